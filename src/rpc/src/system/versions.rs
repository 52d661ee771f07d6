//! The cluster version and feature gates (see doc/upgrading.md).
//!
//! Each node runs a release ([`Version::current`]); the cluster runs at its
//! *active version*: the version it was last finalized at, kept in
//! [`CLUSTER_VERSION_FILE`] on every node and spread by the handshake and
//! by pings (a max-register: a node adopts a higher finalized version it
//! hears of, if its own release reaches it). A cluster that never finalized
//! (one made by v0.1.0, which has no such file) is at v0.1.0.
//!
//! `garage upgrade finalize` raises it to the release series of the node
//! that runs it, once every node of the live layout and every connected
//! node runs that series or later. Until then an upgraded node writes only
//! what the previous release reads, so any node can be rolled back; after
//! it, nodes of older releases are refused at the handshake and the
//! features gated on the new version are used. A new cluster (first layout
//! applied while every node runs this release) is finalized at once: it
//! holds nothing an older release wrote.

use std::path::Path;

use garage_net::version::V0_1_0;
use garage_net::{NodeId, Version, VersionInfo};
use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

use super::{KnownNode, NodeStatus, System, SystemError};
use crate::layout::LayoutHistory;

/// File in `metadata_dir` holding the cluster version this node knows to be
/// finalized, as text (`0.2.0`).
pub const CLUSTER_VERSION_FILE: &str = "cluster_version";

/// A change an older release cannot read or understand: used only once
/// the cluster's active version is at least `since`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub since: Version,
}

/// Lifecycle rules with NoncurrentVersionTransition: a field at the end
/// of a rule in the bucket entry, which v0.2.0 cannot decode.
pub const NONCURRENT_VERSION_TRANSITION: Feature = Feature {
    name: "noncurrent-version-transition",
    since: Version::new(0, 3, 0),
};

/// Conditional-write register values that readers never ignore for their
/// age (format 4): sound only once every node's object-table GC empties a
/// register before collecting the tombstone that supersedes its value,
/// which v0.2.0's does not (and v0.2.0 cannot decode format 4).
pub const CONDITIONAL_REGISTER_GC: Feature = Feature {
    name: "conditional-register-gc",
    since: Version::new(0, 3, 0),
};

/// Multipart uploads whose parts are listed in a table of their own, one
/// entry per part (`multipart_part`), instead of in the upload's entry,
/// which every part rewrote whole: a table and a field v0.2.0 does not
/// know.
pub const MULTIPART_PARTS_APART: Feature = Feature {
    name: "multipart-parts-apart",
    since: Version::new(0, 3, 0),
};

/// Table entries stored in format 3 (`garage_table::encoding`): without
/// the bytes that repeat their tree key, compressed with a built-in
/// dictionary. Only how a node stores its entries (what it sends and the
/// hashes it compares are unchanged), but v0.2.0 could not read such a
/// metadata directory after a rollback.
pub const COMPRESSED_ENTRIES: Feature = Feature {
    name: "compressed-entries",
    since: Version::new(0, 3, 0),
};

/// Storage classes with a place (`garage layout class`): layout fields,
/// block placements and shard headers v0.2.0 does not know.
pub const PLACEMENT_CLASSES: Feature = Feature {
    name: "placement-classes",
    since: Version::new(0, 3, 0),
};

/// Re-encoded blocks carry a count (`recoded`) in a version's block list
/// and an object's metadata, so that the newest form wins every merge:
/// data moves between two coded classes, and follows a class's new
/// redundancy. v0.2.0 does not read the count.
pub const RECODED_BLOCKS: Feature = Feature {
    name: "recoded-blocks",
    since: Version::new(0, 3, 0),
};

/// Bucket notifications: the `notify_topic` table and a bucket's
/// notification rules (a field of its entry), which v0.2.0 does not know.
pub const BUCKET_NOTIFICATIONS: Feature = Feature {
    name: "bucket-notifications",
    since: Version::new(0, 3, 0),
};

