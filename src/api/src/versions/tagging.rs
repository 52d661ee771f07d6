//! Object and bucket tagging, with S3's limits and errors.
//!
//! An object version is written with the tags of its `x-amz-tagging`
//! header (PutObject, CreateMultipartUpload, CopyObject with the tagging
//! directive), kept in its headers under [`TAGGING_HEADER`] in a canonical
//! form; PutObjectTagging and DeleteObjectTagging replace them later
//! through the object entry's per-version tag sets (last writer wins, see
//! `garage_model::object_table`). A bucket's tags are a last-writer-wins
//! register of the bucket entry. See `doc/tagging.md`.

use garage_model::notify::{Cause, Op};
use std::sync::Arc;

use s3s::dto::*;
use s3s::{S3Request, S3Response};

use garage_util::data::Uuid;

use crate::ctx::{check_key, Api};
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, KeyBucket, Owned};
use crate::versions::versioning::Found;

pub use garage_model::tags::{stored_tags, version_tags, written_tags, Tags, TAGGING_HEADER};
/// S3's limits.
pub const MAX_OBJECT_TAGS: usize = 10;
pub const MAX_BUCKET_TAGS: usize = 50;
const MAX_KEY_CHARS: usize = 128;
const MAX_VALUE_CHARS: usize = 256;

