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
//!
//! Versions (from v0.2.0; v0.1.0 sends none and ignores what it does not
//! expect): a listener of v0.2.0 or later puts [`VERSIONED`] in message 2's
//! payload. A dialer that sees it appends its encoded [`VersionInfo`] to
//! message 3's payload (after the sequence number); one that does not (a
//! v0.1.0 listener) sends the bare sequence number, as v0.1.0 expects. The
//! listener answers a versioned dialer with the confirmation followed by its
//! own `VersionInfo`, or with [`REFUSED`] and the reason when their versions
//! are incompatible; it answers a v0.1.0 dialer with the bare confirmation,
//! or hangs up. Versions travel only once the peer has proved it holds the
//! secret (message 3 onwards), except the one-byte marker.

use std::io;
use std::sync::Arc;

use snow::params::NoiseParams;
use snow::StatelessTransportState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::NetError;
use crate::ident::{NetworkKey, NodeId, NodeKey};
use crate::version::VersionInfo;

/// Sent in clear before the handshake and bound into it as the Noise
/// prologue: a peer speaking another version fails at once with a clear
/// message, and a man in the middle cannot make two versions talk.
pub const PREAMBLE: &[u8] = b"garage-net/1";
pub(crate) const NOISE_PATTERN: &str = "Noise_XXpsk3_25519_ChaChaPoly_BLAKE2s";
const CONFIRMATION: &[u8] = b"garage-net/1 ok";
/// Message 2's payload from a listener of v0.2.0 or later: "I exchange
/// versions".
const VERSIONED: &[u8] = b"v";
/// Starts the listener's answer to message 3 instead of the confirmation
/// when it will not talk to the dialer's release; the reason follows.
const REFUSED: &[u8] = b"garage-net/1 refused: ";
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
    /// What the peer told of its version ([`VersionInfo::LEGACY`] if it
    /// sent nothing: v0.1.0).
    pub peer_version: VersionInfo,
    /// Whether the peer speaks the versioned handshake (v0.2.0 and later).
    pub peer_versioned: bool,
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
    ours: &VersionInfo,
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
    let n = hs
        .read_message(&inbuf, &mut payload)
        .map_err(|e| noise_err("message 2", e))?;
    let versioned = &payload[..n] == VERSIONED;
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

    let mut msg3 = dial_seq.to_be_bytes().to_vec();
    if versioned {
        msg3.extend_from_slice(&ours.encode());
    }
    let n = hs
        .write_message(&msg3, &mut msg)
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
    let answer = &payload[..n];
    let peer_version = if !versioned {
        if answer != CONFIRMATION {
            return Err(NetError::Handshake("unexpected confirmation".into()));
        }
        VersionInfo::LEGACY
    } else if let Some(reason) = answer.strip_prefix(REFUSED) {
        return Err(NetError::Incompatible {
            peer,
            reason: format!("refused by the peer: {}", String::from_utf8_lossy(reason)),
        });
    } else if let Some(info) = answer.strip_prefix(CONFIRMATION) {
        VersionInfo::decode(info).map_err(|e| NetError::Handshake(format!("confirmation: {e}")))?
    } else {
        return Err(NetError::Handshake("unexpected confirmation".into()));
    };
    // The listener checked too, but with what it knows of the cluster.
    ours.check_peer(&peer_version)
        .map_err(|reason| NetError::Incompatible { peer, reason })?;
    Ok(Session {
        peer,
        dial_seq,
        transport: Arc::new(transport),
        send_nonce: 0,
        recv_nonce: 1,
        peer_version,
        peer_versioned: versioned,
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
        .write_message(VERSIONED, &mut msg)
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
    let malformed = || NetError::Handshake("message 3 has a malformed payload".into());
    let (seq, rest) = payload[..n].split_at_checked(8).ok_or_else(malformed)?;
    let dial_seq = u64::from_be_bytes(seq.try_into().map_err(|_| malformed())?);
    // A v0.1.0 dialer sends the sequence number alone.
    let (peer_version, peer_versioned) = if rest.is_empty() {
        (VersionInfo::LEGACY, false)
    } else {
        let v = VersionInfo::decode(rest)
            .map_err(|e| NetError::Handshake(format!("message 3: {e}")))?;
        (v, true)
    };
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
        peer_version,
        peer_versioned,
    })
}

/// Completes the listener's side: sends the confirmation. Separate from
/// [`accept`] so that the listener can register the connection first: once
/// the dialer's `connect` returns, both sides know the connection.
pub(crate) async fn confirm<S: AsyncWrite + Unpin>(
    sock: &mut S,
    session: &Session,
    ours: &VersionInfo,
) -> Result<(), NetError> {
    let mut answer = CONFIRMATION.to_vec();
    if session.peer_versioned {
        answer.extend_from_slice(&ours.encode());
    }
    send_answer(sock, session, &answer).await
}

