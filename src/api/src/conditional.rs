//! Conditional writes: `If-None-Match` and `If-Match` on PutObject and
//! CompleteMultipartUpload, decided by the object's compare-and-set
//! register (`garage_table::cas`), so that of several concurrent writers
//! whose condition holds on the same state exactly one succeeds.
//!
//! Only conditional writes touch the register; ordinary writes stay
//! single quorum writes of the object table. The register holds the last
//! version a conditional write made current (complete, ready to be written
//! to the object table). A conditional write:
//! 1. reads the register (Paxos phase 1) and the object entry, at once;
//! 2. folds the register's version into the entry (a CRDT merge, so a
//!    version already overwritten by a newer one changes nothing);
//! 3. checks the condition on that state; if it fails, makes the state it
//!    acted on chosen (phase 2 with the value unchanged, skipped when the
//!    promises already show it chosen), writes the register's version to
//!    the object table if the entry lacked it, and refuses (412 / 404);
//! 4. else proposes its own version (phase 2); once chosen, writes it,
//!    with the register's previous version, to the object table, then
//!    answers.
//!
//! The protocol and the argument of its correctness:
//! `doc/conditional-writes.md`.

use std::time::Duration;

use garage_model::object_table::{Object, ObjectVersion, ObjectVersionData, ObjectVersionState};
use garage_table::{AcceptOutcome, PartitionKey, Prepared, RegisterId};
use garage_util::crdt::Crdt;
use garage_util::data::{gen_uuid, Uuid};
use s3s::dto::ETagCondition;
use tracing::debug;

use crate::ctx::Api;
use crate::error::ApiError;
use crate::object::etag_matches;

/// Rounds one conditional write may take before answering
/// ConditionalRequestConflict (each round is at least one round trip).
const MAX_ROUNDS: u32 = 16;
/// Time one conditional write may take in all.
const DEADLINE: Duration = Duration::from_secs(30);
/// The register namespace of object keys.
const NAMESPACE: &str = "object";
/// A register value last proposed longer ago than this is void (see
/// [`void_after`]); at most this, and at most half the table GC delay.
const MAX_VOID_AFTER: Duration = Duration::from_secs(3600);

/// How long after its writer proposed it a register value is void: read
/// as "nothing", not folded into the object's state. Its writer answers
/// 200 only before half of it (see [`answer_by`]).
///
/// Every chosen value is written to the object table before any client
/// is told anything about it (a 200 to its writer, a 412 to a loser), so
/// the register only matters for a value chosen moments ago whose writer
/// has not written it yet. A value proposed long ago is either in the
/// object table already (folding it changes nothing), or was deleted
/// since and its tombstone collected by the GC (folding it would bring
/// the deleted object back: issue 14, bug 3), or belongs to a writer that
/// died before answering (nobody was told it succeeded). The bound is far
/// above a conditional request's duration (30 s) and below the GC delay,
/// since a deleted version can only vanish from the table a GC delay
/// after its deletion, which came after the value's last proposal.
fn void_after(gc_delay: Duration) -> Duration {
    MAX_VOID_AFTER.min(gc_delay / 2)
}

/// The writer of a chosen value answers 200 only if its write to the
/// object table is done within this of the value's proposal, so that no
/// other writer can have read the value as void before it was in the
/// object table (a round in flight racing the voiding). Half the void
/// delay leaves the other half for clock differences between nodes.
fn answer_by(void_ms: u64) -> u64 {
    void_ms / 2
}

/// First byte of a register value made by [`encode_value`]: the proposal
/// time, then the version (whose own bytes start with format 1, the
/// format of values written before the proposal time was kept).
const VALUE_FORMAT: u8 = 2;

/// A register value: `version`, proposed by its writer at `proposed_at`
/// (milliseconds, the writer's clock). Others re-propose these bytes
/// unchanged when they make a value chosen, so the age of a value is the
/// age of its writer's proposal, never refreshed by a later round.
fn encode_value(proposed_at: u64, version: &ObjectVersion) -> Vec<u8> {
    let mut out = vec![VALUE_FORMAT];
    out.extend_from_slice(&proposed_at.to_be_bytes());
    out.extend(version.to_register_value());
    out
}

