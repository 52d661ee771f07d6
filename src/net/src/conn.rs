//! One admitted connection: a reader task, a writer task, and the table of
//! calls and bodies in flight over it.
//!
//! Call ids: the dialer numbers its calls 0, 2, 4, ... and the listener 1,
//! 3, 5, ..., so an id names one call on the connection, and on receiving a
//! frame a node knows from the id's parity whether it is that call's caller
//! or its callee. Then the frame's kind says what it is about:
//!
//! | kind     | sent by the caller                  | sent by the callee                    |
//! |----------|-------------------------------------|---------------------------------------|
//! | Request  | a piece of the request header       | (protocol error)                      |
//! | Response | (protocol error)                    | a piece of the response header        |
//! | Body/End | request body                        | response body                         |
//! | Error    | request cut short                   | call failed, or response body cut short |
//! | Window   | credit for the response body        | credit for the request body           |
//! | Cancel   | stop sending the response           | stop sending the request body         |
//!
//! A frame for an id that is no longer known is ignored: it crossed a
//! cancel on the wire.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::body::{BodyItem, ByteStream, RecvBody, WINDOW};
use crate::error::NetError;
use crate::frame::{Frame, FrameKind, Priority, FLAG_BODY, FLAG_MORE};
use crate::handshake::{Session, MAX_NOISE_MSG};
use crate::ident::NodeId;
use crate::netapp::NetApp;
use crate::sched::OutMessage;
use crate::writer::Writer;

/// Largest serialized request or response header (path and message). Bulk
/// data belongs in a body, which has no size limit.
pub const MAX_MESSAGE_LEN: usize = 64 * 1024 * 1024;

pub(crate) enum WriterCmd {
    Send(OutMessage),
    Control(Frame),
    /// The peer granted credit for our body `id`.
    Credit(u32, u32),
    /// Stop sending stream `id`; tell the peer why if it already saw part.
    DropStream(u32, Option<&'static str>),
}

type CallResult = Result<(Bytes, Option<RecvBody>), NetError>;

struct PendingCall {
    header: Vec<u8>,
    tx: oneshot::Sender<CallResult>,
}

struct IncomingBody {
    tx: mpsc::UnboundedSender<BodyItem>,
    /// Bytes the peer may still send before it must wait for credit.
    window_left: u64,
}

#[derive(Default)]
struct State {
    closed: bool,
    close_reason: Option<String>,
    next_id: u32,
    /// Our calls still waiting for (the rest of) their response header.
    pending: HashMap<u32, PendingCall>,
    /// Bodies we receive: request bodies of calls we serve, response bodies
    /// of our calls.
    bodies: HashMap<u32, IncomingBody>,
    /// Request headers being received, with their priority.
    requests: HashMap<u32, (Vec<u8>, Priority)>,
    /// Calls whose handler runs; true once the caller gave up on them.
    serving: HashMap<u32, bool>,
}

/// Identity of a connection, for the duplicate-connection rule.
pub(crate) struct ConnMeta {
    pub dialer: NodeId,
    pub dial_seq: u64,
}

pub(crate) struct Conn {
    /// Unique among this process's connections.
    pub conn_id: u64,
    pub peer: NodeId,
    /// For an outgoing connection the address we dialed, for an incoming
    /// one the peer's source address.
    pub addr: SocketAddr,
    pub incoming: bool,
    pub meta: ConnMeta,
    /// What the peer told of its version in the handshake.
    pub peer_version: crate::version::VersionInfo,
    /// Parity of the ids of calls we make (0 if we dialed).
    my_parity: u32,
    cmd: mpsc::UnboundedSender<WriterCmd>,
    state: Mutex<State>,
    pub(crate) closed: CancellationToken,
}

/// A connection built but not yet running: registered first, so that no
/// frame is processed for a connection that will not be kept.
pub(crate) struct Unstarted {
    pub conn: Arc<Conn>,
    cmd_rx: mpsc::UnboundedReceiver<WriterCmd>,
}

impl Unstarted {
    pub fn new(
        my_id: NodeId,
        conn_id: u64,
        session: &Session,
        addr: SocketAddr,
        incoming: bool,
    ) -> Unstarted {
        let (cmd, cmd_rx) = mpsc::unbounded_channel();
        let my_parity = u32::from(incoming);
        let conn = Arc::new(Conn {
            conn_id,
            peer: session.peer,
            addr,
            incoming,
            peer_version: session.peer_version,
            meta: ConnMeta {
                dialer: if incoming { session.peer } else { my_id },
                dial_seq: session.dial_seq,
            },
            my_parity,
            cmd,
            state: Mutex::new(State {
                next_id: my_parity,
                ..Default::default()
            }),
            closed: CancellationToken::new(),
        });
        Unstarted { conn, cmd_rx }
    }

