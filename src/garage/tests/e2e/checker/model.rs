//! The history checker's model: what the clients did (operations with
//! their spans and outcomes) and what S3 allows them to have seen. Kept
//! apart from the workload and the nemesis so that it is tested on its
//! own: the self-tests at the end feed it synthetic histories, one per
//! anomaly it claims to catch, each of which must be flagged, and correct
//! histories, which must pass (see doc/checker.md).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The body written by write `id`: `<id>` repeated, cut to `size`, so that
/// any GET result says which write it is and whether a byte changed.
pub fn body_of(id: u64, size: usize) -> Vec<u8> {
    let unit = format!("<{id:010}>");
    unit.bytes().cycle().take(size).collect()
}

/// The write id a body claims to come from (bodies of 12 bytes or more).
pub fn id_in_body(b: &[u8]) -> Option<u64> {
    if b.len() < 12 || b[0] != b'<' || b[11] != b'>' {
        return None;
    }
    std::str::from_utf8(&b[1..11]).ok()?.parse().ok()
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Acknowledged by the server.
    Ok,
    /// Refused for sure (412 for a conditional write): did not happen.
    Refused,
    /// Error or timeout: may or may not have happened, now or later.
    Unknown(String),
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// The object, as (write id from its metadata, body).
    Value(u64, Vec<u8>),
    Absent,
    Failed(String),
}

#[derive(Clone, Debug)]
pub enum Kind {
    /// A PUT (multipart when `parts > 1`) of write `id`.
    Put {
        id: u64,
        size: usize,
        parts: usize,
    },
    /// `If-None-Match: *` PUT of write `id`.
    Lock {
        id: u64,
    },
    /// `If-Match: <ETag of write expect>` PUT of write `id`.
    CondPut {
        id: u64,
        expect: u64,
    },
    /// CopyObject from `src`, the copy tagged with write `id` (`src` is
    /// only for the history dump).
    Copy {
        id: u64,
        #[allow(dead_code)]
        src: String,
    },
    Delete,
    Get(Read),
    /// The keys of every bucket (`None`: the listing failed).
    List(Option<BTreeSet<String>>),
    /// A PUT of write `id` in the bucket with versioning; the version id
    /// it was given, when acknowledged.
    PutVersion {
        #[allow(dead_code)]
        id: u64,
        version: Option<String>,
    },
    /// DeleteObject of one version, by its id.
    DeleteVersion {
        version: String,
    },
    /// ListObjectVersions of the key (`None`: failed): the version ids.
    ListVersions(Option<BTreeSet<String>>),
}

#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub node: usize,
    pub key: String,
    pub start: Duration,
    pub end: Duration,
    pub kind: Kind,
    pub outcome: Outcome,
}

impl Op {
    /// The value this op writes to its key: `Some(id)` or `None` (absent);
    /// `Err(())` if it is not a write of the register model.
    fn written(&self) -> Result<Option<u64>, ()> {
        match &self.kind {
            Kind::Put { id, .. }
            | Kind::Lock { id }
            | Kind::CondPut { id, .. }
            | Kind::Copy { id, .. } => Ok(Some(*id)),
            Kind::Delete => Ok(None),
            _ => Err(()),
        }
    }

    /// May have happened (acknowledged, or unknown).
    fn may_have_happened(&self) -> bool {
        self.outcome != Outcome::Refused
    }

    fn acked(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// When it may last take effect: its end if acknowledged, else never
    /// (see [`writes_of`]).
    fn effective_end(&self) -> Duration {
        match self.acked() {
            true => self.end,
            false => Duration::MAX,
        }
    }
}

/// Runs every check; returns the anomalies found.
pub fn check_all(ops: &[Op]) -> Vec<String> {
    let mut anomalies = Vec::new();
    check_reads(ops, &mut anomalies);
    check_locks(ops, &mut anomalies);
    check_conditions(ops, &mut anomalies);
    check_lists(ops, &mut anomalies);
    check_versions(ops, &mut anomalies);
    anomalies
}

/// (start, end, value, acked) of every write of the register model to
/// `key` that may have happened, the initial absence first. A write of
/// unknown outcome may take effect at any time after it started, even
/// after its client gave up (the server may still be working on it): its
/// end is taken as never.
type Write = (Duration, Duration, Option<u64>, bool);

fn writes_of<'a>(kops: impl Iterator<Item = &'a &'a Op>) -> Vec<Write> {
    std::iter::once((Duration::ZERO, Duration::ZERO, None, true))
        .chain(kops.filter(|o| o.may_have_happened()).filter_map(|o| {
            o.written()
                .ok()
                .map(|v| (o.start, o.effective_end(), v, o.acked()))
        }))
        .collect()
}

