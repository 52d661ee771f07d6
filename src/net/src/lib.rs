//! `garage_net`: the bottom network layer of garage. It gives each node an
//! identity ([`NodeKey`], whose public half is the [`NodeId`]), admits a
//! connection only after a Noise handshake proving both sides hold the
//! cluster secret ([`NetworkKey`]) and their node keys, encrypts everything
//! after it, and runs many concurrent, prioritised request/response calls
//! with streamed bodies over one TCP connection per pair of nodes
//! ([`NetApp`], [`Endpoint`]).
//!
//! It knows nothing of clusters, layouts or tables: membership, peer
//! discovery, failure detection and quorums belong to `garage_rpc` above.
//! It must never depend on any other garage crate.
//!
//! The wire protocol and the reasons behind it are in
//! `doc/net-protocol.md`. Module map: `ident` (keys and ids), `handshake`
//! (Noise), `frame` (the multiplexing frame), `sched` (what the writer sends
//! next), `writer` (the task that sends it), `body` (received bodies and flow control), `conn` (one
//! connection's tasks and call table), `endpoint` (typed endpoints),
//! `netapp` (connections per peer, listening, dialing), `admission` (how
//! many unauthenticated handshakes may run at once), `trace` (a request's
//! trace context carried to the nodes it calls), `version` (release
//! versions exchanged in the handshake, and which peers may talk).

pub mod admission;
mod body;
mod conn;
mod endpoint;
mod error;
mod frame;
#[cfg(test)]
mod fuzz_tests;
mod handshake;
mod ident;
mod metrics;
mod netapp;
mod sched;
pub mod trace;
pub mod version;
mod writer;

pub use body::{ByteStream, WINDOW};
pub use conn::MAX_MESSAGE_LEN;
pub use endpoint::{Endpoint, EndpointHandler, Message};
pub use error::NetError;
pub use frame::{Priority, CHUNK_SIZE};
pub use handshake::PREAMBLE;
pub use ident::{NetworkKey, NodeId, NodeKey, NODE_KEY_FILE, NODE_PUBKEY_FILE};
pub use netapp::{Listener, NetApp, NetConfig};
pub use version::{Version, VersionInfo};
