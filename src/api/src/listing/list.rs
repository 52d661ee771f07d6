//! ListObjects (v1) and ListObjectsV2: keys in byte order, common prefixes
//! rolled up by a delimiter of any length, pagination by marker or by an
//! opaque continuation token.

use std::sync::Arc;

use base64::Engine;
use garage_model::object_table::ObjectFilter;
use garage_util::data::Uuid;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Access;
use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::request::Ctx;

/// Entries asked of the object table per round.
pub(crate) const BATCH: usize = 1000;
/// Entries asked in the round after a jump over a common prefix.
const AFTER_JUMP: usize = 32;
/// Most keys a listing returns, whatever max-keys says.
const MAX_KEYS: usize = 1000;
/// Sorts after every string that starts with the same prefix, in practice
/// (no UTF-8 key contains it).
pub(crate) const AFTER_ALL: char = '\u{10FFFF}';

pub struct ListQuery {
    pub bucket: Uuid,
    pub prefix: String,
    pub delimiter: Option<String>,
    /// List only what sorts after this (a key, or a common prefix already
    /// returned).
    pub after: Option<String>,
    pub max_keys: usize,
}

pub struct Listed {
    pub key: String,
    pub size: u64,
    pub etag: String,
    pub timestamp: u64,
    /// `None` for `STANDARD`.
    pub storage_class: Option<String>,
    /// The stored checksum's algorithm and type.
    pub checksum: Option<(ChecksumAlgorithm, ChecksumType)>,
}

#[derive(Default)]
pub struct ListResult {
    pub objects: Vec<Listed>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// The last key or prefix returned.
    pub last: Option<String>,
}

/// `allow-unordered=true` (Ceph's extension, sent by its test suite):
/// with a delimiter, refused as Ceph refuses it (`InvalidArgument`);
/// alone, served in order (which is one unordered order).
fn check_unordered(query: Option<&str>, delimiter: Option<&str>) -> ApiResult<()> {
    let unordered = query.is_some_and(|q| {
        q.split('&')
            .any(|kv| kv.eq_ignore_ascii_case("allow-unordered=true"))
    });
    if unordered && delimiter.is_some() {
        return Err(ApiError::InvalidArgument(
            "allow-unordered cannot be used with a delimiter".into(),
        ));
    }
    Ok(())
}