/// Reads [`encode_value`]'s bytes: (proposal time, version). A value in
/// the older format (the version alone) is dated by `ballot_round`, the
/// round of the ballot it was last accepted under.
fn decode_value(b: &[u8], ballot_round: u64) -> Result<(u64, ObjectVersion), String> {
    match b.split_first() {
        Some((&VALUE_FORMAT, rest)) if rest.len() >= 8 => {
            let (t, v) = rest.split_at(8);
            let t = u64::from_be_bytes(t.try_into().expect("8 bytes"));
            Ok((t, ObjectVersion::from_register_value(v)?))
        }
        Some((&VALUE_FORMAT, _)) => Err("register value: truncated".into()),
        _ => Ok((ballot_round, ObjectVersion::from_register_value(b)?)),
    }
}

/// Whether a value proposed at `proposed_at` is void at `now`.
fn is_void(proposed_at: u64, now: u64, void_ms: u64) -> bool {
    now.saturating_sub(proposed_at) > void_ms
}

/// The conditions of a write.
#[derive(Clone, Debug, Default)]
pub struct WriteConditions {
    pub if_match: Option<ETagCondition>,
    pub if_none_match: Option<ETagCondition>,
}

impl WriteConditions {
    /// `None` when the request has no condition (an ordinary write).
    pub fn of(
        if_match: Option<&ETagCondition>,
        if_none_match: Option<&ETagCondition>,
    ) -> Option<Self> {
        if if_match.is_none() && if_none_match.is_none() {
            return None;
        }
        Some(Self {
            if_match: if_match.cloned(),
            if_none_match: if_none_match.cloned(),
        })
    }

