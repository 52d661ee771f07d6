//! ListParts and ListMultipartUploads.

use std::sync::Arc;

use garage_model::object_table::ObjectFilter;
use garage_table::EmptyKey;
use garage_util::data::Uuid;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use super::{upload_checksum, MAX_UPLOADS_LISTED};
use crate::access::authorize::Access;
use crate::ctx::Api;
use crate::error::ApiResult;
use crate::meta;
use crate::request::Ctx;

impl Api {
    pub async fn list_parts(
        self: Arc<Self>,
        req: S3Request<ListPartsInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<ListPartsOutput>> {
        let i = req.input;
        let bucket = ctx.granted.bucket;
        let mpu = self.upload(bucket, &i.key, &i.upload_id).await?;
        let max = i.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let marker = i.part_number_marker.unwrap_or(0).max(0) as u64;
        // One more than a page: whether the listing is truncated.
        let all = self
            .finished_parts_of(&mpu, marker + 1, Some(max + 1))
            .await?;
        let truncated = all.len() > max;
        let checksum = upload_checksum(&mpu)?;
        let parts: Vec<Part> = all
            .iter()
            .take(max)
            .map(|(n, k, p)| {
                let mut part = Part {
                    part_number: Some(*n as i32),
                    e_tag: p.etag.clone().map(ETag::Strong),
                    size: p.size.map(|s| s as i64),
                    last_modified: Some(meta::timestamp(k.timestamp)),
                    ..Default::default()
                };
                if let (Some((algo, _)), Some(v)) = (checksum, &p.checksum) {
                    crate::set_checksums!(
                        part,
                        crate::objects::checksum::stored(&[(algo.header().to_string(), v.clone())])
                    );
                }
                part
            })
            .collect();
        let next = parts.last().and_then(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(i.upload_id),
            max_parts: Some(max as i32),
            part_number_marker: i.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            is_truncated: Some(truncated),
            parts: Some(parts),
            checksum_algorithm: checksum
                .map(|(a, _)| ChecksumAlgorithm::from(a.name().to_string())),
            checksum_type: checksum
                .map(|(_, f)| ChecksumType::from_static(crate::objects::checksum::type_name(f))),
            storage_class: Some(StorageClass::from(
                crate::storage_class::reported(mpu.storage_class.as_deref()).to_string(),
            )),
            ..Default::default()
        }))
    }

    pub async fn list_multipart_uploads(
        self: Arc<Self>,
        req: S3Request<ListMultipartUploadsInput>,
        ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<ListMultipartUploadsOutput>> {
        let i = req.input;
        let bucket = ctx.granted.bucket;
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let objects = self
            .objects
            .get_range(
                &bucket,
                Some(prefix.clone()),
                Some(ObjectFilter::IsUploading {
                    multipart: Some(true),
                }),
                MAX_UPLOADS_LISTED,
                false,
            )
            .await?;
        let mut uploads = Vec::new();
        for o in objects.iter().filter(|o| o.key.starts_with(&prefix)) {
            for v in o.versions().iter().filter(|v| v.is_uploading(Some(true))) {
                uploads.push(UploadRow {
                    key: o.key.clone(),
                    upload_id: v.uuid,
                    initiated: v.timestamp,
                });
            }
        }
        let truncated = uploads.len() > max;
        uploads.truncate(max);
        // Each upload's storage class is in its upload entry: read them
        // (32 at a time), as the object entry does not carry it.
        let classes: Vec<(Option<String>, Option<garage_model::mpu_table::MpuChecksum>)> = {
            use futures::StreamExt;
            let ids: Vec<Uuid> = uploads.iter().map(|u| u.upload_id).collect();
            futures::stream::iter(ids.into_iter().map(|id| {
                let mpus = self.mpus.clone();
                async move {
                    mpus.get(&id, &EmptyKey)
                        .await
                        .map(|m| m.map(|m| (m.storage_class, m.checksum)).unwrap_or_default())
                }
            }))
            .buffered(32)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?
        };
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: i.prefix,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            uploads: Some(
                uploads
                    .into_iter()
                    .zip(classes)
                    .map(|(u, (class, checksum))| s3s::dto::MultipartUpload {
                        key: Some(u.key),
                        upload_id: Some(u.upload_id.hex()),
                        initiated: Some(meta::timestamp(u.initiated)),
                        storage_class: Some(StorageClass::from(
                            crate::storage_class::reported(class.as_deref()).to_string(),
                        )),
                        checksum_algorithm: checksum
                            .as_ref()
                            .map(|c| ChecksumAlgorithm::from(c.algorithm.clone())),
                        checksum_type: checksum.as_ref().map(|c| {
                            ChecksumType::from_static(crate::objects::checksum::type_name(
                                c.full_object,
                            ))
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }
}

struct UploadRow {
    key: String,
    upload_id: Uuid,
    initiated: u64,
}
