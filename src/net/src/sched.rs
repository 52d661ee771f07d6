//! The send side of a connection: which frame goes out next.
//!
//! Control frames (window updates, cancels, errors) go first: they are tiny
//! and unblock the peer. Then the scheduler takes the most urgent priority
//! that has a stream able to produce a frame now, and among the streams of
//! that priority the one that has waited longest (round robin: a stream that
//! sent goes to the back). A frame's payload is at most one chunk, so a
//! message that becomes ready waits for at most the one chunk being written.
//!
//! Body streams are polled only while they have credit: a sender never pulls
//! from its source more than it may send, which is what propagates back
//! pressure to the producer.

use std::collections::{HashMap, VecDeque};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::StreamExt;

use crate::body::{ByteStream, WINDOW};
use crate::frame::{Frame, FrameKind, Priority, CHUNK_SIZE, FLAG_BODY, FLAG_MORE};

/// A request or response to send: its header (already serialized) and
/// optional body.
pub(crate) struct OutMessage {
    pub id: u32,
    /// `Request` or `Response`.
    pub kind: FrameKind,
    pub prio: Priority,
    pub header: Bytes,
    pub body: Option<ByteStream>,
}

struct OutStream {
    msg: OutMessage,
    header_done: bool,
    /// Some frame of this stream has been sent: the peer holds state for it.
    started: bool,
    buffered: Bytes,
    credit: u64,
}

