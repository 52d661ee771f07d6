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
    /// Refused for sure (412 for a conditional write, an upload aborted
    /// on purpose): did not happen.
    Refused,
    /// Failed for sure before anything could be written (a multipart
    /// upload whose completion was never sent), with why: did not happen.
    Failed(String),
    /// Error or timeout: may or may not have happened, now or later.
    Unknown(String),
}

/// What a read returned.
#[derive(Clone, PartialEq)]
pub enum Read {
    /// The object, as (write id from its metadata, body).
    Value(u64, Vec<u8>),
    Absent,
    Failed(String),
}

/// A body is shown by its length and first bytes: the history
/// (`CHECKER_HISTORY`) printed whole bodies, gigabytes per long run.
impl std::fmt::Debug for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Read::Value(id, body) => {
                let head: String = body.iter().take(8).map(|b| format!("{b:02x}")).collect();
                write!(f, "Value({id}, {} bytes {head}…)", body.len())
            }
            Read::Absent => write!(f, "Absent"),
            Read::Failed(e) => f.debug_tuple("Failed").field(e).finish(),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Kind {
    /// A PutObject (`parts` 0) or a multipart upload of `parts` parts of
    /// write `id`.
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
    /// CopyObject from key `src`, the copy tagged with write `id`: its
    /// bytes must be a value `src` may have had during the copy.
    Copy {
        id: u64,
        src: String,
    },
    Delete,
    Get(Read),
    /// GetObject of the null version (`?versionId=null`) of a key of the
    /// bucket whose versioning is suspended ([`suspended_key`]): since the
    /// setup wrote one, the null version is always the latest, so this
    /// reads the register as a GET does (a delete marker: `Absent`, from
    /// 405 MethodNotAllowed). NoSuchVersion is [`NO_NULL_VERSION`].
    GetNull(Read),
    /// The keys of every bucket (`None`: the listing failed).
    List(Option<BTreeSet<String>>),
    /// A PUT of write `id` (`size` bytes) in the bucket with versioning;
    /// the version id it was given, when acknowledged.
    PutVersion {
        id: u64,
        size: usize,
        version: Option<String>,
    },
    /// DeleteObject without a version id in the bucket with versioning:
    /// a delete marker, with the version id it was given.
    DeleteMarker {
        version: Option<String>,
    },
    /// DeleteObject of one version (or delete marker), by its id.
    DeleteVersion {
        version: String,
    },
    /// GetObject of one version, by its id (`Absent`: NoSuchVersion).
    GetVersion {
        version: String,
        read: Read,
    },
    /// ListObjectsV2 of the tree bucket by pages of 7, with `prefix` and
    /// maybe a delimiter (`None`: failed): keys and common prefixes, in
    /// the order of the pages.
    ListTree {
        prefix: String,
        delimiter: Option<String>,
        listed: Option<(Vec<String>, Vec<String>)>,
    },
    /// ListObjectVersions of the key (`None`: failed): its versions in the
    /// listing's order, then its delete markers in the listing's order
    /// (the SDK returns them as two lists).
    ListVersions(Option<Vec<Listed>>),
}

/// The failure a GET of the null version records for NoSuchVersion: an
/// anomaly, as every key of the suspended bucket has one from the setup on.
pub const NO_NULL_VERSION: &str = "NoSuchVersion";

