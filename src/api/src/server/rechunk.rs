//! Request bodies cut into pieces of at most [`MAX_PIECE`] bytes before
//! the S3 layer (s3s) reads them.
//!
//! s3s's parser of `multipart/form-data` (PostObject, browser uploads)
//! keeps a look-ahead buffer of at most 64 KiB when a piece of the body
//! ends with what may be the start of the next boundary, and appends the
//! whole next piece to it: when the client's data arrives in reads larger
//! than 64 KiB (a large file on a fast link, or a loaded server reading
//! late), the upload was refused with `400 InvalidRequest: failed to read
//! file stream` (`BoundaryBufferTooLarge`), at random. With pieces of at
//! most 32 KiB the buffer never exceeds the limit. Splitting copies
//! nothing (`Bytes::split_to`).
//!
//! On the way, the file part's name (`Content-Disposition: form-data;
//! name="file"; filename="…"`) and the `tagging` field are noted in a
//! [`FormFields`] that the request carries to PostObject, which
//! substitutes the name for `${filename}` in the key and applies the tags
//! (s3s passes on neither). Only what comes before the file is looked at:
//! once the file's headers are reached, nothing is scanned any more.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::access::step::FormFields;

/// Largest data frame passed on.
pub const MAX_PIECE: usize = 32 * 1024;

pub struct Rechunk<B> {
    inner: B,
    /// The rest of a frame larger than [`MAX_PIECE`].
    pending: Bytes,
    sniffer: Option<Sniffer>,
}

impl<B> Rechunk<B> {
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            pending: Bytes::new(),
            sniffer: None,
        }
    }

    /// Also notes the form's file name and `tagging` field in `slot`.
    pub fn with_form_fields(inner: B, slot: FormFields) -> Self {
        Self {
            inner,
            pending: Bytes::new(),
            sniffer: Some(Sniffer {
                slot,
                partial: Vec::new(),
                at: At::Other,
            }),
        }
    }

    fn sniff(&mut self, piece: &[u8]) {
        if let Some(s) = self.sniffer.as_mut() {
            if s.feed(piece) {
                self.sniffer = None;
            }
        }
    }
}

/// Reads the parts' headers (and the `tagging` field's value) in the
/// pieces of a form.
struct Sniffer {
    slot: FormFields,
    /// The incomplete last line of what was seen (at most 4 KiB kept
    /// between pieces).
    partial: Vec<u8>,
    at: At,
}

/// Where the sniffer is in the form.
enum At {
    Other,
    /// In the headers of the `tagging` field.
    TaggingHeaders,
    /// In its value: the lines so far.
    TaggingValue(Vec<String>),
}

/// Header lines longer than this are not looked at.
const MAX_LINE: usize = 4096;
/// A `tagging` field longer than this is not kept (s3s refuses fields
/// over 64 KiB anyway).
const MAX_TAGGING: usize = 64 * 1024;

impl Sniffer {
    /// Looks at the lines completed by `piece`; true when done (the file
    /// part, which S3 requires last, was reached).
    fn feed(&mut self, piece: &[u8]) -> bool {
        self.partial.extend_from_slice(piece);
        let mut start = 0;
        while let Some(i) = self.partial[start..].windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&self.partial[start..start + i]).into_owned();
            start += i + 2;
            if self.line(line) {
                return true;
            }
        }
        self.partial.drain(..start);
        if self.partial.len() > MAX_LINE {
            // Not a header line: keep only what may start a line end.
            let last = self.partial.len() - 1;
            self.partial.drain(..last);
        }
        false
    }

    fn line(&mut self, line: String) -> bool {
        if let Some((name, file_name)) = disposition(&line) {
            if name.eq_ignore_ascii_case("file") {
                self.slot.set(|f| f.file_name = file_name);
                return true;
            }
            self.at = match name.eq_ignore_ascii_case("tagging") {
                true => At::TaggingHeaders,
                false => At::Other,
            };
            return false;
        }
        match &mut self.at {
            At::TaggingHeaders if line.is_empty() => self.at = At::TaggingValue(Vec::new()),
            At::TaggingValue(v) if line.starts_with("--") => {
                let value = v.join("\r\n");
                self.slot.set(|f| f.tagging = Some(value));
                self.at = At::Other;
            }
            At::TaggingValue(v)
                if v.iter().map(|l| l.len() + 2).sum::<usize>() + line.len() <= MAX_TAGGING =>
            {
                v.push(line)
            }
            _ => (),
        }
        false
    }
}