/// Checks a tag set against S3's rules: at most `max` tags, keys of 1 to
/// 128 characters, values of at most 256, each key once, no key in the
/// reserved `aws:` namespace.
pub fn check_tags(tags: &Tags, max: usize) -> ApiResult<()> {
    if tags.len() > max {
        return Err(ApiError::TooManyTags(format!(
            "Object tags cannot be greater than {max}"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > MAX_KEY_CHARS {
            return Err(ApiError::InvalidTag(format!(
                "The TagKey you have provided is invalid: {k:?} (1 to {MAX_KEY_CHARS} characters)"
            )));
        }
        if v.chars().count() > MAX_VALUE_CHARS {
            return Err(ApiError::InvalidTag(format!(
                "The TagValue you have provided is invalid: at most {MAX_VALUE_CHARS} characters (key {k:?})"
            )));
        }
        if k.to_ascii_lowercase().starts_with("aws:") {
            return Err(ApiError::InvalidTag(format!(
                "Your TagKey cannot be prefixed with aws: ({k:?})"
            )));
        }
        if !seen.insert(k.as_str()) {
            return Err(ApiError::InvalidTag(format!(
                "Cannot provide multiple Tags with the same key ({k:?})"
            )));
        }
    }
    Ok(())
}

/// Parses the `x-amz-tagging` header (`k1=v1&k2=v2`, URL-encoded) and
/// checks it as an object's tag set.
pub fn parse_header(h: &str) -> ApiResult<Tags> {
    let tags: Tags = form_urlencoded::parse(h.as_bytes())
        .filter(|(k, v)| !(k.is_empty() && v.is_empty()))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    check_tags(&tags, MAX_OBJECT_TAGS)?;
    Ok(tags)
}

/// The header value that [`parse_header`] reads back as `tags`.
pub fn encode_header(tags: &Tags) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in tags {
        s.append_pair(k, v);
    }
    s.finish()
}

/// Replaces the tags among `headers` by `tags` (none: removed).
pub fn set_in_headers(headers: &mut Vec<(String, String)>, tags: &Tags) {
    headers.retain(|(k, _)| k != TAGGING_HEADER);
    if !tags.is_empty() {
        headers.push((TAGGING_HEADER.to_string(), encode_header(tags)));
    }
}

/// The tag set of a PostObject form's `tagging` field: an XML `Tagging`
/// document, as the body of PutObjectTagging.
pub fn parse_form_field(xml: &str) -> ApiResult<Tags> {
    let mut d = s3s::xml::Deserializer::new(xml.trim().as_bytes());
    let t = <Tagging as s3s::xml::Deserialize>::deserialize(&mut d).map_err(|e| {
        ApiError::MalformedXml(format!(
            "the form's tagging field is not a Tagging document: {e}"
        ))
    })?;
    from_xml(t, MAX_OBJECT_TAGS)
}

/// The tag set of a request body, checked against `max`.
fn from_xml(t: Tagging, max: usize) -> ApiResult<Tags> {
    let tags: Tags = t
        .tag_set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect();
    check_tags(&tags, max)?;
    Ok(tags)
}

fn to_xml(tags: Tags) -> TagSet {
    tags.into_iter()
        .map(|(k, v)| Tag {
            key: Some(k),
            value: Some(v),
        })
        .collect()
}

impl Api {
    /// The version a tagging request names (the current one, or the one
    /// its `versionId` names).
    async fn tagged_object(
        &self,
        id: Uuid,
        key: &str,
        version_id: Option<&str>,
    ) -> ApiResult<Found> {
        check_key(key)?;
        self.find_version(id, key, version_id)
            .await
            .map_err(|e| match e {
                // S3 answers 405 for a delete marker, named or current.
                ApiError::DeleteMarker {
                    key,
                    version_id,
                    last_modified,
                    ..
                } => ApiError::DeleteMarker {
                    key,
                    version_id,
                    last_modified,
                    by_id: true,
                },
                e => e,
            })
    }

    /// Writes `tags` as the current tag set of the version found: in its
    /// object entry when it is there (one quorum write of the entry as
    /// read, with the new set, timestamped after the set read), else in
    /// its history entry.
    async fn write_tags(&self, f: &Found, tags: Tags, cause: &Cause) -> ApiResult<()> {
        match (&f.history, &f.obj) {
            (Some(h), _) => {
                let mut e = h.clone();
                e.tags.update(Some(tags));
                self.writer.update_entries(None, Some(&e), cause).await?;
            }
            (None, Some(obj)) => {
                let mut e = obj.clone();
                e.set_tags(f.version.uuid, tags.clone());
                if f.version.in_history() {
                    // Its history entry too: the set must stay once the
                    // version is no longer current.
                    // Stamped as in the object entry (after the set
                    // read there), not by this node's clock alone: while
                    // the version is current, every tag write goes through
                    // the object entry, so its stamps order them.
                    let mut h = garage_model::history_table::HistoryEntry::new(
                        obj.bucket_id,
                        &obj.key,
                        f.version.clone(),
                    );
                    let ts = e
                        .tags_stamp(&f.version.uuid)
                        .unwrap_or_else(garage_util::time::stamp);
                    h.tags = garage_util::crdt::Lww::raw(ts, Some(tags));
                    self.writer
                        .update_entries(Some(&e), Some(&h), cause)
                        .await?;
                } else {
                    self.writer.update_entries(Some(&e), None, cause).await?;
                }
            }
            (None, None) => return Err(ApiError::NoSuchKey(String::new())),
        }
        Ok(())
    }

    pub async fn put_object_tagging(
        self: Arc<Self>,
        req: S3Request<PutObjectTaggingInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<PutObjectTaggingOutput>> {
        let i = req.input;
        let tags = from_xml(i.tagging, MAX_OBJECT_TAGS)?;
        let f = self
            .tagged_object(ctx.granted.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let cause = crate::request::cause(&req.extensions, &ctx.who, Op::TaggingPut);
        self.write_tags(&f, tags, &cause).await?;
        Ok(S3Response::new(PutObjectTaggingOutput {
            version_id: f.version_id(),
        }))
    }

    pub async fn get_object_tagging(
        self: Arc<Self>,
        req: S3Request<GetObjectTaggingInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetObjectTaggingOutput>> {
        let i = req.input;
        let f = self
            .tagged_object(ctx.granted.bucket, &i.key, i.version_id.as_deref())
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: to_xml(f.tags()),
            version_id: f.version_id(),
        }))
    }

    pub async fn delete_object_tagging(
        self: Arc<Self>,
        req: S3Request<DeleteObjectTaggingInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<DeleteObjectTaggingOutput>> {
        let i = req.input;
        let f = self
            .tagged_object(ctx.granted.bucket, &i.key, i.version_id.as_deref())
            .await?;
        let cause = crate::request::cause(&req.extensions, &ctx.who, Op::TaggingDelete);
        self.write_tags(&f, Vec::new(), &cause).await?;
        let mut resp = S3Response::new(DeleteObjectTaggingOutput {
            version_id: f.version_id(),
        });
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub async fn put_bucket_tagging(
        self: Arc<Self>,
        req: S3Request<PutBucketTaggingInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketTaggingOutput>> {
        let i = req.input;
        let tags = from_xml(i.tagging, MAX_BUCKET_TAGS)?;
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.tags.update(Some(tags))).await?;
        Ok(S3Response::new(PutBucketTaggingOutput::default()))
    }

    pub async fn get_bucket_tagging(
        self: Arc<Self>,
        _req: S3Request<GetBucketTaggingInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketTaggingOutput>> {
        let b = ctx.granted.bucket;
        let tags = b
            .params()
            .and_then(|p| p.tags.get().clone())
            .ok_or(ApiError::NoSuchTagSet)?;
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: to_xml(tags),
        }))
    }

    pub async fn delete_bucket_tagging(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketTaggingInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketTaggingOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.tags.update(None)).await?;
        let mut resp = S3Response::new(DeleteBucketTaggingOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_tagging_field() {
        let xml = "<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>\r\n<Tag><Key>b c</Key><Value></Value></Tag></TagSet></Tagging>";
        assert_eq!(
            parse_form_field(xml).unwrap(),
            vec![
                ("a".to_string(), "1".to_string()),
                ("b c".to_string(), String::new())
            ]
        );
        assert!(matches!(
            parse_form_field("a=1"),
            Err(ApiError::MalformedXml(_))
        ));
        let many: String = (0..11)
            .map(|i| format!("<Tag><Key>k{i}</Key><Value>v</Value></Tag>"))
            .collect();
        assert!(parse_form_field(&format!("<Tagging><TagSet>{many}</TagSet></Tagging>")).is_err());
    }

    fn t(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_tagging_header_round_trips_and_is_checked() {
        let tags = t(&[("project", "blue sky"), ("a&b", "c=d/é")]);
        let h = encode_header(&tags);
        assert_eq!(parse_header(&h).unwrap(), tags);
        assert_eq!(parse_header("").unwrap(), Vec::new());
        assert_eq!(parse_header("k=").unwrap(), t(&[("k", "")]));
        let code = |r: ApiResult<Tags>| r.unwrap_err().code().as_str().to_string();
        let eleven: String = (0..11).map(|i| format!("k{i}=v&")).collect();
        assert_eq!(code(parse_header(&eleven)), "BadRequest");
        assert_eq!(code(parse_header("k=1&k=2")), "InvalidTag");
        assert_eq!(code(parse_header("aws:x=1")), "InvalidTag");
        assert_eq!(code(parse_header("=v")), "InvalidTag");
        let long_key = format!("{}=v", "k".repeat(129));
        assert_eq!(code(parse_header(&long_key)), "InvalidTag");
        assert!(parse_header(&format!("{}=v", "k".repeat(128))).is_ok());
        let long_value = format!("k={}", "v".repeat(257));
        assert_eq!(code(parse_header(&long_value)), "InvalidTag");
        // Characters, not bytes.
        assert!(parse_header(&encode_header(&t(&[("k", &"é".repeat(256))]))).is_ok());
        assert!(check_tags(&t(&[("a", "1"); 1]), MAX_BUCKET_TAGS).is_ok());
    }

    #[test]
    fn tags_in_headers_are_replaced() {
        let mut h = vec![("content-type".to_string(), "text/plain".to_string())];
        set_in_headers(&mut h, &t(&[("a", "1")]));
        assert_eq!(written_tags(&h), t(&[("a", "1")]));
        set_in_headers(&mut h, &t(&[("b", "2")]));
        assert_eq!(written_tags(&h), t(&[("b", "2")]));
        set_in_headers(&mut h, &Vec::new());
        assert_eq!(written_tags(&h), Vec::new());
        assert_eq!(h.len(), 1);
    }
}
