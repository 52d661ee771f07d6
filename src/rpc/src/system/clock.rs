//! Clock offsets between nodes, measured from the pings: each ping's
//! answer carries the peer's wall clock ([`NodeStatus::clock_ms`]), so its
//! offset is its clock minus the middle of the round trip (exact within
//! half the round trip). The cluster's clock is the median of the nodes'
//! clocks ([`garage_util::clock::offsets_from_median`]); a node off it by
//! more than `max_clock_offset_msec` makes the cluster health degraded,
//! is named in `garage status` and the log (once when it goes off, once
//! when it comes back), and, when it is this node, refuses time-based
//! decisions ([`garage_util::clock::check`]). The same measures give
//! this node's correction to the cluster's time
//! ([`garage_util::clock::cluster_now_msec`]), which stamps its writes.

use std::collections::BTreeSet;

use tracing::{info, warn};

use super::status::NodeStatus;
use super::System;
use crate::NodeId;

/// A peer's clock offset from one ping: its clock when it answered minus
/// the middle of the round trip, in ms (positive: the peer is ahead).
/// `None` when the peer does not send its clock (an older node).
pub(super) fn offset_of_peer(sent_ms: u64, received_ms: u64, status: &NodeStatus) -> Option<i64> {
    if status.clock_ms == 0 {
        return None;
    }
    let middle = (sent_ms as i128 + received_ms as i128) / 2;
    Some((status.clock_ms as i128 - middle) as i64)
}

/// Every node's offset from the cluster's clock, as this node measures
/// them.
#[derive(Clone, Debug, Default)]
pub struct ClockView {
    /// This node's offset (ms, positive: ahead), failing closed: of two
    /// nodes that disagree, both are off.
    pub local: i64,
    /// This node's correction to the cluster's time (ms, positive: ahead;
    /// see [`garage_util::clock::correction_from_median`]).
    pub correction: i64,
    /// Each answering peer with a measure, and its offset.
    pub peers: Vec<(NodeId, i64)>,
}

impl ClockView {
    /// The offset of node `id` (this node or a measured peer).
    pub fn offset_of(&self, me: &NodeId, id: &NodeId) -> Option<i64> {
        if id == me {
            return (!self.peers.is_empty()).then_some(self.local);
        }
        self.peers.iter().find(|(n, _)| n == id).map(|(_, o)| *o)
    }

    /// The nodes off the cluster's clock by more than `bound_ms`.
    pub fn skewed(&self, me: &NodeId, bound_ms: u64) -> BTreeSet<NodeId> {
        let mut out: BTreeSet<NodeId> = self
            .peers
            .iter()
            .filter(|(_, o)| o.unsigned_abs() > bound_ms)
            .map(|(n, _)| *n)
            .collect();
        if self.local.unsigned_abs() > bound_ms {
            out.insert(*me);
        }
        out
    }
}

impl System {
    /// The clock offsets of this node and of its answering peers.
    pub fn clock_view(&self) -> ClockView {
        let me = self.id();
        let measured: Vec<(NodeId, i64)> = self
            .peers()
            .iter()
            .filter(|(id, p)| **id != me && p.is_up())
            .filter_map(|(id, p)| p.clock_offset_ms.map(|o| (*id, o)))
            .collect();
        let raw: Vec<i64> = measured.iter().map(|(_, o)| *o).collect();
        let (local, offsets) = garage_util::clock::offsets_from_median(&raw);
        ClockView {
            local,
            correction: garage_util::clock::correction_from_median(&raw),
            peers: measured.iter().map(|(id, _)| *id).zip(offsets).collect(),
        }
    }

    /// After each round of pings: publishes this node's offset (for
    /// [`garage_util::clock::check`]) and logs nodes going off the bound
    /// or coming back, once each.
    pub(super) fn update_clock_health(&self) {
        let view = self.clock_view();
        if view.peers.is_empty() {
            return;
        }
        garage_util::clock::set_offset(view.local, view.correction);
        let me = self.id();
        let bound = garage_util::clock::bound_ms();
        let now = view.skewed(&me, bound);
        let mut alarms = self.clock_alarms.lock().unwrap_or_else(|e| e.into_inner());
        for id in now.difference(&alarms) {
            let offset = view.offset_of(&me, id).unwrap_or(0);
            match *id == me {
                true => warn!(
                    offset_ms = offset,
                    bound_ms = bound,
                    "this node's clock is {offset} ms off the cluster's: writes are stamped with the cluster's time, but time-based decisions (retention, lifecycle, GC, conditional writes) are refused here until it is corrected"
                ),
                false => warn!(
                    peer = ?id,
                    offset_ms = offset,
                    bound_ms = bound,
                    "peer's clock is {offset} ms off the cluster's (bound {bound} ms): cluster health degraded"
                ),
            }
        }
        for id in alarms.difference(&now) {
            info!(peer = ?id, "clock back within {bound} ms of the cluster's");
        }
        *alarms = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::status::test_status as status;

    #[test]
    fn offset_is_measured_from_the_middle_of_the_round_trip() {
        // Sent at 1000, answered at 1100: the middle is 1050.
        assert_eq!(offset_of_peer(1000, 1100, &status(2050)), Some(1000));
        assert_eq!(offset_of_peer(1000, 1100, &status(50)), Some(-1000));
        assert_eq!(offset_of_peer(1000, 1100, &status(0)), None);
    }
}