/// Whether a read spanning `[start, end]` may return `value`: some write
/// of it started before the read ended, and no acknowledged write ran
/// entirely between that write's end and the read's start (a write that
/// starts after another ended wins over it: doc/ordering.md).
fn possible(writes: &[Write], value: Option<u64>, start: Duration, end: Duration) -> bool {
    writes.iter().any(|(ws, we, wv, _)| {
        *wv == value
            && *ws <= end
            && !writes
                .iter()
                .any(|(os, oe, _, acked)| *acked && *os > *we && *oe < start)
    })
}

fn by_key(ops: &[Op]) -> BTreeMap<&str, Vec<&Op>> {
    let mut m: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        m.entry(op.key.as_str()).or_default().push(op);
    }
    m
}

/// Checks every read of a key against the writes of the key: a read may
/// return what [`possible`] allows, and its bytes must be exactly those
/// written.
pub fn check_reads(ops: &[Op], anomalies: &mut Vec<String>) {
    // Bodies of every write id (for copies: the source's writes).
    let mut puts: BTreeMap<u64, (&str, usize)> = BTreeMap::new();
    for op in ops {
        match op.kind {
            Kind::Put { id, size, .. } => {
                puts.insert(id, (op.key.as_str(), size));
            }
            Kind::Lock { id } | Kind::CondPut { id, .. } => {
                puts.insert(id, (op.key.as_str(), 200));
            }
            _ => {}
        }
    }
    for (key, kops) in by_key(ops).iter() {
        let writes = writes_of(kops.iter());
        for g in kops.iter() {
            let Kind::Get(read) = &g.kind else { continue };
            let value = match read {
                Read::Failed(_) => continue,
                Read::Absent => None,
                Read::Value(id, body) => {
                    // The bytes: those of the write, or for a copy those of
                    // a write to the copy's source.
                    let ok = match puts.get(id) {
                        Some((k, size)) if k == key => *body == body_of(*id, *size),
                        _ => {
                            // A copy tagged `id` (of a copy, maybe): its
                            // bytes are exactly those of some PUT.
                            let copied = kops
                                .iter()
                                .any(|o| matches!(&o.kind, Kind::Copy { id: c, .. } if c == id));
                            let of_put = |w: u64| {
                                puts.get(&w)
                                    .is_some_and(|(_, size)| *body == body_of(w, *size))
                            };
                            copied
                                && match id_in_body(body) {
                                    Some(w) => of_put(w),
                                    // Bodies too short to carry an id.
                                    None => puts.keys().any(|w| of_put(*w)),
                                }
                        }
                    };
                    if !ok {
                        anomalies.push(format!(
                            "{key}: GET at {:?} by client {} through node {} returned {} bytes for write {id} that are not the bytes written",
                            g.start, g.client, g.node, body.len()
                        ));
                        continue;
                    }
                    Some(*id)
                }
            };
            if !possible(&writes, value, g.start, g.end) {
                anomalies.push(format!(
                    "{key}: GET [{:?}..{:?}] by client {} through node {} returned {} which an acknowledged later write had replaced (or which was never written)",
                    g.start,
                    g.end,
                    g.client,
                    g.node,
                    match value {
                        Some(v) => format!("write {v}"),
                        None => "\"absent\"".into(),
                    }
                ));
            }
        }
    }
}

/// Among concurrent `If-None-Match: *` writers of a fresh key, at most one
/// succeeds, and exactly one when none failed.
pub fn check_locks(ops: &[Op], anomalies: &mut Vec<String>) {
    let mut races: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| matches!(o.kind, Kind::Lock { .. })) {
        races.entry(o.key.as_str()).or_default().push(o);
    }
    for (key, r) in races {
        let won = r.iter().filter(|o| o.acked()).count();
        let unknown = r
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
            .count();
        if won > 1 || (won == 0 && unknown == 0) {
            anomalies.push(format!(
                "{key}: {won} of {} If-None-Match writers won ({unknown} unknown)",
                r.len()
            ));
        }
    }
}

