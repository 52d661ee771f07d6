//! The value of an object's compare-and-set register (conditional writes,
//! `garage_api::conditional`; the protocol is in
//! `doc/conditional-writes.md`), and what the object table's tombstone GC
//! needs to know about it.
//!
//! The register holds the last version a conditional write made current.
//! A value is folded into the object's state by every later conditional
//! writer. Once the object is deleted by an ordinary write and its
//! tombstone collected, folding it would bring the deleted object back, so
//! the GC empties the register (a Paxos round) before it collects a
//! tombstone whose register holds a value the tombstone supersedes
//! ([`superseded_by`]). Values written before that rule existed (formats
//! 2 and 3) were instead ignored once older than a delay, by the readers'
//! wall clocks; they still are ([`RegisterValue::voids_by_age`]).

use garage_table::{PartitionKey, RegisterId};
use garage_util::crdt::Crdt;
use garage_util::data::Uuid;

use crate::object_table::{Object, ObjectVersion};

/// The register namespace of object keys.
pub const NAMESPACE: &str = "object";

/// The register of object `key` of bucket `bucket`: kept by the nodes of
/// the object entry's partition.
pub fn register_id(bucket: &Uuid, key: &str) -> RegisterId {
    RegisterId::new(NAMESPACE, &bucket.hash(), key.as_bytes())
}

/// First byte of a register value in the format of [`RegisterValue`]
/// before the chain was kept: the proposal time, then the version.
const VALUE_FORMAT_TIMED: u8 = 2;
/// First byte of a [`RegisterValue`] that readers ignore once old (by
/// their clocks): proposal time, chain position, recent chain, version.
const VALUE_FORMAT_AGED: u8 = 3;
/// First byte of a [`RegisterValue`] that is never ignored for its age:
/// the GC empties the register before collecting the tombstone that
/// supersedes it. Same fields as [`VALUE_FORMAT_AGED`]. Written only once
/// the cluster is finalized at the release that brought the rule
/// (`garage_rpc::system::versions::CONDITIONAL_REGISTER_GC`), so that no
/// node that collects tombstones without emptying registers runs.
const VALUE_FORMAT: u8 = 4;
/// How many of the previous values of the chain a register value names.
/// A writer whose proposal may have been chosen and then overwritten
/// finds out from them; past this many later writes it cannot tell, and
/// answers that its outcome is unknown.
pub const CHAIN: usize = 32;

/// A register value: `version`, proposed by its writer at `proposed_at`
/// (milliseconds, the writer's clock), the `seq`-th value of the
/// register's chain of values, built on the values whose version ids are
/// `recent` (the previous one first, at most [`CHAIN`]).
///
/// Others re-propose these bytes unchanged when they make a value chosen,
/// so the age of a value is the age of its writer's proposal, never
/// refreshed by a later round.
///
/// Why the chain: a writer's proposal may be accepted by some acceptors
/// only (its round fails), and another writer may then read it as the
/// register's value and build on it: the first writer's change took
/// effect, and was overwritten. Finding the register at a newer value, the
/// first writer must not conclude that its change did not happen (a
/// conditional delete answered 412 although it deleted the object): it
/// looks for its version in the chain at the position it proposed it.
#[derive(Clone, Debug, PartialEq)]
pub struct RegisterValue {
    pub proposed_at: u64,
    pub seq: u64,
    pub recent: Vec<Uuid>,
    pub version: ObjectVersion,
    /// Written in an older format, whose values readers ignore once
    /// older than a delay (they predate the GC's emptying of registers).
    pub voids_by_age: bool,
}

impl RegisterValue {
    /// The value that follows `base` (the register's value when read,
    /// ignored or not; `None` when it has none). `voids_by_age`: the
    /// older format, while the cluster is not finalized at the release
    /// whose GC empties registers.
    pub fn after(
        base: Option<&RegisterValue>,
        proposed_at: u64,
        version: ObjectVersion,
        voids_by_age: bool,
    ) -> Self {
        let (seq, recent) = match base {
            None => (1, Vec::new()),
            Some(b) => {
                let mut recent = Vec::with_capacity(CHAIN);
                recent.push(b.version.uuid);
                recent.extend(b.recent.iter().take(CHAIN - 1).copied());
                (b.seq + 1, recent)
            }
        };
        Self {
            proposed_at,
            seq,
            recent,
            version,
            voids_by_age,
        }
    }

    /// Whether version `uuid`, proposed at position `seq`, is in this
    /// value's chain: `Some(true)` if it is this value or one it was built
    /// on, `Some(false)` if another value holds that position or the chain
    /// has not reached it (a proposal past the register's value was not
    /// chosen: a chosen value is below every later register value), `None`
    /// if the chain kept here does not reach back to it.
    pub fn holds(&self, seq: u64, uuid: Uuid) -> Option<bool> {
        if seq == self.seq {
            return Some(self.version.uuid == uuid);
        }
        if seq > self.seq {
            return Some(false);
        }
        let back = (self.seq - seq - 1) as usize;
        self.recent.get(back).map(|u| *u == uuid)
    }

