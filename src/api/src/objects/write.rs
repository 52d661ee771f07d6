//! PutObject (and PostObject): a whole object from a request body, inline
//! or as blocks, made current by one ordered write or a conditional one.

use garage_model::notify::{Cause, Op};
use std::sync::Arc;

use garage_model::bucket_table::Versioning;
use garage_model::object_table::{
    ObjectVersion, ObjectVersionData, ObjectVersionMeta, ObjectVersionState, VersionId,
};
use garage_model::version_table::VersionBacklink;
use garage_util::data::{gen_uuid, Uuid};
use garage_util::time::stamp;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::step::PutGrant;
use crate::conditional::WriteConditions;
use crate::ctx::{check_key, Api};
use crate::encryption::sse::{SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::objects::block_writer::{
    md5_of, parse_content_md5, write_blocks, BlockTarget, BodyChecks, Chunker, BLOCK_SIZE,
    INLINE_MAX,
};
use crate::objects::replica::Replica;
use crate::request::Ctx;
use crate::versions::object_lock::Placement;

/// Where a new version of an object goes and how it is sealed, from a
/// PutObject's or CreateMultipartUpload's input `$i` (their fields have
/// the same names): its object lock, encryption, ACL and storage class.
/// Evaluates to `(Placement, Option<SseKey>)`; returns on a refusal.
#[macro_export]
macro_rules! new_version_placement {
    ($api:expr, $bucket:expr, $i:expr, $who:expr, $customer:expr) => {{
        let (mut place, sse) = $api
            .prepare_write(
                $bucket,
                $crate::lock_headers!($i),
                $crate::write_ask!($i, $customer),
            )
            .await?;
        place.acl = $crate::written_acl!($api, place, $bucket, $i, $who);
        place.class = $api.write_class(
            $i.storage_class.as_ref().map(|c| c.as_str()),
            place.default_class.as_deref(),
            place.allowed_classes.as_deref(),
        )?;
        (place, sse)
    }};
}

/// A request body, what it must match (`Content-MD5`, `Content-Length`)
/// and how it is checked and sealed.
pub struct ObjectBody<'a> {
    pub body: Option<StreamingBlob>,
    pub content_md5: Option<[u8; 16]>,
    pub content_length: Option<i64>,
    pub checks: BodyChecks<'a>,
}

impl<'a> ObjectBody<'a> {
    /// A body of `size` bytes made by the server (a copy, a log file),
    /// sealed with `sse`.
    pub fn made(body: StreamingBlob, size: u64, sse: Option<&'a SseKey>) -> Self {
        ObjectBody {
            body: Some(body),
            content_md5: None,
            content_length: Some(size as i64),
            checks: BodyChecks {
                sse,
                ..Default::default()
            },
        }
    }
}

/// What a write stored.
pub struct Written {
    pub etag: String,
    pub size: u64,
    pub checksum: Option<(String, String)>,
    /// The version made current.
    pub version: ObjectVersion,
}

impl Written {
    /// Its `x-amz-version-id`: none when the bucket never had versioning.
    pub fn version_id(&self) -> Option<String> {
        (self.version.versioning != Versioning::Off).then(|| self.version.version_id().to_string())
    }
}

/// How a new version is made current: under the request's conditions
/// (if any), for its notification event's cause.
#[derive(Clone, Copy)]
pub struct Commit<'a> {
    pub cond: Option<&'a WriteConditions>,
    pub cause: &'a Cause,
    /// Written by another cluster's replication, under the source's
    /// version id and stamp (see [`crate::objects::replica`]).
    pub replica: Option<&'a Replica>,
}

