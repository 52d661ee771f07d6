//! Put/Get/DeleteBucketEncryption: a bucket's default encryption, SSE-S3
//! only (applied by [`crate::encryption::sse::write_key`] to writes that ask for no
//! encryption of their own).

use std::sync::Arc;

use garage_model::bucket_table::DefaultEncryption;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::{Api, Need};
use crate::encryption::sse::{no_master_key, AES256};
use crate::error::{ApiError, ApiResult};

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
    crate::encryption::sse::write_key(
        None,
        None,
        Some(by_default.sse_algorithm.as_str()),
        false,
        None,
    )
    .or_else(|e| match e {
        // Only the algorithm is checked here.
        ApiError::InvalidRequest(_) => Ok(None),
        e => Err(e),
    })?;
    if by_default.kms_master_key_id.is_some() {
        return Err(ApiError::InvalidArgument(
            "KMSMasterKeyID is only allowed with aws:kms".into(),
        ));
    }
    Ok(DefaultEncryption {
        bucket_key_enabled: rule.bucket_key_enabled.unwrap_or(false),
    })
}

impl Api {
    pub async fn put_bucket_encryption(
        self: Arc<Self>,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> ApiResult<S3Response<PutBucketEncryptionOutput>> {
        let i = req.input;
        let enc = parse(&i.server_side_encryption_configuration)?;
        if self.sse_master.is_none() {
            return Err(no_master_key());
        }
        let (_, b) = self.owned_bucket(&req.credentials, &i.bucket).await?;
        self.update_bucket(b, |p| p.encryption.update(Some(enc)))
            .await?;
        Ok(S3Response::new(PutBucketEncryptionOutput::default()))
    }

    pub async fn get_bucket_encryption(
        self: Arc<Self>,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> ApiResult<S3Response<GetBucketEncryptionOutput>> {
        let key = self.key(&req.credentials).await?;
        let id = self.bucket_id(&key, &req.input.bucket, Need::Read).await?;
        let b = self.bucket(id, &req.input.bucket).await?;
        let enc = b
            .params()
            .and_then(|p| *p.encryption.get())
            .ok_or(ApiError::NoSuchEncryptionConfiguration)?;
        Ok(S3Response::new(GetBucketEncryptionOutput {
            server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration {
                rules: vec![ServerSideEncryptionRule {
                    apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                        kms_master_key_id: None,
                        sse_algorithm: ServerSideEncryption::from_static(AES256),
                    }),
                    bucket_key_enabled: Some(enc.bucket_key_enabled),
                }],
            }),
        }))
    }

    pub async fn delete_bucket_encryption(
        self: Arc<Self>,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> ApiResult<S3Response<DeleteBucketEncryptionOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
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
        assert!(matches!(
            parse(&conf("aws:kms", None, 1)),
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
