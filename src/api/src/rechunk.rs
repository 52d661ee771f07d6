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

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Largest data frame passed on.
pub const MAX_PIECE: usize = 32 * 1024;

pub struct Rechunk<B> {
    inner: B,
    /// The rest of a frame larger than [`MAX_PIECE`].
    pending: Bytes,
}

impl<B> Rechunk<B> {
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            pending: Bytes::new(),
        }
    }
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