/// `If-Match: <ETag of write X>` PUTs: a success means X was current when
/// it was decided, so no acknowledged write may have replaced X entirely
/// before the PUT started; a 412 means X was not current at some moment
/// of the PUT, so X may not have been current for sure all along (written
/// and acknowledged before the PUT started, and no other write of the key
/// that may have happened started before the PUT ended).
pub fn check_conditions(ops: &[Op], anomalies: &mut Vec<String>) {
    for (key, kops) in by_key(ops).iter() {
        let writes = writes_of(kops.iter());
        for c in kops.iter() {
            let Kind::CondPut { id, expect } = c.kind else {
                continue;
            };
            let Some(&(xs, xe, _, xacked)) = writes.iter().find(|w| w.2 == Some(expect)) else {
                if c.acked() {
                    anomalies.push(format!(
                        "{key}: If-Match PUT {id} succeeded on write {expect}, which was never written"
                    ));
                }
                continue;
            };
            let others = || {
                writes
                    .iter()
                    .filter(|w| w.2 != Some(expect) && w.2 != Some(id))
            };
            match &c.outcome {
                Outcome::Ok => {
                    // The ETag is of the bytes: a write of the same bytes
                    // as X (a copy of X, of the key onto itself maybe)
                    // does not replace X for If-Match. Only writes whose
                    // bytes are known to differ count.
                    let x_bytes = contents(kops, expect);
                    let differs = |w: &Option<u64>| match w {
                        None => true,
                        Some(w) => match (contents(kops, *w), &x_bytes) {
                            (Some(a), Some(b)) => a.is_disjoint(b),
                            _ => false,
                        },
                    };
                    let replaced = others().any(|(os, oe, w, acked)| {
                        *acked && *os > xe && *oe < c.start && differs(w)
                    });
                    if replaced {
                        anomalies.push(format!(
                            "{key}: If-Match PUT {id} [{:?}..{:?}] through node {} succeeded although write {expect} had been replaced before it started",
                            c.start, c.end, c.node
                        ));
                    }
                }
                Outcome::Refused => {
                    let surely_current = xacked
                        && xe < c.start
                        && !others().any(|(os, oe, _, _)| *os < c.end && *oe > xs);
                    if surely_current {
                        anomalies.push(format!(
                            "{key}: If-Match PUT {id} [{:?}..{:?}] through node {} was refused although write {expect} was current all along",
                            c.start, c.end, c.node
                        ));
                    }
                }
                Outcome::Unknown(_) => {}
            }
        }
    }
}

/// Which PUTs' bytes write `id` of a key holds: the PUT itself, or for a
/// copy the PUTs whose ids its bodies carried when read (`None`: a copy
/// never read, whose bytes are unknown).
fn contents(kops: &[&Op], id: u64) -> Option<BTreeSet<u64>> {
    let is_copy = kops
        .iter()
        .any(|o| matches!(o.kind, Kind::Copy { id: c, .. } if c == id));
    if !is_copy {
        return Some(BTreeSet::from([id]));
    }
    let seen: BTreeSet<u64> = kops
        .iter()
        .filter_map(|o| match &o.kind {
            Kind::Get(Read::Value(v, body)) if *v == id => id_in_body(body),
            _ => None,
        })
        .collect();
    (!seen.is_empty()).then_some(seen)
}

/// Listings during the workload and after: a key whose last write that
/// may have happened is an acknowledged write that ended before the
/// listing started must be listed; a key listed must have a write that
/// started before the listing ended and may have happened; a key whose
/// acknowledged delete ended before the listing started, with no write
/// that may have happened after the delete started, must not be listed.
pub fn check_lists(ops: &[Op], anomalies: &mut Vec<String>) {
    let keyed = by_key(ops);
    for l in ops.iter() {
        let Kind::List(Some(listed)) = &l.kind else {
            continue;
        };
        for (key, kops) in keyed.iter() {
            // Only keys of the register model live in the listed buckets.
            let writes: Vec<&Op> = kops
                .iter()
                .copied()
                .filter(|o| o.may_have_happened() && o.written().is_ok())
                .collect();
            if writes.is_empty() {
                continue;
            }
            let shown = listed.contains(*key);
            let before = |o: &&Op| o.end < l.start;
            // Present for sure: an acknowledged PUT that ended before the
            // listing, and no delete that may have happened after it
            // started and before the listing ended.
            let present = writes.iter().filter(|o| o.acked() && before(o)).any(|w| {
                matches!(w.written(), Ok(Some(_)))
                    && !writes.iter().any(|d| {
                        matches!(d.written(), Ok(None))
                            && d.start < l.end
                            && d.effective_end() > w.start
                    })
            });
            // Absent for sure: an acknowledged delete that ended before the
            // listing, and no PUT that may have happened after it started
            // and before the listing ended.
            let absent = writes.iter().filter(|o| o.acked() && before(o)).any(|d| {
                matches!(d.written(), Ok(None))
                    && !writes.iter().any(|w| {
                        matches!(w.written(), Ok(Some(_)))
                            && w.start < l.end
                            && w.effective_end() > d.start
                    })
            });
            let ever = writes
                .iter()
                .any(|o| matches!(o.written(), Ok(Some(_))) && o.start < l.end);
            let what = if present && !shown {
                Some("misses")
            } else if shown && (absent || !ever) {
                Some("shows")
            } else {
                None
            };
            if let Some(w) = what {
                anomalies.push(format!(
                    "{key}: listing [{:?}..{:?}] by client {} through node {} {w} it",
                    l.start, l.end, l.client, l.node
                ));
            }
        }
        // A key no operation ever wrote.
        for key in listed {
            let written = keyed.get(key.as_str()).is_some_and(|kops| {
                kops.iter()
                    .any(|o| o.may_have_happened() && o.written().is_ok())
            });
            if !written {
                anomalies.push(format!(
                    "{key}: listing [{:?}..{:?}] by client {} through node {} shows it",
                    l.start, l.end, l.client, l.node
                ));
            }
        }
    }
}