    /// Whether the write may replace `current` (the object's current data
    /// version, `None` when there is none): `If-None-Match` fails (412)
    /// when it matches; `If-Match` fails when it does not (412), or when
    /// there is no object (404 NoSuchKey, as S3 answers).
    pub fn check(&self, current: Option<&ObjectVersion>, key: &str) -> Result<(), ApiError> {
        let etag = current.and_then(etag_of);
        if let Some(c) = &self.if_none_match {
            if etag.is_some_and(|e| etag_matches(c, e)) {
                return Err(ApiError::PreconditionFailed);
            }
        }
        if let Some(c) = &self.if_match {
            match etag {
                None => return Err(ApiError::NoSuchKey(key.into())),
                Some(e) if !etag_matches(c, e) => return Err(ApiError::PreconditionFailed),
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn etag_of(v: &ObjectVersion) -> Option<&str> {
    match &v.state {
        ObjectVersionState::Complete(ObjectVersionData::Inline(m, _))
        | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) => Some(&m.etag),
        _ => None,
    }
}

/// A conditional write that did not happen.
#[derive(Debug)]
pub struct Refused {
    pub error: ApiError,
    /// No later round can make the version current any more (it was never
    /// proposed, or a state above every ballot it was proposed under is
    /// chosen): the caller may abort it and release its blocks.
    pub final_: bool,
}

impl Api {
    /// Makes `version` (complete) the object's current version if `cond`
    /// holds on the current state, as decided by the object's register.
    /// When `retimable` (nothing was written under the version's
    /// timestamp yet), its timestamp is raised if needed to sort after the
    /// current version; otherwise a version older than the current one is
    /// refused with ConditionalRequestConflict. Returns the version made
    /// current.
    pub async fn commit_conditional(
        &self,
        bucket: Uuid,
        key: &str,
        mut version: ObjectVersion,
        cond: &WriteConditions,
        retimable: bool,
    ) -> Result<ObjectVersion, Refused> {
        let id = RegisterId::new(NAMESPACE, &bucket.hash(), key.as_bytes());
        let key_s = key.to_string();
        let start = tokio::time::Instant::now();
        // Whether our version may be held by an acceptor, and the
        // register's version it was built on (written with it).
        let mut proposed = false;
        let mut base: Option<ObjectVersion> = None;
        let refuse = |error: ApiError, proposed: bool| Refused {
            error,
            final_: !proposed,
        };
        let void_ms = void_after(self.objects.tuning.gc_delay).as_millis() as u64;
        for round in 0..MAX_ROUNDS {
            if round > 0 {
                if start.elapsed() > DEADLINE {
                    break;
                }
                backoff(round).await;
            }
            let (prepared, obj) =
                tokio::join!(self.cas.prepare(id), self.objects.get(&bucket, &key_s));
            let p = match prepared {
                Ok(p) => p,
                Err(garage_table::Error::CasConflict { .. }) => continue,
                Err(e) => return Err(refuse(e.into(), proposed)),
            };
            let obj = obj.map_err(|e| refuse(e.into(), proposed))?;
            let decoded = match p.value.as_deref() {
                None | Some([]) => None,
                Some(b) => Some(
                    decode_value(b, p.value_round.unwrap_or(0))
                        .map_err(|e| refuse(ApiError::Internal(e), proposed))?,
                ),
            };
            let void = decoded
                .as_ref()
                .is_some_and(|(t, _)| is_void(*t, garage_util::time::now_msec(), void_ms));
            let (reg_at, reg) = match decoded.filter(|_| !void) {
                Some((t, r)) => (t, Some(r)),
                None => (0, None),
            };

            // Our own version, accepted in an earlier round: finish it.
            if let Some(r) = reg.as_ref().filter(|r| r.uuid == version.uuid) {
                if !self.settle(&p, void).await {
                    continue;
                }
                let mut versions: Vec<ObjectVersion> = base.into_iter().collect();
                versions.push(r.clone());
                self.write_in_time(bucket, key, versions, reg_at, void_ms)
                    .await?;
                return Ok(r.clone());
            }

            let mut state = obj
                .clone()
                .unwrap_or_else(|| Object::new(bucket, key.to_string(), vec![]));
            if let Some(r) = &reg {
                state.merge(&Object::new(bucket, key.to_string(), vec![r.clone()]));
            }
            if let Err(e) = cond.check(state.last_data(), key) {
                // Act on the state read only once it is chosen: then no
                // earlier proposal of ours can be chosen any more either.
                if (reg.is_some() || proposed) && !self.settle(&p, void).await {
                    continue;
                }
                if let Some(r) = reg.filter(|_| obj.as_ref() != Some(&state)) {
                    self.objects
                        .insert(&Object::new(bucket, key.to_string(), vec![r]))
                        .await
                        .map_err(|e| refuse(e.into(), false))?;
                }
                return Err(refuse(e, false));
            }

            // The new version must sort after everything ever current.
            if let Some(newest) = state.newest_complete() {
                if newest >= version.sort_key() {
                    if !retimable {
                        if proposed && !self.settle(&p, void).await {
                            continue;
                        }
                        return Err(refuse(
                            ApiError::ConditionalRequestConflict(
                                "the object changed while this upload was in progress".into(),
                            ),
                            false,
                        ));
                    }
                    version.timestamp = newest.0 + 1;
                }
            }
            proposed = true;
            base.clone_from(&reg);
            let proposed_at = garage_util::time::now_msec();
            match self
                .cas
                .accept(&p, encode_value(proposed_at, &version))
                .await
            {
                AcceptOutcome::Chosen => {
                    let mut versions: Vec<ObjectVersion> = base.into_iter().collect();
                    versions.push(version.clone());
                    self.write_in_time(bucket, key, versions, proposed_at, void_ms)
                        .await?;
                    return Ok(version);
                }
                AcceptOutcome::Failed {
                    maybe_accepted,
                    why,
                } => {
                    debug!(%key, "conditional write, round {round}: {why}");
                    proposed = maybe_accepted || proposed;
                }
            }
        }
        Err(refuse(
            ApiError::ConditionalRequestConflict(
                "too many concurrent conditional writes of this key; try again".into(),
            ),
            proposed,
        ))
    }

    /// Writes `versions` (ending with this request's chosen version,
    /// proposed at `proposed_at`) to the object table, if it is still time:
    /// before and after the write, at most [`answer_by`] may have passed
    /// since the proposal. Past that, another writer may already read the
    /// value as void (and win) before it is in the object table, so this
    /// request must not claim success: it answers 503, its outcome unknown
    /// to the client (the version is not aborted: it may be current).
    async fn write_in_time(
        &self,
        bucket: Uuid,
        key: &str,
        versions: Vec<ObjectVersion>,
        proposed_at: u64,
        void_ms: u64,
    ) -> Result<(), Refused> {
        let late =
            || garage_util::time::now_msec().saturating_sub(proposed_at) > answer_by(void_ms);
        let too_late = || Refused {
            error: ApiError::Unavailable(
                "the conditional write took too long to complete; its outcome is unknown".into(),
            ),
            final_: false,
        };
        if late() {
            return Err(too_late());
        }
        self.objects
            .insert(&Object::new(bucket, key.to_string(), versions))
            .await
            .map_err(|e| Refused {
                error: e.into(),
                final_: false,
            })?;
        if late() {
            return Err(too_late());
        }
        Ok(())
    }

    /// Makes the value `p` read chosen (phase 2 with it unchanged; an
    /// empty value stands for "none"), unless the promises showed it
    /// chosen already. A `void` value is settled as "none", never
    /// proposed again (which would make it look recent). Returns whether
    /// it is chosen.
    async fn settle(&self, p: &Prepared, void: bool) -> bool {
        if void {
            return self.cas.accept(p, Vec::new()).await == AcceptOutcome::Chosen;
        }
        p.chosen
            || self
                .cas
                .accept(p, p.value.clone().unwrap_or_default())
                .await
                == AcceptOutcome::Chosen
    }
}

/// Waits before round `round` (> 0): 10 ms doubling to 320 ms, plus up to
/// as much again at random, so that duelling proposers spread out.
async fn backoff(round: u32) {
    let base = 10u64 << round.min(5);
    let jitter = u64::from_le_bytes(gen_uuid().as_slice()[..8].try_into().expect("8 bytes")) % base;
    tokio::time::sleep(Duration::from_millis(base + jitter)).await;
}

#[cfg(test)]
mod tests {
    use garage_model::object_table::ObjectVersionMeta;
    use s3s::dto::ETag;

    use super::*;

    fn data(etag: &str) -> ObjectVersion {
        ObjectVersion {
            uuid: gen_uuid(),
            timestamp: 1,
            state: ObjectVersionState::Complete(ObjectVersionData::Inline(
                ObjectVersionMeta {
                    headers: vec![],
                    size: 1,
                    etag: etag.into(),
                },
                vec![0],
            )),
        }
    }

    fn code(r: Result<(), ApiError>) -> &'static str {
        match r {
            Ok(()) => "ok",
            Err(ApiError::PreconditionFailed) => "412",
            Err(ApiError::NoSuchKey(_)) => "404",
            Err(e) => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn conditions_are_checked_as_s3_does() {
        let none_any = WriteConditions {
            if_none_match: Some(ETagCondition::Any),
            ..Default::default()
        };
        assert_eq!(code(none_any.check(None, "k")), "ok");
        assert_eq!(code(none_any.check(Some(&data("a")), "k")), "412");
        let m = WriteConditions {
            if_match: Some(ETagCondition::ETag(ETag::Strong("a".into()))),
            ..Default::default()
        };
        assert_eq!(code(m.check(None, "k")), "404");
        assert_eq!(code(m.check(Some(&data("a")), "k")), "ok");
        assert_eq!(code(m.check(Some(&data("b")), "k")), "412");
        assert!(WriteConditions::of(None, None).is_none());
    }

    /// A register value keeps the time its writer proposed it: the bytes
    /// others re-propose to make it chosen carry the same time, so a value
    /// is void a fixed delay after its writer's proposal however many
    /// later rounds accepted it again (a ballot-based age was refreshed by
    /// each of them). Values of the older format are dated by the ballot.
    #[test]
    fn a_register_value_is_dated_by_its_writers_proposal() {
        let v = data("e");
        let b = encode_value(1_000, &v);
        // Re-accepted under a much later ballot: still dated 1000.
        assert_eq!(decode_value(&b, 9_000_000).unwrap(), (1_000, v.clone()));
        let void_ms = void_after(Duration::from_secs(20)).as_millis() as u64;
        assert_eq!(void_ms, 10_000);
        assert!(!is_void(1_000, 11_000, void_ms));
        assert!(is_void(1_000, 11_001, void_ms));
        // A clock behind the proposal: not void.
        assert!(!is_void(1_000, 500, void_ms));
        // The older format: the version alone, dated by its ballot.
        let old = v.to_register_value();
        assert_eq!(decode_value(&old, 42).unwrap(), (42, v));
        assert!(decode_value(&[VALUE_FORMAT, 1, 2], 0).is_err());
        // The writer answers well before anyone can read its value as void.
        assert!(answer_by(void_ms) < void_ms);
        // Production: void after an hour, GC delay a day.
        assert_eq!(void_after(Duration::from_secs(86400)), MAX_VOID_AFTER);
    }

    #[test]
    fn register_values_round_trip() {
        let v = data("e");
        let b = v.to_register_value();
        assert_eq!(ObjectVersion::from_register_value(&b).unwrap(), v);
        assert!(ObjectVersion::from_register_value(&[9, 1, 2]).is_err());
    }
}
