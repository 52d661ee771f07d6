//! Server access logging: Put/GetBucketLogging (a bucket's target bucket,
//! prefix and key format), the log lines in AWS's format ([`record`]),
//! and their delivery as objects of the target bucket ([`delivery`]).
//!
//! The S3 listener hands every finished request naming a bucket to its
//! [`delivery::AccessLogs`], and runs its delivery task.

pub mod delivery;
pub mod record;

use std::sync::Arc;

use garage_model::bucket_table::{BucketLogging, PartitionDateSource as DateSource};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::{Api, Need};
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

/// The target a PutBucketLogging names, checked as S3 does but for the
/// target bucket's existence and permission (checked by the caller).
fn parse(l: &LoggingEnabled) -> ApiResult<(Option<DateSource>, String)> {
    if l.target_grants.as_ref().is_some_and(|g| !g.is_empty()) {
        return Err(ApiError::NotImplemented(
            "TargetGrants are not served: log objects belong to the target bucket's owner \
             (as with S3's BucketOwnerEnforced)"
                .into(),
        ));
    }
    let partitioned = match &l.target_object_key_format {
        None => None,
        Some(f) => match (&f.simple_prefix, &f.partitioned_prefix) {
            (Some(_), Some(_)) => {
                return Err(ApiError::MalformedXml(
                    "TargetObjectKeyFormat takes SimplePrefix or PartitionedPrefix, not both"
                        .into(),
                ))
            }
            (_, Some(p)) => Some(match p.partition_date_source.as_ref().map(|s| s.as_str()) {
                None | Some(PartitionDateSource::EVENT_TIME) => DateSource::EventTime,
                Some(PartitionDateSource::DELIVERY_TIME) => DateSource::DeliveryTime,
                Some(other) => {
                    return Err(ApiError::MalformedXml(format!(
                        "PartitionDateSource {other:?}: EventTime or DeliveryTime"
                    )))
                }
            }),
            (_, None) => None,
        },
    };
    if l.target_prefix.len() > 1024 {
        return Err(ApiError::InvalidArgument(
            "TargetPrefix is at most 1024 bytes".into(),
        ));
    }
    Ok((partitioned, l.target_prefix.clone()))
}

/// The AWS error of a target bucket logs cannot be delivered to.
fn invalid_target(why: impl Into<String>) -> ApiError {
    ApiError::InvalidTargetBucketForLogging(why.into())
}

impl Api {
    pub async fn put_bucket_logging(
        self: Arc<Self>,
        req: S3Request<PutBucketLoggingInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketLoggingOutput>> {
        let i = req.input;
        let Owned { key, bucket: b, .. } = ctx.granted;
        let logging = match &i.bucket_logging_status.logging_enabled {
            None => None,
            Some(l) => {
                let (partitioned, prefix) = parse(l)?;
                // The target: a bucket this key designates, and may write
                // to, or whose policy lets the log delivery service write.
                let target =
                    match self.bucket_id(&key, &l.target_bucket, Need::Read).await {
                        Ok(t) => t,
                        Err(ApiError::NoSuchBucket(_)) => {
                            return Err(invalid_target(
                                "The target bucket for logging does not exist",
                            ))
                        }
                        Err(ApiError::AccessDenied(_)) => return Err(invalid_target(
                            "You must have write permission on the target bucket, or its policy \
                             must allow the logging.s3.amazonaws.com service to write",
                        )),
                        Err(e) => return Err(e),
                    };
                let may_write = self
                    .bucket_id(&key, &l.target_bucket, Need::Write)
                    .await
                    .is_ok();
                let tb = self.bucket(target, &l.target_bucket).await?;
                let policy_allows = tb
                    .params()
                    .and_then(|p| p.access.policy.get().as_deref())
                    .and_then(|text| garage_model::policy::Policy::parse(text, None).ok())
                    .is_some_and(|p| {
                        p.allows_log_delivery(
                            &l.target_bucket,
                            &format!("{prefix}x"),
                            &format!("arn:aws:s3:::{}", i.bucket),
                        )
                    });
                if !may_write && !policy_allows {
                    return Err(invalid_target(
                        "You must have write permission on the target bucket, or its policy must \
                         allow the logging.s3.amazonaws.com service to write",
                    ));
                }
                Some(BucketLogging {
                    target_bucket: target,
                    target_name: l.target_bucket.clone(),
                    target_prefix: prefix,
                    partitioned,
                })
            }
        };
        self.update_bucket(b, |p| p.logging.update(logging)).await?;
        Ok(S3Response::new(PutBucketLoggingOutput::default()))
    }

    pub async fn get_bucket_logging(
        self: Arc<Self>,
        _req: S3Request<GetBucketLoggingInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketLoggingOutput>> {
        let b = ctx.granted.bucket;
        let logging = b.params().and_then(|p| p.logging.get().clone());
        Ok(S3Response::new(GetBucketLoggingOutput {
            logging_enabled: logging.map(|l| LoggingEnabled {
                target_bucket: l.target_name,
                target_prefix: l.target_prefix,
                target_grants: None,
                target_object_key_format: Some(match l.partitioned {
                    None => TargetObjectKeyFormat {
                        simple_prefix: Some(SimplePrefix {}),
                        partitioned_prefix: None,
                    },
                    Some(s) => TargetObjectKeyFormat {
                        simple_prefix: None,
                        partitioned_prefix: Some(PartitionedPrefix {
                            partition_date_source: Some(PartitionDateSource::from_static(
                                match s {
                                    DateSource::EventTime => PartitionDateSource::EVENT_TIME,
                                    DateSource::DeliveryTime => PartitionDateSource::DELIVERY_TIME,
                                },
                            )),
                        }),
                    },
                }),
            }),
        }))
    }
}