/// Bucket replication: the `replication_remote` table, a bucket's
/// replication rules (a field of its entry) and each version's replication
/// state (a field of its history entry), which v0.2.0 does not know.
pub const BUCKET_REPLICATION: Feature = Feature {
    name: "bucket-replication",
    since: Version::new(0, 3, 0),
};

/// IAM users, groups and policies: the `iam_user`, `iam_group`,
/// `iam_policy` and `iam_access_key` tables, which v0.2.0 does not know.
pub const IAM: Feature = Feature {
    name: "iam",
    since: Version::new(0, 3, 0),
};

/// Object ACLs that grant to users (a field at the end of a version in
/// the object and history entries), which v0.2.0 cannot decode.
pub const OBJECT_ACL_GRANTS: Feature = Feature {
    name: "object-acl-grants",
    since: Version::new(0, 3, 0),
};

/// Every gated feature, oldest first, for `garage --version` and the docs.
/// v0.2.0 changed no stored format and no RPC that v0.1.0 reads (its
/// handshake and ping additions are read by v0.1.0 as before): its
/// finalization only made the cluster refuse v0.1.0.
pub const FEATURES: &[Feature] = &[
    NONCURRENT_VERSION_TRANSITION,
    CONDITIONAL_REGISTER_GC,
    MULTIPART_PARTS_APART,
    COMPRESSED_ENTRIES,
    PLACEMENT_CLASSES,
    RECODED_BLOCKS,
    BUCKET_NOTIFICATIONS,
    BUCKET_REPLICATION,
    IAM,
    OBJECT_ACL_GRANTS,
];

/// Whether `feature` may be used by a cluster whose active version is
/// `active`.
pub fn allows(active: Version, feature: &Feature) -> bool {
    active >= feature.since
}