impl Api {
    pub async fn list(&self, q: &ListQuery) -> ApiResult<ListResult> {
        let mut res = ListResult::default();
        if q.max_keys == 0 {
            return Ok(res);
        }
        let after = q.after.clone().unwrap_or_default();
        // Keys <= `skip` are not listed.
        let mut skip = after.clone();
        let mut start = if after > q.prefix {
            after.clone()
        } else {
            q.prefix.clone()
        };
        let mut count = 0;
        let delimiter = q.delimiter.as_deref().filter(|d| !d.is_empty());
        // The common prefix being rolled up: the keys under it that follow
        // in the same batch are passed over without a new read.
        let mut rolled: Option<String> = None;
        // Entries asked per round: after a jump over a common prefix, few
        // (the next key may open another prefix at once), then doubling
        // while the keys keep coming, up to BATCH.
        let mut limit = BATCH;
        // Each round moves `start` forward; the bound is a safety net.
        'rounds: for _ in 0..1_000_000 {
            let batch = self
                .objects
                .get_range(
                    &q.bucket,
                    Some(start.clone()),
                    Some(ObjectFilter::IsData),
                    limit,
                    false,
                )
                .await?;
            let full = batch.len() >= limit;
            for o in batch.iter() {
                if o.key <= skip {
                    continue;
                }
                if !o.key.starts_with(&q.prefix) {
                    break 'rounds;
                }
                if rolled.as_ref().is_some_and(|cp| o.key.starts_with(cp)) {
                    continue;
                }
                rolled = None;
                // The current version deleted by its id: the one now
                // current is in the history (one more read, for this key).
                let resolved;
                let v = match o.last_data() {
                    Some(v) => v,
                    None => match self.current_in(q.bucket, &o.key, Some(o.clone())).await {
                        Ok(f) => {
                            resolved = f.version;
                            &resolved
                        }
                        Err(ApiError::NoSuchKey(_) | ApiError::DeleteMarker { .. }) => continue,
                        Err(e) => return Err(e),
                    },
                };
                let rest = &o.key[q.prefix.len()..];
                let common = delimiter.and_then(|d| {
                    rest.find(d)
                        .map(|i| format!("{}{}", q.prefix, &rest[..i + d.len()]))
                });
                if let Some(cp) = common {
                    if !after.starts_with(&cp) {
                        if count == q.max_keys {
                            res.truncated = true;
                            break 'rounds;
                        }
                        count += 1;
                        res.prefixes.push(cp.clone());
                        res.last = Some(cp.clone());
                    }
                    rolled = Some(cp);
                    continue;
                }
                if count == q.max_keys {
                    res.truncated = true;
                    break 'rounds;
                }
                count += 1;
                let (size, etag, storage_class, checksum) = match &v.state {
                    garage_model::object_table::ObjectVersionState::Complete(
                        garage_model::object_table::ObjectVersionData::Inline(m, _)
                        | garage_model::object_table::ObjectVersionData::FirstBlock(m, _),
                    ) => (
                        m.size,
                        m.etag.clone(),
                        m.storage_class.clone(),
                        crate::objects::checksum::listed(&m.headers),
                    ),
                    _ => (0, String::new(), None, None),
                };
                res.objects.push(Listed {
                    key: o.key.clone(),
                    size,
                    etag,
                    timestamp: v.timestamp,
                    storage_class,
                    checksum,
                });
                res.last = Some(o.key.clone());
            }
            if !full {
                break;
            }
            let last = batch.last().expect("full batch").key.clone();
            match &rolled {
                // The batch ended inside a common prefix: jump over the
                // rest of it.
                Some(cp) if last.starts_with(cp.as_str()) => {
                    start = format!("{cp}{AFTER_ALL}");
                    skip = skip.max(start.clone());
                    limit = AFTER_JUMP;
                }
                _ => {
                    skip = skip.max(last.clone());
                    start = last;
                    limit = (limit * 2).min(BATCH);
                }
            }
        }
        Ok(res)
    }

    pub async fn list_objects_v2(
        self: Arc<Self>,
        req: S3Request<ListObjectsV2Input>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<ListObjectsV2Output>> {
        let who = ctx.who;
        let i = req.input;
        check_unordered(req.uri.query(), i.delimiter.as_deref())?;
        let bucket = ctx.granted.bucket;
        let token_after = i
            .continuation_token
            .as_deref()
            .map(decode_token)
            .transpose()?;
        let after = match (token_after, i.start_after.clone()) {
            (Some(t), Some(s)) => Some(t.max(s)),
            (t, s) => t.or(s),
        };
        let max_keys = max_keys(i.max_keys)?;
        let q = ListQuery {
            bucket,
            prefix: i.prefix.clone().unwrap_or_default(),
            delimiter: i.delimiter.clone(),
            after,
            max_keys,
        };
        let r = self.list(&q).await?;
        let url = url_encoding(&i.encoding_type)?;
        let owner = i
            .fetch_owner
            .unwrap_or(false)
            .then(|| who.owner())
            .flatten();
        let key_count = (r.objects.len() + r.prefixes.len()) as i32;
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: Some(enc(url, &q.prefix)),
            delimiter: i.delimiter.as_deref().map(|d| enc(url, d)),
            start_after: i.start_after.as_deref().map(|s| enc(url, s)),
            max_keys: Some(max_keys as i32),
            key_count: Some(key_count),
            continuation_token: i.continuation_token,
            next_continuation_token: r
                .truncated
                .then(|| r.last.as_deref().map(encode_token))
                .flatten(),
            is_truncated: Some(r.truncated),
            encoding_type: i.encoding_type,
            contents: Some(contents(&r, url, owner)),
            common_prefixes: Some(prefixes(&r, url)),
            ..Default::default()
        }))
    }

    pub async fn list_objects(
        self: Arc<Self>,
        req: S3Request<ListObjectsInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<ListObjectsOutput>> {
        let who = ctx.who;
        let i = req.input;
        check_unordered(req.uri.query(), i.delimiter.as_deref())?;
        let bucket = ctx.granted.bucket;
        let max_keys = max_keys(i.max_keys)?;
        let q = ListQuery {
            bucket,
            prefix: i.prefix.clone().unwrap_or_default(),
            delimiter: i.delimiter.clone(),
            after: i.marker.clone().filter(|m| !m.is_empty()),
            max_keys,
        };
        let r = self.list(&q).await?;
        let url = url_encoding(&i.encoding_type)?;
        let owner = who.owner();
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(i.bucket),
            prefix: Some(enc(url, &q.prefix)),
            delimiter: i.delimiter.as_deref().map(|d| enc(url, d)),
            marker: Some(i.marker.as_deref().map(|m| enc(url, m)).unwrap_or_default()),
            max_keys: Some(max_keys as i32),
            is_truncated: Some(r.truncated),
            next_marker: r
                .truncated
                .then(|| r.last.as_deref().map(|l| enc(url, l)))
                .flatten(),
            encoding_type: i.encoding_type,
            contents: Some(contents(&r, url, owner)),
            common_prefixes: Some(prefixes(&r, url)),
            ..Default::default()
        }))
    }
}

