//! Cluster health as this node sees it: which nodes answer, and how many
//! partitions still have a quorum or all their replicas. The `cluster_*`
//! metrics, `garage status` and the admin API's health answer all read
//! [`System::health`], so they always agree.

use serde::{Deserialize, Serialize};

use super::System;
use crate::layout::LayoutVersion;

/// Whether requests can be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthStatus {
    /// Every storage node of the layout answers.
    Healthy,
    /// Some storage nodes are down, but every partition has a quorum.
    Degraded,
    /// Some partitions have no quorum: some requests fail.
    Unavailable,
}

impl std::fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HealthStatus::Healthy => "healthy",
            HealthStatus::Degraded => "degraded",
            HealthStatus::Unavailable => "unavailable",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterHealth {
    pub status: HealthStatus,
    /// Nodes this node knows of (itself included).
    pub known_nodes: usize,
    /// Of them, those that answer (itself included).
    pub connected_nodes: usize,
    /// Nodes with a role in the current layout (storage and gateways).
    pub layout_nodes: usize,
    /// Storage nodes of the current layout, and how many of them answer.
    pub storage_nodes: usize,
    pub storage_nodes_up: usize,
    /// Partitions of the layout, those with a write quorum of answering
    /// nodes, and those with all their nodes answering.
    pub partitions: usize,
    pub partitions_quorum: usize,
    pub partitions_all_ok: usize,
    /// Nodes whose clock is off the cluster's by more than
    /// `max_clock_offset_msec` (hex ids): they make a healthy cluster
    /// degraded (absent from older nodes).
    #[serde(default)]
    pub clock_skewed_nodes: Vec<String>,
}

impl ClusterHealth {
    /// Computes the health from the current layout and which nodes are up.
    pub fn compute(
        layout: &LayoutVersion,
        write_quorum: usize,
        known_nodes: usize,
        is_up: impl Fn(&crate::NodeId) -> bool,
    ) -> Self {
        let up: Vec<bool> = layout.storage_nodes.iter().map(&is_up).collect();
        let mut partitions_quorum = 0;
        let mut partitions_all_ok = 0;
        for p in layout.ring.iter() {
            let ok = p.iter().filter(|&&i| up[i as usize]).count();
            if ok >= write_quorum.min(p.len()) {
                partitions_quorum += 1;
            }
            if ok == p.len() {
                partitions_all_ok += 1;
            }
        }
        let partitions = layout.ring.len();
        let storage_nodes_up = up.iter().filter(|u| **u).count();
        let status = if partitions == 0 || partitions_quorum < partitions {
            HealthStatus::Unavailable
        } else if storage_nodes_up < up.len() {
            HealthStatus::Degraded
        } else {
            HealthStatus::Healthy
        };
        let connected_layout = layout.roles.keys().filter(|n| is_up(n)).count();
        ClusterHealth {
            status,
            known_nodes,
            connected_nodes: connected_layout.max(1),
            layout_nodes: layout.roles.len(),
            storage_nodes: up.len(),
            storage_nodes_up,
            partitions,
            partitions_quorum,
            partitions_all_ok,
            clock_skewed_nodes: vec![],
        }
    }
}

impl System {
    /// This node's view of the cluster's health (cheap: no I/O, no RPC).
    pub fn health(&self) -> ClusterHealth {
        let layout = self.layout();
        let peers = self.peers();
        let me = self.id();
        let known = 1 + peers.iter().filter(|(id, _)| **id != me).count();
        let connected = 1 + peers
            .iter()
            .filter(|(id, p)| **id != me && p.is_up())
            .count();
        let mut h = ClusterHealth::compute(layout.current(), self.write_quorum(), known, |n| {
            *n == me || peers.get(n).is_some_and(|p| p.is_up())
        });
        h.connected_nodes = connected;
        drop(peers);
        let skewed = self
            .clock_view()
            .skewed(&me, garage_util::clock::bound_ms());
        if !skewed.is_empty() && h.status == HealthStatus::Healthy {
            h.status = HealthStatus::Degraded;
        }
        h.clock_skewed_nodes = skewed.iter().map(|n| hex::encode(n.0)).collect();
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeId;

    fn layout(nodes: usize, rf: usize) -> LayoutVersion {
        let mut l = LayoutVersion::initial(rf);
        l.storage_nodes = (0..nodes).map(|i| NodeId::from([i as u8; 32])).collect();
        for n in l.storage_nodes.clone() {
            l.roles.insert(
                n,
                crate::layout::NodeRole {
                    zone: "z".into(),
                    capacity: Some(1),
                    tags: vec![],
                },
            );
        }
        l.ring = (0..256)
            .map(|p| (0..rf).map(|k| ((p + k) % nodes) as u16).collect())
            .collect();
        l
    }

    #[test]
    fn one_node_down_of_three_is_degraded_with_all_quorums() {
        let l = layout(3, 3);
        let down = NodeId::from([2; 32]);
        let h = ClusterHealth::compute(&l, 2, 3, |n| *n != down);
        assert_eq!(h.status, HealthStatus::Degraded);
        assert_eq!((h.partitions_quorum, h.partitions_all_ok), (256, 0));
        assert_eq!((h.storage_nodes, h.storage_nodes_up), (3, 2));
    }

    #[test]
    fn two_down_of_three_is_unavailable() {
        let l = layout(3, 3);
        let h = ClusterHealth::compute(&l, 2, 3, |n| *n == NodeId::from([0; 32]));
        assert_eq!(h.status, HealthStatus::Unavailable);
        assert_eq!(h.partitions_quorum, 0);
    }

    #[test]
    fn all_up_is_healthy() {
        let l = layout(3, 3);
        let h = ClusterHealth::compute(&l, 2, 3, |_| true);
        assert_eq!(h.status, HealthStatus::Healthy);
        assert_eq!(h.partitions_all_ok, 256);
    }

    #[test]
    fn no_layout_is_unavailable() {
        let l = LayoutVersion::initial(3);
        let h = ClusterHealth::compute(&l, 2, 1, |_| true);
        assert_eq!(h.status, HealthStatus::Unavailable);
    }
}