/// Versions in the bucket with versioning: a listing of a key shows every
/// version acknowledged before it started and not (possibly) deleted by
/// its id since; never a version acknowledged deleted before it started;
/// and no more versions it cannot name than the PUTs of unknown outcome
/// that started before it ended.
pub fn check_versions(ops: &[Op], anomalies: &mut Vec<String>) {
    for (key, kops) in by_key(ops).iter() {
        for l in kops.iter() {
            let Kind::ListVersions(Some(listed)) = &l.kind else {
                continue;
            };
            let mut known: BTreeSet<&str> = BTreeSet::new();
            let mut unknown_puts = 0;
            for p in kops.iter().filter(|o| o.start < l.end) {
                match (&p.kind, &p.outcome) {
                    (
                        Kind::PutVersion {
                            version: Some(v), ..
                        },
                        Outcome::Ok,
                    ) => {
                        known.insert(v);
                    }
                    (Kind::PutVersion { .. }, Outcome::Unknown(_)) => unknown_puts += 1,
                    _ => {}
                }
            }
            let deleted_maybe = |v: &str| {
                kops.iter().any(|d| {
                    matches!(&d.kind, Kind::DeleteVersion { version } if version == v)
                        && d.may_have_happened()
                        && d.start < l.end
                })
            };
            let deleted_surely = |v: &str| {
                kops.iter().any(|d| {
                    matches!(&d.kind, Kind::DeleteVersion { version } if version == v)
                        && d.acked()
                        && d.end < l.start
                })
            };
            for p in kops.iter() {
                if let (
                    Kind::PutVersion {
                        version: Some(v), ..
                    },
                    Outcome::Ok,
                ) = (&p.kind, &p.outcome)
                {
                    if p.end < l.start && !deleted_maybe(v) && !listed.contains(v) {
                        anomalies.push(format!(
                            "{key}: version listing [{:?}..{:?}] through node {} misses version {v}, acknowledged at {:?}",
                            l.start, l.end, l.node, p.end
                        ));
                    }
                }
            }
            let mut strangers = 0;
            for v in listed {
                if deleted_surely(v) {
                    anomalies.push(format!(
                        "{key}: version listing [{:?}..{:?}] through node {} shows version {v}, deleted before",
                        l.start, l.end, l.node
                    ));
                } else if !known.contains(v.as_str()) {
                    strangers += 1;
                }
            }
            if strangers > unknown_puts {
                anomalies.push(format!(
                    "{key}: version listing [{:?}..{:?}] through node {} shows {strangers} versions no write made ({unknown_puts} PUTs of unknown outcome)",
                    l.start, l.end, l.node
                ));
            }
        }
    }
}

// ---- Self-tests: the checker catches what it claims ----

