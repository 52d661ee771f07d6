//! DeleteObject and DeleteObjects: delete markers (one quorum write for
//! a whole DeleteObjects), conditional deletes and deletes of a version.

use garage_model::notify::{Cause, Op};
use std::sync::Arc;

use futures::StreamExt;
use garage_model::bucket_table::Versioning;
use garage_model::object_table::ObjectVersion;
use garage_model::object_write::ObjectWriter;
use garage_util::data::Uuid;
use hyper::StatusCode;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::{Access, Action, Decider};
use crate::conditional::WriteConditions;
use crate::ctx::{check_key, Api};
use crate::error::{ApiError, ApiResult};
use crate::request::Ctx;

impl Api {
    pub async fn delete_object(
        self: Arc<Self>,
        req: S3Request<DeleteObjectInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<DeleteObjectOutput>> {
        let (who, bucket) = (ctx.who, ctx.granted.bucket);
        let cause = crate::request::cause(&req.extensions, &who, Op::Delete);
        let i = req.input;
        check_key(&i.key)?;
        let cond = WriteConditions::of_delete(
            i.if_match.as_ref(),
            i.if_match_last_modified_time.as_ref(),
            i.if_match_size,
        );
        let mut out = DeleteObjectOutput::default();
        match i.version_id.as_deref() {
            Some(vid) => {
                if cond.is_some() {
                    return Err(ApiError::NotImplemented(
                        "conditional deletes of a version named by its id are not supported".into(),
                    ));
                }
                let bypass = self
                    .may_bypass(who.key.as_ref(), &i.bucket, i.bypass_governance_retention)
                    .await;
                let was_marker = self
                    .delete_version(bucket, &i.key, vid, bypass, &cause)
                    .await?;
                out.version_id = Some(vid.to_string());
                out.delete_marker = was_marker.then_some(true);
            }
            None if req
                .headers
                .contains_key(crate::objects::replica::REPLICA_HEADER) =>
            {
                let marker = self
                    .delete_as_replica(&req.headers, &who, bucket, &i.key, cause)
                    .await?;
                out.version_id = Some(marker.to_string());
                out.delete_marker = Some(true);
            }
            None => {
                let versioning = self.versioning_of(bucket).await?;
                let marker = self
                    .delete_one(bucket, &i.key, cond.as_ref(), versioning, &cause)
                    .await?;
                if versioning != Versioning::Off {
                    out.version_id = Some(marker.version_id().to_string());
                    out.delete_marker = Some(true);
                }
            }
        }
        let mut resp = S3Response::new(out);
        resp.status = Some(StatusCode::NO_CONTENT);
        Ok(resp)
    }

    /// Deletes `key`: one quorum write of a delete marker, or, when the
    /// delete has conditions, a conditional write of the marker through
    /// the object's register (see [`crate::conditional`]). Returns the
    /// marker.
    async fn delete_one(
        &self,
        bucket: Uuid,
        key: &str,
        cond: Option<&WriteConditions>,
        versioning: Versioning,
        cause: &Cause,
    ) -> ApiResult<ObjectVersion> {
        let marker = ObjectWriter::delete_marker(versioning);
        match cond {
            None => Ok(self
                .writer
                .write_version(bucket, key, &marker, None, cause)
                .await?),
            // Nothing to release when it is refused: a marker has no
            // blocks.
            Some(c) => self
                .commit_conditional(bucket, key, marker, c, true, cause)
                .await
                .map_err(|r| r.error),
        }
    }

    pub async fn delete_objects(
        self: Arc<Self>,
        req: S3Request<DeleteObjectsInput>,
        ctx: Ctx<Decider>,
    ) -> ApiResult<S3Response<DeleteObjectsOutput>> {
        let (who, decider) = (ctx.who, ctx.granted);
        let cause = crate::request::cause(&req.extensions, &who, Op::Delete);
        let i = req.input;
        check_delete_count(i.delete.objects.len())?;
        // Each key is decided on its own (a policy may deny some), on
        // the bucket's state read once.
        let bucket = decider.bucket;
        let mut allowed = Vec::new();
        let mut errors = Vec::new();
        for o in i.delete.objects {
            if let Err(e) = check_key(&o.key) {
                errors.push(key_error(o.key, o.version_id, &e));
                continue;
            }
            let action = Action::delete(&o.version_id);
            let tags = decider.existing_tags(&self, &who, &o.key).await?;
            match decider.decide(&who, action, Some(&o.key), None, tags.as_ref()) {
                Ok(_) => allowed.push(o),
                Err(e) => errors.push(key_error(o.key, o.version_id, &e)),
            }
        }
        let versioning = self.versioning_of(bucket).await?;
        let bypass = self
            .may_bypass(who.key.as_ref(), &i.bucket, i.bypass_governance_retention)
            .await;
        let quiet = i.delete.quiet.unwrap_or(false);
        let mut markers: Vec<(String, ObjectVersion)> = Vec::new();
        let mut deleted = Vec::new();
        // Keys with conditions, or with a version id: one by one, a few
        // at once.
        let mut one_by_one = Vec::new();
        for o in allowed {
            // `<ETag>*</ETag>`: the object exists (as the `If-Match: *`
            // header).
            let if_match = o.e_tag.map(|e| match e.value() {
                "*" => ETagCondition::Any,
                _ => ETagCondition::ETag(e),
            });
            let cond = WriteConditions::of_delete(
                if_match.as_ref(),
                o.last_modified_time.as_ref(),
                o.size,
            );
            match (cond, o.version_id) {
                (None, None) => {
                    markers.push((o.key, ObjectWriter::delete_marker(versioning)));
                }
                (c, vid) => one_by_one.push((o.key, c, vid)),
            }
        }
        let (this, cause) = (&self, &cause);
        let outcomes: Vec<(String, Option<String>, ApiResult<DeletedObject>)> =
            futures::stream::iter(one_by_one)
                .map(|(k, c, vid)| async move {
                    let r = match (&vid, &c) {
                        (Some(_), Some(_)) => Err(ApiError::NotImplemented(
                            "conditional deletes of a version named by its id are not supported"
                                .into(),
                        )),
                        (Some(v), None) => this
                            .delete_version(bucket, &k, v, bypass, cause)
                            .await
                            .map(|was_marker| DeletedObject {
                                key: Some(k.clone()),
                                version_id: Some(v.clone()),
                                delete_marker: was_marker.then_some(true),
                                ..Default::default()
                            }),
                        (None, c) => this
                            .delete_one(bucket, &k, c.as_ref(), versioning, cause)
                            .await
                            .map(|m| deleted_entry(k.clone(), None, &m)),
                    };
                    (k, vid, r)
                })
                .buffered(CONDITIONAL_DELETES_AT_ONCE)
                .collect()
                .await;
        if !markers.is_empty() {
            // The markers as written (one may have been stamped again).
            match self
                .writer
                .write_versions(bucket, &markers, cause)
                .await
                .map_err(ApiError::from)
            {
                Ok(written) => {
                    for (k, m) in written {
                        deleted.push(deleted_entry(k, None, &m));
                    }
                }
                Err(e) => {
                    for (k, _) in markers {
                        errors.push(key_error(k, None, &e));
                    }
                }
            }
        }
        for (k, vid, r) in outcomes {
            match r {
                Ok(d) => deleted.push(d),
                Err(e) => errors.push(key_error(k, vid, &e)),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: (!quiet).then_some(deleted),
            errors: Some(errors),
            ..Default::default()
        }))
    }
}