/// Keys of the bucket whose versioning was enabled, then suspended
/// (`n0`…). Each has one version written while versioning was enabled
/// (a [`Kind::PutVersion`] of the setup) and, from the setup on, one null
/// version (a [`Kind::Put`] of the setup): PUTs, copies and DELETEs
/// without version id replace the null version (DELETE with a null delete
/// marker), so the key is a register like those of the plain buckets,
/// and its version listing always shows exactly those two entries.
pub fn suspended_key(key: &str) -> bool {
    key.strip_prefix('n')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The bucket of keys at rest listed by prefix and delimiter, written
/// before the faults: `tree/<dir>/<nnn>`, [`TREE_PER_DIR`] keys in each of
/// [`TREE_DIRS`].
pub const TREE_BUCKET: &str = "checker-tree";
pub const TREE_DIRS: &[&str] = &["a", "b", "c", "d", "e", "f"];
pub const TREE_PER_DIR: usize = 40;

/// Every key of the tree under `prefix`, in byte order.
pub fn tree_keys(prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = TREE_DIRS
        .iter()
        .flat_map(|d| (0..TREE_PER_DIR).map(move |n| format!("tree/{d}/{n:03}")))
        .filter(|k| k.starts_with(prefix))
        .collect();
    keys.sort();
    keys
}

/// What a listing of the tree must return: keys and common prefixes.
fn tree_expected(prefix: &str, delimiter: Option<&str>) -> (Vec<String>, Vec<String>) {
    let all = tree_keys(prefix);
    let Some(d) = delimiter else {
        return (all, Vec::new());
    };
    let mut keys = Vec::new();
    let mut prefixes: Vec<String> = Vec::new();
    for k in all {
        match k[prefix.len()..].find(d) {
            Some(i) => {
                let p = k[..prefix.len() + i + d.len()].to_string();
                if prefixes.last() != Some(&p) {
                    prefixes.push(p);
                }
            }
            None => keys.push(k),
        }
    }
    (keys, prefixes)
}

/// One entry of a version listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub version: String,
    pub marker: bool,
    /// `IsLatest`.
    pub latest: bool,
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

    /// What this op read of its key's register, if it is a read.
    fn read(&self) -> Option<&Read> {
        match &self.kind {
            Kind::Get(r) | Kind::GetNull(r) => Some(r),
            _ => None,
        }
    }

    /// May have happened (acknowledged, or unknown).
    fn may_have_happened(&self) -> bool {
        matches!(self.outcome, Outcome::Ok | Outcome::Unknown(_))
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
    check_suspended(ops, &mut anomalies);
    check_trees(ops, &mut anomalies);
    check_linearizable(ops, &mut anomalies);
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
    let keys = by_key(ops);
    let writes_by_key: BTreeMap<&str, Vec<Write>> = keys
        .iter()
        .map(|(k, kops)| (*k, writes_of(kops.iter())))
        .collect();
    let copies: BTreeMap<u64, &Op> = ops
        .iter()
        .filter_map(|o| match &o.kind {
            Kind::Copy { id, .. } => Some((*id, o)),
            _ => None,
        })
        .collect();
    for (key, kops) in keys.iter() {
        let writes = &writes_by_key[key];
        for g in kops.iter() {
            let Some(read) = g.read() else { continue };
            let value = match read {
                Read::Failed(_) => continue,
                Read::Absent => None,
                Read::Value(id, body) => {
                    // The bytes: those of the write, or for a copy those of
                    // a write to the copy's source.
                    let ok = match puts.get(id) {
                        Some((k, size)) if k == key => *body == body_of(*id, *size),
                        _ => match copies.get(id) {
                            // A copy tagged `id`: its bytes are those of a
                            // value its source may have had during the copy.
                            Some(c) if c.key == *key => {
                                let Kind::Copy { src, .. } = &c.kind else {
                                    unreachable!()
                                };
                                let no_writes = Vec::new();
                                let src_writes =
                                    writes_by_key.get(src.as_str()).unwrap_or(&no_writes);
                                let (cs, ce) = (c.start, c.effective_end());
                                let of_put = |w: u64| {
                                    puts.get(&w)
                                        .is_some_and(|(_, size)| *body == body_of(w, *size))
                                };
                                // The source may have held a copy itself:
                                // then any PUT's bytes (not followed further).
                                let of_a_copy = src_writes.iter().any(|(_, _, v, _)| {
                                    v.is_some_and(|x| {
                                        copies.contains_key(&x)
                                            && possible(src_writes, Some(x), cs, ce)
                                    })
                                });
                                match id_in_body(body) {
                                    Some(w) => {
                                        of_put(w)
                                            && (of_a_copy || possible(src_writes, Some(w), cs, ce))
                                    }
                                    // Bodies too short to carry an id.
                                    None => puts.keys().any(|w| of_put(*w)),
                                }
                            }
                            _ => false,
                        },
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
            if !possible(writes, value, g.start, g.end) {
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
                Outcome::Unknown(_) | Outcome::Failed(_) => {}
            }
        }
    }
}

/// Which PUTs' bytes write `id` of a key holds: the PUT itself, or for a
/// copy the PUTs whose ids its bodies carried when read (`None`: a copy
/// never read, whose bytes are unknown).
/// What [`contents`] gives for the empty body of any write.
const EMPTY_BYTES: u64 = u64::MAX;

fn contents(kops: &[&Op], id: u64) -> Option<BTreeSet<u64>> {
    let is_copy = kops
        .iter()
        .any(|o| matches!(o.kind, Kind::Copy { id: c, .. } if c == id));
    // Every empty body is the same bytes (and the same ETag), whichever
    // write made it: it cannot carry its write's id.
    let is_empty = kops.iter().any(|o| {
        matches!(o.kind, Kind::Put { id: w, size: 0, .. } | Kind::PutVersion { id: w, size: 0, .. } if w == id)
    });
    if is_empty {
        return Some(BTreeSet::from([EMPTY_BYTES]));
    }
    if !is_copy {
        return Some(BTreeSet::from([id]));
    }
    let seen: BTreeSet<u64> = kops
        .iter()
        .filter_map(|o| match o.read() {
            Some(Read::Value(v, body)) if *v == id => id_in_body(body),
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

/// Versions in the bucket with versioning. A listing of a key shows every
/// version and delete marker acknowledged before it started and not
/// (possibly) deleted by its id since, each as what it is (a version or a
/// marker); never one acknowledged deleted before it started; no more
/// entries it cannot name than the writes of unknown outcome that started
/// before it ended; versions (and markers) newest first: one written after
/// another was acknowledged is listed before it; and exactly one entry
/// `IsLatest`, none written after it was acknowledged. A GET by version id
/// returns that version's bytes, NoSuchVersion only if it may have been
/// deleted, and never a version acknowledged deleted before it started.
pub fn check_versions(ops: &[Op], anomalies: &mut Vec<String>) {
    for (key, kops) in by_key(ops).iter().filter(|(k, _)| !suspended_key(k)) {
        // Each acknowledged version or marker, by id: its write, and
        // whether it is a marker.
        let created: BTreeMap<&str, (&Op, bool)> = kops
            .iter()
            .filter_map(|o| match (&o.kind, &o.outcome) {
                (
                    Kind::PutVersion {
                        version: Some(v), ..
                    },
                    Outcome::Ok,
                ) => Some((v.as_str(), (*o, false))),
                (Kind::DeleteMarker { version: Some(v) }, Outcome::Ok) => {
                    Some((v.as_str(), (*o, true)))
                }
                _ => None,
            })
            .collect();
        let deletes_of = |v: &str| -> Vec<&Op> {
            kops.iter()
                .filter(|d| matches!(&d.kind, Kind::DeleteVersion { version } if version == v))
                .copied()
                .collect()
        };
        // Deleted by id, possibly, by a delete started before `t`.
        let deleted_maybe = |v: &str, t: Duration| {
            deletes_of(v)
                .iter()
                .any(|d| d.may_have_happened() && d.start < t)
        };
        // Deleted by id, acknowledged before `t`.
        let deleted_surely =
            |v: &str, t: Duration| deletes_of(v).iter().any(|d| d.acked() && d.end < t);
        for l in kops.iter() {
            match &l.kind {
                Kind::ListVersions(Some(listed)) => {
                    let what = format!(
                        "{key}: version listing [{:?}..{:?}] through node {}",
                        l.start, l.end, l.node
                    );
                    check_listing(&what, l, listed, &created, kops, anomalies, |v| {
                        (deleted_maybe(v, l.end), deleted_surely(v, l.start))
                    });
                }
                Kind::GetVersion { version, read } => {
                    let what = format!(
                        "{key}: GET of version {version} [{:?}..{:?}] through node {}",
                        l.start, l.end, l.node
                    );
                    let Some((p, false)) = created.get(version.as_str()) else {
                        continue;
                    };
                    let Kind::PutVersion { id, size, .. } = &p.kind else {
                        continue;
                    };
                    match read {
                        Read::Value(rid, body) => {
                            if rid != id || *body != body_of(*id, *size) {
                                anomalies.push(format!(
                                    "{what} returned write {rid} ({} bytes), not write {id} ({size} bytes)",
                                    body.len()
                                ));
                            }
                            if deleted_surely(version, l.start) {
                                anomalies.push(format!("{what} returned it, deleted before"));
                            }
                        }
                        Read::Absent => {
                            if p.end < l.start && !deleted_maybe(version, l.end) {
                                anomalies.push(format!(
                                    "{what} says NoSuchVersion, acknowledged at {:?} and never deleted",
                                    p.end
                                ));
                            }
                        }
                        Read::Failed(_) => {}
                    }
                }
                _ => {}
            }
        }
    }
}

/// The keys of the bucket whose versioning is suspended
/// ([`suspended_key`]): a GET of the null version never says
/// NoSuchVersion; a version listing shows the version written before the
/// suspension, as a version and not `IsLatest`, and exactly one null
/// entry, `IsLatest`, listed before it when both are versions; nothing
/// else (a write while suspended that made a version with an id, or left
/// a second null entry, shows here). What the null entry holds is checked
/// with the register: by GETs, of the key and of its null version.
pub fn check_suspended(ops: &[Op], anomalies: &mut Vec<String>) {
    for (key, kops) in by_key(ops).iter().filter(|(k, _)| suspended_key(k)) {
        let enabled: Vec<&str> = kops
            .iter()
            .filter_map(|o| match (&o.kind, &o.outcome) {
                (
                    Kind::PutVersion {
                        version: Some(v), ..
                    },
                    Outcome::Ok,
                ) => Some(v.as_str()),
                _ => None,
            })
            .collect();
        for o in kops.iter() {
            let what = |w: &str| {
                format!(
                    "{key}: {w} [{:?}..{:?}] through node {}",
                    o.start, o.end, o.node
                )
            };
            match &o.kind {
                Kind::GetNull(Read::Failed(e)) if e == NO_NULL_VERSION => {
                    anomalies.push(format!(
                        "{} says NoSuchVersion: the setup wrote one and nothing deletes it",
                        what("GET of the null version")
                    ));
                }
                Kind::ListVersions(Some(listed)) => {
                    let what = what("version listing (versioning suspended)");
                    let at = |v: &str| listed.iter().position(|e| e.version == v);
                    for v in &enabled {
                        match at(v).map(|i| &listed[i]) {
                            None => anomalies.push(format!(
                                "{what} misses version {v}, written before the suspension"
                            )),
                            Some(e) if e.marker => anomalies.push(format!(
                                "{what} shows {v} as a delete marker, written as a version"
                            )),
                            Some(e) if e.latest => anomalies.push(format!(
                                "{what} says {v} IsLatest, older than the null version"
                            )),
                            Some(_) => {}
                        }
                    }
                    let nulls: Vec<usize> = (0..listed.len())
                        .filter(|i| listed[*i].version == "null")
                        .collect();
                    match nulls.as_slice() {
                        [i] => {
                            let n = &listed[*i];
                            if !n.latest {
                                anomalies
                                    .push(format!("{what} does not say the null version IsLatest"));
                            }
                            let first_version = enabled.iter().filter_map(|v| at(v)).min();
                            if !n.marker && first_version.is_some_and(|f| f < *i) {
                                anomalies.push(format!(
                                    "{what} lists the null version after an older one"
                                ));
                            }
                        }
                        _ => anomalies.push(format!(
                            "{what} shows {} null entries, not one",
                            nulls.len()
                        )),
                    }
                    for e in listed {
                        if e.version != "null" && !enabled.contains(&e.version.as_str()) {
                            anomalies.push(format!(
                                "{what} shows {} {}, no write made while versioning was enabled",
                                if e.marker { "delete marker" } else { "version" },
                                e.version
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The checks of one version listing (see [`check_versions`]); `deleted`
/// says of a version id whether a delete by id may have happened before
/// the listing ended, and whether one was acknowledged before it started.
fn check_listing(
    what: &str,
    l: &Op,
    listed: &[Listed],
    created: &BTreeMap<&str, (&Op, bool)>,
    kops: &[&Op],
    anomalies: &mut Vec<String>,
    deleted: impl Fn(&str) -> (bool, bool),
) {
    let unknown = kops
        .iter()
        .filter(|p| {
            matches!(p.kind, Kind::PutVersion { .. } | Kind::DeleteMarker { .. })
                && matches!(p.outcome, Outcome::Unknown(_))
                && p.start < l.end
        })
        .count();
    for (v, (p, marker)) in created {
        let entry = listed.iter().find(|e| e.version == *v);
        match entry {
            None if p.end < l.start && !deleted(v).0 => anomalies.push(format!(
                "{what} misses {} {v}, acknowledged at {:?}",
                if *marker { "delete marker" } else { "version" },
                p.end
            )),
            Some(e) if e.marker != *marker => anomalies.push(format!(
                "{what} shows {v} as a {}, written as a {}",
                if e.marker { "delete marker" } else { "version" },
                if *marker { "delete marker" } else { "version" },
            )),
            _ => {}
        }
    }
    let mut strangers = 0;
    for e in listed {
        let v = &e.version;
        if deleted(v).1 {
            anomalies.push(format!("{what} shows version {v}, deleted before"));
        } else if !created.contains_key(v.as_str()) {
            strangers += 1;
        }
    }
    if strangers > unknown {
        anomalies.push(format!(
            "{what} shows {strangers} versions no write made ({unknown} writes of unknown outcome)"
        ));
    }
    // Newest first, among versions and among markers.
    for (i, a) in listed.iter().enumerate() {
        for b in listed[i + 1..].iter().filter(|b| b.marker == a.marker) {
            if let (Some((pa, _)), Some((pb, _))) = (
                created.get(a.version.as_str()),
                created.get(b.version.as_str()),
            ) {
                if pa.end < pb.start {
                    anomalies.push(format!(
                        "{what} lists {} before {}, written after it was acknowledged",
                        a.version, b.version
                    ));
                }
            }
        }
    }
    let latest: Vec<&Listed> = listed.iter().filter(|e| e.latest).collect();
    if !listed.is_empty() && latest.len() != 1 {
        anomalies.push(format!("{what} has {} entries with IsLatest", latest.len()));
    }
    if let Some(Some((pl, _))) = latest.first().map(|e| created.get(e.version.as_str())) {
        for e in listed {
            if let Some((pe, _)) = created.get(e.version.as_str()) {
                if pl.end < pe.start {
                    anomalies.push(format!(
                        "{what} says {} IsLatest, but {} was written after it was acknowledged",
                        latest[0].version, e.version
                    ));
                }
            }
        }
    }
}

/// Listings of the keys at rest by prefix and delimiter, paged: exactly the
/// keys and common prefixes there are, in byte order, each once.
pub fn check_trees(ops: &[Op], anomalies: &mut Vec<String>) {
    for o in ops {
        let Kind::ListTree {
            prefix,
            delimiter,
            listed: Some((keys, prefixes)),
        } = &o.kind
        else {
            continue;
        };
        let (want_keys, want_prefixes) = tree_expected(prefix, delimiter.as_deref());
        for (what, got, want) in [
            ("keys", keys, &want_keys),
            ("common prefixes", prefixes, &want_prefixes),
        ] {
            if got != want {
                let missing = want.iter().filter(|k| !got.contains(k)).count();
                let extra = got.iter().filter(|k| !want.contains(k)).count();
                anomalies.push(format!(
                    "listing of {TREE_BUCKET} (prefix {prefix:?}, delimiter {delimiter:?}) [{:?}..{:?}] through node {}: {} {what} instead of {}: {missing} missing, {extra} extra{}",
                    o.start,
                    o.end,
                    o.node,
                    got.len(),
                    want.len(),
                    if missing == 0 && extra == 0 { ", out of order or repeated" } else { "" }
                ));
            }
        }
    }
}

/// Explored states of one key's search before it gives up (reported, not
/// as an anomaly: "undecided").
const SEARCH_BUDGET: usize = 2_000_000;

/// Each key's history as one register, searched as a whole (Wing and
/// Gong's search with Lowe's cache of visited states, as Knossos and
/// Porcupine do): there must be one order of its writes and reads,
/// each placed between its start and its end, in which every read returns
/// the last write before it. A write of unknown outcome is placed at one
/// point after its start, or nowhere; so, unlike [`check_reads`], which
/// judges each read alone, a write that appears, vanishes and appears
/// again is caught. Failed reads and refused writes take no part.
pub fn check_linearizable(ops: &[Op], anomalies: &mut Vec<String>) {
    for (key, kops) in by_key(ops).iter() {
        // Values some read returned: a write of unknown outcome whose
        // value no read returned is placed nowhere (placing it can only
        // forbid reads, never allow one), which keeps the search small.
        let read: BTreeSet<Option<u64>> = kops
            .iter()
            .filter_map(|o| match o.read() {
                Some(Read::Value(v, _)) => Some(Some(*v)),
                Some(Read::Absent) => Some(None),
                _ => None,
            })
            .collect();
        let hist: Vec<&Op> = kops
            .iter()
            .copied()
            .filter(|o| match o.read() {
                Some(Read::Failed(_)) => false,
                Some(_) => true,
                None => {
                    o.may_have_happened()
                        && o.written().is_ok_and(|v| o.acked() || read.contains(&v))
                }
            })
            .collect();
        if hist.iter().all(|o| o.read().is_none()) {
            continue;
        }
        match linearize(&hist, SEARCH_BUDGET) {
            Search::Found => {}
            Search::None => anomalies.push(format!(
                "{key}: no order of its {} writes and reads explains every read (not linearizable; e.g. a write that appeared, vanished and appeared again)",
                hist.len()
            )),
            Search::GaveUp => eprintln!(
                "checker: {key}: linearizability undecided after {SEARCH_BUDGET} states ({} operations)",
                hist.len()
            ),
        }
    }
}

#[derive(Debug, PartialEq)]
enum Search {
    Found,
    None,
    GaveUp,
}

/// The search of [`check_linearizable`] over one key's operations.
fn linearize(hist: &[&Op], budget: usize) -> Search {
    use std::collections::HashSet;
    const NONE: usize = usize::MAX;
    // Events: (time, is_return, op index), calls before returns at equal
    // times (two operations that touch overlap). Writes of unknown
    // outcome have no return: they may be placed late, or never.
    let mut events: Vec<(Duration, bool, usize)> = Vec::new();
    for (i, o) in hist.iter().enumerate() {
        events.push((o.start, false, i));
        if o.acked() || o.read().is_some() {
            events.push((o.end, true, i));
        }
    }
    events.sort_by_key(|(t, r, i)| (*t, *r, *i));
    let n = events.len();
    // A doubly linked list of the events not placed yet: `head` before
    // the first, `end` after the last.
    let (head, end) = (n, n + 1);
    let mut next: Vec<usize> = (1..=n).collect();
    if let Some(last) = next.last_mut() {
        *last = end;
    }
    next.push(if n == 0 { end } else { 0 });
    let mut prev: Vec<usize> = std::iter::once(head)
        .chain(0..n.saturating_sub(1))
        .collect();
    prev.push(NONE);
    let (mut call, mut ret) = (vec![NONE; hist.len()], vec![NONE; hist.len()]);
    for (e, (_, r, i)) in events.iter().enumerate() {
        match r {
            false => call[*i] = e,
            true => ret[*i] = e,
        }
    }
    fn unlink(next: &mut [usize], prev: &mut [usize], end: usize, e: usize) {
        let (p, x) = (prev[e], next[e]);
        next[p] = x;
        if x != end {
            prev[x] = p;
        }
    }
    fn relink(next: &mut [usize], prev: &mut [usize], end: usize, e: usize) {
        let (p, x) = (prev[e], next[e]);
        next[p] = e;
        if x != end {
            prev[x] = e;
        }
    }
    let mut returns_left = events.iter().filter(|(_, r, _)| *r).count();
    let mut state: Option<u64> = None;
    let mut placed = vec![0u64; hist.len().div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, Option<u64>)> = HashSet::new();
    // The operations placed, each with the state before it.
    let mut stack: Vec<(usize, Option<u64>)> = Vec::new();
    let mut e = next[head];
    loop {
        if returns_left == 0 {
            return Search::Found;
        }
        if cache.len() > budget {
            return Search::GaveUp;
        }
        let call_here = e != end && !events[e].1;
        if call_here {
            let i = events[e].2;
            let after = match hist[i].read() {
                Some(Read::Value(v, _)) => (state == Some(*v)).then_some(state),
                Some(_) => state.is_none().then_some(None),
                None => Some(hist[i].written().expect("a write of the register")),
            };
            if let Some(after) = after {
                placed[i / 64] |= 1 << (i % 64);
                if cache.insert((placed.clone(), after)) {
                    stack.push((i, state));
                    state = after;
                    unlink(&mut next, &mut prev, end, call[i]);
                    if ret[i] != NONE {
                        unlink(&mut next, &mut prev, end, ret[i]);
                        returns_left -= 1;
                    }
                    e = next[head];
                    continue;
                }
                placed[i / 64] &= !(1 << (i % 64));
            }
            e = next[e];
            continue;
        }
        // A return (an operation must be placed before it), or the end:
        // undo the last placement and try the next event after its call.
        let Some((j, before)) = stack.pop() else {
            return Search::None;
        };
        placed[j / 64] &= !(1 << (j % 64));
        state = before;
        if ret[j] != NONE {
            relink(&mut next, &mut prev, end, ret[j]);
            returns_left += 1;
        }
        relink(&mut next, &mut prev, end, call[j]);
        e = next[call[j]];
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
        // Two empty PUTs have the same bytes, so the same ETag (seed
        // 14006, long mode, and likely seed 14 in the suite): an If-Match
        // on the first's still matches after the second.
        let empty = |id, start, end| {
            let kind = Kind::Put {
                id,
                size: 0,
                parts: 0,
            };
            op("k", start, end, kind, Outcome::Ok)
        };
        clean(vec![
            empty(1, 0, 10),
            empty(2, 20, 30),
            cond(3, 1, 40, 50, Outcome::Ok),
        ]);
        // An empty PUT after a non-empty one does replace it, and so does
        // a non-empty one after an empty one.
        flagged(
            vec![
                put("k", 1, 0, 10),
                empty(2, 20, 30),
                cond(3, 1, 40, 50, Outcome::Ok),
            ],
            "succeeded although write 1 had been replaced",
        );
        flagged(
            vec![
                empty(1, 0, 10),
                put("k", 2, 20, 30),
                cond(3, 1, 40, 50, Outcome::Ok),
            ],
            "succeeded although write 1 had been replaced",
        );
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
    fn copies_are_checked_against_their_source_at_the_time() {
        let copy = |id, src: &str, start, end| {
            let kind = Kind::Copy {
                id,
                src: src.into(),
            };
            op("k", start, end, kind, Outcome::Ok)
        };
        let read = |id, of, start, end| {
            op(
                "k",
                start,
                end,
                Kind::Get(Read::Value(id, body_of(of, 100))),
                Outcome::Ok,
            )
        };
        // `j` held write 6 during the copy (write 5 replaced before).
        flagged(
            vec![
                put("j", 5, 0, 10),
                put("j", 6, 20, 30),
                copy(7, "j", 40, 50),
                read(7, 5, 60, 61),
            ],
            "are not the bytes written",
        );
        // The bytes of a PUT to another key.
        flagged(
            vec![
                put("j", 5, 0, 10),
                put("i", 8, 0, 10),
                copy(7, "j", 40, 50),
                read(7, 8, 60, 61),
            ],
            "are not the bytes written",
        );
        // A write of the source concurrent with the copy: either value.
        for of in [5, 6] {
            clean(vec![
                put("j", 5, 0, 10),
                put("j", 6, 35, 45),
                copy(7, "j", 40, 50),
                read(7, of, 60, 61),
            ]);
        }
    }

    fn putv(id: u64, v: &str, start: u64, end: u64) -> Op {
        let kind = Kind::PutVersion {
            id,
            size: 100,
            version: Some(v.into()),
        };
        op("v0", start, end, kind, Outcome::Ok)
    }

    fn markv(v: &str, start: u64, end: u64) -> Op {
        let kind = Kind::DeleteMarker {
            version: Some(v.into()),
        };
        op("v0", start, end, kind, Outcome::Ok)
    }

    fn delv(v: &str, start: u64, end: u64) -> Op {
        let kind = Kind::DeleteVersion { version: v.into() };
        op("v0", start, end, kind, Outcome::Ok)
    }

    /// A listing of `v0`: versions newest first (the first one latest),
    /// then markers (`m…` ids), as the SDK returns them.
    fn listv(start: u64, end: u64, vs: &[&str]) -> Op {
        let l = vs
            .iter()
            .enumerate()
            .map(|(i, v)| Listed {
                version: v.to_string(),
                marker: v.starts_with('m'),
                latest: i == 0,
            })
            .collect();
        op("v0", start, end, Kind::ListVersions(Some(l)), Outcome::Ok)
    }

    fn getv(v: &str, start: u64, end: u64, read: Read) -> Op {
        let kind = Kind::GetVersion {
            version: v.into(),
            read,
        };
        op("v0", start, end, kind, Outcome::Ok)
    }

    #[test]
    fn version_listings_are_checked() {
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
        // Order: b was written after a was acknowledged.
        flagged(
            vec![
                putv(1, "a", 0, 10),
                putv(2, "b", 20, 30),
                listv(40, 50, &["a", "b"]),
            ],
            "lists a before b, written after it was acknowledged",
        );
        // IsLatest on an older version.
        let mut l = listv(40, 50, &["b", "a"]);
        if let Kind::ListVersions(Some(e)) = &mut l.kind {
            e[0].latest = false;
            e[1].latest = true;
        }
        flagged(
            vec![putv(1, "a", 0, 10), putv(2, "b", 20, 30), l],
            "says a IsLatest, but b was written after it",
        );
        // Delete markers: listed as markers, missing, or as versions.
        flagged(
            vec![
                putv(1, "a", 0, 10),
                markv("m1", 20, 30),
                listv(40, 50, &["a"]),
            ],
            "misses delete marker m1",
        );
        let mut l = listv(40, 50, &["m1", "a"]);
        if let Kind::ListVersions(Some(e)) = &mut l.kind {
            e[0].marker = false;
        }
        flagged(
            vec![putv(1, "a", 0, 10), markv("m1", 20, 30), l],
            "shows m1 as a version, written as a delete marker",
        );
        clean(vec![
            putv(1, "a", 0, 10),
            putv(2, "b", 20, 30),
            // Concurrent with the listing: may or may not show.
            putv(3, "c", 35, 60),
            delv("a", 45, 55),
            listv(40, 50, &["b", "a"]),
            listv(70, 80, &["c", "b"]),
            markv("m1", 90, 95),
            // The marker is the latest: versions and markers are two lists.
            {
                let mut l = listv(100, 110, &["c", "b", "m1"]);
                if let Kind::ListVersions(Some(e)) = &mut l.kind {
                    e[0].latest = false;
                    e[2].latest = true;
                }
                l
            },
        ]);
    }

    #[test]
    fn tree_listings_are_checked() {
        let tree =
            |prefix: &str, delimiter: Option<&str>, keys: Vec<String>, prefixes: Vec<String>| {
                op(
                    "",
                    0,
                    10,
                    Kind::ListTree {
                        prefix: prefix.into(),
                        delimiter: delimiter.map(String::from),
                        listed: Some((keys, prefixes)),
                    },
                    Outcome::Ok,
                )
            };
        let dirs: Vec<String> = TREE_DIRS.iter().map(|d| format!("tree/{d}/")).collect();
        clean(vec![
            tree("tree/", Some("/"), vec![], dirs.clone()),
            tree("tree/c/", None, tree_keys("tree/c/"), vec![]),
            tree("tree/", None, tree_keys(""), vec![]),
        ]);
        assert_eq!(tree_keys("").len(), TREE_DIRS.len() * TREE_PER_DIR);
        // A page lost, a page repeated, a prefix missing.
        let mut lost = tree_keys("tree/c/");
        lost.drain(7..14);
        flagged(
            vec![tree("tree/c/", None, lost, vec![])],
            "33 keys instead of 40: 7 missing, 0 extra",
        );
        let mut twice = tree_keys("tree/c/");
        twice.extend(tree_keys("tree/c/")[..7].to_vec());
        flagged(
            vec![tree("tree/c/", None, twice, vec![])],
            "out of order or repeated",
        );
        flagged(
            vec![tree("tree/", Some("/"), vec![], dirs[1..].to_vec())],
            "5 common prefixes instead of 6",
        );
    }

    /// A key of the suspended bucket after its setup: version `a` written
    /// while versioning was enabled, then the null version of write 1.
    fn suspended_setup() -> Vec<Op> {
        let kind = Kind::PutVersion {
            id: 100,
            size: 100,
            version: Some("a".into()),
        };
        vec![op("n0", 0, 1, kind, Outcome::Ok), put("n0", 1, 2, 3)]
    }

    /// A listing of `n0`: `(version id, delete marker, IsLatest)`.
    fn listn(start: u64, end: u64, entries: &[(&str, bool, bool)]) -> Op {
        let l = entries
            .iter()
            .map(|(v, marker, latest)| Listed {
                version: v.to_string(),
                marker: *marker,
                latest: *latest,
            })
            .collect();
        op("n0", start, end, Kind::ListVersions(Some(l)), Outcome::Ok)
    }

    fn getnull(start: u64, end: u64, read: Read) -> Op {
        op("n0", start, end, Kind::GetNull(read), Outcome::Ok)
    }

    #[test]
    fn suspended_versioning_is_checked() {
        let with = |more: Vec<Op>| {
            let mut h = suspended_setup();
            h.extend(more);
            h
        };
        // Correct: the null version latest and first, then a null marker.
        clean(with(vec![
            listn(10, 20, &[("null", false, true), ("a", false, false)]),
            getnull(10, 20, Read::Value(1, body_of(1, 100))),
            delete("n0", 30, 40),
            listn(50, 60, &[("a", false, false), ("null", true, true)]),
            getnull(50, 60, Read::Absent),
            get("n0", 50, 60, None),
        ]));
        flagged(
            with(vec![getnull(10, 20, Read::Failed(NO_NULL_VERSION.into()))]),
            "says NoSuchVersion: the setup wrote one",
        );
        // The null version's value is the register's.
        flagged(
            with(vec![
                put("n0", 2, 10, 20),
                getnull(30, 40, Read::Value(1, body_of(1, 100))),
            ]),
            "returned write 1",
        );
        flagged(
            with(vec![listn(10, 20, &[("null", false, true)])]),
            "misses version a, written before the suspension",
        );
        flagged(
            with(vec![listn(
                10,
                20,
                &[("a", false, false), ("null", false, true)],
            )]),
            "lists the null version after an older one",
        );
        flagged(
            with(vec![listn(
                10,
                20,
                &[("null", false, false), ("a", false, true)],
            )]),
            "says a IsLatest, older than the null version",
        );
        flagged(
            with(vec![listn(
                10,
                20,
                &[
                    ("null", false, true),
                    ("a", false, false),
                    ("null", true, false),
                ],
            )]),
            "shows 2 null entries, not one",
        );
        flagged(
            with(vec![listn(
                10,
                20,
                &[
                    ("x", false, true),
                    ("null", false, false),
                    ("a", false, false),
                ],
            )]),
            "shows version x, no write made while versioning was enabled",
        );
    }

    #[test]
    fn version_reads_are_checked() {
        flagged(
            vec![putv(1, "a", 0, 10), getv("a", 20, 30, Read::Absent)],
            "says NoSuchVersion",
        );
        flagged(
            vec![
                putv(1, "a", 0, 10),
                putv(2, "b", 0, 10),
                getv("a", 20, 30, Read::Value(2, body_of(2, 100))),
            ],
            "returned write 2",
        );
        let mut bad = body_of(1, 100);
        bad[50] ^= 1;
        flagged(
            vec![putv(1, "a", 0, 10), getv("a", 20, 30, Read::Value(1, bad))],
            "returned write 1 (100 bytes), not write 1",
        );
        flagged(
            vec![
                putv(1, "a", 0, 10),
                delv("a", 20, 30),
                getv("a", 40, 50, Read::Value(1, body_of(1, 100))),
            ],
            "returned it, deleted before",
        );
        clean(vec![
            putv(1, "a", 0, 10),
            getv("a", 20, 30, Read::Value(1, body_of(1, 100))),
            // A delete concurrent with the read: either answer.
            delv("a", 35, 60),
            getv("a", 40, 50, Read::Absent),
            getv("a", 41, 51, Read::Value(1, body_of(1, 100))),
            getv("a", 70, 80, Read::Absent),
        ]);
    }

    fn unknown_put(key: &str, id: u64, start: u64, end: u64) -> Op {
        let kind = Kind::Put {
            id,
            size: 100,
            parts: 1,
        };
        op(key, start, end, kind, Outcome::Unknown("timeout".into()))
    }

    #[test]
    fn an_unknown_write_that_appears_vanishes_and_appears_again_is_caught() {
        let ops = vec![
            put("k", 1, 0, 10),
            unknown_put("k", 2, 20, 25),
            get("k", 30, 31, Some(2)),
            get("k", 40, 41, Some(1)),
            get("k", 50, 51, Some(2)),
        ];
        // Each read alone is possible: only the search over the whole
        // history sees it.
        let mut alone = Vec::new();
        check_reads(&ops, &mut alone);
        assert!(alone.is_empty(), "{alone:?}");
        flagged(ops, "not linearizable");
        // A deleted key that comes back after an unknown delete.
        flagged(
            vec![
                put("k", 1, 0, 10),
                op("k", 20, 25, Kind::Delete, Outcome::Unknown("503".into())),
                get("k", 30, 31, None),
                get("k", 40, 41, Some(1)),
            ],
            "not linearizable",
        );
        // Two reads that see two concurrent writes in both orders.
        flagged(
            vec![
                put("k", 1, 0, 100),
                put("k", 2, 0, 100),
                get("k", 10, 20, Some(1)),
                get("k", 30, 40, Some(2)),
                get("k", 50, 60, Some(1)),
            ],
            "not linearizable",
        );
    }

    #[test]
    fn unknown_writes_taking_effect_once_or_never_pass() {
        clean(vec![
            put("k", 1, 0, 10),
            unknown_put("k", 2, 20, 25),
            unknown_put("k", 3, 21, 26),
            get("k", 30, 31, Some(1)),
            get("k", 40, 41, Some(3)),
            get("k", 50, 51, Some(3)),
            put("k", 4, 60, 70),
            get("k", 80, 81, Some(4)),
        ]);
        // Many unknown writes: the search stays within its budget.
        let mut ops = vec![put("k", 1, 0, 10)];
        for i in 0..40 {
            ops.push(unknown_put("k", 100 + i, 20 + i, 21 + i));
        }
        ops.push(get("k", 100, 101, Some(120)));
        ops.push(get("k", 110, 111, Some(139)));
        clean(ops);
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
