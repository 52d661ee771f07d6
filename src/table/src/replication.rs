//! Which nodes hold a table's entries.
//!
//! - [`Replication::Sharded`]: an entry lives on the `replication_factor`
//!   nodes the layout gives its partition (objects, versions, block
//!   references, uploads). Reads and writes use quorums of those nodes.
//! - [`Replication::Full`]: every entry lives on every node with a role in
//!   the layout, storage or gateway (access keys, buckets, bucket aliases:
//!   small, rarely written, read by every request). A write goes to all of
//!   them and needs a majority of each live layout version's nodes; a read
//!   is answered from the local copy (no round trip), and goes to a quorum
//!   only when the local copy lacks the entry (see
//!   [`crate::Table::get`]).
//!
//! Anti-entropy and the GC use the same node sets, so a node that was down
//! or cut off when a fully replicated entry was written gets it from the
//! first sync pass after it comes back (a pass runs when a peer comes
//! back up). A node that restarts does not wait for that: its reads ask a
//! quorum until its copy has caught up with one ([`crate::Table::get`]).

use garage_net::NodeId;
use garage_rpc::layout::{LayoutHistory, LayoutVersion};

/// See [`Replication::former_nodes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormerNodes {
    /// Nodes with a role in a live version.
    pub members: Vec<NodeId>,
    /// Nodes with no role in any live version.
    pub removed: Vec<NodeId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// Each partition on its `replication_factor` nodes.
    Sharded,
    /// Every entry on every node with a role.
    Full,
}

impl Replication {
    /// The nodes of layout version `v` that hold `partition`.
    pub fn nodes_in(self, v: &LayoutVersion, partition: usize) -> Vec<NodeId> {
        match self {
            Replication::Sharded => v.nodes_of(partition),
            Replication::Full => v.roles.keys().copied().collect(),
        }
    }

    /// The node sets a write of `partition` must reach a quorum of: one
    /// per live version that has such nodes, without repeats.
    pub fn write_sets(self, layout: &LayoutHistory, partition: usize) -> Vec<Vec<NodeId>> {
        let mut sets: Vec<Vec<NodeId>> = Vec::new();
        for v in layout.live_versions() {
            let nodes = self.nodes_in(v, partition);
            if !nodes.is_empty() && !sets.contains(&nodes) {
                sets.push(nodes);
            }
        }
        sets
    }

