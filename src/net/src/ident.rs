//! Who a node is ([`NodeId`], [`NodeKey`]) and which cluster it belongs to
//! ([`NetworkKey`]).

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};

use crate::error::NetError;

/// File, in `metadata_dir`, holding the node's X25519 secret key (32 raw
/// bytes, mode 0600).
pub const NODE_KEY_FILE: &str = "node_key";
/// File, in `metadata_dir`, holding the node's public key (32 raw bytes):
/// its node id, readable without access to the secret.
pub const NODE_PUBKEY_FILE: &str = "node_key.pub";

const KEY_LEN: usize = 32;

/// A node's identity: its X25519 static public key, as proven in every
/// handshake. Shown in full as 64 lowercase hex characters; `Debug` shows
/// only the first 16, which is what logs use.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub [u8; 32]);

impl NodeId {
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The first 8 bytes in hex: enough to tell nodes apart in logs.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..8])
    }

    pub(crate) fn from_slice(b: &[u8]) -> Option<NodeId> {
        Some(NodeId(b.try_into().ok()?))
    }
}

impl From<[u8; 32]> for NodeId {
    fn from(bytes: [u8; 32]) -> NodeId {
        NodeId(bytes)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

impl FromStr for NodeId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_hex32(s).map(NodeId)
    }
}

fn parse_hex32(s: &str) -> Result<[u8; 32], String> {
    if s.len() != 2 * KEY_LEN {
        return Err(format!(
            "expected {} hex characters, got {}",
            2 * KEY_LEN,
            s.len()
        ));
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).map_err(|e| format!("not hex: {e}"))?;
    Ok(out)
}

/// The cluster secret (`rpc_secret`): every node of a cluster holds the same
/// one, and a connection is admitted only if both sides prove they do. Its
/// `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct NetworkKey([u8; 32]);

impl NetworkKey {
    /// Parses the 64 hex characters of `rpc_secret`.
    pub fn from_hex(s: &str) -> Result<NetworkKey, NetError> {
        parse_hex32(s.trim())
            .map(NetworkKey)
            .map_err(NetError::BadNetworkKey)
    }

    pub fn from_bytes(b: [u8; 32]) -> NetworkKey {
        NetworkKey(b)
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for NetworkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NetworkKey(<secret>)")
    }
}

/// The node's X25519 static key pair, used as Noise's `s`. The node id is
/// its public half. `Debug` shows the id only, never the secret.
#[derive(Clone)]
pub struct NodeKey {
    secret: [u8; 32],
    id: NodeId,
}

impl NodeKey {
    /// A fresh random key pair, from snow's own RNG and X25519.
    pub fn generate() -> NodeKey {
        let kp = snow::Builder::new(crate::handshake::noise_params())
            .generate_keypair()
            .expect("the built-in resolver provides X25519 and an RNG");
        let secret: [u8; 32] = kp.private.as_slice().try_into().expect("32-byte key");
        NodeKey::from_secret(secret)
    }

    /// The key pair whose secret half is `secret` (any 32 bytes are a valid
    /// X25519 secret: the scalar is clamped when used).
    pub fn from_secret(secret: [u8; 32]) -> NodeKey {
        let mut dh = DefaultResolver
            .resolve_dh(&DHChoice::Curve25519)
            .expect("the built-in resolver provides X25519");
        dh.set(&secret);
        let id = NodeId::from_slice(dh.pubkey()).expect("X25519 public keys are 32 bytes");
        NodeKey { secret, id }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub(crate) fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// Reads the key pair from `metadata_dir/node_key`, or generates one and
    /// stores it there (and its public half in `node_key.pub`) on first
    /// start. The secret is written to a temporary file with mode 0600,
    /// fsynced, then renamed into place, so a crash leaves either no key or
    /// a whole one.
    pub fn load_or_generate(metadata_dir: &Path) -> Result<NodeKey, NetError> {
        let key_path = metadata_dir.join(NODE_KEY_FILE);
        let pub_path = metadata_dir.join(NODE_PUBKEY_FILE);
        let key = match fs::read(&key_path) {
            Ok(bytes) => {
                let secret: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    key_error(
                        &key_path,
                        format!(
                            "expected {KEY_LEN} bytes, found {}: the file is corrupt (move it away to generate a new node identity)",
                            bytes.len()
                        ),
                    )
                })?;
                warn_if_readable_by_others(&key_path);
                NodeKey::from_secret(secret)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(metadata_dir).map_err(|e| key_error(metadata_dir, e))?;
                let key = NodeKey::generate();
                write_atomically(&key_path, &key.secret, 0o600)?;
                tracing::info!(
                    "generated a new node key in {}; node id {}",
                    key_path.display(),
                    key.id
                );
                key
            }
            Err(e) => return Err(key_error(&key_path, e)),
        };
        // The public file is derived data: rewrite it if it is missing or
        // disagrees, rather than refusing to start.
        match fs::read(&pub_path) {
            Ok(b) if b == key.id.0 => {}
            Ok(_) => {
                tracing::warn!(
                    "{} does not match {}; rewriting it",
                    pub_path.display(),
                    key_path.display()
                );
                write_atomically(&pub_path, &key.id.0, 0o644)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_atomically(&pub_path, &key.id.0, 0o644)?;
            }
            Err(e) => return Err(key_error(&pub_path, e)),
        }
        Ok(key)
    }
}

