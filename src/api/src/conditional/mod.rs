//! Conditional writes: `If-None-Match` and `If-Match` on PutObject and
//! CompleteMultipartUpload, and conditional deletes (`If-Match`,
//! `x-amz-if-match-last-modified-time`, `x-amz-if-match-size` on
//! DeleteObject and on each key of DeleteObjects), decided by the object's
//! compare-and-set register (`garage_table::cas`), so that of several
//! concurrent writers whose condition holds on the same state exactly one
//! succeeds. A conditional delete is a conditional write of a delete
//! marker: it races conditional PUTs through the same register.
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

use garage_model::notify::Cause;
use std::time::Duration;

use garage_model::object_register::{register_id, RegisterValue};
use garage_model::object_table::{Object, ObjectVersion, ObjectVersionData, ObjectVersionState};
use garage_rpc::system::versions::CONDITIONAL_REGISTER_GC;
use garage_table::{AcceptOutcome, Prepared};
use garage_util::crdt::Crdt;
use garage_util::data::{gen_uuid, Uuid};
use s3s::dto::{ETag, ETagCondition};
use tracing::debug;

use crate::ctx::Api;
use crate::error::ApiError;

/// Rounds one conditional write may take before answering
/// ConditionalRequestConflict (each round is at least one round trip).
const MAX_ROUNDS: u32 = 16;
/// Time one conditional write may take in all.
const DEADLINE: Duration = Duration::from_secs(30);
/// A register value of the older format (`voids_by_age`, written until
/// the cluster is finalized at v0.3.0) last proposed longer ago than this
/// is void (see [`void_after`]); at most this, and at most half the table
/// GC delay. Values of the current format are never void: the tombstone
/// GC empties the register instead (`garage_model::object_register`).
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

/// Whether a value proposed at `proposed_at` is void at `now`.
fn is_void(proposed_at: u64, now: u64, void_ms: u64) -> bool {
    now.saturating_sub(proposed_at) > void_ms
}