    /// Every node holding `partition` in a live version: where
    /// anti-entropy pushes and where the GC must find a tombstone before
    /// removing it.
    pub fn all_nodes(self, layout: &LayoutHistory, partition: usize) -> Vec<NodeId> {
        let mut all: Vec<NodeId> = Vec::new();
        for v in layout.live_versions() {
            for n in self.nodes_in(v, partition) {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
        all
    }

    /// The nodes that held `partition` in a retired version (one kept in
    /// the history, no longer written to) and hold it in no live one. They
    /// may still keep a stale copy of it: a node drops a partition it left
    /// at its next sync pass, not at the moment the version retires, and
    /// a node that is slow or down meanwhile keeps it longer. If it came to
    /// hold the partition again, or pushed it while its own view of the
    /// layout still showed the old version live, that copy would bring
    /// back entries deleted meanwhile. Split into those with a role in a
    /// live version (still members of the cluster) and those without
    /// (removed from the layout).
    pub fn former_nodes(self, layout: &LayoutHistory, partition: usize) -> FormerNodes {
        let live = self.all_nodes(layout, partition);
        let members: Vec<NodeId> = {
            let mut m: Vec<NodeId> = Vec::new();
            for v in layout.live_versions() {
                for n in v.roles.keys() {
                    if !m.contains(n) {
                        m.push(*n);
                    }
                }
            }
            m
        };
        let mut out = FormerNodes::default();
        for v in layout.retired_versions() {
            for n in self.nodes_in(v, partition) {
                if live.contains(&n) || out.members.contains(&n) || out.removed.contains(&n) {
                    continue;
                }
                match members.contains(&n) {
                    true => out.members.push(n),
                    false => out.removed.push(n),
                }
            }
        }
        out
    }

    /// The nodes of the version reads use (see
    /// [`LayoutHistory::read_version`]) that hold `partition`.
    pub fn read_nodes(
        self,
        layout: &LayoutHistory,
        write_quorum: usize,
        partition: usize,
    ) -> Vec<NodeId> {
        self.nodes_in(layout.read_version(write_quorum), partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_rpc::layout::NodeRole;

    fn node(i: u8) -> NodeId {
        NodeId([i; 32])
    }

    /// Three storage nodes and a gateway, replication 2.
    fn layout() -> LayoutHistory {
        let mut l = LayoutHistory::new(2);
        for i in 1..=3u8 {
            l.stage_role(
                node(i),
                Some(NodeRole {
                    zone: format!("z{i}"),
                    capacity: Some(1 << 30),
                    tags: vec![],
                }),
            );
        }
        l.stage_role(
            node(9),
            Some(NodeRole {
                zone: "z1".into(),
                capacity: None,
                tags: vec![],
            }),
        );
        l.apply(1).unwrap();
        l
    }

    #[test]
    fn full_replication_is_every_node_with_a_role() {
        let l = layout();
        for p in [0usize, 17, 255] {
            let sharded = Replication::Sharded.write_sets(&l, p);
            assert_eq!(sharded.len(), 1);
            assert_eq!(sharded[0].len(), 2, "partition {p}");
            assert!(!sharded[0].contains(&node(9)), "a gateway stores no shard");
            let full = Replication::Full.write_sets(&l, p);
            assert_eq!(full, vec![vec![node(1), node(2), node(3), node(9)]]);
            assert_eq!(Replication::Full.all_nodes(&l, p).len(), 4);
            assert_eq!(Replication::Full.read_nodes(&l, 2, p).len(), 4);
        }
    }

    #[test]
    fn former_nodes_are_the_retired_versions_holders_split_by_membership() {
        use garage_rpc::layout::Tracker;
        let mut l = layout();
        // Version 2: node 4 joins, node 3 leaves.
        l.stage_role(
            node(4),
            Some(NodeRole {
                zone: "z4".into(),
                capacity: Some(1 << 30),
                tags: vec![],
            }),
        );
        l.stage_role(node(3), None);
        l.apply(2).unwrap();
        for p in 0..256 {
            assert_eq!(
                Replication::Sharded.former_nodes(&l, p),
                FormerNodes::default(),
                "version 1 is still live"
            );
        }
        for i in [1u8, 2, 3, 4, 9] {
            l.raise_tracker(Tracker::SyncAck, node(i), 2);
        }
        assert_eq!(l.min_live_version(), 2);
        let mut left_removed = 0;
        for p in 0..256 {
            let v1 = l.version(1).unwrap().nodes_of(p);
            let v2 = l.version(2).unwrap().nodes_of(p);
            let f = Replication::Sharded.former_nodes(&l, p);
            let expected: Vec<NodeId> = v1.iter().filter(|n| !v2.contains(n)).copied().collect();
            let mut got: Vec<NodeId> = f.members.iter().chain(f.removed.iter()).copied().collect();
            got.sort();
            let mut want = expected.clone();
            want.sort();
            assert_eq!(got, want, "partition {p}");
            assert!(f.removed.iter().all(|n| *n == node(3)));
            assert!(!f.members.contains(&node(3)));
            left_removed += f.removed.len();
        }
        assert!(left_removed > 0, "node 3 held partitions");
        // Full replication: the removed node is the only former one.
        let f = Replication::Full.former_nodes(&l, 0);
        assert_eq!(f.members, vec![]);
        assert_eq!(f.removed, vec![node(3)]);
    }
}