impl Api {
    /// Writes a whole object from a request body: inline when it is at
    /// most [`INLINE_MAX`] bytes (one quorum write), else as blocks.
    pub async fn store_object(
        self: &Arc<Self>,
        bucket: Uuid,
        key: &str,
        headers: Vec<(String, String)>,
        body: ObjectBody<'_>,
        commit: Commit<'_>,
        place: &Placement,
    ) -> ApiResult<Written> {
        let ObjectBody {
            body,
            content_md5,
            content_length,
            checks:
                BodyChecks {
                    checksum,
                    trailers,
                    sse,
                },
        } = body;
        let versioning = place.versioning;
        let mut headers = headers;
        if let Some(k) = sse {
            headers.extend(k.stored_pairs());
        }
        let (uuid, timestamp) = match commit.replica {
            Some(r) => (r.uuid, r.timestamp),
            None => (gen_uuid(), stamp()),
        };
        let mut chunker = Chunker::new(body);
        let first = chunker.next(BLOCK_SIZE).await?.unwrap_or_default();
        if first.len() <= INLINE_MAX {
            let md5 = md5_of(&first);
            check_body(content_md5, content_length, &md5, first.len() as u64)?;
            let sum = match checksum {
                Some(e) => {
                    let mut h = e.algo.hasher();
                    h.update(&first);
                    let sum = crate::objects::checksum::verify(e, &h.finalize(), trailers)?;
                    headers.push(sum.clone());
                    Some(sum)
                }
                None => None,
            };
            let etag =
                replica_etag(commit).unwrap_or_else(|| crate::encryption::sse::etag_of(sse, &md5));
            let size = first.len() as u64;
            let data = match sse {
                Some(k) => k.seal(&first),
                None => first.to_vec(),
            };
            let mut v = ObjectVersion::new(
                uuid,
                timestamp,
                ObjectVersionState::Complete(ObjectVersionData::Inline(
                    ObjectVersionMeta {
                        headers,
                        size,
                        etag: etag.clone(),
                        storage_class: place.class.name.clone(),
                        first_ec: None,
                        recoded: 0,
                    },
                    data,
                )),
                versioning,
            );
            place.apply(&mut v);
            let v = self
                .finish_version(bucket, key, v, None, commit, true)
                .await?;
            return Ok(Written {
                etag,
                size,
                checksum: sum,
                version: v,
            });
        }

        // No "uploading" object entry: a newer version completing first
        // would drop it and release the blocks written so far, while the
        // last write to complete must win (see doc/ordering.md). An upload
        // that fails is aborted below; one whose node dies leaves a
        // version entry that no object lists, which `garage repair
        // versions` deletes (see doc/versioning.md).
        let backlink = VersionBacklink::Object {
            bucket_id: bucket,
            key: key.to_string(),
        };
        let target = BlockTarget {
            uuid,
            backlink,
            part_number: 1,
            ec: place.class.code,
        };
        let written = write_blocks(
            self,
            &target,
            first,
            &mut chunker,
            checksum.map(|e| e.algo.hasher()),
            sse,
        )
        .await;
        let checked = written.and_then(|w| {
            check_body(content_md5, content_length, &w.md5, w.size)?;
            let sum = match (checksum, &w.checksum) {
                (Some(e), Some(c)) => Some(crate::objects::checksum::verify(e, c, trailers)?),
                _ => None,
            };
            Ok((w, sum))
        });
        let (w, sum) = match checked {
            Ok(w) => w,
            Err(e) => {
                // A replica's version id is the source's: it is written
                // again by the next try (an aborted version stays so).
                if commit.replica.is_none() {
                    self.writer
                        .abort_version(bucket, key, uuid, timestamp, versioning)
                        .await;
                }
                return Err(e);
            }
        };
        let etag =
            replica_etag(commit).unwrap_or_else(|| crate::encryption::sse::etag_of(sse, &w.md5));
        headers.extend(sum.clone());
        let mut complete = ObjectVersion::new(
            uuid,
            timestamp,
            ObjectVersionState::Complete(ObjectVersionData::FirstBlock(
                ObjectVersionMeta {
                    headers,
                    size: w.size,
                    etag: etag.clone(),
                    storage_class: place.class.name.clone(),
                    first_ec: w.first_ec,
                    recoded: 0,
                },
                w.first_block,
            )),
            versioning,
        );
        place.apply(&mut complete);
        let v = self
            .finish_version(bucket, key, complete, Some(&w.blocks), commit, false)
            .await?;
        Ok(Written {
            etag,
            size: w.size,
            checksum: sum,
            version: v,
        })
    }

    /// Makes a complete version current: one quorum write, or through the
    /// object's register when the request has conditions (see
    /// [`crate::conditional`]). A refused version that is written already
    /// (not `retimable`) is aborted when nothing can make it current any
    /// more, releasing its blocks.
    pub async fn finish_version(
        &self,
        bucket: Uuid,
        key: &str,
        version: ObjectVersion,
        blocks: Option<&garage_model::object_write::BlockList>,
        commit: Commit<'_>,
        retimable: bool,
    ) -> ApiResult<ObjectVersion> {
        let Commit {
            cond,
            cause,
            replica,
        } = commit;
        if replica.is_some() {
            // Unordered: the source ordered it among its key's writes.
            self.writer
                .update_versions(bucket, key, vec![version.clone()], cause)
                .await?;
            return Ok(version);
        }
        let Some(cond) = cond else {
            return Ok(self
                .writer
                .write_version(bucket, key, &version, blocks, cause)
                .await?);
        };
        let (uuid, timestamp, versioning) = (version.uuid, version.timestamp, version.versioning);
        match self
            .commit_conditional(bucket, key, version, cond, retimable, cause)
            .await
        {
            Ok(v) => Ok(v),
            Err(r) => {
                if r.final_ && !retimable {
                    self.writer
                        .abort_version(bucket, key, uuid, timestamp, versioning)
                        .await;
                }
                Err(r.error)
            }
        }
    }

