//! The Noise handshake that admits a connection (see doc/net-protocol.md).
//!
//! ```text
//! dialer                                   listener
//!   "garage-net/1" (plaintext preamble) ->
//!   -> e                                  (msg 1)
//!                        <- e, ee, s, es   (msg 2: the dialer learns and
//!                                           checks the listener's id)
//!   -> s, se, psk  [dial sequence number] (msg 3: the listener learns the
//!                                           dialer's id and checks the psk)
//!                        <- confirmation  (first transport message: the
//!                                           listener proves it has the psk)
//! ```
//!
//! With `psk3` the pre-shared key is mixed in only by the third message, so
//! the dialer cannot know the listener holds `rpc_secret` until something
//! encrypted with the final keys comes back: hence the confirmation.

use std::io;
use std::sync::Arc;

use snow::params::NoiseParams;
use snow::StatelessTransportState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::NetError;
use crate::ident::{NetworkKey, NodeId, NodeKey};

/// Sent in clear before the handshake and bound into it as the Noise
/// prologue: a peer speaking another version fails at once with a clear
/// message, and a man in the middle cannot make two versions talk.
pub const PREAMBLE: &[u8] = b"garage-net/1";
pub(crate) const NOISE_PATTERN: &str = "Noise_XXpsk3_25519_ChaChaPoly_BLAKE2s";
const CONFIRMATION: &[u8] = b"garage-net/1 ok";
/// Largest Noise message, and so the largest frame on the wire after its
/// two length bytes.
pub(crate) const MAX_NOISE_MSG: usize = 65535;
/// Authentication tag added to every encrypted message.
pub(crate) const TAG_LEN: usize = 16;
const SECRET_HINT: &str = "(is rpc_secret the same on both nodes?)";

pub(crate) fn noise_params() -> NoiseParams {
    NOISE_PATTERN.parse().expect("valid Noise pattern")
}

/// An admitted connection's cryptographic state.
///
/// `StatelessTransportState` takes the nonce as an argument and needs only
/// `&self`, so the reader and writer tasks share it behind an `Arc` and each
/// keeps the counter of its own direction: the writer uses 0, 1, 2, ... for
/// what it sends, and the reader expects exactly that sequence from the
/// peer. A lost, replayed or reordered message therefore fails to decrypt,
/// as with a stateful transport, since TCP delivers in order.
pub(crate) struct Session {
    pub peer: NodeId,
    /// The dialer's sequence number for this connection (see
    /// `netapp::conn_wins`).
    pub dial_seq: u64,
    pub transport: Arc<StatelessTransportState>,
    pub send_nonce: u64,
    pub recv_nonce: u64,
}

fn builder<'a>(
    network_key: &'a NetworkKey,
    node_key: &'a NodeKey,
) -> Result<snow::Builder<'a>, snow::Error> {
    snow::Builder::new(noise_params())
        .prologue(PREAMBLE)?
        .psk(3, network_key.as_bytes())?
        .local_private_key(node_key.secret())
}

fn noise_err(stage: &str, e: snow::Error) -> NetError {
    match e {
        snow::Error::Decrypt => {
            NetError::Handshake(format!("{stage}: decryption failed {SECRET_HINT}"))
        }
        e => NetError::Handshake(format!("{stage}: {e}")),
    }
}

fn io_err(stage: &str, e: io::Error) -> NetError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        NetError::Handshake(format!("{stage}: the peer closed the connection"))
    } else {
        NetError::Handshake(format!("{stage}: {e}"))
    }
}

