//! The errors of the network layer: I/O, the node's keys, handshakes,
//! peers, timeouts.

use std::path::PathBuf;
use std::time::Duration;

use crate::ident::NodeId;

/// Errors of the network layer.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The node key files in `metadata_dir` could not be read, written or
    /// understood.
    #[error("node key file {path}: {reason}")]
    KeyFile { path: PathBuf, reason: String },
    /// `rpc_secret` is not 64 hex characters.
    #[error("invalid rpc_secret: {0}")]
    BadNetworkKey(String),
    /// The peer could not be authenticated, or did not speak our protocol.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The dialed address is this node itself (a peer list naming every
    /// node by address, this one included).
    #[error("the address is this node's own")]
    Ourselves,
    /// The dialed node proved a valid identity, but not the one we asked for.
    #[error("connected to node {got}, but expected node {expected}")]
    WrongPeer { expected: NodeId, got: NodeId },
    /// The peer proved its identity, but runs a release this node does not
    /// talk to, or the other way round (see `VersionInfo::check_peer`).
    #[error("node {peer} is incompatible: {reason}")]
    Incompatible { peer: NodeId, reason: String },
    /// There is no open connection to this node; `connect` first.
    #[error("node {0} is not connected")]
    NotConnected(NodeId),
    /// The connection the call was using went away before its response.
    #[error("connection closed")]
    ConnectionClosed,
    /// The whole call (request sent, response header received) took longer
    /// than `NetConfig::rpc_timeout`.
    #[error("call timed out after {0:?}")]
    Timeout(Duration),
    /// The node that handled the call (possibly this one) answered with an
    /// error instead of a response: no handler for the endpoint, a message it
    /// could not decode, a handler that panicked.
    #[error("remote error: {0}")]
    Remote(String),
    /// A message or response could not be serialized or deserialized.
    #[error("cannot encode or decode message: {0}")]
    Codec(String),
    /// The peer broke the framing protocol; its connection is closed.
    #[error("protocol error: {0}")]
    Protocol(String),
}
