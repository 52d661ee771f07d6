//! Received bodies and their flow control.
//!
//! Each body has a window: the sender may have at most [`WINDOW`] bytes sent
//! but not yet read by the consumer. The connection's reader task hands
//! chunks to the body's channel without ever waiting, which is safe because
//! the window bounds how much can pile up there. As the consumer reads, it
//! gives credit back in window-update frames, a quarter window at a time so
//! that updates stay rare and the pipe stays full.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::mpsc;

use crate::conn::Conn;

/// A streamed request or response body.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>;

/// Bytes a body's sender may have in flight beyond what the consumer read.
///
/// Larger than a data block (1 MiB by default, plus compression or
/// encryption overhead), so that a whole block crosses a long link in one
/// trip: with a window smaller than the block, the sender would wait a
/// round trip for credit after each window (a 256 KiB window made a 1 MiB
/// block cost 4 round trips at 50 ms). It also bounds what a slow consumer
/// lets pile up per body.
pub const WINDOW: u32 = 2 * 1024 * 1024;
/// Credit is given back once this much was read.
const GRANT_STEP: u32 = WINDOW / 4;

/// What the reader task passes to a received body.
pub(crate) enum BodyItem {
    Data(Bytes),
    End,
    Error(String),
}

/// A body arriving from the peer. Dropping it before its end tells the
/// sender to stop.
pub(crate) struct RecvBody {
    id: u32,
    rx: mpsc::UnboundedReceiver<BodyItem>,
    conn: Arc<Conn>,
    unacked: u32,
    done: bool,
}

impl RecvBody {
    pub fn new(id: u32, rx: mpsc::UnboundedReceiver<BodyItem>, conn: Arc<Conn>) -> RecvBody {
        RecvBody {
            id,
            rx,
            conn,
            unacked: 0,
            done: false,
        }
    }
}

impl Stream for RecvBody {
    type Item = Result<Bytes, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let item = match self.rx.poll_recv(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        Poll::Ready(match item {
            Some(BodyItem::Data(b)) => {
                self.unacked += b.len() as u32;
                if self.unacked >= GRANT_STEP {
                    let n = std::mem::take(&mut self.unacked);
                    self.conn.grant(self.id, n);
                }
                Some(Ok(b))
            }
            Some(BodyItem::End) => {
                self.done = true;
                None
            }
            Some(BodyItem::Error(msg)) => {
                self.done = true;
                Some(Err(io::Error::other(msg)))
            }
            // The connection went away: never let a cut body look complete.
            None => {
                self.done = true;
                Some(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "connection closed before the end of the body",
                )))
            }
        })
    }
}

impl Drop for RecvBody {
    fn drop(&mut self) {
        if !self.done {
            self.conn.cancel_body(self.id);
        }
    }
}
