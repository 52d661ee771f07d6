//! ListObjectVersions: every version of every key, keys in byte order and
//! each key's versions newest first, delete markers included; common
//! prefixes rolled up by a delimiter; pages by key marker and version id
//! marker.
//!
//! Two range reads walk side by side: the object table (the keys, their
//! current versions and their null versions) and the history table (the
//! versions with ids of their own, newest first per key). A version in
//! both (a current one) is listed once. A key with 100 000 versions is
//! paged like any other listing: each page reads at most what it lists,
//! plus one batch.

use std::collections::VecDeque;
use std::sync::Arc;

use garage_model::history_table::{HistoryKey, HistoryTable};
use garage_model::object_table::{
    Head, ObjectTable, ObjectVersion, ObjectVersionData, ObjectVersionState, VersionId,
};
use garage_table::{Entry, Table, TableSchema};
use garage_util::data::Uuid;
use s3s::dto;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Access;
use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::listing::list::{enc, max_keys, url_encoding, AFTER_ALL, BATCH};
use crate::meta;
use crate::request::Ctx;
use crate::versions::versioning::parse_version_id;

/// A table's partition, read in batches from a sort key on.
struct Cursor<F: TableSchema> {
    buf: VecDeque<F::E>,
    /// Next read starts here (included)...
    from: F::S,
    /// ... and skips entries up to this sort key (included).
    after: Option<F::S>,
    done: bool,
}

impl<F: TableSchema> Cursor<F>
where
    F::S: Ord,
{
    fn new(from: F::S) -> Self {
        Self {
            buf: VecDeque::new(),
            from,
            after: None,
            done: false,
        }
    }

    async fn peek(&mut self, table: &Table<F>, p: &F::P) -> ApiResult<Option<&F::E>> {
        while self.buf.is_empty() && !self.done {
            let batch = table
                .get_range(p, Some(self.from.clone()), None, BATCH, false)
                .await?;
            self.done = batch.len() < BATCH;
            if let Some(last) = batch.last() {
                self.from = last.sort_key().clone();
            }
            let after = self.after.replace(self.from.clone());
            self.buf.extend(
                batch
                    .into_iter()
                    .filter(|e| after.as_ref().is_none_or(|a| e.sort_key() > a)),
            );
        }
        Ok(self.buf.front())
    }

    /// Goes on from `from` (included), forgetting what was read.
    fn jump(&mut self, from: F::S) {
        *self = Self::new(from);
    }
}

/// One listed version.
pub struct ListedVersion {
    pub key: String,
    pub version: ObjectVersion,
    pub latest: bool,
}

#[derive(Default)]
pub struct VersionListing {
    pub versions: Vec<ListedVersion>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// Where the next page starts: the last key (or common prefix) and
    /// version listed.
    pub next: Option<(String, Option<String>)>,
}

pub struct VersionQuery {
    pub bucket: Uuid,
    pub prefix: String,
    pub delimiter: Option<String>,
    pub key_marker: Option<String>,
    pub version_id_marker: Option<String>,
    pub max_keys: usize,
}