    /// Starts the reader and writer tasks. Calls made before are queued.
    pub fn start(self, netapp: Arc<NetApp>, sock: TcpStream, session: Session) {
        let Unstarted { conn, cmd_rx } = self;
        let (rd, wr) = sock.into_split();
        let writer = Writer::new(
            conn.clone(),
            session.transport.clone(),
            session.send_nonce,
            cmd_rx,
        );
        tokio::spawn(writer.run(wr));
        tokio::spawn(async move {
            let reason = match conn.read_loop(&netapp, rd, session).await {
                Ok(()) => "closed by the peer".to_string(),
                Err(e) => e.to_string(),
            };
            conn.close(&reason);
            let reason = conn.close_reason();
            netapp.conn_closed(&conn, &reason);
        });
    }
}

impl Conn {
    fn close_reason(&self) -> String {
        let st = self.state.lock().unwrap();
        st.close_reason.clone().unwrap_or_else(|| "closed".into())
    }

    /// Closes the connection: both tasks stop, the socket is shut, and every
    /// call waiting on it fails at once. The first reason given is kept.
    pub fn close(&self, reason: &str) {
        let (pending, bodies) = {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                return;
            }
            st.closed = true;
            st.close_reason = Some(reason.to_string());
            st.requests.clear();
            st.serving.clear();
            (
                std::mem::take(&mut st.pending),
                std::mem::take(&mut st.bodies),
            )
        };
        self.closed.cancel();
        for (_, p) in pending {
            let _ = p.tx.send(Err(NetError::ConnectionClosed));
        }
        // Dropping the senders makes each body end with an error.
        drop(bodies);
    }

    fn send_cmd(&self, cmd: WriterCmd) {
        // Fails only once the writer stopped, i.e. the connection is closed,
        // and then the frame has nowhere to go anyway.
        let _ = self.cmd.send(cmd);
    }

