//! A bucket's access settings other than ACLs: Put/Get/DeleteBucketPolicy,
//! GetBucketPolicyStatus, Get/Put/DeleteBucketOwnershipControls,
//! Get/Put/DeletePublicAccessBlock. The decision they feed is in
//! [`crate::access::authorize`]; see doc/access-control.md.

use std::sync::Arc;

use garage_model::access::{ObjectOwnership as Ownership, PublicAccessBlock};
use garage_model::bucket_table::Bucket;
use garage_model::policy::Policy;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::acl::{access_of, no_content};
use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

impl Api {
    pub async fn put_bucket_policy(
        self: Arc<Self>,
        req: S3Request<PutBucketPolicyInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketPolicyOutput>> {
        let i = req.input;
        let b = ctx.granted.bucket;
        let policy =
            Policy::parse(&i.policy, Some(&i.bucket)).map_err(ApiError::MalformedPolicy)?;
        if policy.is_public() && access_of(&b).block().block_public_policy {
            return Err(ApiError::AccessDenied(
                "Access Denied: the bucket's public access block (BlockPublicPolicy) refuses public policies"
                    .into(),
            ));
        }
        let text = i.policy;
        self.update_bucket(b, |p| p.access.policy.update(Some(text)))
            .await?;
        Ok(no_content(PutBucketPolicyOutput::default()))
    }

    pub async fn get_bucket_policy(
        self: Arc<Self>,
        _req: S3Request<GetBucketPolicyInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketPolicyOutput>> {
        let text = policy_text(&ctx.granted.bucket)?;
        Ok(S3Response::new(GetBucketPolicyOutput {
            policy: Some(text),
        }))
    }

    pub async fn get_bucket_policy_status(
        self: Arc<Self>,
        _req: S3Request<GetBucketPolicyStatusInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketPolicyStatusOutput>> {
        let text = policy_text(&ctx.granted.bucket)?;
        let public = Policy::parse(&text, None).is_ok_and(|p| p.is_public());
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(public),
            }),
        }))
    }

    pub async fn delete_bucket_policy(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketPolicyInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketPolicyOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.access.policy.update(None))
            .await?;
        Ok(no_content(DeleteBucketPolicyOutput::default()))
    }

    pub async fn put_bucket_ownership_controls(
        self: Arc<Self>,
        req: S3Request<PutBucketOwnershipControlsInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketOwnershipControlsOutput>> {
        let i = req.input;
        let own = match i.ownership_controls.rules.as_slice() {
            [r] => Ownership::parse(r.object_ownership.as_str()).ok_or_else(|| {
                ApiError::MalformedXml(format!(
                    "ObjectOwnership {:?} is not BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter",
                    r.object_ownership.as_str()
                ))
            })?,
            _ => {
                return Err(ApiError::MalformedXml(
                    "OwnershipControls must have exactly one Rule".into(),
                ))
            }
        };
        let b = ctx.granted.bucket;
        if own == Ownership::BucketOwnerEnforced && access_of(&b).acl.get().is_public() {
            return Err(ApiError::InvalidBucketAclWithObjectOwnership);
        }
        self.update_bucket(b, |p| p.access.ownership.update(Some(own)))
            .await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput::default()))
    }

    pub async fn get_bucket_ownership_controls(
        self: Arc<Self>,
        _req: S3Request<GetBucketOwnershipControlsInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketOwnershipControlsOutput>> {
        let b = ctx.granted.bucket;
        let own = access_of(&b)
            .ownership
            .get()
            .ok_or(ApiError::OwnershipControlsNotFound)?;
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(OwnershipControls {
                rules: vec![OwnershipControlsRule {
                    object_ownership: ObjectOwnership::from_static(own.as_str()),
                }],
            }),
        }))
    }

    pub async fn delete_bucket_ownership_controls(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketOwnershipControlsInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketOwnershipControlsOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.access.ownership.update(None))
            .await?;
        Ok(no_content(DeleteBucketOwnershipControlsOutput::default()))
    }

    pub async fn put_public_access_block(
        self: Arc<Self>,
        req: S3Request<PutPublicAccessBlockInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutPublicAccessBlockOutput>> {
        let i = req.input;
        let c = &i.public_access_block_configuration;
        let block = PublicAccessBlock {
            block_public_acls: c.block_public_acls.unwrap_or(false),
            ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
            block_public_policy: c.block_public_policy.unwrap_or(false),
            restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
        };
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.access.public_access_block.update(Some(block)))
            .await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput::default()))
    }

    pub async fn get_public_access_block(
        self: Arc<Self>,
        _req: S3Request<GetPublicAccessBlockInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetPublicAccessBlockOutput>> {
        let b = ctx.granted.bucket;
        let block = access_of(&b)
            .public_access_block
            .get()
            .ok_or(ApiError::NoSuchPublicAccessBlockConfiguration)?;
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(PublicAccessBlockConfiguration {
                block_public_acls: Some(block.block_public_acls),
                ignore_public_acls: Some(block.ignore_public_acls),
                block_public_policy: Some(block.block_public_policy),
                restrict_public_buckets: Some(block.restrict_public_buckets),
            }),
        }))
    }

    pub async fn delete_public_access_block(
        self: Arc<Self>,
        _req: S3Request<DeletePublicAccessBlockInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeletePublicAccessBlockOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.access.public_access_block.update(None))
            .await?;
        Ok(no_content(DeletePublicAccessBlockOutput::default()))
    }
}

/// A bucket's policy, as it was written.
fn policy_text(b: &Bucket) -> ApiResult<String> {
    access_of(b)
        .policy
        .get()
        .clone()
        .ok_or(ApiError::NoSuchBucketPolicy)
}