impl Api {
    pub async fn list_versions(&self, q: &VersionQuery) -> ApiResult<VersionListing> {
        let mut res = VersionListing::default();
        if q.max_keys == 0 {
            return Ok(res);
        }
        let bucket = q.bucket;
        let mut objs = Cursor::<ObjectTable>::new(q.prefix.clone());
        let mut hist = Cursor::<HistoryTable>::new(HistoryKey::first_of(&q.prefix));
        // Resuming inside a key: only its versions older than this one.
        let mut resume: Option<(String, HistoryKey)> = None;
        match (&q.key_marker, &q.version_id_marker) {
            (None, _) => {}
            (Some(km), None) => {
                if *km >= q.prefix {
                    objs.jump(km.clone());
                    objs.after = Some(km.clone());
                    hist.jump(HistoryKey::after(km));
                }
            }
            (Some(km), Some(vm)) => {
                let pos = match parse_version_id(vm)? {
                    VersionId::Id(ts, uuid) => Some(HistoryKey::of(km, ts, uuid)),
                    VersionId::Null => self
                        .objects
                        .get(&bucket, km)
                        .await?
                        .and_then(|o| o.null_versions().next().map(|v| v.sort_key()))
                        .map(|(ts, uuid)| HistoryKey::of(km, ts, uuid)),
                };
                if *km >= q.prefix {
                    match pos {
                        Some(pos) => {
                            objs.jump(km.clone());
                            hist.jump(pos.clone());
                            hist.after = Some(pos.clone());
                            resume = Some((km.clone(), pos));
                        }
                        None => {
                            objs.jump(km.clone());
                            objs.after = Some(km.clone());
                            hist.jump(HistoryKey::after(km));
                        }
                    }
                }
            }
        }
        let mut count = 0;
        // Each round lists a key or a prefix, or ends; the bound is a
        // safety net.
        'keys: for _ in 0..10_000_000 {
            let ok = objs
                .peek(&self.objects, &bucket)
                .await?
                .map(|o| o.key.clone());
            let hk = hist
                .peek(&self.history, &bucket)
                .await?
                .map(|h| h.key.clone());
            let k = match (ok.as_ref(), hk.as_ref()) {
                (Some(a), Some(b)) => a.min(b).clone(),
                (Some(a), None) => a.clone(),
                (None, Some(b)) => b.clone(),
                (None, None) => break,
            };
            if !k.starts_with(&q.prefix) {
                break;
            }
            let rest = &k[q.prefix.len()..];
            let common = q
                .delimiter
                .as_deref()
                .filter(|d| !d.is_empty())
                .and_then(|d| {
                    rest.find(d)
                        .map(|i| format!("{}{}", q.prefix, &rest[..i + d.len()]))
                });
            if let Some(cp) = common {
                let listed = q.key_marker.as_ref().is_some_and(|m| m.starts_with(&cp));
                if !listed {
                    if count == q.max_keys {
                        res.truncated = true;
                        break;
                    }
                    count += 1;
                    res.prefixes.push(cp.clone());
                    res.next = Some((cp.clone(), None));
                }
                let past = format!("{cp}{AFTER_ALL}");
                hist.jump(HistoryKey::first_of(&past));
                objs.jump(past);
                continue;
            }

            // The key's versions in its entry (current, null), in the
            // history's order, then merged with the history's.
            let entry = match ok.as_ref() == Some(&k) {
                true => objs.buf.pop_front(),
                false => None,
            };
            let mut in_entry: Vec<(HistoryKey, ObjectVersion)> = entry
                .iter()
                .flat_map(|o| o.versions().iter())
                .filter(|v| v.is_complete())
                .map(|v| (HistoryKey::of(&k, v.timestamp, v.uuid), v.clone()))
                .collect();
            in_entry.sort_by(|a, b| a.0.cmp(&b.0));
            let mut in_entry: VecDeque<_> = in_entry.into();
            let head = entry.as_ref().and_then(|o| match o.head() {
                Head::Version(v) => Some((v.uuid, HistoryKey::of(&k, v.timestamp, v.uuid))),
                _ => None,
            });
            // Entries and history are read in separate batches: a write
            // that completed in between is in the history, newer than the
            // entry's head. The newest version listed is then the latest
            // (not the head, which it overwrote).
            let mut head_overtaken = false;
            let resume_here = resume.take().filter(|(rk, _)| *rk == k).map(|(_, p)| p);
            let mut first = resume_here.is_none();
            for _ in 0..100_000_000u64 {
                let h = hist
                    .peek(&self.history, &bucket)
                    .await?
                    .filter(|h| h.key == k);
                let hpos = h.map(|h| h.hkey.clone());
                let epos = in_entry.front().map(|(p, _)| p.clone());
                let from_history = match (&hpos, &epos) {
                    (None, None) => break,
                    (Some(hp), Some(ep)) => hp <= ep,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                };
                let next = match from_history {
                    true => {
                        // Listed once when in both.
                        if epos.is_some() && epos == hpos {
                            in_entry.pop_front();
                        }
                        hist.buf.pop_front().map(|h| (h.hkey, h.version))
                    }
                    false => in_entry.pop_front(),
                };
                let Some((pos, v)) = next else { break };
                if resume_here.as_ref().is_some_and(|r| pos <= *r) {
                    continue;
                }
                if count == q.max_keys {
                    res.truncated = true;
                    break 'keys;
                }
                count += 1;
                let latest = match &head {
                    Some((_, hpos)) if first && pos < *hpos => {
                        head_overtaken = true;
                        true
                    }
                    Some((u, _)) => *u == v.uuid && !head_overtaken,
                    None => first,
                };
                first = false;
                res.next = Some((k.clone(), Some(v.version_id().to_string())));
                res.versions.push(ListedVersion {
                    key: k.clone(),
                    version: v,
                    latest,
                });
            }
        }
        Ok(res)
    }

    pub async fn list_object_versions(
        self: Arc<Self>,
        req: S3Request<dto::ListObjectVersionsInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<dto::ListObjectVersionsOutput>> {
        let who = ctx.who;
        let i = req.input;
        let bucket = ctx.granted.bucket;
        let max_keys = max_keys(i.max_keys)?;
        let key_marker = i.key_marker.clone().filter(|m| !m.is_empty());
        let version_id_marker = i.version_id_marker.clone().filter(|m| !m.is_empty());
        if version_id_marker.is_some() && key_marker.is_none() {
            return Err(ApiError::InvalidArgument(
                "A version-id marker cannot be specified without a key marker.".into(),
            ));
        }
        let q = VersionQuery {
            bucket,
            prefix: i.prefix.clone().unwrap_or_default(),
            delimiter: i.delimiter.clone(),
            key_marker,
            version_id_marker,
            max_keys,
        };
        let r = self.list_versions(&q).await?;
        let url = url_encoding(&i.encoding_type)?;
        let owner = who.owner();
        let mut versions = Vec::new();
        let mut markers = Vec::new();
        for l in r.versions {
            let id = Some(l.version.version_id().to_string());
            let modified = Some(meta::timestamp(l.version.timestamp));
            match &l.version.state {
                ObjectVersionState::Complete(ObjectVersionData::Inline(m, _))
                | ObjectVersionState::Complete(ObjectVersionData::FirstBlock(m, _)) => versions
                    .push(dto::ObjectVersion {
                        key: Some(enc(url, &l.key)),
                        version_id: id,
                        is_latest: Some(l.latest),
                        e_tag: Some(dto::ETag::Strong(m.etag.clone())),
                        size: Some(m.size as i64),
                        last_modified: modified,
                        owner: owner.clone(),
                        storage_class: Some(dto::ObjectVersionStorageClass::from(
                            crate::storage_class::reported(m.storage_class.as_deref()).to_string(),
                        )),
                        checksum_algorithm: crate::objects::checksum::listed(&m.headers)
                            .map(|(a, _)| vec![a]),
                        checksum_type: crate::objects::checksum::listed(&m.headers).map(|(_, t)| t),
                        ..Default::default()
                    }),
                _ => markers.push(dto::DeleteMarkerEntry {
                    key: Some(enc(url, &l.key)),
                    version_id: id,
                    is_latest: Some(l.latest),
                    last_modified: modified,
                    owner: owner.clone(),
                }),
            }
        }
        let (next_key, next_version) = match (r.truncated, r.next) {
            (true, Some((k, v))) => (Some(enc(url, &k)), v),
            _ => (None, None),
        };
        Ok(S3Response::new(dto::ListObjectVersionsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(url, &q.prefix)),
            delimiter: i.delimiter.as_deref().map(|d| enc(url, d)),
            key_marker: Some(i.key_marker.unwrap_or_default()),
            version_id_marker: Some(i.version_id_marker.unwrap_or_default()),
            max_keys: Some(max_keys as i32),
            is_truncated: Some(r.truncated),
            next_key_marker: next_key,
            next_version_id_marker: next_version,
            encoding_type: i.encoding_type,
            versions: Some(versions),
            delete_markers: Some(markers),
            common_prefixes: Some(
                r.prefixes
                    .iter()
                    .map(|p| dto::CommonPrefix {
                        prefix: Some(enc(url, p)),
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }
}