/// The conditions of a write (PutObject, CompleteMultipartUpload) or of a
/// delete (DeleteObject, and each key of DeleteObjects).
#[derive(Clone, Debug, Default)]
pub struct WriteConditions {
    pub if_match: Option<ETagCondition>,
    pub if_none_match: Option<ETagCondition>,
    /// `x-amz-if-match-last-modified-time` (deletes): the current version's
    /// last-modified time, in whole seconds as HTTP dates carry it.
    pub if_match_last_modified_s: Option<u64>,
    /// `x-amz-if-match-size` (deletes): the current version's size.
    pub if_match_size: Option<u64>,
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
            ..Default::default()
        })
    }

    /// The conditions of a delete; `None` when it has none (an ordinary
    /// delete). A negative size never matches.
    pub fn of_delete(
        if_match: Option<&ETagCondition>,
        last_modified: Option<&s3s::dto::Timestamp>,
        size: Option<i64>,
    ) -> Option<Self> {
        if if_match.is_none() && last_modified.is_none() && size.is_none() {
            return None;
        }
        let secs = |t: &s3s::dto::Timestamp| {
            let odt: time::OffsetDateTime = t.clone().into();
            odt.unix_timestamp().max(0) as u64
        };
        Some(Self {
            if_match: if_match.cloned(),
            if_none_match: None,
            if_match_last_modified_s: last_modified.map(secs),
            if_match_size: size.map(|s| u64::try_from(s).unwrap_or(u64::MAX)),
        })
    }

    /// Whether the write may replace `current` (the object's current data
    /// version, `None` when there is none, or when it is a delete marker):
    /// `If-None-Match` fails (412) when it matches; `If-Match` fails when
    /// it does not (412), or when there is no object (404 NoSuchKey, as S3
    /// answers, for writes and deletes alike). The last-modified time and
    /// the size fail (412) when they differ from an existing object's; with
    /// no object they hold (S3: "or if the object doesn't exist, 204").
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
        if let Some(cur) = current.filter(|v| v.is_data()) {
            if let Some(t) = self.if_match_last_modified_s {
                if cur.timestamp / 1000 != t {
                    return Err(ApiError::PreconditionFailed);
                }
            }
            if let Some(s) = self.if_match_size {
                if cur.size() != s {
                    return Err(ApiError::PreconditionFailed);
                }
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
        cause: &Cause,
    ) -> Result<ObjectVersion, Refused> {
        // Until the cluster is finalized at the release whose GC empties
        // registers, values are written in the format that readers ignore
        // once old by their clocks (older nodes void them so): a node
        // whose clock is off its peers' would read a recent value as void,
        // or propose one that others read as void (see doc/ordering.md).
        let aged = !self.blocks.system.feature_allowed(&CONDITIONAL_REGISTER_GC);
        if aged {
            if let Err(e) = garage_util::clock::check() {
                return Err(Refused {
                    error: ApiError::Unavailable(format!("conditional write refused: {e}")),
                    final_: true,
                });
            }
        }
        let id = register_id(&bucket, key);
        let key_s = key.to_string();
        let start = tokio::time::Instant::now();
        // Our proposals that an acceptor may hold: each value proposed,
        // with the register's version it was built on (written with it).
        let mut proposals: Vec<(RegisterValue, Option<ObjectVersion>)> = Vec::new();
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
            let proposed = !proposals.is_empty();
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
                    RegisterValue::decode(b, p.value_round.unwrap_or(0))
                        .map_err(|e| refuse(ApiError::Internal(e), proposed))?,
                ),
            };
            // Only values of the older format age (see above). Then the
            // clock is read once, and checked at that reading: a step
            // since the check above must not make a recent value void.
            let now = if aged || decoded.as_ref().is_some_and(|r| r.voids_by_age) {
                garage_util::clock::checked_now_msec().map_err(|e| {
                    refuse(
                        ApiError::Unavailable(format!("conditional write refused: {e}")),
                        proposed,
                    )
                })?
            } else {
                garage_util::time::now_msec()
            };
            let void = decoded
                .as_ref()
                .is_some_and(|r| r.voids_by_age && is_void(r.proposed_at, now, void_ms));
            let reg = decoded.as_ref().filter(|_| !void);

            // One of our proposals is the register's value, or a value it
            // was built on: it took effect. Finish it: make the register's
            // value chosen, and write our version to the object table
            // before answering (a later value that overwrote it may not be
            // written yet).
            if let Some(r) = reg {
                let mut unknown = false;
                let mut ours = None;
                for (v, base) in proposals.iter() {
                    match r.holds(v.seq, v.version.uuid) {
                        Some(true) => ours = Some((v, base)),
                        Some(false) => {}
                        None => unknown = true,
                    }
                }
                if let Some((v, base)) = ours {
                    if !self.settle(&p, void).await {
                        continue;
                    }
                    let mut versions: Vec<ObjectVersion> = base.iter().cloned().collect();
                    versions.push(v.version.clone());
                    self.write_in_time(bucket, key, versions, v, void_ms, cause)
                        .await?;
                    return Ok(v.version.clone());
                }
                if unknown {
                    // So many writes came after ours that the chain no
                    // longer reaches it: it may have taken effect.
                    return Err(Refused {
                        error: ApiError::Unavailable(
                            "the conditional write raced too many others; its outcome is unknown"
                                .into(),
                        ),
                        final_: false,
                    });
                }
            }

            let mut state = obj
                .clone()
                .unwrap_or_else(|| Object::new(bucket, key.to_string(), vec![]));
            if let Some(r) = reg {
                state.merge(&Object::new(
                    bucket,
                    key.to_string(),
                    vec![r.version.clone()],
                ));
            }
            if let Err(e) = cond.check(state.last_data(), key) {
                // Act on the state read only once it is chosen: then no
                // earlier proposal of ours can be chosen any more either.
                if (reg.is_some() || proposed) && !self.settle(&p, void).await {
                    continue;
                }
                if let Some(r) = reg.filter(|_| obj.as_ref() != Some(&state)) {
                    self.writer
                        .update_versions(bucket, key, vec![r.version.clone()], &Cause::silent())
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
            let value = RegisterValue::after(decoded.as_ref(), now, version.clone(), aged);
            let base = reg.map(|r| r.version.clone());
            proposals.push((value.clone(), base.clone()));
            match self.cas.accept(&p, value.encode()).await {
                AcceptOutcome::Chosen => {
                    let mut versions: Vec<ObjectVersion> = base.into_iter().collect();
                    versions.push(version.clone());
                    self.write_in_time(bucket, key, versions, &value, void_ms, cause)
                        .await?;
                    return Ok(version);
                }
                AcceptOutcome::Failed {
                    maybe_accepted,
                    why,
                } => {
                    debug!(%key, "conditional write, round {round}: {why}");
                    if !maybe_accepted {
                        proposals.pop();
                    }
                }
            }
        }
        Err(refuse(
            ApiError::ConditionalRequestConflict(
                "too many concurrent conditional writes of this key; try again".into(),
            ),
            !proposals.is_empty(),
        ))
    }

    /// Writes `versions` (ending with this request's chosen version, of
    /// register value `value`) to the object table. A value of the older
    /// format ([`RegisterValue::voids_by_age`]) only if it is still time:
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
        value: &RegisterValue,
        void_ms: u64,
        cause: &Cause,
    ) -> Result<(), Refused> {
        let (aged, proposed_at) = (value.voids_by_age, value.proposed_at);
        // A clock that stepped is "late" too: its reading cannot tell.
        let late = || {
            aged && garage_util::clock::checked_now_msec().map_or(true, |now| {
                now.saturating_sub(proposed_at) > answer_by(void_ms)
            })
        };
        let too_late = || Refused {
            error: ApiError::Unavailable(
                "the conditional write took too long to complete; its outcome is unknown".into(),
            ),
            final_: false,
        };
        if late() {
            return Err(too_late());
        }
        self.writer
            .update_versions(bucket, key, versions, cause)
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

/// Whether an `If-Match`/`If-None-Match` condition holds for `etag`
/// (conditional reads and writes alike).
pub fn etag_matches(cond: &ETagCondition, etag: &str) -> bool {
    match cond {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => etag_list(e).any(|x| x == etag),
    }
}

/// The ETags of a header that may list several (`"a", W/"b"`): s3s
/// parses such a list as one ETag whose value runs from the first
/// quote to the last.
fn etag_list(e: &ETag) -> impl Iterator<Item = &str> {
    e.value().split(',').map(|x| {
        let x = x.trim();
        let x = x.strip_prefix("W/").unwrap_or(x);
        x.trim_matches('"')
    })
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
                    storage_class: None,
                    first_ec: None,
                    recoded: 0,
                },
                vec![0],
            )),
            versioning: Default::default(),
            lock: Default::default(),
            acl: Default::default(),
            acl_grants: Default::default(),
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

    /// Values of the older format are void a fixed delay after their
    /// writer's proposal (by the reader's clock), and their writer answers
    /// well before that.
    #[test]
    fn an_aged_register_value_is_void_after_half_the_gc_delay() {
        let void_ms = void_after(Duration::from_secs(20)).as_millis() as u64;
        assert_eq!(void_ms, 10_000);
        assert!(!is_void(1_000, 11_000, void_ms));
        assert!(is_void(1_000, 11_001, void_ms));
        // A clock behind the proposal: not void.
        assert!(!is_void(1_000, 500, void_ms));
        assert!(answer_by(void_ms) < void_ms);
        // Production: void after an hour, GC delay a day.
        assert_eq!(void_after(Duration::from_secs(86400)), MAX_VOID_AFTER);
    }

    /// Delete conditions: If-Match on a missing object is 404 as for
    /// writes; size and last-modified time compare with an existing
    /// object (seconds, as HTTP dates carry it) and hold when there is
    /// none; a negative size never matches.
    #[test]
    fn delete_conditions_are_checked_as_s3_does() {
        let mut v = data("a");
        v.timestamp = 1_700_000_000_123;
        let t = |s: i64| {
            s3s::dto::Timestamp::from(time::OffsetDateTime::from_unix_timestamp(s).unwrap())
        };
        let size = WriteConditions::of_delete(None, None, Some(1)).unwrap();
        assert_eq!(code(size.check(Some(&v), "k")), "ok");
        assert_eq!(code(size.check(None, "k")), "ok");
        let size2 = WriteConditions::of_delete(None, None, Some(2)).unwrap();
        assert_eq!(code(size2.check(Some(&v), "k")), "412");
        let neg = WriteConditions::of_delete(None, None, Some(-1)).unwrap();
        assert_eq!(code(neg.check(Some(&v), "k")), "412");
        let lm = WriteConditions::of_delete(None, Some(&t(1_700_000_000)), None).unwrap();
        assert_eq!(code(lm.check(Some(&v), "k")), "ok");
        let lm2 = WriteConditions::of_delete(None, Some(&t(1_700_000_001)), None).unwrap();
        assert_eq!(code(lm2.check(Some(&v), "k")), "412");
        let any = ETagCondition::Any;
        let m = WriteConditions::of_delete(Some(&any), None, None).unwrap();
        assert_eq!(code(m.check(None, "k")), "404");
        assert_eq!(code(m.check(Some(&v), "k")), "ok");
        assert!(WriteConditions::of_delete(None, None, None).is_none());
    }

    #[test]
    fn register_values_round_trip() {
        let v = data("e");
        let b = v.to_register_value();
        assert_eq!(ObjectVersion::from_register_value(&b).unwrap(), v);
        assert!(ObjectVersion::from_register_value(&[9, 1, 2]).is_err());
    }
}
