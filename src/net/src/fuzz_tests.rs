//! Fuzz targets of what an unauthenticated or authenticated peer sends:
//! the handshake (preamble and Noise messages) and the frame decoder.
//! They run with bolero: `cargo test -p garage_net fuzz_` for a short
//! budget (`GARAGE_FUZZ_SECONDS`, default 1 s each; see doc/security.md).

use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use crate::frame::{Frame, FrameKind, FLAG_BODY, FLAG_MORE};
use crate::handshake;
use crate::ident::{NetworkKey, NodeKey};
use crate::Priority;

/// As `garage_util::fuzzing::budget` (this crate sits below garage_util).
fn budget() -> Duration {
    let s = std::env::var("GARAGE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(s)
}

/// Any bytes: decoding never panics, and a decoded frame encodes back to
/// the same bytes.
#[test]
fn fuzz_frame_decode() {
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(70_000)
        .for_each(|b: &[u8]| {
            if let Ok(f) = Frame::decode(b) {
                let mut out = Vec::new();
                f.encode_into(&mut out);
                assert_eq!(out, b, "a decoded frame re-encodes to its bytes");
            }
        });
}

/// Valid frames with a few bytes changed: still never a panic.
#[test]
fn fuzz_frame_decode_mutated() {
    let kinds = [
        FrameKind::Request,
        FrameKind::Body,
        FrameKind::Window,
        FrameKind::Error,
    ];
    bolero::check!()
        .with_test_time(budget())
        .with_type::<(u8, u32, Vec<(u16, u8)>, u16)>()
        .for_each(|(k, id, edits, len)| {
            let kind = kinds[usize::from(*k) % kinds.len()];
            let payload = Bytes::from(vec![7u8; usize::from(*len % 600)]);
            let mut f = Frame::new(*id, kind, Priority::Normal, payload);
            f.flags = k & (FLAG_BODY | FLAG_MORE);
            let mut b = Vec::new();
            f.encode_into(&mut b);
            for (pos, v) in edits {
                if !b.is_empty() {
                    let i = usize::from(*pos) % b.len();
                    b[i] ^= v;
                }
            }
            let _ = Frame::decode(&b);
        });
}

/// What a stranger may send to the RPC port: any bytes, after or instead
/// of the preamble. The listener's side of the handshake ends with an
/// error (never a panic, never a session without the network key).
#[test]
fn fuzz_handshake_accept() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let net = NetworkKey::from_bytes([3; 32]);
    let node = NodeKey::generate();
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(4096)
        .with_type::<(bool, Vec<u8>)>()
        .for_each(|(with_preamble, b)| {
            let mut input = Vec::new();
            if *with_preamble {
                input.extend_from_slice(handshake::PREAMBLE);
            }
            input.extend_from_slice(b);
            rt.block_on(async {
                let (mut ours, mut theirs) = tokio::io::duplex(1 << 17);
                theirs.write_all(&input).await.unwrap();
                drop(theirs.shutdown().await);
                let r = tokio::time::timeout(
                    Duration::from_secs(5),
                    handshake::accept(&mut ours, &net, &node),
                )
                .await
                .expect("a handshake on a closed input ends");
                assert!(r.is_err(), "random bytes never complete a handshake");
            });
        });
}