    pub fn encode(&self) -> Vec<u8> {
        let format = if self.voids_by_age {
            VALUE_FORMAT_AGED
        } else {
            VALUE_FORMAT
        };
        let mut out = vec![format];
        out.extend_from_slice(&self.proposed_at.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.push(self.recent.len() as u8);
        for u in &self.recent {
            out.extend_from_slice(u.as_slice());
        }
        out.extend(self.version.to_register_value());
        out
    }

    /// Reads [`RegisterValue::encode`]'s bytes, and the two older formats:
    /// the version alone (dated by `ballot_round`, the round of the ballot
    /// it was last accepted under), and the proposal time then the version.
    /// Older values have position 0 and no chain.
    pub fn decode(b: &[u8], ballot_round: u64) -> Result<Self, String> {
        let old = |proposed_at, v: &[u8]| -> Result<Self, String> {
            Ok(Self {
                proposed_at,
                seq: 0,
                recent: Vec::new(),
                version: ObjectVersion::from_register_value(v)?,
                voids_by_age: true,
            })
        };
        let u64_at = |b: &[u8], i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(b.get(i..i + 8)?.try_into().ok()?))
        };
        let truncated = || "register value: truncated".to_string();
        match b.split_first() {
            Some((&f, rest)) if f == VALUE_FORMAT || f == VALUE_FORMAT_AGED => {
                let proposed_at = u64_at(rest, 0).ok_or_else(truncated)?;
                let seq = u64_at(rest, 8).ok_or_else(truncated)?;
                let n = *rest.get(16).ok_or_else(truncated)? as usize;
                let ids = rest.get(17..17 + 32 * n).ok_or_else(truncated)?;
                let recent = ids
                    .chunks(32)
                    .map(|c| Uuid::try_from_slice(c).ok_or_else(truncated))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self {
                    proposed_at,
                    seq,
                    recent,
                    version: ObjectVersion::from_register_value(&rest[17 + 32 * n..])?,
                    voids_by_age: f == VALUE_FORMAT_AGED,
                })
            }
            Some((&VALUE_FORMAT_TIMED, rest)) => {
                let t = u64_at(rest, 0).ok_or_else(truncated)?;
                old(t, &rest[8..])
            }
            _ => old(ballot_round, b),
        }
    }
}