    /// Sends one request and waits for its response header.
    pub async fn call(
        self: &Arc<Self>,
        path: &str,
        msg: Vec<u8>,
        body: Option<ByteStream>,
        prio: Priority,
        timeout: Duration,
    ) -> Result<(Bytes, Option<ByteStream>), NetError> {
        let path_len = u16::try_from(path.len())
            .map_err(|_| NetError::Codec(format!("endpoint path of {} bytes", path.len())))?;
        let len = 2 + path.len() + msg.len();
        if len > MAX_MESSAGE_LEN {
            return Err(NetError::Codec(format!(
                "request of {len} bytes exceeds the {MAX_MESSAGE_LEN}-byte message limit (send bulk data as a body)"
            )));
        }
        let mut header = Vec::with_capacity(len);
        header.extend_from_slice(&path_len.to_be_bytes());
        header.extend_from_slice(path.as_bytes());
        header.extend_from_slice(&msg);

        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                return Err(NetError::ConnectionClosed);
            }
            let id = st.alloc_id();
            st.pending.insert(
                id,
                PendingCall {
                    header: Vec::new(),
                    tx,
                },
            );
            id
        };
        // From here on, leaving early (timeout, or the caller dropping this
        // future) must tell the peer.
        let mut guard = AbandonOnDrop {
            conn: self,
            id: Some(id),
        };
        self.send_cmd(WriterCmd::Send(OutMessage {
            id,
            kind: FrameKind::Request,
            prio,
            header: header.into(),
            body,
        }));
        let res = match tokio::time::timeout(timeout, rx).await {
            Err(_) => return Err(NetError::Timeout(timeout)),
            Ok(Err(_)) => Err(NetError::ConnectionClosed),
            Ok(Ok(res)) => res,
        };
        guard.id = None;
        res.map(|(h, b)| (h, b.map(|b| Box::pin(b) as ByteStream)))
    }

    fn abandon(&self, id: u32) {
        let was_pending = self.state.lock().unwrap().pending.remove(&id).is_some();
        if was_pending {
            self.send_cmd(WriterCmd::DropStream(
                id,
                Some("call cancelled by the caller"),
            ));
            self.send_cmd(WriterCmd::Control(Frame::cancel(id)));
        }
    }

    /// The consumer of body `id` read `n` bytes: the sender may send more.
    pub fn grant(&self, id: u32, n: u32) {
        let mut st = self.state.lock().unwrap();
        if let Some(b) = st.bodies.get_mut(&id) {
            b.window_left += u64::from(n);
            drop(st);
            self.send_cmd(WriterCmd::Control(Frame::window(id, n)));
        }
    }

    /// The consumer of body `id` dropped it before its end.
    pub fn cancel_body(&self, id: u32) {
        let removed = self.state.lock().unwrap().bodies.remove(&id).is_some();
        if removed {
            self.send_cmd(WriterCmd::Control(Frame::cancel(id)));
        }
    }

    async fn read_loop(
        self: &Arc<Self>,
        netapp: &Arc<NetApp>,
        rd: OwnedReadHalf,
        session: Session,
    ) -> Result<(), NetError> {
        let mut rd = BufReader::with_capacity(2 * MAX_NOISE_MSG, rd);
        let transport = session.transport;
        let mut nonce = session.recv_nonce;
        let mut cipher = vec![0u8; MAX_NOISE_MSG];
        let mut plain = vec![0u8; MAX_NOISE_MSG];
        loop {
            let len = tokio::select! {
                _ = self.closed.cancelled() => return Ok(()),
                r = rd.read_u16() => match r {
                    Ok(len) => usize::from(len),
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(e.into()),
                },
            };
            tokio::select! {
                _ = self.closed.cancelled() => return Ok(()),
                r = rd.read_exact(&mut cipher[..len]) => { r?; }
            }
            let n = transport
                .read_message(nonce, &cipher[..len], &mut plain)
                .map_err(|e| NetError::Protocol(format!("cannot decrypt a message: {e}")))?;
            nonce += 1;
            let frame = Frame::decode(&plain[..n])?;
            self.on_frame(netapp, frame)?;
        }
    }

    fn on_frame(self: &Arc<Self>, netapp: &Arc<NetApp>, f: Frame) -> Result<(), NetError> {
        let ours = f.id & 1 == self.my_parity;
        match (f.kind, ours) {
            (FrameKind::Request, false) => self.on_request_piece(netapp, f),
            (FrameKind::Response, true) => self.on_response_piece(f),
            (FrameKind::Request, true) | (FrameKind::Response, false) => Err(NetError::Protocol(
                format!("{:?} frame with an id of the wrong side", f.kind),
            )),
            (FrameKind::Body, _) => {
                let mut st = self.state.lock().unwrap();
                if let Some(b) = st.bodies.get_mut(&f.id) {
                    let len = f.payload.len() as u64;
                    if len > b.window_left {
                        return Err(NetError::Protocol(
                            "the peer overran a body's flow-control window".into(),
                        ));
                    }
                    b.window_left -= len;
                    // A consumer that is gone has already sent a cancel.
                    let _ = b.tx.send(BodyItem::Data(f.payload));
                }
                Ok(())
            }
            (FrameKind::End, _) => {
                let body = self.state.lock().unwrap().bodies.remove(&f.id);
                if let Some(b) = body {
                    let _ = b.tx.send(BodyItem::End);
                }
                Ok(())
            }
            (FrameKind::Error, _) => {
                let msg = String::from_utf8_lossy(&f.payload).into_owned();
                let mut st = self.state.lock().unwrap();
                if ours {
                    if let Some(p) = st.pending.remove(&f.id) {
                        drop(st);
                        // Nobody will read the rest of our request body.
                        self.send_cmd(WriterCmd::DropStream(f.id, None));
                        let _ = p.tx.send(Err(NetError::Remote(msg)));
                        return Ok(());
                    }
                } else if st.requests.remove(&f.id).is_some() {
                    return Ok(());
                }
                if let Some(b) = st.bodies.remove(&f.id) {
                    let _ = b.tx.send(BodyItem::Error(msg));
                }
                Ok(())
            }
            (FrameKind::Window, _) => {
                self.send_cmd(WriterCmd::Credit(f.id, f.window_increment()));
                Ok(())
            }
            (FrameKind::Cancel, _) => {
                if !ours {
                    // The caller gave up: its response is not wanted.
                    if let Some(c) = self.state.lock().unwrap().serving.get_mut(&f.id) {
                        *c = true;
                    }
                }
                self.send_cmd(WriterCmd::DropStream(f.id, None));
                Ok(())
            }
        }
    }

    fn on_request_piece(self: &Arc<Self>, netapp: &Arc<NetApp>, f: Frame) -> Result<(), NetError> {
        let mut st = self.state.lock().unwrap();
        let (buf, _) = st
            .requests
            .entry(f.id)
            .or_insert_with(|| (Vec::new(), f.prio));
        if buf.len() + f.payload.len() > MAX_MESSAGE_LEN {
            return Err(NetError::Protocol("request header too large".into()));
        }
        buf.extend_from_slice(&f.payload);
        if f.flags & FLAG_MORE != 0 {
            return Ok(());
        }
        let (header, prio) = st.requests.remove(&f.id).expect("just inserted");
        let body = (f.flags & FLAG_BODY != 0).then(|| st.new_body(f.id, self));
        st.serving.insert(f.id, false);
        drop(st);

        let (conn, netapp, id) = (self.clone(), netapp.clone(), f.id);
        tokio::spawn(async move {
            let res = std::panic::AssertUnwindSafe(netapp.handle_request(
                Bytes::from(header),
                body.map(|b| Box::pin(b) as ByteStream),
                conn.peer,
            ))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err("the handler panicked".to_string()));
            conn.finish_request(id, prio, res);
        });
        Ok(())
    }

    fn finish_request(
        &self,
        id: u32,
        prio: Priority,
        res: Result<(Vec<u8>, Option<ByteStream>), String>,
    ) {
        let cancelled = self.state.lock().unwrap().serving.remove(&id);
        if cancelled != Some(false) {
            return; // the caller gave up, or the connection closed
        }
        match res {
            Ok((header, body)) => self.send_cmd(WriterCmd::Send(OutMessage {
                id,
                kind: FrameKind::Response,
                prio,
                header: header.into(),
                body,
            })),
            Err(msg) => self.send_cmd(WriterCmd::Control(Frame::error(id, prio, &msg))),
        }
    }

    fn on_response_piece(self: &Arc<Self>, f: Frame) -> Result<(), NetError> {
        let mut st = self.state.lock().unwrap();
        let Some(p) = st.pending.get_mut(&f.id) else {
            return Ok(()); // an abandoned call
        };
        if p.header.len() + f.payload.len() > MAX_MESSAGE_LEN {
            return Err(NetError::Protocol("response header too large".into()));
        }
        p.header.extend_from_slice(&f.payload);
        if f.flags & FLAG_MORE != 0 {
            return Ok(());
        }
        let p = st.pending.remove(&f.id).expect("present");
        let body = (f.flags & FLAG_BODY != 0).then(|| st.new_body(f.id, self));
        drop(st);
        // If the caller is gone, the body is dropped here, which cancels it.
        let _ = p.tx.send(Ok((Bytes::from(p.header), body)));
        Ok(())
    }
}

impl State {
    fn alloc_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(2);
            if !self.pending.contains_key(&id) && !self.bodies.contains_key(&id) {
                return id;
            }
        }
    }

    fn new_body(&mut self, id: u32, conn: &Arc<Conn>) -> RecvBody {
        let (tx, rx) = mpsc::unbounded_channel();
        self.bodies.insert(
            id,
            IncomingBody {
                tx,
                window_left: u64::from(WINDOW),
            },
        );
        RecvBody::new(id, rx, conn.clone())
    }
}

struct AbandonOnDrop<'a> {
    conn: &'a Conn,
    id: Option<u32>,
}

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.conn.abandon(id);
        }
    }
}
