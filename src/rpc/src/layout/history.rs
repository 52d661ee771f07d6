//! The layout as a node keeps it: the applied versions, and the role and
//! parameter changes staged for the next one. Nodes exchange it by gossip
//! and merge what they receive, so every node converges to the newest
//! version and the union of staged changes.

use std::collections::BTreeMap;
use std::path::Path;

use garage_util::crdt::{Crdt, Lww, LwwMap};
use serde::{Deserialize, Serialize};

use super::version::{ChangeReport, LayoutParameters, LayoutVersion, NodeRole};
use super::{LayoutError, NodeId};

/// How many applied versions are kept for `garage layout history`.
pub const VERSIONS_KEPT: usize = 16;

/// Changes waiting for `garage layout apply`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutStaging {
    /// New role for a node, or `None` to remove it from the layout.
    pub roles: LwwMap<NodeId, Option<NodeRole>>,
    pub parameters: Lww<LayoutParameters>,
}

impl LayoutStaging {
    fn for_version(current: &LayoutVersion) -> Self {
        Self {
            roles: LwwMap::new(),
            // Timestamp 0: any explicit `layout config` wins over it.
            parameters: Lww::raw(0, current.parameters.clone()),
        }
    }
}

/// How far each node has moved to newer layout versions. Each map grows
/// only (merge keeps the maximum), so trackers gossip like any CRDT.
///
/// - `ack[n] = v`: node `n` writes to version `v`'s nodes, and every write
///   it started under an older version has finished.
/// - `sync[n] = v`: node `n` has pushed every entry it holds to the nodes
///   of version `v`, in a table sync that started once every node had
///   acknowledged `v`.
/// - `sync_ack[n] = v`: node `n` has seen that every node synced `v`, so
///   it reads from `v` (or newer) only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateTrackers {
    pub ack: BTreeMap<NodeId, u64>,
    pub sync: BTreeMap<NodeId, u64>,
    pub sync_ack: BTreeMap<NodeId, u64>,
}

/// Which of the three trackers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracker {
    Ack,
    Sync,
    SyncAck,
}

impl UpdateTrackers {
    fn map(&self, t: Tracker) -> &BTreeMap<NodeId, u64> {
        match t {
            Tracker::Ack => &self.ack,
            Tracker::Sync => &self.sync,
            Tracker::SyncAck => &self.sync_ack,
        }
    }

    fn map_mut(&mut self, t: Tracker) -> &mut BTreeMap<NodeId, u64> {
        match t {
            Tracker::Ack => &mut self.ack,
            Tracker::Sync => &mut self.sync,
            Tracker::SyncAck => &mut self.sync_ack,
        }
    }

    /// Raises `node`'s tracker to `v`; returns whether it changed.
    pub fn raise(&mut self, t: Tracker, node: NodeId, v: u64) -> bool {
        let e = self.map_mut(t).entry(node).or_insert(0);
        if v > *e {
            *e = v;
            true
        } else {
            false
        }
    }

    pub fn get(&self, t: Tracker, node: &NodeId) -> u64 {
        self.map(t).get(node).copied().unwrap_or(0)
    }

