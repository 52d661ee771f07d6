//! Put/Get/DeleteBucketEncryption: a bucket's default encryption, SSE-S3
//! or SSE-KMS (applied by [`crate::encryption::sse::write_key`] to writes
//! that ask for no encryption of their own).

use std::sync::Arc;

use garage_model::bucket_table::DefaultEncryption;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::Api;
use crate::encryption::sse::{check_default, AES256, AWS_KMS};
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, KeyBucket, Owned};

/// The one rule of a PutBucketEncryption, checked as S3 does.
fn parse(conf: &ServerSideEncryptionConfiguration) -> ApiResult<DefaultEncryption> {
    let [rule] = conf.rules.as_slice() else {
        return Err(ApiError::MalformedXml(
            "ServerSideEncryptionConfiguration needs exactly one Rule".into(),
        ));
    };
    let by_default = rule
        .apply_server_side_encryption_by_default
        .as_ref()
        .ok_or_else(|| {
            ApiError::MalformedXml("the Rule needs ApplyServerSideEncryptionByDefault".into())
        })?;
    let kms = match by_default.sse_algorithm.as_str() {
        AES256 => false,
        AWS_KMS => true,
        "aws:kms:dsse" => {
            return Err(ApiError::NotImplemented(
                "Dual-layer SSE-KMS (aws:kms:dsse) is not available; use aws:kms or AES256".into(),
            ))
        }
        other => {
            return Err(ApiError::InvalidArgument(format!(
                "The encryption method specified is not supported: {other:?}"
            )))
        }
    };
    if by_default.kms_master_key_id.is_some() && !kms {
        return Err(ApiError::InvalidArgument(
            "KMSMasterKeyID is only allowed with aws:kms".into(),
        ));
    }
    Ok(DefaultEncryption {
        bucket_key_enabled: rule.bucket_key_enabled.unwrap_or(false),
        kms,
        kms_key_id: by_default.kms_master_key_id.clone(),
    })
}

impl Api {
    pub async fn put_bucket_encryption(
        self: Arc<Self>,
        req: S3Request<PutBucketEncryptionInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketEncryptionOutput>> {
        let i = req.input;
        let enc = parse(&i.server_side_encryption_configuration)?;
        check_default(&self.kms, &enc).await?;
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.encryption.update(Some(enc)))
            .await?;
        Ok(S3Response::new(PutBucketEncryptionOutput::default()))
    }

    pub async fn get_bucket_encryption(
        self: Arc<Self>,
        req: S3Request<GetBucketEncryptionInput>,
        ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetBucketEncryptionOutput>> {
        let b = self.bucket(ctx.granted.bucket, &req.input.bucket).await?;
        let enc = b
            .params()
            .and_then(|p| p.encryption.get().clone())
            .ok_or(ApiError::NoSuchEncryptionConfiguration)?;
        Ok(S3Response::new(GetBucketEncryptionOutput {
            server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration {
                rules: vec![ServerSideEncryptionRule {
                    apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                        kms_master_key_id: enc.kms_key_id.clone(),
                        sse_algorithm: ServerSideEncryption::from_static(if enc.kms {
                            AWS_KMS
                        } else {
                            AES256
                        }),
                    }),
                    bucket_key_enabled: Some(enc.bucket_key_enabled),
                }],
            }),
        }))
    }

    pub async fn delete_bucket_encryption(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketEncryptionInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketEncryptionOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.encryption.update(None)).await?;
        let mut resp = S3Response::new(DeleteBucketEncryptionOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(algo: &str, kms: Option<&str>, n: usize) -> ServerSideEncryptionConfiguration {
        let rule = ServerSideEncryptionRule {
            apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                kms_master_key_id: kms.map(String::from),
                sse_algorithm: ServerSideEncryption::from(algo.to_string()),
            }),
            bucket_key_enabled: Some(true),
        };
        ServerSideEncryptionConfiguration {
            rules: vec![rule; n],
        }
    }

    #[test]
    fn configurations_are_checked() {
        assert!(parse(&conf(AES256, None, 1)).unwrap().bucket_key_enabled);
        let kms = parse(&conf(AWS_KMS, Some("alias/k"), 1)).unwrap();
        assert!(kms.kms && kms.kms_key_id.as_deref() == Some("alias/k"));
        assert!(matches!(
            parse(&conf("aws:kms:dsse", None, 1)),
            Err(ApiError::NotImplemented(_))
        ));
        assert!(matches!(
            parse(&conf("rot13", None, 1)),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(
            parse(&conf(AES256, Some("k"), 1)),
            Err(ApiError::InvalidArgument(_))
        ));
        assert!(matches!(
            parse(&conf(AES256, None, 2)),
            Err(ApiError::MalformedXml(_))
        ));
    }
}