async fn send<S: AsyncWrite + Unpin>(sock: &mut S, msg: &[u8]) -> io::Result<()> {
    let len = u16::try_from(msg.len()).expect("Noise messages fit in 65535 bytes");
    let mut buf = Vec::with_capacity(2 + msg.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(msg);
    sock.write_all(&buf).await?;
    sock.flush().await
}

async fn recv<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> io::Result<()> {
    let len = sock.read_u16().await?;
    buf.resize(usize::from(len), 0);
    sock.read_exact(buf).await?;
    Ok(())
}

/// Runs the dialer's side. Aborts before revealing our own identity if the
/// listener is not `expected` (or is ourselves).
pub(crate) async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    sock: &mut S,
    network_key: &NetworkKey,
    node_key: &NodeKey,
    expected: Option<NodeId>,
    dial_seq: u64,
) -> Result<Session, NetError> {
    let mut hs = builder(network_key, node_key)
        .and_then(|b| b.build_initiator())
        .map_err(|e| noise_err("setup", e))?;
    let mut msg = vec![0u8; MAX_NOISE_MSG];
    let mut inbuf = Vec::new();
    let mut payload = vec![0u8; MAX_NOISE_MSG];

    sock.write_all(PREAMBLE)
        .await
        .map_err(|e| io_err("sending preamble", e))?;
    let n = hs
        .write_message(&[], &mut msg)
        .map_err(|e| noise_err("message 1", e))?;
    send(sock, &msg[..n])
        .await
        .map_err(|e| io_err("sending message 1", e))?;

    recv(sock, &mut inbuf)
        .await
        .map_err(|e| io_err("receiving message 2", e))?;
    hs.read_message(&inbuf, &mut payload)
        .map_err(|e| noise_err("message 2", e))?;
    let peer = hs
        .get_remote_static()
        .and_then(NodeId::from_slice)
        .ok_or_else(|| NetError::Handshake("message 2 carried no static key".into()))?;
    if peer == node_key.id() {
        return Err(NetError::Ourselves);
    }
    if let Some(expected) = expected {
        if expected != peer {
            return Err(NetError::WrongPeer {
                expected,
                got: peer,
            });
        }
    }

    let n = hs
        .write_message(&dial_seq.to_be_bytes(), &mut msg)
        .map_err(|e| noise_err("message 3", e))?;
    send(sock, &msg[..n])
        .await
        .map_err(|e| io_err("sending message 3", e))?;
    let transport = hs
        .into_stateless_transport_mode()
        .map_err(|e| noise_err("split", e))?;

    match recv(sock, &mut inbuf).await {
        Ok(()) => {}
        // The listener hangs up when message 3 does not decrypt.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return Err(NetError::Handshake(format!(
                "the peer closed the connection instead of confirming {SECRET_HINT}"
            )))
        }
        Err(e) => return Err(io_err("receiving confirmation", e)),
    }
    let n = transport
        .read_message(0, &inbuf, &mut payload)
        .map_err(|e| noise_err("confirmation", e))?;
    if &payload[..n] != CONFIRMATION {
        return Err(NetError::Handshake("unexpected confirmation".into()));
    }
    Ok(Session {
        peer,
        dial_seq,
        transport: Arc::new(transport),
        send_nonce: 0,
        recv_nonce: 1,
    })
}

/// Runs the listener's side up to the dialer's last message; [`confirm`]
/// finishes it.
pub(crate) async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    sock: &mut S,
    network_key: &NetworkKey,
    node_key: &NodeKey,
) -> Result<Session, NetError> {
    let mut preamble = [0u8; PREAMBLE.len()];
    sock.read_exact(&mut preamble)
        .await
        .map_err(|e| io_err("receiving preamble", e))?;
    if preamble != PREAMBLE {
        return Err(NetError::Handshake(format!(
            "the peer does not speak {} (first bytes {:?})",
            String::from_utf8_lossy(PREAMBLE),
            String::from_utf8_lossy(&preamble)
        )));
    }
    let mut hs = builder(network_key, node_key)
        .and_then(|b| b.build_responder())
        .map_err(|e| noise_err("setup", e))?;
    let mut msg = vec![0u8; MAX_NOISE_MSG];
    let mut inbuf = Vec::new();
    let mut payload = vec![0u8; MAX_NOISE_MSG];

    recv(sock, &mut inbuf)
        .await
        .map_err(|e| io_err("receiving message 1", e))?;
    hs.read_message(&inbuf, &mut payload)
        .map_err(|e| noise_err("message 1", e))?;
    let n = hs
        .write_message(&[], &mut msg)
        .map_err(|e| noise_err("message 2", e))?;
    send(sock, &msg[..n])
        .await
        .map_err(|e| io_err("sending message 2", e))?;

    recv(sock, &mut inbuf)
        .await
        .map_err(|e| io_err("receiving message 3", e))?;
    let n = hs
        .read_message(&inbuf, &mut payload)
        .map_err(|e| noise_err("message 3", e))?;
    let dial_seq = <[u8; 8]>::try_from(&payload[..n])
        .map(u64::from_be_bytes)
        .map_err(|_| NetError::Handshake("message 3 has a malformed payload".into()))?;
    let peer = hs
        .get_remote_static()
        .and_then(NodeId::from_slice)
        .ok_or_else(|| NetError::Handshake("message 3 carried no static key".into()))?;
    if peer == node_key.id() {
        return Err(NetError::Ourselves);
    }
    let transport = hs
        .into_stateless_transport_mode()
        .map_err(|e| noise_err("split", e))?;
    Ok(Session {
        peer,
        dial_seq,
        transport: Arc::new(transport),
        // Nonce 0 is the confirmation's.
        send_nonce: 1,
        recv_nonce: 0,
    })
}