#[cfg(test)]
mod self_tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn op(key: &str, start: u64, end: u64, kind: Kind, outcome: Outcome) -> Op {
        Op {
            client: 0,
            node: 0,
            key: key.into(),
            start: ms(start),
            end: ms(end),
            kind,
            outcome,
        }
    }

    fn put(key: &str, id: u64, start: u64, end: u64) -> Op {
        let kind = Kind::Put {
            id,
            size: 100,
            parts: 1,
        };
        op(key, start, end, kind, Outcome::Ok)
    }

    fn get(key: &str, start: u64, end: u64, id: Option<u64>) -> Op {
        let r = match id {
            Some(id) => Read::Value(id, body_of(id, 100)),
            None => Read::Absent,
        };
        op(key, start, end, Kind::Get(r), Outcome::Ok)
    }

    fn delete(key: &str, start: u64, end: u64) -> Op {
        op(key, start, end, Kind::Delete, Outcome::Ok)
    }

    fn list(start: u64, end: u64, keys: &[&str]) -> Op {
        let l = keys.iter().map(|k| k.to_string()).collect();
        op("", start, end, Kind::List(Some(l)), Outcome::Ok)
    }

    /// `ops` must be flagged, with an anomaly naming `what`.
    fn flagged(ops: Vec<Op>, what: &str) {
        let a = check_all(&ops);
        assert!(
            a.iter().any(|x| x.contains(what)),
            "expected an anomaly with {what:?}, got {a:?}"
        );
    }

    fn clean(ops: Vec<Op>) {
        let a = check_all(&ops);
        assert!(a.is_empty(), "a correct history was flagged: {a:?}");
    }

    #[test]
    fn a_lost_acknowledged_write_is_caught() {
        flagged(
            vec![put("k", 1, 1, 10), get("k", 20, 30, None)],
            "returned \"absent\"",
        );
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_caught() {
        flagged(
            vec![
                put("k", 1, 0, 10),
                put("k", 2, 20, 30),
                get("k", 40, 50, Some(1)),
            ],
            "returned write 1",
        );
    }

    #[test]
    fn wrong_bytes_are_caught() {
        let mut body = body_of(1, 100);
        body[57] ^= 4;
        flagged(
            vec![
                put("k", 1, 0, 10),
                op("k", 20, 30, Kind::Get(Read::Value(1, body)), Outcome::Ok),
            ],
            "not the bytes written",
        );
    }

    #[test]
    fn a_deleted_key_returning_is_caught() {
        flagged(
            vec![
                put("k", 1, 0, 10),
                delete("k", 20, 30),
                get("k", 40, 50, Some(1)),
            ],
            "returned write 1",
        );
    }

    #[test]
    fn a_value_never_written_is_caught() {
        flagged(vec![get("k", 40, 50, Some(7))], "for write 7");
    }

    #[test]
    fn a_listing_missing_a_key_is_caught() {
        flagged(
            vec![put("k", 1, 0, 10), list(20, 30, &[])],
            "k: listing [20ms..30ms] by client 0 through node 0 misses it",
        );
    }

    #[test]
    fn a_listing_showing_a_key_never_written_or_deleted_is_caught() {
        flagged(
            vec![put("k", 1, 0, 10), list(5, 30, &["k", "ghost"])],
            "ghost: listing [5ms..30ms] by client 0 through node 0 shows it",
        );
        flagged(
            vec![list(0, 5, &["k"]), put("k", 1, 10, 20)],
            "k: listing [0ns..5ms] by client 0 through node 0 shows it",
        );
        flagged(
            vec![
                put("k", 1, 0, 10),
                delete("k", 20, 30),
                list(40, 50, &["k"]),
            ],
            "shows it",
        );
    }

    #[test]
    fn two_lock_winners_are_caught() {
        let lock = |id| op("lock-0", 0, 10, Kind::Lock { id }, Outcome::Ok);
        flagged(vec![lock(1), lock(2)], "2 of 2 If-None-Match writers won");
        // And none winning when none failed.
        let refused = |id| op("lock-1", 0, 10, Kind::Lock { id }, Outcome::Refused);
        flagged(vec![refused(1), refused(2)], "0 of 2");
    }

    #[test]
    fn if_match_outcomes_are_checked() {
        let cond = |id, expect, start, end, outcome| {
            op("k", start, end, Kind::CondPut { id, expect }, outcome)
        };
        // Succeeded although write 1 had been replaced by write 2.
        flagged(
            vec![
                put("k", 1, 0, 10),
                put("k", 2, 20, 30),
                cond(3, 1, 40, 50, Outcome::Ok),
            ],
            "succeeded although write 1 had been replaced",
        );
        // Refused although write 1 was current all along.
        flagged(
            vec![put("k", 1, 0, 10), cond(3, 1, 40, 50, Outcome::Refused)],
            "refused although write 1 was current",
        );
        // Concurrent writers: either outcome is possible.
        clean(vec![
            put("k", 1, 0, 10),
            put("k", 2, 35, 45),
            cond(3, 1, 40, 50, Outcome::Refused),
            cond(4, 1, 40, 50, Outcome::Ok),
        ]);
        // A copy of the key onto itself has write 1's bytes, so its ETag
        // (seen in seed 7008, long mode): the If-Match still matches.
        let copy = |id, start, end| {
            op(
                "k",
                start,
                end,
                Kind::Copy {
                    id,
                    src: "k".into(),
                },
                Outcome::Ok,
            )
        };
        let read_copy = |id, of, start, end| {
            op(
                "k",
                start,
                end,
                Kind::Get(Read::Value(id, body_of(of, 100))),
                Outcome::Ok,
            )
        };
        clean(vec![
            put("k", 1, 0, 10),
            copy(2, 20, 30),
            read_copy(2, 1, 31, 32),
            cond(3, 1, 40, 50, Outcome::Ok),
        ]);
        // A copy of other bytes does replace it.
        flagged(
            vec![
                put("k", 1, 0, 10),
                put("j", 5, 0, 10),
                op(
                    "k",
                    20,
                    30,
                    Kind::Copy {
                        id: 2,
                        src: "j".into(),
                    },
                    Outcome::Ok,
                ),
                read_copy(2, 5, 31, 32),
                cond(3, 1, 40, 50, Outcome::Ok),
            ],
            "succeeded although write 1 had been replaced",
        );
    }

    #[test]
    fn version_listings_are_checked() {
        let putv = |id, v: &str, start, end| {
            op(
                "v0",
                start,
                end,
                Kind::PutVersion {
                    id,
                    version: Some(v.into()),
                },
                Outcome::Ok,
            )
        };
        let listv = |start, end, vs: &[&str]| {
            let l = vs.iter().map(|v| v.to_string()).collect();
            op("v0", start, end, Kind::ListVersions(Some(l)), Outcome::Ok)
        };
        let delv = |v: &str, start, end| {
            op(
                "v0",
                start,
                end,
                Kind::DeleteVersion { version: v.into() },
                Outcome::Ok,
            )
        };
        flagged(
            vec![
                putv(1, "a", 0, 10),
                putv(2, "b", 20, 30),
                listv(40, 50, &["b"]),
            ],
            "misses version a",
        );
        flagged(
            vec![
                putv(1, "a", 0, 10),
                delv("a", 20, 30),
                listv(40, 50, &["a"]),
            ],
            "shows version a, deleted before",
        );
        flagged(
            vec![putv(1, "a", 0, 10), listv(40, 50, &["a", "zz"])],
            "shows 1 versions no write made",
        );
        clean(vec![
            putv(1, "a", 0, 10),
            putv(2, "b", 20, 30),
            // Concurrent with the listing: may or may not show.
            putv(3, "c", 35, 60),
            delv("a", 45, 55),
            listv(40, 50, &["a", "b"]),
            listv(70, 80, &["b", "c"]),
        ]);
    }

    #[test]
    fn a_correct_history_passes() {
        clean(vec![
            put("k", 1, 0, 10),
            get("k", 11, 12, Some(1)),
            // Concurrent writes: a read during both may see either, and
            // after both either one (the last to complete wins only when
            // one starts after the other ended).
            put("k", 2, 20, 40),
            put("k", 3, 25, 35),
            get("k", 30, 38, Some(1)),
            get("k", 41, 45, Some(2)),
            // A write of unknown outcome may appear at any time later.
            op(
                "k",
                50,
                60,
                Kind::Put {
                    id: 4,
                    size: 100,
                    parts: 1,
                },
                Outcome::Unknown("timeout".into()),
            ),
            get("k", 61, 62, Some(2)),
            get("k", 70, 71, Some(4)),
            delete("k", 80, 90),
            get("k", 91, 92, None),
            list(95, 99, &[]),
            put("j", 5, 100, 110),
            list(111, 120, &["j"]),
            // A listing concurrent with a delete may show the key or not.
            delete("j", 121, 140),
            list(125, 130, &["j"]),
            list(126, 131, &[]),
            op("lock-0", 200, 210, Kind::Lock { id: 8 }, Outcome::Ok),
            op("lock-0", 200, 210, Kind::Lock { id: 9 }, Outcome::Refused),
            op(
                "lock-0",
                200,
                210,
                Kind::Lock { id: 10 },
                Outcome::Unknown("503".into()),
            ),
        ]);
    }
}
