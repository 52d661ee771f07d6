//! The multiplexing frame: what one decrypted Noise transport message holds.
//!
//! ```text
//! id: u32 BE | kind: u8 | flags: u8 | priority: u8 | payload ...
//! ```
//!
//! Every byte here comes from an authenticated peer, but a buggy one must
//! still not crash us: decoding checks everything and returns
//! [`NetError::Protocol`], which closes that one connection.

use bytes::{BufMut, Bytes};
use serde::{Deserialize, Serialize};

use crate::error::NetError;

/// Bytes before the payload.
pub(crate) const FRAME_HEADER_LEN: usize = 7;
/// Largest payload carried by one frame: body chunks and pieces of message
/// headers are cut to this size, which is what bounds how long a frame of
/// lower priority can hold up a more urgent one.
pub const CHUNK_SIZE: usize = 16 * 1024;

/// Frame flag: more pieces of this request or response header follow.
pub(crate) const FLAG_MORE: u8 = 1;
/// Frame flag, on the last piece of a header: a body follows.
pub(crate) const FLAG_BODY: u8 = 2;

/// How urgent a message is. The writer of each connection always sends the
/// next chunk of the most urgent message that has one ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Priority {
    /// Metadata reads and writes on the request path of a client.
    High,
    Normal,
    /// Resync, scrub, rebalancing: may wait for everything else.
    Background,
}

impl Priority {
    pub(crate) const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Background];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    fn from_u8(b: u8) -> Option<Priority> {
        Self::ALL.get(usize::from(b)).copied()
    }
}

/// What a frame carries. The id says which call it belongs to; whether it
/// concerns the request or the response follows from the kind and from
/// which side sent it (see `conn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameKind {
    /// A piece of a request header: endpoint path and serialized message.
    Request = 1,
    /// A piece of a response header: the serialized response.
    Response = 2,
    /// A chunk of the body of the request or response.
    Body = 3,
    /// The body ended normally.
    End = 4,
    /// The call failed (payload: message), or, once a body has started, the
    /// body ended abnormally.
    Error = 5,
    /// The receiver of a body consumed some of it: the sender may send this
    /// many more bytes (payload: u32 BE).
    Window = 6,
    /// The receiver of a body (or of a response) wants no more of it.
    Cancel = 7,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        use FrameKind::*;
        Some(match b {
            1 => Request,
            2 => Response,
            3 => Body,
            4 => End,
            5 => Error,
            6 => Window,
            7 => Cancel,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub id: u32,
    pub kind: FrameKind,
    pub flags: u8,
    pub prio: Priority,
    pub payload: Bytes,
}

impl Frame {
    pub fn new(id: u32, kind: FrameKind, prio: Priority, payload: Bytes) -> Frame {
        Frame {
            id,
            kind,
            flags: 0,
            prio,
            payload,
        }
    }

    pub fn window(id: u32, n: u32) -> Frame {
        Frame::new(
            id,
            FrameKind::Window,
            Priority::High,
            Bytes::copy_from_slice(&n.to_be_bytes()),
        )
    }

    pub fn cancel(id: u32) -> Frame {
        Frame::new(id, FrameKind::Cancel, Priority::High, Bytes::new())
    }

    /// An error frame; long messages are cut so the frame stays one chunk.
    pub fn error(id: u32, prio: Priority, msg: &str) -> Frame {
        let mut end = msg.len().min(CHUNK_SIZE);
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        Frame::new(
            id,
            FrameKind::Error,
            prio,
            Bytes::copy_from_slice(&msg.as_bytes()[..end]),
        )
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.put_u32(self.id);
        out.put_u8(self.kind as u8);
        out.put_u8(self.flags);
        out.put_u8(self.prio as u8);
        out.extend_from_slice(&self.payload);
    }

    pub fn decode(b: &[u8]) -> Result<Frame, NetError> {
        if b.len() < FRAME_HEADER_LEN {
            return Err(NetError::Protocol(format!(
                "frame of {} bytes is shorter than its header",
                b.len()
            )));
        }
        let id = u32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
        let kind = FrameKind::from_u8(b[4])
            .ok_or_else(|| NetError::Protocol(format!("unknown frame kind {}", b[4])))?;
        let flags = b[5];
        if flags & !(FLAG_MORE | FLAG_BODY) != 0 {
            return Err(NetError::Protocol(format!(
                "unknown frame flags {flags:#x}"
            )));
        }
        let prio = Priority::from_u8(b[6])
            .ok_or_else(|| NetError::Protocol(format!("unknown priority {}", b[6])))?;
        let payload = &b[FRAME_HEADER_LEN..];
        if payload.len() > CHUNK_SIZE {
            return Err(NetError::Protocol(format!(
                "frame payload of {} bytes exceeds the {CHUNK_SIZE}-byte chunk size",
                payload.len()
            )));
        }
        if kind == FrameKind::Window && payload.len() != 4 {
            return Err(NetError::Protocol("window frame without a u32".into()));
        }
        Ok(Frame {
            id,
            kind,
            flags,
            prio,
            payload: Bytes::copy_from_slice(payload),
        })
    }

    /// The increment carried by a window frame (checked by `decode`).
    pub fn window_increment(&self) -> u32 {
        u32::from_be_bytes(self.payload[..4].try_into().expect("checked in decode"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut f = Frame::new(
            0xdead_beef,
            FrameKind::Request,
            Priority::Background,
            Bytes::from_static(b"hello"),
        );
        f.flags = FLAG_MORE;
        let mut buf = Vec::new();
        f.encode_into(&mut buf);
        assert_eq!(buf.len(), FRAME_HEADER_LEN + 5);
        assert_eq!(Frame::decode(&buf).unwrap(), f);

        let w = Frame::window(3, 70_000);
        buf.clear();
        w.encode_into(&mut buf);
        assert_eq!(Frame::decode(&buf).unwrap().window_increment(), 70_000);
    }

    #[test]
    fn rejects_malformed_frames() {
        let good = {
            let mut b = Vec::new();
            Frame::cancel(1).encode_into(&mut b);
            b
        };
        assert!(Frame::decode(&good[..3]).is_err());
        for (pos, val) in [(4, 0u8), (4, 99), (5, 0x80), (6, 3)] {
            let mut b = good.clone();
            b[pos] = val;
            assert!(Frame::decode(&b).is_err(), "byte {pos} = {val}");
        }
        let mut w = Vec::new();
        Frame::new(
            1,
            FrameKind::Window,
            Priority::High,
            Bytes::from_static(b"x"),
        )
        .encode_into(&mut w);
        assert!(Frame::decode(&w).is_err());
        let mut big = Vec::new();
        Frame::new(
            1,
            FrameKind::Body,
            Priority::High,
            vec![0; CHUNK_SIZE + 1].into(),
        )
        .encode_into(&mut big);
        assert!(Frame::decode(&big).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..10_000 {
            let len = rng.random_range(0..64);
            let b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let _ = Frame::decode(&b);
        }
    }

    #[test]
    fn error_messages_are_cut_on_char_boundaries() {
        let msg = "é".repeat(CHUNK_SIZE);
        let f = Frame::error(1, Priority::Normal, &msg);
        assert!(f.payload.len() <= CHUNK_SIZE);
        assert!(std::str::from_utf8(&f.payload).is_ok());
    }
}