pub(crate) fn max_keys(m: Option<i32>) -> ApiResult<usize> {
    match m {
        None => Ok(MAX_KEYS),
        Some(n) if n < 0 => Err(ApiError::InvalidArgument(
            "max-keys must be between 0 and 2147483647".into(),
        )),
        Some(n) => Ok((n as usize).min(MAX_KEYS)),
    }
}

pub(crate) fn url_encoding(e: &Option<EncodingType>) -> ApiResult<bool> {
    match e {
        None => Ok(false),
        Some(e) if e.as_str() == "url" => Ok(true),
        Some(e) => Err(ApiError::InvalidArgument(format!(
            "Invalid Encoding Method specified in Request: {}",
            e.as_str()
        ))),
    }
}

/// `encoding-type=url`: everything but unreserved characters and `/` is
/// percent-encoded.
pub(crate) fn enc(url: bool, s: &str) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const SET: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/');
    if url {
        utf8_percent_encode(s, SET).to_string()
    } else {
        s.to_string()
    }
}

fn contents(r: &ListResult, url: bool, owner: Option<Owner>) -> Vec<Object> {
    r.objects
        .iter()
        .map(|o| Object {
            key: Some(enc(url, &o.key)),
            size: Some(o.size as i64),
            e_tag: Some(ETag::Strong(o.etag.clone())),
            last_modified: Some(meta::timestamp(o.timestamp)),
            storage_class: Some(ObjectStorageClass::from(
                crate::storage_class::reported(o.storage_class.as_deref()).to_string(),
            )),
            owner: owner.clone(),
            checksum_algorithm: o.checksum.as_ref().map(|(a, _)| vec![a.clone()]),
            checksum_type: o.checksum.as_ref().map(|(_, t)| t.clone()),
            ..Default::default()
        })
        .collect()
}

fn prefixes(r: &ListResult, url: bool) -> Vec<CommonPrefix> {
    r.prefixes
        .iter()
        .map(|p| CommonPrefix {
            prefix: Some(enc(url, p)),
        })
        .collect()
}

fn encode_token(last: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last.as_bytes())
}

fn decode_token(t: &str) -> ApiResult<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            ApiError::InvalidArgument("The continuation token provided is incorrect".into())
        })
}

#[cfg(test)]
mod tests {

    #[test]
    fn unordered_listing_is_refused_with_a_delimiter() {
        assert!(check_unordered(Some("allow-unordered=true&delimiter=%2F"), Some("/")).is_err());
        assert!(check_unordered(Some("allow-unordered=true"), None).is_ok());
        assert!(check_unordered(Some("list-type=2"), Some("/")).is_ok());
        assert!(check_unordered(None, None).is_ok());
    }

    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_are_refused() {
        let t = encode_token("a/b c/é");
        assert_eq!(decode_token(&t).unwrap(), "a/b c/é");
        assert!(decode_token("***").is_err());
    }

    #[test]
    fn url_encoding_keeps_slashes() {
        assert_eq!(enc(true, "a b/c+d"), "a%20b/c%2Bd");
        assert_eq!(enc(false, "a b"), "a b");
    }
}
