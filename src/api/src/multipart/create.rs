//! CreateMultipartUpload and AbortMultipartUpload.

use std::sync::Arc;

use garage_model::mpu_table::{MpuChecksum, MultipartUpload};
use garage_model::object_table::{gen_upload_id, Object, ObjectVersion, ObjectVersionState};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Access;
use crate::ctx::{check_key, Api};
use crate::encryption::sse::{SseFields, SseKey};
use crate::error::{ApiError, ApiResult};
use crate::objects::checksum::Algo;
use crate::request::Ctx;

impl Api {
    pub async fn create_multipart_upload(
        self: Arc<Self>,
        req: S3Request<CreateMultipartUploadInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<CreateMultipartUploadOutput>> {
        let who = ctx.who;
        let i = req.input;
        check_key(&i.key)?;
        let bucket = ctx.granted.bucket;
        let algo = i
            .checksum_algorithm
            .as_ref()
            .map(|a| {
                Algo::parse(a.as_str()).ok_or_else(|| {
                    ApiError::InvalidRequest("Checksum algorithm provided is unsupported.".into())
                })
            })
            .transpose()?;
        let checksum = match (algo, &i.checksum_type) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ApiError::InvalidRequest(
                    "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.".into(),
                ))
            }
            (Some(a), t) => Some((a, a.upload_type(t.as_ref().map(|t| t.as_str()))?)),
        };
        let customer = SseKey::from_headers(
            i.sse_customer_algorithm.as_deref(),
            i.sse_customer_key.as_deref(),
            i.sse_customer_key_md5.as_deref(),
        )?;
        let mut headers = crate::std_headers!(i).into_pairs();
        if let Some(t) = i.tagging.as_deref() {
            crate::versions::tagging::set_in_headers(
                &mut headers,
                &crate::versions::tagging::parse_header(t)?,
            );
        }
        let upload_id = gen_upload_id();
        let timestamp = garage_util::time::stamp();
        // The lock is decided now (the bucket's default retention counts
        // from the upload's creation) and kept with the upload's version;
        // so is the encryption (an SSE-S3 upload's data key is made now).
        let (place, sse) = crate::new_version_placement!(self, bucket, i, who, customer);
        if let Some(k) = &sse {
            headers.extend(k.stored_pairs());
        }
        // An ordered write (see `garage_model::object_write`): an upload stamped
        // before a version a replica already holds would be dropped from
        // the object entry at once (with its upload). Refused, it starts
        // again under a new id, stamped after that version.
        let (mut upload_id, mut timestamp) = (upload_id, timestamp);
        let mut attempts = 0;
        loop {
            let mut upload = ObjectVersion::new(
                upload_id,
                timestamp,
                ObjectVersionState::Uploading {
                    multipart: true,
                    headers: headers.clone(),
                },
                place.versioning,
            );
            place.apply(&mut upload);
            let obj = Object::new(bucket, i.key.clone(), vec![upload]);
            let mut mpu = MultipartUpload::new(upload_id, timestamp, bucket, i.key.clone());
            mpu.checksum = checksum.map(|(a, full_object)| MpuChecksum {
                algorithm: a.name().to_string(),
                full_object,
            });
            mpu.storage_class = place.class.name.clone();
            // Its parts in the part table, once every node reads it.
            mpu.parts_apart = self
                .blocks
                .system
                .feature_allowed(&garage_rpc::system::versions::MULTIPART_PARTS_APART);
            let Some(newer) = self.writer.start_upload(&obj, &mpu).await? else {
                break;
            };
            attempts += 1;
            if attempts > 8 {
                return Err(ApiError::Unavailable(
                    "newer writes of this key kept overtaking the upload's creation; try again"
                        .into(),
                ));
            }
            upload_id = gen_upload_id();
            timestamp = garage_util::time::increment_after(newer);
        }
        let sse_fields = SseFields::of(sse.as_ref(), self.region());
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(upload_id.hex()),
            checksum_algorithm: checksum
                .map(|(a, _)| ChecksumAlgorithm::from(a.name().to_string())),
            checksum_type: checksum
                .map(|(_, f)| ChecksumType::from_static(crate::objects::checksum::type_name(f))),
            sse_customer_algorithm: sse_fields.sse_customer_algorithm,
            sse_customer_key_md5: sse_fields.sse_customer_key_md5,
            server_side_encryption: sse_fields.server_side_encryption,
            ssekms_key_id: sse_fields.ssekms_key_id,
            bucket_key_enabled: sse_fields.bucket_key_enabled,
            ..Default::default()
        }))
    }

    pub async fn abort_multipart_upload(
        self: Arc<Self>,
        req: S3Request<AbortMultipartUploadInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<AbortMultipartUploadOutput>> {
        let i = req.input;
        let bucket = ctx.granted.bucket;
        let mpu = self.upload(bucket, &i.key, &i.upload_id).await?;
        self.writer.abort_upload(&mpu).await?;
        let mut resp = S3Response::new(AbortMultipartUploadOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}