/// The field name and file name of a `Content-Disposition: form-data;
/// name="…"[; filename="…"]` header line.
fn disposition(line: &str) -> Option<(String, Option<String>)> {
    let (name, value) = line.split_once(':')?;
    if !name.trim().eq_ignore_ascii_case("content-disposition") {
        return None;
    }
    let mut field = None;
    let mut file_name = None;
    for param in value.split(';').map(str::trim) {
        if let Some((k, v)) = param.split_once('=') {
            let v = v.trim().trim_matches('"').to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "name" => field = Some(v),
                "filename" => file_name = Some(v),
                _ => (),
            }
        }
    }
    Some((field?, file_name))
}

impl<B: Body<Data = Bytes> + Unpin> Body for Rechunk<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if !self.pending.is_empty() {
            let n = self.pending.len().min(MAX_PIECE);
            let piece = self.pending.split_to(n);
            return Poll::Ready(Some(Ok(Frame::data(piece))));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(mut data) => {
                    self.sniff(&data);
                    if data.len() > MAX_PIECE {
                        self.pending = data.split_off(MAX_PIECE);
                    }
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                // Trailers pass as they are.
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let extra = self.pending.len() as u64;
        let mut h = SizeHint::new();
        h.set_lower(inner.lower() + extra);
        if let Some(u) = inner.upper() {
            h.set_upper(u + extra);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    /// The file's name and the tagging field are found whatever the
    /// pieces the form is cut into; a field named otherwise is not taken
    /// for them.
    #[test]
    fn the_form_fields_are_found_across_pieces() {
        let form = b"--b\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nup/${filename}\r\n--b\r\nContent-Disposition: form-data; name=\"tagging\"\r\n\r\n<Tagging><TagSet>\r\n<Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>\r\n--b\r\nContent-Disposition: form-data; name=\"notfile\"; filename=\"no.txt\"\r\n\r\nx\r\n--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"photo 1.jpg\"\r\nContent-Type: image/jpeg\r\n\r\nDATA\r\n--b--\r\n";
        for cut in [1, 2, 7, 13, 64, form.len()] {
            let slot = FormFields::default();
            let mut s = Sniffer {
                slot: slot.clone(),
                partial: Vec::new(),
                at: At::Other,
            };
            for piece in form.chunks(cut) {
                if s.feed(piece) {
                    break;
                }
            }
            let f = slot.get();
            assert_eq!(
                f.file_name.as_deref(),
                Some("photo 1.jpg"),
                "pieces of {cut}"
            );
            assert_eq!(
                f.tagging.as_deref(),
                Some("<Tagging><TagSet>\r\n<Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>"),
                "pieces of {cut}"
            );
        }
    }

    /// Frames of every size come out as pieces of at most MAX_PIECE,
    /// with the same bytes in the same order.
    #[tokio::test]
    async fn frames_are_cut_and_bytes_kept() {
        let sizes = [0usize, 1, MAX_PIECE, MAX_PIECE + 1, 417_793, 5];
        let mut all = Vec::new();
        let mut frames = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let b: Vec<u8> = (0..*n).map(|j| (i * 31 + j) as u8).collect();
            all.extend_from_slice(&b);
            frames.push(Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(
                b,
            ))));
        }
        let body = Rechunk::new(StreamBody::new(futures::stream::iter(frames)));
        assert_eq!(body.size_hint().lower(), 0);
        let mut got = Vec::new();
        let mut stream = body.into_data_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.unwrap();
            assert!(piece.len() <= MAX_PIECE, "a piece of {} bytes", piece.len());
            got.extend_from_slice(&piece);
        }
        assert!(got == all);
    }
}