    /// The smallest value of tracker `t` over `nodes` (absent counts as 0).
    pub fn min_over<'a>(&self, t: Tracker, nodes: impl Iterator<Item = &'a NodeId>) -> u64 {
        nodes.map(|n| self.get(t, n)).min().unwrap_or(u64::MAX)
    }

    fn merge(&mut self, other: &UpdateTrackers) {
        for t in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            for (n, v) in other.map(t) {
                self.raise(t, *n, *v);
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutHistory {
    /// Applied versions, oldest first; never empty. The versions from
    /// [`LayoutHistory::min_live_version`] on are live (written to); older
    /// ones are kept for `garage layout history` only.
    pub versions: Vec<LayoutVersion>,
    /// Changes staged on top of the newest version.
    pub staging: LayoutStaging,
    #[serde(default)]
    pub trackers: UpdateTrackers,
}

/// The on-disk and on-the-wire form, versioned from the start.
#[derive(Serialize, Deserialize)]
enum Persisted {
    V1(LayoutHistory),
}

impl LayoutHistory {
    pub fn new(replication_factor: usize) -> Self {
        let v0 = LayoutVersion::initial(replication_factor);
        Self {
            staging: LayoutStaging::for_version(&v0),
            versions: vec![v0],
            trackers: UpdateTrackers::default(),
        }
    }

    pub fn version(&self, v: u64) -> Option<&LayoutVersion> {
        self.versions.iter().find(|l| l.version == v)
    }

    /// The oldest version still written to: every node has seen that all
    /// nodes synced it (or a newer one), so no node reads older ones.
    pub fn min_live_version(&self) -> u64 {
        let current = self.current().version;
        // The nodes that count are those of the live versions, which depend
        // on the result: iterate to the fixed point (it only rises).
        let mut m = self.versions[0].version;
        loop {
            let next = self
                .trackers
                .min_over(Tracker::SyncAck, self.tracked_nodes_of(m).iter())
                .clamp(m, current);
            if next == m {
                return m;
            }
            m = next;
        }
    }

    /// Versions written to: writes must reach a quorum in each of them.
    pub fn live_versions(&self) -> impl Iterator<Item = &LayoutVersion> {
        let min = self.min_live_version();
        self.versions.iter().filter(move |v| v.version >= min)
    }

    /// Versions kept but no longer written to (at most
    /// [`VERSIONS_KEPT`] of them), oldest first. Their nodes may still
    /// hold copies of partitions they have left, until their next sync
    /// pass drops them: the tombstone GC reaches them too (see
    /// `garage_table::gc`).
    pub fn retired_versions(&self) -> impl Iterator<Item = &LayoutVersion> {
        let min = self.min_live_version();
        self.versions.iter().filter(move |v| v.version < min)
    }

    /// Nodes whose trackers count: every node with a role in a version
    /// from `from` on (a node being removed still coordinates writes until
    /// it has seen the new version).
    fn tracked_nodes_of(&self, from: u64) -> std::collections::BTreeSet<NodeId> {
        self.versions
            .iter()
            .filter(|v| v.version >= from)
            .flat_map(|v| v.roles.keys().copied())
            .collect()
    }

    /// Nodes whose trackers decide the live and readable versions.
    pub fn tracked_nodes(&self) -> std::collections::BTreeSet<NodeId> {
        self.tracked_nodes_of(self.min_live_version())
    }

    /// The smallest value of tracker `t` over the tracked nodes.
    pub fn min_tracker(&self, t: Tracker) -> u64 {
        let current = self.current().version;
        self.trackers
            .min_over(t, self.tracked_nodes().iter())
            .min(current)
    }

    /// The newest version whose data every acknowledged write has reached,
    /// for writes acknowledged by `write_quorum` nodes of each partition:
    /// version `v` is synced when every node with a role in `v` or newer
    /// has synced `v` (pushed what it holds), and, for each older live
    /// version and partition, enough of that partition's nodes have synced
    /// `v` that every write quorum includes one of them. So a node that
    /// only held old copies and is down for good does not block a layout
    /// change while the others hold every acknowledged write (see
    /// `garage layout skip-dead-nodes`).
    pub fn synced_version(&self, write_quorum: usize) -> u64 {
        let min_live = self.min_live_version();
        let synced = |n: &NodeId, v: u64| self.trackers.get(Tracker::Sync, n) >= v;
        let mut best = min_live;
        for cand in self.live_versions().filter(|l| l.version > min_live) {
            let v = cand.version;
            let newer_ok = self.tracked_nodes_of(v).iter().all(|n| synced(n, v));
            let older_ok = newer_ok
                && self
                    .live_versions()
                    .filter(|u| u.version < v && !u.storage_nodes.is_empty())
                    .all(|u| {
                        (0..crate::layout::PARTITIONS).all(|p| {
                            let set = u.nodes_of(p);
                            let need = (set.len() + 1).saturating_sub(write_quorum.max(1));
                            set.iter().filter(|n| synced(n, v)).count() >= need
                        })
                    });
            if older_ok {
                best = v;
            }
        }
        best
    }

    /// The version reads use: the newest synced one (see
    /// [`LayoutHistory::synced_version`]).
    pub fn read_version(&self, write_quorum: usize) -> &LayoutVersion {
        let v = self.synced_version(write_quorum);
        let chosen = self
            .live_versions()
            .filter(|l| l.version <= v)
            .last()
            .unwrap_or_else(|| self.current());
        if chosen.storage_nodes.is_empty() {
            // A version without storage nodes holds no data: reading the
            // next one that has nodes loses nothing (the first layout).
            if let Some(next) = self
                .live_versions()
                .find(|l| l.version > chosen.version && !l.storage_nodes.is_empty())
            {
                return next;
            }
        }
        chosen
    }

    /// Nodes to write an entry of `partition` to: one set per live version
    /// that has storage nodes.
    pub fn write_sets(&self, partition: usize) -> Vec<Vec<NodeId>> {
        let mut sets: Vec<Vec<NodeId>> = Vec::new();
        for v in self.live_versions() {
            let nodes = v.nodes_of(partition);
            if !nodes.is_empty() && !sets.contains(&nodes) {
                sets.push(nodes);
            }
        }
        sets
    }

    /// Every node holding `partition` in a live version: where anti-entropy
    /// pushes and the GC must find a tombstone before removing it.
    pub fn all_storage_nodes_of(&self, partition: usize) -> Vec<NodeId> {
        let mut all: Vec<NodeId> = Vec::new();
        for v in self.live_versions() {
            for n in v.nodes_of(partition) {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
        all
    }

    /// Raises this node's tracker; returns whether the layout changed.
    pub fn raise_tracker(&mut self, t: Tracker, node: NodeId, v: u64) -> bool {
        let v = v.min(self.current().version);
        self.trackers.raise(t, node, v)
    }

    pub fn current(&self) -> &LayoutVersion {
        self.versions
            .last()
            .expect("a layout history is never empty")
    }

    /// Roles as they would be after applying the staged changes.
    pub fn staged_roles(&self) -> BTreeMap<NodeId, NodeRole> {
        let mut roles = self.current().roles.clone();
        for (id, _, role) in self.staging.roles.items() {
            match role {
                Some(r) => roles.insert(*id, r.clone()),
                None => roles.remove(id),
            };
        }
        roles
    }

    pub fn has_staged_changes(&self) -> bool {
        let current = self.current();
        self.staging
            .roles
            .items()
            .any(|(id, _, role)| current.roles.get(id) != role.as_ref())
            || *self.staging.parameters.get() != current.parameters
    }

    pub fn stage_role(&mut self, node: NodeId, role: Option<NodeRole>) {
        self.staging.roles.update(node, role);
    }

    pub fn stage_parameters(&mut self, parameters: LayoutParameters) {
        self.staging.parameters.update(parameters);
    }

    /// Drops every staged change.
    pub fn revert(&mut self) {
        self.staging = LayoutStaging::for_version(self.current());
    }

    /// What applying the staged changes would give, without applying them.
    pub fn preview(&self) -> Result<(LayoutVersion, ChangeReport), LayoutError> {
        self.current()
            .next(self.staged_roles(), self.staging.parameters.get().clone())
    }

    /// Applies the staged changes as `version`, which must be the current
    /// version plus one (so that an operator applies what they reviewed).
    pub fn apply(&mut self, version: u64) -> Result<ChangeReport, LayoutError> {
        let expected = self.current().version + 1;
        if version != expected {
            return Err(LayoutError::WrongVersion {
                given: version,
                expected,
            });
        }
        if !self.has_staged_changes() {
            return Err(LayoutError::NothingStaged);
        }
        let (next, report) = self.preview()?;
        self.staging = LayoutStaging::for_version(&next);
        self.versions.push(next);
        self.trim();
        Ok(report)
    }

    /// Drops versions that are neither live nor among the last
    /// [`VERSIONS_KEPT`].
    fn trim(&mut self) {
        let min_live = self.min_live_version();
        while self.versions.len() > VERSIONS_KEPT && self.versions[0].version < min_live {
            self.versions.remove(0);
        }
    }

    /// Merges a layout received from another node; returns whether ours
    /// changed. Versions are united by number; the staging of the newer
    /// current version wins, and on the same version staged changes are
    /// merged; trackers keep each node's maximum. Two different versions
    /// with the same number (applied concurrently on two nodes) are
    /// resolved deterministically by their encoding, so all nodes pick the
    /// same one.
    pub fn merge(&mut self, other: &LayoutHistory) -> bool {
        let before = self.clone();
        let (mine, theirs) = (self.current().version, other.current().version);
        let mut by_number: BTreeMap<u64, LayoutVersion> = self
            .versions
            .iter()
            .map(|v| (v.version, v.clone()))
            .collect();
        for v in other.versions.iter() {
            match by_number.get(&v.version) {
                Some(m) if m == v || encode(m) >= encode(v) => (),
                _ => {
                    by_number.insert(v.version, v.clone());
                }
            }
        }
        self.versions = by_number.into_values().collect();
        if theirs > mine {
            self.staging = other.staging.clone();
        } else if theirs == mine {
            if other.current() == self.current() {
                self.staging.roles.merge(&other.staging.roles);
                self.staging.parameters.merge(&other.staging.parameters);
            } else if before.current() != self.current() {
                // Their version of this number won.
                self.staging = other.staging.clone();
            }
        }
        self.trackers.merge(&other.trackers);
        self.trim();
        *self != before
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(&Persisted::V1(self.clone())).expect("a layout always serializes")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LayoutError> {
        match rmp_serde::from_slice(bytes) {
            Ok(Persisted::V1(h)) => Ok(h),
            Err(e) => Err(LayoutError::Decode(e.to_string())),
        }
    }

    /// Reads the layout saved at `path`, if any.
    pub fn load(path: &Path) -> Result<Option<Self>, LayoutError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_bytes(&bytes).map(Some).map_err(|e| match e {
                LayoutError::Decode(m) => LayoutError::Decode(format!("{}: {m}", path.display())),
                e => e,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LayoutError::Io(format!("{}: {e}", path.display()))),
        }
    }

    /// Saves durably: temporary file, fsync, rename, fsync of the directory.
    pub fn save(&self, path: &Path) -> Result<(), LayoutError> {
        use std::io::Write;
        let io = |e: std::io::Error| LayoutError::Io(format!("{}: {e}", path.display()));
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&self.to_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

fn encode(v: &LayoutVersion) -> Vec<u8> {
    rmp_serde::to_vec_named(v).expect("a layout always serializes")
}
