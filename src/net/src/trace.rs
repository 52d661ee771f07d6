//! Trace context across RPC: a call made inside a traced request carries
//! its span's context to the node that serves it, whose handler then runs
//! in a span that is a child of the caller's, so that one S3 request is one
//! trace with spans on every node it touched.
//!
//! On the wire the context is a trailer after the request's MessagePack
//! message: `'T' | trace id (16 bytes) | span id (8) | flags (1)`. A node
//! of an older version decodes the message and ignores what follows it (a
//! MessagePack decoder stops at the end of the value), so the trailer needs
//! no new frame flag and old and new nodes still talk.
//!
//! This crate knows nothing of OpenTelemetry: the binary installs a
//! [`Propagator`] that reads and sets the contexts of `tracing` spans, and
//! only while it exports traces.

use std::sync::OnceLock;

/// Marks the trailer (and its version).
const MARK: u8 = b'T';
/// Bytes of the trailer.
pub const TRAILER_LEN: usize = 1 + 16 + 8 + 1;

/// The caller's span, as W3C trace context names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// W3C trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = [0u8; TRAILER_LEN];
        out[0] = MARK;
        out[1..17].copy_from_slice(&self.trace_id);
        out[17..25].copy_from_slice(&self.span_id);
        out[25] = self.flags;
        out
    }

    /// The context in the bytes after a message: `None` for none (an
    /// older caller, or a call outside any trace) and for anything else
    /// than one well-formed trailer (a newer format is ignored, not an
    /// error: the call is served, only without a parent).
    pub fn decode(rest: &[u8]) -> Option<Self> {
        if rest.len() != TRAILER_LEN || rest[0] != MARK {
            return None;
        }
        let mut trace_id = [0u8; 16];
        trace_id.copy_from_slice(&rest[1..17]);
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&rest[17..25]);
        // All-zero ids are invalid in W3C trace context.
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags: rest[25],
        })
    }
}

/// Reads and sets the trace contexts of `tracing` spans (installed by the
/// binary when it exports traces).
pub trait Propagator: Send + Sync + 'static {
    /// The context of the current span, if it is part of a trace.
    fn current(&self) -> Option<TraceParent>;
    /// Makes `span` a child of `parent`, a span on another node.
    fn adopt(&self, span: &tracing::Span, parent: TraceParent);
}

static PROPAGATOR: OnceLock<Box<dyn Propagator>> = OnceLock::new();

/// Installs the propagator (once; later calls are ignored).
pub fn set_propagator(p: Box<dyn Propagator>) {
    let _ = PROPAGATOR.set(p);
}

/// The context to send with a call made now.
pub(crate) fn current() -> Option<TraceParent> {
    PROPAGATOR.get()?.current()
}

/// Parents `span` on `parent`; whether a propagator did.
pub(crate) fn adopt(span: &tracing::Span, parent: TraceParent) -> bool {
    match PROPAGATOR.get() {
        Some(p) => {
            p.adopt(span, parent);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_round_trip_and_anything_else_is_none() {
        let t = TraceParent {
            trace_id: [7; 16],
            span_id: [9; 8],
            flags: 1,
        };
        let b = t.encode();
        assert_eq!(TraceParent::decode(&b), Some(t));
        assert_eq!(TraceParent::decode(&[]), None);
        assert_eq!(TraceParent::decode(&b[..TRAILER_LEN - 1]), None);
        let mut longer = b.to_vec();
        longer.push(0);
        assert_eq!(TraceParent::decode(&longer), None);
        let mut other = b;
        other[0] = b'U';
        assert_eq!(TraceParent::decode(&other), None);
        let zero = TraceParent {
            trace_id: [0; 16],
            ..t
        };
        assert_eq!(TraceParent::decode(&zero.encode()), None);
    }

    /// A message followed by a trailer decodes as the message alone with
    /// the plain decoder older nodes use.
    #[test]
    fn older_decoders_ignore_the_trailer() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct M {
            a: u32,
            b: String,
        }
        let m = M {
            a: 5,
            b: "x".into(),
        };
        let mut bytes = rmp_serde::to_vec_named(&m).unwrap();
        bytes.extend_from_slice(
            &TraceParent {
                trace_id: [1; 16],
                span_id: [2; 8],
                flags: 1,
            }
            .encode(),
        );
        let back: M = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, m);
    }
}
