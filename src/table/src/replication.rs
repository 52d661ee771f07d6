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
//! back up).

use garage_net::NodeId;
use garage_rpc::layout::{LayoutHistory, LayoutVersion};

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
}