impl NodeKey {
    /// The node id stored in `metadata_dir/node_key.pub` by
    /// [`NodeKey::load_or_generate`], without touching the secret: for tools
    /// (the CLI) that need to name the local node but may not read its key.
    pub fn read_public(metadata_dir: &Path) -> Result<NodeId, NetError> {
        let path = metadata_dir.join(NODE_PUBKEY_FILE);
        let bytes = fs::read(&path).map_err(|e| key_error(&path, e))?;
        NodeId::from_slice(&bytes).ok_or_else(|| {
            key_error(
                &path,
                format!("expected {KEY_LEN} bytes, found {}", bytes.len()),
            )
        })
    }
}

impl fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeKey({:?})", self.id)
    }
}

fn key_error(path: &Path, reason: impl ToString) -> NetError {
    NetError::KeyFile {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn write_atomically(path: &Path, data: &[u8], mode: u32) -> Result<(), NetError> {
    let mut tmp = PathBuf::from(path);
    tmp.set_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, mode);
        let mut f = opts.open(&tmp)?;
        // `mode` only applies when the file is created: a stale temporary
        // file from an interrupted run keeps its own permissions otherwise.
        #[cfg(unix)]
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| key_error(path, e))
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "{} is accessible to group or others; it should be mode 0600",
                path.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_text_forms() {
        let id = NodeId([0xab; 32]);
        let s = id.to_string();
        assert_eq!(s, "ab".repeat(32));
        assert_eq!(s.parse::<NodeId>().unwrap(), id);
        assert_eq!(format!("{id:?}"), "ab".repeat(8));
        assert!("abc".parse::<NodeId>().is_err());
        assert!("zz".repeat(32).parse::<NodeId>().is_err());
    }

    #[test]
    fn node_id_serde_roundtrip() {
        let id = NodeId([7; 32]);
        let b = rmp_serde::to_vec_named(&id).unwrap();
        assert_eq!(rmp_serde::from_slice::<NodeId>(&b).unwrap(), id);
    }

    #[test]
    fn network_key_parsing_and_redaction() {
        let k = NetworkKey::from_hex(&"0f".repeat(32)).unwrap();
        assert_eq!(k.as_bytes(), &[0x0f; 32]);
        assert!(!format!("{k:?}").contains("0f0f"));
        assert!(matches!(
            NetworkKey::from_hex("1234"),
            Err(NetError::BadNetworkKey(_))
        ));
    }

    #[test]
    fn secret_determines_id() {
        let a = NodeKey::generate();
        let b = NodeKey::from_secret(*a.secret());
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), NodeKey::generate().id());
        assert!(!format!("{a:?}").contains(&hex::encode(a.secret())));
    }

    #[test]
    fn key_files_persist_with_private_mode() {
        let dir = tempfile::tempdir().unwrap();
        let k1 = NodeKey::load_or_generate(dir.path()).unwrap();
        let k2 = NodeKey::load_or_generate(dir.path()).unwrap();
        assert_eq!(k1.id(), k2.id());
        assert_eq!(
            fs::read(dir.path().join(NODE_PUBKEY_FILE)).unwrap(),
            k1.id().0
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(NODE_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A missing public file is rewritten from the secret.
        fs::remove_file(dir.path().join(NODE_PUBKEY_FILE)).unwrap();
        assert_eq!(NodeKey::load_or_generate(dir.path()).unwrap().id(), k1.id());
        assert_eq!(
            fs::read(dir.path().join(NODE_PUBKEY_FILE)).unwrap(),
            k1.id().0
        );
    }

    #[test]
    fn corrupt_key_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(NODE_KEY_FILE), b"short").unwrap();
        let err = NodeKey::load_or_generate(dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, NetError::KeyFile { .. }));
        assert!(msg.contains(NODE_KEY_FILE), "{msg}");
        assert!(msg.contains("expected 32 bytes, found 5"), "{msg}");
        let err = NodeKey::read_public(dir.path()).unwrap_err().to_string();
        assert!(err.contains(NODE_PUBKEY_FILE), "{err}");
    }
}
