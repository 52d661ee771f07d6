//! A version's replication state, kept in its history entry (replication
//! needs versioning enabled, so every version it sends has one): per
//! destination, how far it got, and whether the version is itself a
//! replica. Merging keeps the furthest state of each destination, so the
//! state moves forward whatever the order the writes arrive in, and no
//! clock decides it.

use std::collections::BTreeMap;

use garage_util::crdt::Crdt;
use serde::{Deserialize, Serialize};

/// How far one destination got with a version, in the order merges
/// follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DestStatus {
    /// Queued; not sent yet, or the destination did not answer yet.
    Pending,
    /// The destination refused it (a permission, a missing bucket, …):
    /// `garage bucket replication resync` queues it again.
    Failed,
    Completed,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationState {
    /// Per destination (`REMOTE/BUCKET`).
    pub dests: BTreeMap<String, DestStatus>,
    /// Written by another cluster's replication (`REPLICA`): never
    /// replicated again from here, so two clusters that replicate to each
    /// other do not send versions back and forth.
    pub replica: bool,
}

impl ReplicationState {
    pub fn is_empty(&self) -> bool {
        self.dests.is_empty() && !self.replica
    }

    pub fn pending(dests: impl IntoIterator<Item = String>) -> Self {
        Self {
            dests: dests
                .into_iter()
                .map(|d| (d, DestStatus::Pending))
                .collect(),
            replica: false,
        }
    }

    pub fn replica() -> Self {
        Self {
            dests: BTreeMap::new(),
            replica: true,
        }
    }

    pub fn with(dest: &str, status: DestStatus) -> Self {
        Self {
            dests: [(dest.to_string(), status)].into(),
            replica: false,
        }
    }

    /// `x-amz-replication-status`: `REPLICA`, else `FAILED` if a
    /// destination refused the version, `COMPLETED` once every one has it,
    /// `PENDING` before; none for a version no rule sent.
    pub fn s3_status(&self) -> Option<&'static str> {
        if self.replica {
            return Some("REPLICA");
        }
        if self.dests.is_empty() {
            return None;
        }
        let s = self.dests.values();
        Some(if s.clone().any(|s| *s == DestStatus::Failed) {
            "FAILED"
        } else if s.clone().all(|s| *s == DestStatus::Completed) {
            "COMPLETED"
        } else {
            "PENDING"
        })
    }
}

impl Crdt for ReplicationState {
    fn merge(&mut self, other: &Self) {
        for (d, s) in &other.dests {
            let e = self.dests.entry(d.clone()).or_insert(*s);
            *e = (*e).max(*s);
        }
        self.replica |= other.replica;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = ReplicationState> {
        (
            proptest::collection::btree_map(0u8..3, 0u8..3, 0..3),
            any::<bool>(),
        )
            .prop_map(|(m, replica)| ReplicationState {
                dests: m
                    .into_iter()
                    .map(|(d, s)| {
                        let s = [
                            DestStatus::Pending,
                            DestStatus::Failed,
                            DestStatus::Completed,
                        ][s as usize];
                        (format!("r/{d}"), s)
                    })
                    .collect(),
                replica,
            })
    }

    proptest! {
        #[test]
        fn merge_laws(a in state(), b in state(), c in state()) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn the_status_s3_shows() {
        let mut s = ReplicationState::pending(["r/a".to_string(), "r/b".to_string()]);
        assert_eq!(s.s3_status(), Some("PENDING"));
        s.merge(&ReplicationState::with("r/a", DestStatus::Completed));
        assert_eq!(s.s3_status(), Some("PENDING"));
        s.merge(&ReplicationState::with("r/b", DestStatus::Failed));
        assert_eq!(s.s3_status(), Some("FAILED"));
        // A retry that succeeds wins over the failure.
        s.merge(&ReplicationState::with("r/b", DestStatus::Completed));
        assert_eq!(s.s3_status(), Some("COMPLETED"));
        // A pending state arriving late changes nothing.
        s.merge(&ReplicationState::pending(["r/a".to_string()]));
        assert_eq!(s.s3_status(), Some("COMPLETED"));
        assert_eq!(ReplicationState::replica().s3_status(), Some("REPLICA"));
        assert_eq!(ReplicationState::default().s3_status(), None);
    }
}