/// Completes the listener's side: sends the confirmation. Separate from
/// [`accept`] so that the listener can register the connection first: once
/// the dialer's `connect` returns, both sides know the connection.
pub(crate) async fn confirm<S: AsyncWrite + Unpin>(
    sock: &mut S,
    session: &Session,
) -> Result<(), NetError> {
    let mut msg = vec![0u8; CONFIRMATION.len() + TAG_LEN];
    let n = session
        .transport
        .write_message(0, CONFIRMATION, &mut msg)
        .map_err(|e| noise_err("confirmation", e))?;
    send(sock, &msg[..n])
        .await
        .map_err(|e| io_err("sending confirmation", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nk(b: u8) -> NetworkKey {
        NetworkKey::from_bytes([b; 32])
    }

    async fn run(
        dial_net: NetworkKey,
        accept_net: NetworkKey,
        expected: impl FnOnce(NodeId) -> Option<NodeId>,
    ) -> (
        NodeKey,
        NodeKey,
        Result<Session, NetError>,
        Result<Session, NetError>,
    ) {
        let (a, b) = (NodeKey::generate(), NodeKey::generate());
        let (mut s1, mut s2) = tokio::io::duplex(4096);
        let exp = expected(b.id());
        let (ra, rb) = tokio::join!(
            async {
                let r = dial(&mut s1, &dial_net, &a, exp, 42).await;
                drop(s1); // hang up on failure, as the real connection does
                r
            },
            async {
                let r = accept(&mut s2, &accept_net, &b).await;
                let r = match r {
                    Ok(session) => confirm(&mut s2, &session).await.map(|()| session),
                    Err(e) => Err(e),
                };
                drop(s2);
                r
            }
        );
        (a, b, ra, rb)
    }

    #[tokio::test]
    async fn both_sides_learn_each_other() {
        let (a, b, ra, rb) = run(nk(1), nk(1), Some).await;
        let (sa, sb) = (ra.unwrap(), rb.unwrap());
        assert_eq!(sa.peer, b.id());
        assert_eq!(sb.peer, a.id());
        assert_eq!(sb.dial_seq, 42);
        // Transport keys agree, in both directions, with the nonces given.
        let mut ct = vec![0u8; 100];
        let mut pt = vec![0u8; 100];
        let n = sa
            .transport
            .write_message(sa.send_nonce, b"hi", &mut ct)
            .unwrap();
        let m = sb
            .transport
            .read_message(sb.recv_nonce, &ct[..n], &mut pt)
            .unwrap();
        assert_eq!(&pt[..m], b"hi");
        let n = sb
            .transport
            .write_message(sb.send_nonce, b"yo", &mut ct)
            .unwrap();
        let m = sa
            .transport
            .read_message(sa.recv_nonce, &ct[..n], &mut pt)
            .unwrap();
        assert_eq!(&pt[..m], b"yo");
        // A replayed nonce does not decrypt.
        assert!(sa.transport.read_message(0, &ct[..n], &mut pt).is_err());
    }

    #[tokio::test]
    async fn wrong_secret_fails_on_both_sides() {
        let (_, _, ra, rb) = run(nk(1), nk(2), |_| None).await;
        let (ea, eb) = (ra.err().unwrap(), rb.err().unwrap());
        assert!(matches!(ea, NetError::Handshake(_)), "{ea}");
        assert!(matches!(eb, NetError::Handshake(_)), "{eb}");
        assert!(eb.to_string().contains("is rpc_secret the same"), "{eb}");
        assert!(ea.to_string().contains("is rpc_secret the same"), "{ea}");
    }

    #[tokio::test]
    async fn unexpected_peer_is_refused() {
        let other = NodeKey::generate().id();
        let (_, b, ra, rb) = run(nk(1), nk(1), |_| Some(other)).await;
        match ra {
            Err(NetError::WrongPeer { expected, got }) => {
                assert_eq!(expected, other);
                assert_eq!(got, b.id());
            }
            r => panic!("expected WrongPeer, got {:?}", r.err()),
        }
        assert!(matches!(rb, Err(NetError::Handshake(_))));
    }

    #[tokio::test]
    async fn garbage_preamble_is_refused() {
        let b = NodeKey::generate();
        let (mut s1, mut s2) = tokio::io::duplex(4096);
        s1.write_all(&[0x16, 3, 1, 0, 0xa5, 1, 0, 0, 0xa1, 3, 3, 0])
            .await
            .unwrap();
        let e = accept(&mut s2, &nk(1), &b).await.err().unwrap();
        assert!(e.to_string().contains("does not speak garage-net/1"), "{e}");
    }
}
