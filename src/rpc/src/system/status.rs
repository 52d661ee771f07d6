//! What each node tells the others about itself, with every ping.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Free and total bytes of a file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeSpace {
    pub available: u64,
    pub total: u64,
}

/// A short summary of a layout, so that peers can tell whether they hold
/// the same one without exchanging it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutDigest {
    pub version: u64,
    /// Hash of the whole encoded layout (staged changes included).
    pub hash: [u8; 32],
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub hostname: String,
    pub replication_factor: usize,
    /// The address other nodes should use to reach this node.
    pub rpc_public_addr: Option<std::net::SocketAddr>,
    pub layout: LayoutDigest,
    pub metadata_space: Option<FreeSpace>,
    /// Summed over the data directories' file systems (each counted once).
    pub data_space: Option<FreeSpace>,
    /// The sender's wall clock when it sent this (ms since the epoch), so
    /// that a node measures its peers' clock offsets from its pings
    /// (absent from older nodes: 0, no measure).
    #[serde(default)]
    pub clock_ms: u64,
    /// The sender's release, the oldest it talks to and the cluster
    /// version it knows to be finalized (absent from v0.1.0 nodes).
    #[serde(default)]
    pub version: Option<garage_net::VersionInfo>,
}

/// A status for tests, with sender clock `clock_ms`.
#[cfg(test)]
pub(crate) fn test_status(clock_ms: u64) -> NodeStatus {
    NodeStatus {
        hostname: "h".into(),
        replication_factor: 3,
        rpc_public_addr: None,
        layout: LayoutDigest {
            version: 0,
            hash: [0; 32],
        },
        metadata_space: None,
        data_space: None,
        clock_ms,
        version: None,
    }
}

/// The machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".into())
}

/// Free space of the file system holding `path`.
pub fn free_space(path: &Path) -> Option<FreeSpace> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = st.fragment_size() as u64;
    Some(FreeSpace {
        available: st.blocks_available() as u64 * frag,
        total: st.blocks() as u64 * frag,
    })
}

/// Free space summed over distinct file systems among `paths`.
pub fn free_space_of_all(paths: &[impl AsRef<Path>]) -> Option<FreeSpace> {
    let mut seen = Vec::new();
    let mut sum = FreeSpace {
        available: 0,
        total: 0,
    };
    for p in paths {
        let st = nix::sys::statvfs::statvfs(p.as_ref()).ok()?;
        let fsid = st.filesystem_id();
        if seen.contains(&fsid) {
            continue;
        }
        seen.push(fsid);
        let f = free_space(p.as_ref())?;
        sum.available += f.available;
        sum.total += f.total;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_the_temp_dir() {
        let dir = tempfile::tempdir().unwrap();
        let f = free_space(dir.path()).unwrap();
        assert!(f.total > 0 && f.available <= f.total);
        // The same file system twice counts once.
        let both = free_space_of_all(&[dir.path(), dir.path()]).unwrap();
        assert_eq!(both.total, f.total);
        assert!(free_space(Path::new("/nonexistent/path")).is_none());
    }
}