/// Reads the cluster version saved in `metadata_dir`: v0.1.0 when there is
/// none (a node new or upgraded from v0.1.0).
pub fn load(metadata_dir: &Path) -> Result<Version, String> {
    let path = metadata_dir.join(CLUSTER_VERSION_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| format!("{}: {e} (the file holds the cluster version this node knows to be finalized: restore it, or write the version `garage status` shows on another node)", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(V0_1_0),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Saves `v` as this node's cluster version, durably (written aside,
/// synced, renamed, directory synced).
pub fn save(metadata_dir: &Path, v: Version) -> std::io::Result<()> {
    use std::io::Write;
    let path = metadata_dir.join(CLUSTER_VERSION_FILE);
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        writeln!(f, "{v}")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(metadata_dir)?.sync_all()
}

/// The versions part of `garage status` and of the admin API's cluster
/// status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterVersions {
    /// The release the answering node runs.
    pub release: Version,
    /// The cluster's active version: what it was finalized at.
    pub active: Version,
    /// The lowest and highest releases run by the nodes of the live layout
    /// and the connected nodes (as far as known).
    pub lowest: Version,
    pub highest: Version,
    /// Whether nodes run different release series, or the cluster is not
    /// yet finalized at the series they all run.
    pub mixed: bool,
    /// What keeps `garage upgrade finalize` (run on the answering node)
    /// from raising the active version to its release series; empty when it
    /// can, or when there is nothing to finalize.
    pub finalize_blockers: Vec<String>,
}

/// What is known of one node's version, to decide whether the cluster can
/// be finalized at `target`.
pub struct NodeVersion {
    pub name: String,
    pub is_up: bool,
    pub info: Option<VersionInfo>,
}

/// Why the cluster cannot be finalized at `target` now, one line per node.
pub fn finalize_blockers(nodes: &[NodeVersion], target: Version) -> Vec<String> {
    let mut out = Vec::new();
    for n in nodes {
        match (&n.info, n.is_up) {
            (_, false) => out.push(format!(
                "node {} is down: finalizing needs every node of the layout up and running v{target} or later",
                n.name
            )),
            (None, true) => out.push(format!(
                "node {} has not told its version yet: try again in a few seconds",
                n.name
            )),
            (Some(i), true) if i.release < target => out.push(format!(
                "node {} runs v{}: upgrade it to v{target} or later first",
                n.name, i.release
            )),
            _ => {}
        }
    }
    out
}

impl System {
    /// The cluster's active version: features gated on a later version are
    /// not used yet.
    pub fn active_version(&self) -> Version {
        self.netapp.version().cluster
    }

    /// Whether `feature` may be used now (see [`FEATURES`]).
    pub fn feature_allowed(&self, feature: &Feature) -> bool {
        allows(self.active_version(), feature)
    }

    /// What is known of a peer's version: its release from the handshake
    /// of its current connection (fresh after a restart into another
    /// release), the cluster version from its pings too; the last ping's
    /// when it is not connected.
    pub(super) fn known_version(
        &self,
        id: &NodeId,
        status: Option<&NodeStatus>,
    ) -> Option<VersionInfo> {
        let pinged = status.and_then(|s| s.version);
        match (self.netapp.peer_version(id), pinged) {
            (Some(mut hs), Some(p)) => {
                if p.release == hs.release {
                    hs.cluster = hs.cluster.max(p.cluster);
                }
                Some(hs)
            }
            (hs, p) => hs.or(p),
        }
    }

    /// A peer's ping or pong told its version: adopt a higher finalized
    /// cluster version this release reaches, and drop a peer that can no
    /// longer be part of the cluster (the handshake refuses it from then
    /// on).
    pub(super) fn peer_version_heard(&self, id: NodeId, status: &NodeStatus) {
        let Some(theirs) = self.known_version(&id, Some(status)) else {
            return;
        };
        if theirs.cluster > self.active_version() && theirs.cluster <= Version::current() {
            if let Err(e) = self.raise_cluster_version(theirs.cluster) {
                warn!("{e}");
            }
        }
        if let Err(reason) = self.netapp.version().check_peer(&theirs) {
            error!(peer = ?id, "dropping the connection to an incompatible peer: {reason}");
            self.netapp.disconnect(&id);
        }
    }

    /// Raises this node's cluster version to `v` (never lowers it) and
    /// saves it; true if it changed.
    fn raise_cluster_version(&self, v: Version) -> Result<bool, SystemError> {
        let _saving = self
            .cluster_version_save
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if v <= self.active_version() {
            return Ok(false);
        }
        save(&self.config.metadata_dir, v).map_err(|e| {
            SystemError::ClusterVersion(format!(
                "cannot save {} in {}: {e}",
                CLUSTER_VERSION_FILE,
                self.config.metadata_dir.display()
            ))
        })?;
        self.netapp.set_cluster_version(v);
        info!("the cluster is finalized at v{v}: nodes older than v{v} are refused from now on");
        Ok(true)
    }

    /// The nodes that must run the target release before finalizing: every
    /// node with a role in a live layout version, and every connected node.
    fn finalize_candidates(&self) -> Vec<NodeVersion> {
        let me = self.id();
        let mut ids = self.layout().tracked_nodes();
        ids.extend(self.peers().connected_ids());
        ids.remove(&me);
        let known: Vec<(NodeId, bool, Option<NodeStatus>)> = {
            let peers = self.peers();
            ids.into_iter()
                .map(|id| {
                    let p = peers.get(&id);
                    (
                        id,
                        p.is_some_and(|p| p.is_up()),
                        p.and_then(|p| p.status.clone()),
                    )
                })
                .collect()
        };
        known
            .into_iter()
            .map(|(id, is_up, status)| NodeVersion {
                name: hex::encode(&id.0[..8]),
                is_up,
                info: self.known_version(&id, status.as_ref()),
            })
            .collect()
    }

    /// `garage upgrade finalize`: raises the cluster version to this node's
    /// release series once every node runs it, then tells every connected
    /// peer at once (a ping carries it; the others learn it when they
    /// connect). Returns the active version.
    pub async fn finalize(&self) -> Result<Version, SystemError> {
        let target = Version::current().series();
        if self.active_version() >= target {
            return Ok(self.active_version());
        }
        let blockers = finalize_blockers(&self.finalize_candidates(), target);
        if !blockers.is_empty() {
            return Err(SystemError::CannotFinalize { target, blockers });
        }
        self.raise_cluster_version(target)?;
        let peers = self.peers().connected_ids();
        futures::future::join_all(peers.into_iter().map(|id| self.ping_once(id))).await;
        Ok(self.active_version())
    }

    /// A cluster's first layout, applied while every node runs this
    /// release: nothing an older release wrote exists, so it starts
    /// finalized.
    pub(super) fn finalize_new_cluster(&self) {
        let target = Version::current().series();
        if self.active_version() >= target
            || !finalize_blockers(&self.finalize_candidates(), target).is_empty()
        {
            return;
        }
        match self.raise_cluster_version(target) {
            // The peers learn it from a ping at once, not in up to
            // PING_INTERVAL: a client may use a gated feature through
            // any node right after the first layout.
            Ok(true) => self.ping_now.notify_one(),
            Ok(false) => (),
            Err(e) => warn!("{e}"),
        }
    }

    /// The versions part of the cluster status, from the nodes listed.
    pub(super) fn versions_of(
        &self,
        nodes: &[KnownNode],
        layout: &LayoutHistory,
    ) -> ClusterVersions {
        let tracked = layout.tracked_nodes();
        let releases: Vec<Version> = nodes
            .iter()
            .filter(|n| n.is_up || tracked.contains(&n.id))
            .filter_map(|n| n.version.map(|v| v.release))
            .collect();
        let release = Version::current();
        let lowest = releases.iter().copied().min().unwrap_or(release);
        let highest = releases.iter().copied().max().unwrap_or(release);
        let active = self.active_version();
        let target = release.series();
        let finalize_blockers = if active >= target {
            Vec::new()
        } else {
            finalize_blockers(&self.finalize_candidates(), target)
        };
        ClusterVersions {
            release,
            active,
            lowest,
            highest,
            mixed: lowest.series() != highest.series() || active < lowest.series(),
            finalize_blockers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, up: bool, release: Option<&str>) -> NodeVersion {
        NodeVersion {
            name: name.into(),
            is_up: up,
            info: release.map(|r| VersionInfo {
                release: r.parse().unwrap(),
                oldest_peer: V0_1_0,
                cluster: V0_1_0,
            }),
        }
    }

    #[test]
    fn finalize_waits_for_every_node_up_and_upgraded() {
        let target: Version = "0.2.0".parse().unwrap();
        let all = [
            node("a", true, Some("0.2.0")),
            node("b", true, Some("0.2.3")),
        ];
        assert!(finalize_blockers(&all, target).is_empty());
        let b = finalize_blockers(
            &[
                node("a", true, Some("0.1.0")),
                node("b", false, Some("0.2.0")),
                node("c", true, None),
            ],
            target,
        );
        assert_eq!(b.len(), 3, "{b:?}");
        assert!(b[0].contains("node a runs v0.1.0"), "{b:?}");
        assert!(b[1].contains("node b is down"), "{b:?}");
        assert!(b[2].contains("node c has not told"), "{b:?}");
    }

    #[test]
    fn the_cluster_version_file_round_trips_and_defaults_to_v0_1_0() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), V0_1_0);
        let v: Version = "0.2.0".parse().unwrap();
        save(dir.path(), v).unwrap();
        assert_eq!(load(dir.path()).unwrap(), v);
        std::fs::write(dir.path().join(CLUSTER_VERSION_FILE), "garbage").unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(
            e.contains(CLUSTER_VERSION_FILE) && e.contains("MAJOR.MINOR.PATCH"),
            "{e}"
        );
    }

    #[test]
    fn features_are_gated_on_the_active_version() {
        let f = Feature {
            name: "a later format",
            since: "0.3.0".parse().unwrap(),
        };
        assert!(!allows(V0_1_0, &f));
        assert!(!allows("0.2.9".parse().unwrap(), &f));
        assert!(allows("0.3.0".parse().unwrap(), &f));
        assert!(allows("1.0.0".parse().unwrap(), &f));
        // The table is ordered and names no feature twice.
        for w in FEATURES.windows(2) {
            assert!(w[0].since <= w[1].since && w[0].name != w[1].name);
        }
    }
}