/// The DeleteObjects entry of a key deleted by writing `marker`: with the
/// marker's id when the bucket has versioning.
fn deleted_entry(key: String, version_id: Option<String>, marker: &ObjectVersion) -> DeletedObject {
    let versioned = marker.versioning != Versioning::Off;
    DeletedObject {
        key: Some(key),
        version_id,
        delete_marker: versioned.then_some(true),
        delete_marker_version_id: versioned.then(|| marker.version_id().to_string()),
    }
}

/// How many conditional deletes of one DeleteObjects request run at once.
const CONDITIONAL_DELETES_AT_ONCE: usize = 8;

/// A DeleteObjects error entry for `key`.
fn key_error(key: String, version_id: Option<String>, e: &ApiError) -> Error {
    Error {
        code: Some(e.code().as_str().to_string()),
        message: Some(e.to_string()),
        key: Some(key),
        version_id,
    }
}

/// The most keys one DeleteObjects request may name (AWS's limit).
pub const MAX_DELETE_KEYS: usize = 1000;

/// AWS answers `MalformedXML` to a DeleteObjects naming no key or more
/// than [`MAX_DELETE_KEYS`].
fn check_delete_count(n: usize) -> ApiResult<()> {
    match n {
        0 => Err(ApiError::MalformedXml("Delete names no Object".into())),
        n if n > MAX_DELETE_KEYS => Err(ApiError::MalformedXml(format!(
            "Delete names {n} objects, more than the {MAX_DELETE_KEYS} allowed in one request"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod delete_count_tests {
    use super::*;

    #[test]
    fn delete_objects_names_one_to_a_thousand_keys() {
        assert!(matches!(
            check_delete_count(0),
            Err(ApiError::MalformedXml(_))
        ));
        assert!(check_delete_count(1).is_ok());
        assert!(check_delete_count(1000).is_ok());
        assert!(matches!(
            check_delete_count(1001),
            Err(ApiError::MalformedXml(m)) if m.contains("1001")
        ));
    }
}