/// Whether the register value `value` (bytes as stored, empty for none)
/// is superseded by `tombstone`, an object entry about to be collected:
/// folding its version into the entry leaves a tombstone (the version is
/// older than the delete, or was aborted), so the register may be emptied
/// and the entry collected. A value that does not decode is not
/// superseded (kept: the tombstone waits).
pub fn superseded_by(tombstone: &Object, value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    let Ok(v) = RegisterValue::decode(value, 0) else {
        return false;
    };
    let mut folded = tombstone.clone();
    folded.merge(&Object::new(
        tombstone.bucket_id,
        tombstone.key.clone(),
        vec![v.version],
    ));
    garage_table::Entry::is_tombstone(&folded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket_table::Versioning;
    use crate::object_table::{ObjectVersionData, ObjectVersionMeta, ObjectVersionState};
    use garage_util::data::gen_uuid;

    fn data(ts: u64) -> ObjectVersion {
        ObjectVersion::new(
            gen_uuid(),
            ts,
            ObjectVersionState::Complete(ObjectVersionData::Inline(
                ObjectVersionMeta {
                    headers: vec![],
                    size: 1,
                    etag: "e".into(),
                    storage_class: None,
                    first_ec: None,
                    recoded: 0,
                },
                vec![0],
            )),
            Versioning::Off,
        )
    }

    fn marker(ts: u64) -> ObjectVersion {
        ObjectVersion::new(
            gen_uuid(),
            ts,
            ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
            Versioning::Off,
        )
    }

    /// A value of the new format is never void; the older formats are,
    /// and decode as such. Encoding round-trips; every truncation is
    /// refused, never a panic.
    #[test]
    fn formats_say_whether_a_value_voids_by_age() {
        let v = data(5);
        let kept = RegisterValue::after(None, 1_000, v.clone(), false);
        let back = RegisterValue::decode(&kept.encode(), 9).unwrap();
        assert_eq!(back, kept);
        assert!(!back.voids_by_age);
        let aged = RegisterValue::after(Some(&kept), 2_000, data(6), true);
        let back = RegisterValue::decode(&aged.encode(), 9).unwrap();
        assert_eq!(back, aged);
        assert!(back.voids_by_age);
        assert_eq!(back.holds(kept.seq, kept.version.uuid), Some(true));
        let oldest = RegisterValue::decode(&v.to_register_value(), 42).unwrap();
        assert!(oldest.voids_by_age);
        assert_eq!((oldest.proposed_at, oldest.seq), (42, 0));
        let b = kept.encode();
        for n in 0..b.len() {
            let _ = RegisterValue::decode(&b[..n], 0);
        }
    }

    /// The GC may empty a register whose version the tombstone deleted
    /// (older than its delete marker) or aborted, never one that would
    /// make the entry live again (a conditional write newer than the
    /// delete, not yet written to the table), nor bytes it cannot read.
    #[test]
    fn a_tombstone_supersedes_only_what_it_deleted() {
        let bucket = gen_uuid();
        let key = "lock".to_string();
        let old = data(10);
        let tomb = Object::new(bucket, key.clone(), vec![old.clone(), marker(20)]);
        assert!(garage_table::Entry::is_tombstone(&tomb));
        let enc = |v: &ObjectVersion| RegisterValue::after(None, 1, v.clone(), false).encode();
        assert!(superseded_by(&tomb, &enc(&old)));
        assert!(superseded_by(&tomb, &[]));
        assert!(!superseded_by(&tomb, &enc(&data(30))));
        assert!(!superseded_by(&tomb, b"\x04garbage"));
        let mut aborted = data(40);
        let fresh = aborted.clone();
        aborted.state = ObjectVersionState::Aborted;
        let tomb2 = Object::new(bucket, key, vec![aborted]);
        assert!(garage_table::Entry::is_tombstone(&tomb2));
        assert!(superseded_by(&tomb2, &enc(&fresh)));
    }

    /// A register value keeps the time its writer proposed it: the bytes
    /// others re-propose to make it chosen carry the same time, so an
    /// aged value is void a fixed delay after its writer's proposal
    /// however many later rounds accepted it again (a ballot-based age was
    /// refreshed by each of them). Values of the oldest format are dated
    /// by the ballot.
    #[test]
    fn a_register_value_is_dated_by_its_writers_proposal() {
        let v = data(5);
        let b = RegisterValue::after(None, 1_000, v.clone(), true).encode();
        // Re-accepted under a much later ballot: still dated 1000.
        let d = RegisterValue::decode(&b, 9_000_000).unwrap();
        assert_eq!((d.proposed_at, &d.version), (1_000, &v));
        // The oldest format: the version alone, dated by its ballot.
        let old = v.to_register_value();
        let d = RegisterValue::decode(&old, 42).unwrap();
        assert_eq!((d.proposed_at, d.seq, &d.version), (42, 0, &v));
        // The timed format: proposal time, then the version.
        let mut timed = vec![VALUE_FORMAT_TIMED];
        timed.extend_from_slice(&7u64.to_be_bytes());
        timed.extend(v.to_register_value());
        let d = RegisterValue::decode(&timed, 42).unwrap();
        assert_eq!((d.proposed_at, d.seq, &d.version), (7, 0, &v));
        assert!(RegisterValue::decode(&[VALUE_FORMAT, 1, 2], 0).is_err());
        assert!(RegisterValue::decode(&[VALUE_FORMAT_TIMED, 1, 2], 0).is_err());
        // Every prefix of a valid value is refused, never a panic.
        for n in 0..b.len() {
            let _ = RegisterValue::decode(&b[..n], 0);
        }
    }

    /// The chain: a writer finds its proposal in a later register value
    /// that was built on it (its change took effect and was overwritten),
    /// tells another value at its position apart, treats a position the
    /// chain has not reached as not chosen, and knows when the chain kept
    /// no longer reaches back to its proposal.
    #[test]
    fn a_writer_finds_its_overwritten_proposal_in_the_chain() {
        let first = RegisterValue::after(None, 1, data(1), true);
        assert_eq!(first.seq, 1);
        let mine = RegisterValue::after(Some(&first), 2, data(2), true);
        let other = RegisterValue::after(Some(&first), 2, data(3), true);
        // Built on mine, then more values.
        let mut cur = RegisterValue::after(Some(&mine), 3, data(4), true);
        assert_eq!(cur.holds(mine.seq, mine.version.uuid), Some(true));
        assert_eq!(cur.holds(other.seq, other.version.uuid), Some(false));
        assert_eq!(cur.holds(cur.seq, cur.version.uuid), Some(true));
        // A position past the register's value: not chosen.
        assert_eq!(first.holds(mine.seq, mine.version.uuid), Some(false));
        // The chain survives encoding.
        let back = RegisterValue::decode(&cur.encode(), 0).unwrap();
        assert_eq!(back, cur);
        for i in 0..CHAIN - 1 {
            cur = RegisterValue::after(Some(&cur), 4 + i as u64, data(5), true);
        }
        assert_eq!(cur.recent.len(), CHAIN);
        assert_eq!(cur.holds(mine.seq, mine.version.uuid), Some(true));
        cur = RegisterValue::after(Some(&cur), 99, data(6), true);
        assert_eq!(cur.recent.len(), CHAIN);
        assert_eq!(cur.holds(mine.seq, mine.version.uuid), None);
    }
}