/// Ends the listener's side with a refusal instead of the confirmation: a
/// versioned dialer reads `reason`; a v0.1.0 dialer, which would take
/// anything but the bare confirmation as a broken handshake, gets nothing
/// (the caller hangs up).
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(
    sock: &mut S,
    session: &Session,
    reason: &str,
) -> Result<(), NetError> {
    if !session.peer_versioned {
        return Ok(());
    }
    let mut answer = REFUSED.to_vec();
    // A reason is a sentence; keep the message well under a Noise message.
    answer.extend_from_slice(&reason.as_bytes()[..reason.len().min(4096)]);
    send_answer(sock, session, &answer).await
}

async fn send_answer<S: AsyncWrite + Unpin>(
    sock: &mut S,
    session: &Session,
    answer: &[u8],
) -> Result<(), NetError> {
    let mut msg = vec![0u8; answer.len() + TAG_LEN];
    let n = session
        .transport
        .write_message(0, answer, &mut msg)
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

    fn this_build() -> VersionInfo {
        VersionInfo::this_build(crate::version::V0_1_0)
    }

    /// The listener's side as `NetApp` runs it: accept, check the
    /// versions, then confirm or refuse.
    async fn listen_side<S: AsyncRead + AsyncWrite + Unpin>(
        sock: &mut S,
        net: &NetworkKey,
        key: &NodeKey,
        ours: &VersionInfo,
    ) -> Result<Session, NetError> {
        let session = accept(sock, net, key).await?;
        if let Err(reason) = ours.check_peer(&session.peer_version) {
            refuse(sock, &session, &reason).await?;
            return Err(NetError::Incompatible {
                peer: session.peer,
                reason,
            });
        }
        confirm(sock, &session, ours).await.map(|()| session)
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
        run_versions(dial_net, accept_net, expected, this_build(), this_build()).await
    }

    async fn run_versions(
        dial_net: NetworkKey,
        accept_net: NetworkKey,
        expected: impl FnOnce(NodeId) -> Option<NodeId>,
        dial_version: VersionInfo,
        accept_version: VersionInfo,
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
                let r = dial(&mut s1, &dial_net, &a, exp, 42, &dial_version).await;
                drop(s1); // hang up on failure, as the real connection does
                r
            },
            async {
                let r = listen_side(&mut s2, &accept_net, &b, &accept_version).await;
                drop(s2);
                r
            }
        );
        (a, b, ra, rb)
    }

    /// Release v0.1.0's dialer, byte for byte on the wire: empty message 1
    /// payload, message 2's payload ignored, the bare sequence number in
    /// message 3, and nothing but the bare confirmation accepted.
    async fn v0_1_0_dial<S: AsyncRead + AsyncWrite + Unpin>(
        sock: &mut S,
        net: &NetworkKey,
        key: &NodeKey,
    ) -> Result<NodeId, String> {
        let mut hs = builder(net, key).unwrap().build_initiator().unwrap();
        let (mut msg, mut payload, mut inbuf) = (
            vec![0u8; MAX_NOISE_MSG],
            vec![0u8; MAX_NOISE_MSG],
            Vec::new(),
        );
        sock.write_all(PREAMBLE).await.unwrap();
        let n = hs.write_message(&[], &mut msg).unwrap();
        send(sock, &msg[..n]).await.unwrap();
        recv(sock, &mut inbuf).await.unwrap();
        hs.read_message(&inbuf, &mut payload).unwrap();
        let peer = NodeId::from_slice(hs.get_remote_static().unwrap()).unwrap();
        let n = hs.write_message(&7u64.to_be_bytes(), &mut msg).unwrap();
        send(sock, &msg[..n]).await.unwrap();
        let t = hs.into_stateless_transport_mode().unwrap();
        recv(sock, &mut inbuf)
            .await
            .map_err(|e| format!("no confirmation: {e}"))?;
        let n = t.read_message(0, &inbuf, &mut payload).unwrap();
        if &payload[..n] != CONFIRMATION {
            return Err("unexpected confirmation".into());
        }
        Ok(peer)
    }

    /// Release v0.1.0's listener, byte for byte on the wire: empty message
    /// 2 payload, exactly 8 bytes expected in message 3, the bare
    /// confirmation.
    async fn v0_1_0_accept<S: AsyncRead + AsyncWrite + Unpin>(
        sock: &mut S,
        net: &NetworkKey,
        key: &NodeKey,
    ) -> Result<NodeId, String> {
        let mut pre = [0u8; PREAMBLE.len()];
        sock.read_exact(&mut pre).await.unwrap();
        let mut hs = builder(net, key).unwrap().build_responder().unwrap();
        let (mut msg, mut payload, mut inbuf) = (
            vec![0u8; MAX_NOISE_MSG],
            vec![0u8; MAX_NOISE_MSG],
            Vec::new(),
        );
        recv(sock, &mut inbuf).await.unwrap();
        hs.read_message(&inbuf, &mut payload).unwrap();
        let n = hs.write_message(&[], &mut msg).unwrap();
        send(sock, &msg[..n]).await.unwrap();
        recv(sock, &mut inbuf).await.unwrap();
        let n = hs.read_message(&inbuf, &mut payload).unwrap();
        if n != 8 {
            return Err("message 3 has a malformed payload".into());
        }
        let peer = NodeId::from_slice(hs.get_remote_static().unwrap()).unwrap();
        let t = hs.into_stateless_transport_mode().unwrap();
        let n = t.write_message(0, CONFIRMATION, &mut msg).unwrap();
        send(sock, &msg[..n]).await.unwrap();
        Ok(peer)
    }

    #[tokio::test]
    async fn versions_are_exchanged() {
        let mut newer = this_build();
        newer.release = crate::version::Version::new(9, 0, 0);
        newer.oldest_peer = this_build().release;
        let (_, _, ra, rb) = run_versions(nk(1), nk(1), Some, this_build(), newer).await;
        let (sa, sb) = (ra.unwrap(), rb.unwrap());
        assert_eq!(sa.peer_version, newer);
        assert!(sa.peer_versioned && sb.peer_versioned);
        assert_eq!(sb.peer_version, this_build());
    }

    /// v0.1.0 is two releases back: this build talks to it no more (its
    /// wire format is still understood, so that the refusal names it).
    #[tokio::test]
    async fn this_build_refuses_a_v0_1_0_listener() {
        let (a, b) = (NodeKey::generate(), NodeKey::generate());
        let (mut s1, mut s2) = tokio::io::duplex(4096);
        let (net, ours) = (nk(1), this_build());
        let (ra, rb) = tokio::join!(
            async {
                let r = dial(&mut s1, &net, &a, Some(b.id()), 3, &ours).await;
                drop(s1);
                r
            },
            v0_1_0_accept(&mut s2, &net, &b)
        );
        match ra {
            Err(NetError::Incompatible { peer, reason }) => {
                assert_eq!(peer, b.id());
                assert!(reason.contains("v0.1.0"), "{reason}");
            }
            r => panic!("expected Incompatible, got {:?}", r.err()),
        }
        // The old listener finished its side; the dialer hung up.
        assert_eq!(rb.unwrap(), a.id());
    }

    #[tokio::test]
    async fn a_listener_hangs_up_on_a_v0_1_0_dialer_finalized_or_not() {
        for cluster in [
            crate::version::V0_1_0,
            crate::version::Version::current().series(),
        ] {
            let (a, b) = (NodeKey::generate(), NodeKey::generate());
            let ours = VersionInfo::this_build(cluster);
            let (mut s1, mut s2) = tokio::io::duplex(4096);
            let net = nk(1);
            let (ra, rb) = tokio::join!(v0_1_0_dial(&mut s1, &net, &a), async {
                let r = listen_side(&mut s2, &net, &b, &ours).await;
                drop(s2);
                r
            });
            assert!(ra.unwrap_err().contains("no confirmation"));
            match rb {
                Err(NetError::Incompatible { peer, reason }) => {
                    assert_eq!(peer, a.id());
                    assert!(reason.contains("v0.1.0"), "{reason}");
                }
                r => panic!("expected Incompatible, got {:?}", r.err()),
            }
        }
    }

    #[tokio::test]
    async fn an_incompatible_dialer_reads_why_it_was_refused() {
        let too_old = VersionInfo {
            release: crate::version::Version::new(0, 0, 9),
            oldest_peer: crate::version::Version::new(0, 0, 1),
            cluster: crate::version::Version::new(0, 0, 1),
        };
        let (_, _, ra, rb) = run_versions(nk(1), nk(1), |_| None, too_old, this_build()).await;
        for r in [ra, rb] {
            match r {
                Err(NetError::Incompatible { reason, .. }) => {
                    assert!(reason.contains("v0.0.9"), "{reason}");
                    assert!(reason.contains(env!("CARGO_PKG_VERSION")), "{reason}");
                }
                r => panic!("expected Incompatible, got {:?}", r.err()),
            }
        }
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