impl OutStream {
    /// The stream's next frame, and whether it is the stream's last.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<(Frame, bool)> {
        let (id, prio) = (self.msg.id, self.msg.prio);
        if !self.header_done {
            let n = self.msg.header.len().min(CHUNK_SIZE);
            let mut f = Frame::new(id, self.msg.kind, prio, self.msg.header.split_to(n));
            let more = !self.msg.header.is_empty();
            f.flags = if more {
                FLAG_MORE
            } else if self.msg.body.is_some() {
                FLAG_BODY
            } else {
                0
            };
            self.header_done = !more;
            self.started = true;
            return Poll::Ready((f, !more && self.msg.body.is_none()));
        }
        let Some(body) = self.msg.body.as_mut() else {
            unreachable!("a stream without body is removed after its header")
        };
        loop {
            if self.credit == 0 {
                // Woken by the window update, which arrives as a command.
                return Poll::Pending;
            }
            if !self.buffered.is_empty() {
                let n = self
                    .buffered
                    .len()
                    .min(CHUNK_SIZE)
                    .min(self.credit as usize);
                self.credit -= n as u64;
                let chunk = self.buffered.split_to(n);
                return Poll::Ready((Frame::new(id, FrameKind::Body, prio, chunk), false));
            }
            match body.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(b))) => self.buffered = b,
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready((Frame::error(id, prio, &e.to_string()), true))
                }
                Poll::Ready(None) => {
                    return Poll::Ready((Frame::new(id, FrameKind::End, prio, Bytes::new()), true))
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct Scheduler {
    control: VecDeque<Frame>,
    queues: [VecDeque<u32>; 3],
    streams: HashMap<u32, OutStream>,
}

impl Scheduler {
    pub fn push(&mut self, msg: OutMessage) {
        let id = msg.id;
        if let Some(old) = self.streams.remove(&id) {
            // Ids are unique among live streams; a collision is a bug.
            debug_assert!(false, "stream id {id} reused");
            self.queues[old.msg.prio.index()].retain(|&i| i != id);
        }
        self.queues[msg.prio.index()].push_back(id);
        self.streams.insert(
            id,
            OutStream {
                msg,
                header_done: false,
                started: false,
                buffered: Bytes::new(),
                credit: u64::from(WINDOW),
            },
        );
    }

    pub fn control(&mut self, f: Frame) {
        self.control.push_back(f);
    }

    /// The peer allows `n` more body bytes on stream `id`.
    pub fn credit(&mut self, id: u32, n: u32) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.credit += u64::from(n);
        }
    }

    /// Stops sending stream `id`. If the peer has already seen part of it and
    /// `notify` is given, an error frame tells it the stream is cut short.
    pub fn drop_stream(&mut self, id: u32, notify: Option<&str>) {
        if let Some(s) = self.streams.remove(&id) {
            self.queues[s.msg.prio.index()].retain(|&i| i != id);
            if let (true, Some(msg)) = (s.started, notify) {
                self.control(Frame::error(id, s.msg.prio, msg));
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    pub fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Frame> {
        if let Some(f) = self.control.pop_front() {
            return Poll::Ready(f);
        }
        for queue in self.queues.iter_mut() {
            for i in 0..queue.len() {
                let id = queue[i];
                let s = self.streams.get_mut(&id).expect("queued streams exist");
                if let Poll::Ready((f, last)) = s.poll_frame(cx) {
                    queue.remove(i);
                    if last {
                        self.streams.remove(&id);
                    } else {
                        queue.push_back(id);
                    }
                    return Poll::Ready(f);
                }
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker_ref;

    fn body_of(len: usize, piece: usize) -> ByteStream {
        let pieces: Vec<_> = (0..len.div_ceil(piece))
            .map(|i| Ok(Bytes::from(vec![i as u8; piece.min(len - i * piece)])))
            .collect();
        Box::pin(futures::stream::iter(pieces))
    }

    fn msg(id: u32, prio: Priority, header: usize, body: Option<ByteStream>) -> OutMessage {
        OutMessage {
            id,
            kind: FrameKind::Request,
            prio,
            header: vec![1u8; header].into(),
            body,
        }
    }

    fn drain(s: &mut Scheduler) -> Vec<Frame> {
        let mut cx = Context::from_waker(noop_waker_ref());
        let mut out = Vec::new();
        while let Poll::Ready(f) = s.poll_frame(&mut cx) {
            out.push(f);
        }
        out
    }

    #[test]
    fn header_is_cut_into_chunks_with_flags() {
        let mut s = Scheduler::default();
        s.push(msg(
            1,
            Priority::Normal,
            2 * CHUNK_SIZE + 5,
            Some(body_of(10, 10)),
        ));
        let f = drain(&mut s);
        let kinds: Vec<_> = f
            .iter()
            .map(|f| (f.kind, f.flags, f.payload.len()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (FrameKind::Request, FLAG_MORE, CHUNK_SIZE),
                (FrameKind::Request, FLAG_MORE, CHUNK_SIZE),
                (FrameKind::Request, FLAG_BODY, 5),
                (FrameKind::Body, 0, 10),
                (FrameKind::End, 0, 0),
            ]
        );
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn high_priority_waits_at_most_one_chunk() {
        let mut s = Scheduler::default();
        s.push(msg(
            2,
            Priority::Background,
            10,
            Some(body_of(1 << 20, 1 << 20)),
        ));
        let mut cx = Context::from_waker(noop_waker_ref());
        // The background transfer is under way...
        for _ in 0..3 {
            assert!(s.poll_frame(&mut cx).is_ready());
        }
        // ...when an urgent message arrives: it is the very next frame.
        s.push(msg(4, Priority::High, 100, None));
        let Poll::Ready(f) = s.poll_frame(&mut cx) else {
            panic!()
        };
        assert_eq!((f.id, f.kind), (4, FrameKind::Request));
        let Poll::Ready(f) = s.poll_frame(&mut cx) else {
            panic!()
        };
        assert_eq!((f.id, f.kind), (2, FrameKind::Body));
        assert!(f.payload.len() <= CHUNK_SIZE);
    }

    #[test]
    fn equal_priorities_take_turns() {
        let mut s = Scheduler::default();
        s.push(msg(
            1,
            Priority::Normal,
            1,
            Some(body_of(4 * CHUNK_SIZE, CHUNK_SIZE)),
        ));
        s.push(msg(
            3,
            Priority::Normal,
            1,
            Some(body_of(4 * CHUNK_SIZE, CHUNK_SIZE)),
        ));
        let ids: Vec<u32> = drain(&mut s).iter().map(|f| f.id).take(8).collect();
        assert_eq!(ids, vec![1, 3, 1, 3, 1, 3, 1, 3]);
    }

    #[test]
    fn body_stops_at_credit_and_resumes() {
        let mut s = Scheduler::default();
        let total = 2 * WINDOW as usize;
        s.push(msg(1, Priority::Normal, 1, Some(body_of(total, 100_000))));
        let sent: usize = drain(&mut s)
            .iter()
            .filter(|f| f.kind == FrameKind::Body)
            .map(|f| f.payload.len())
            .sum();
        assert_eq!(sent, WINDOW as usize);
        s.credit(1, 1000);
        let more = drain(&mut s);
        assert_eq!(more.iter().map(|f| f.payload.len()).sum::<usize>(), 1000);
        s.credit(1, WINDOW);
        let rest = drain(&mut s);
        assert_eq!(rest.last().unwrap().kind, FrameKind::End);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn dropping_a_started_stream_notifies_the_peer() {
        let mut s = Scheduler::default();
        s.push(msg(
            1,
            Priority::Normal,
            1,
            Some(Box::pin(futures::stream::pending())),
        ));
        s.push(msg(3, Priority::Normal, 1, None));
        assert_eq!(drain(&mut s).len(), 2);
        s.drop_stream(1, Some("gone"));
        let f = drain(&mut s);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].id, f[0].kind), (1, FrameKind::Error));
        assert_eq!(s.len(), 0);
        // Never-started streams vanish silently.
        s.push(msg(5, Priority::Normal, 1, None));
        s.drop_stream(5, Some("gone"));
        assert!(drain(&mut s).is_empty());
    }

    #[test]
    fn source_errors_become_error_frames() {
        let mut s = Scheduler::default();
        let body: ByteStream = Box::pin(futures::stream::iter(vec![
            Ok(Bytes::from_static(b"abc")),
            Err(std::io::Error::other("disk on fire")),
        ]));
        s.push(msg(1, Priority::Normal, 1, Some(body)));
        let f = drain(&mut s);
        assert_eq!(f[2].kind, FrameKind::Error);
        assert_eq!(&f[2].payload[..], b"disk on fire");
    }
}
