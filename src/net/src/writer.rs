//! A connection's writer task: takes frames from the scheduler, encrypts
//! them, and writes them to the socket.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use snow::StatelessTransportState;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::conn::{Conn, WriterCmd};
use crate::error::NetError;
use crate::frame::Frame;
use crate::handshake::{MAX_NOISE_MSG, TAG_LEN};
use crate::sched::Scheduler;

/// The writer coalesces ready frames into one socket write while it holds
/// less than this: small frames share a syscall, but a write never holds
/// more than this plus one frame (one chunk), so an urgent frame that
/// becomes ready during a write waits for little more than one chunk.
const WRITE_BATCH: usize = 4 * 1024;

pub(crate) struct Writer {
    conn: Arc<Conn>,
    transport: Arc<StatelessTransportState>,
    nonce: u64,
    sched: Scheduler,
    cmd_rx: mpsc::UnboundedReceiver<WriterCmd>,
}

impl Writer {
    pub fn new(
        conn: Arc<Conn>,
        transport: Arc<StatelessTransportState>,
        nonce: u64,
        cmd_rx: mpsc::UnboundedReceiver<WriterCmd>,
    ) -> Writer {
        Writer {
            conn,
            transport,
            nonce,
            sched: Scheduler::default(),
            cmd_rx,
        }
    }

    pub async fn run(mut self, mut wr: OwnedWriteHalf) {
        let conn = self.conn.clone();
        let res = tokio::select! {
            _ = conn.closed.cancelled() => Ok(()),
            r = self.write_loop(&mut wr) => r,
        };
        if let Err(e) = res {
            conn.close(&e.to_string());
        }
        // Tell the peer we are gone rather than leaving it to time out.
        let _ = wr.shutdown().await;
    }

    fn apply(&mut self, cmd: WriterCmd) {
        match cmd {
            WriterCmd::Send(m) => self.sched.push(m),
            WriterCmd::Control(f) => self.sched.control(f),
            WriterCmd::Credit(id, n) => self.sched.credit(id, n),
            WriterCmd::DropStream(id, why) => self.sched.drop_stream(id, why),
        }
    }

    /// The next frame to send; `None` when every command sender is gone.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        loop {
            match self.cmd_rx.poll_recv(cx) {
                Poll::Ready(Some(cmd)) => self.apply(cmd),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        self.sched.poll_frame(cx).map(Some)
    }

    fn seal(&mut self, f: &Frame, plain: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<(), NetError> {
        plain.clear();
        f.encode_into(plain);
        let start = out.len();
        out.resize(start + 2 + plain.len() + TAG_LEN, 0);
        let n = self
            .transport
            .write_message(self.nonce, plain, &mut out[start + 2..])
            .map_err(|e| NetError::Protocol(format!("cannot encrypt a message: {e}")))?;
        self.nonce += 1;
        let len = u16::try_from(n).expect("frames fit in a Noise message");
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
        out.truncate(start + 2 + n);
        Ok(())
    }

    async fn write_loop(&mut self, wr: &mut OwnedWriteHalf) -> Result<(), NetError> {
        let mut plain = Vec::with_capacity(MAX_NOISE_MSG);
        let mut out = Vec::with_capacity(WRITE_BATCH + MAX_NOISE_MSG + 2);
        loop {
            let Some(f) = poll_fn(|cx| self.poll_next(cx)).await else {
                return Ok(());
            };
            self.seal(&f, &mut plain, &mut out)?;
            while out.len() < WRITE_BATCH {
                match poll_fn(|cx| self.poll_next(cx)).now_or_never() {
                    Some(Some(f)) => self.seal(&f, &mut plain, &mut out)?,
                    _ => break,
                }
            }
            wr.write_all(&out).await?;
            out.clear();
        }
    }
}