    pub async fn put_object(
        self: Arc<Self>,
        req: S3Request<PutObjectInput>,
        ctx: Ctx<PutGrant>,
    ) -> ApiResult<S3Response<PutObjectOutput>> {
        let (who, PutGrant { access, key, form }) = (ctx.who, ctx.granted);
        let op = match req.method == hyper::Method::POST {
            true => Op::Post,
            false => Op::Put,
        };
        let mut cause = crate::request::cause(&req.extensions, &who, op);
        let bucket = access.bucket;
        let mut i = req.input;
        i.key = key;
        check_key(&i.key)?;
        let replica = self.replica_of(&req.headers, &who, bucket, &i.key).await?;
        if let Some(r) = &replica {
            cause = cause.as_replica();
            if let Some(etag) = self.replica_written(bucket, &i.key, r, &cause).await? {
                return Ok(S3Response::new(PutObjectOutput {
                    version_id: Some(VersionId::Id(r.timestamp, r.uuid).to_string()),
                    e_tag: Some(ETag::Strong(etag)),
                    ..Default::default()
                }));
            }
        }
        let md5 = i
            .content_md5
            .as_deref()
            .map(parse_content_md5)
            .transpose()?;
        let cond = WriteConditions::of(i.if_match.as_ref(), i.if_none_match.as_ref());
        // A large upload whose condition fails already fails before its
        // data is sent (one read); the condition is decided at the end.
        if let Some(c) = &cond {
            if i.content_length.is_none_or(|l| l as usize > INLINE_MAX) {
                let obj = self.objects.get(&bucket, &i.key).await?;
                c.check(obj.as_ref().and_then(|o| o.last_data()), &i.key)?;
            }
        }
        let customer = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let mut headers = crate::std_headers!(i).into_pairs();
        let tags = match (i.tagging.as_deref(), &form.tagging) {
            (Some(t), _) => Some(crate::versions::tagging::parse_header(t)?),
            (None, Some(xml)) => Some(crate::versions::tagging::parse_form_field(xml)?),
            (None, None) => None,
        };
        if let Some(t) = tags {
            crate::versions::tagging::set_in_headers(&mut headers, &t);
        }
        if replica.is_some() {
            headers.push(Replica::stored_header());
        }
        let expected = crate::objects::checksum::expected(&req.headers)?;
        let (place, sse) = crate::new_version_placement!(self, bucket, i, who, customer);
        let w = self
            .store_object(
                bucket,
                &i.key,
                headers,
                ObjectBody {
                    body: i.body,
                    content_md5: md5,
                    content_length: i.content_length,
                    checks: BodyChecks {
                        checksum: expected.as_ref(),
                        trailers: req.trailing_headers.as_ref(),
                        sse: sse.as_ref(),
                    },
                },
                Commit {
                    cond: cond.as_ref(),
                    cause: &cause,
                    replica: replica.as_ref(),
                },
                &place,
            )
            .await?;
        let mut out = PutObjectOutput {
            version_id: w.version_id(),
            e_tag: Some(ETag::Strong(w.etag)),
            ssekms_encryption_context: sse.as_ref().and_then(|k| k.context().map(String::from)),
            ..Default::default()
        };
        crate::set_sse!(out, SseFields::of(sse.as_ref(), self.region()));
        crate::set_checksums!(
            out,
            crate::objects::checksum::stored(w.checksum.as_slice()),
            with_type
        );
        Ok(S3Response::new(out))
    }
}

/// The ETag a replica keeps: its source's.
fn replica_etag(commit: Commit<'_>) -> Option<String> {
    commit.replica.and_then(|r| r.etag.clone())
}

fn check_body(
    content_md5: Option<[u8; 16]>,
    content_length: Option<i64>,
    md5: &[u8; 16],
    size: u64,
) -> ApiResult<()> {
    if let Some(l) = content_length {
        if l >= 0 && l as u64 != size {
            return Err(ApiError::IncompleteBody);
        }
    }
    if content_md5.is_some_and(|m| &m != md5) {
        return Err(ApiError::BadDigest);
    }
    Ok(())
}
