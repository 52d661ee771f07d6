//! ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation,
//! GetBucketVersioning.

use garage_model::policy::Decision;
use std::sync::Arc;

use garage_model::bucket_table::check_bucket_name;
use garage_model::helper::HelperError;
use garage_model::object_table::ObjectFilter;
use garage_model::permission::BucketKeyPerm;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::authorize::Access;
use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::request::{Ctx, KeyBucket, Owned};
use garage_model::key_table::Key;

impl Api {
    pub async fn list_buckets(
        self: Arc<Self>,
        req: S3Request<ListBucketsInput>,
        ctx: Ctx<Key>,
    ) -> ApiResult<S3Response<ListBucketsOutput>> {
        let key = ctx.granted;
        let all = self.metadata.list_buckets().await?;
        // An identity policy allowing s3:ListAllMyBuckets lists them all.
        let every =
            ctx.who
                .identity_decision(ctx.who.action, "*", None, ctx.who.values(None, None))
                == Decision::Allow;
        let mut out = Vec::new();
        for b in all.iter() {
            let Some(p) = b.params() else { continue };
            if !every && !key.bucket_permissions(&b.id).is_any() {
                continue;
            }
            let mut names = b.global_aliases();
            if let Some(kp) = key.params() {
                for (name, _, target) in kp.local_aliases.items() {
                    if *target == Some(b.id) {
                        names.push(name.clone());
                    }
                }
            }
            for name in names {
                out.push(Bucket {
                    name: Some(name),
                    creation_date: Some(meta::timestamp(p.creation_date)),
                    bucket_region: Some(self.region().to_string()),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        if let Some(prefix) = &req.input.prefix {
            out.retain(|b| b.name.as_deref().is_some_and(|n| n.starts_with(prefix)));
        }
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(out),
            owner: Some(Owner {
                id: Some(key.key_id.clone()),
                display_name: Some(key.name().to_string()),
            }),
            ..Default::default()
        }))
    }

    pub async fn create_bucket(
        self: Arc<Self>,
        req: S3Request<CreateBucketInput>,
        ctx: Ctx<Key>,
    ) -> ApiResult<S3Response<CreateBucketOutput>> {
        let key = ctx.granted;
        let i = req.input;
        if let Some(loc) = i
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
        {
            if loc.as_str() != self.region() {
                return Err(ApiError::InvalidLocationConstraint {
                    given: loc.as_str().to_string(),
                    region: self.region().to_string(),
                });
            }
        }
        check_bucket_name(&i.bucket).map_err(ApiError::InvalidBucketName)?;
        let ownership = match &i.object_ownership {
            Some(o) => Some(
                garage_model::access::ObjectOwnership::parse(o.as_str()).ok_or_else(|| {
                    ApiError::InvalidArgument(format!(
                        "x-amz-object-ownership {:?} is not BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter",
                        o.as_str()
                    ))
                })?,
            ),
            None => None,
        };
        if let Some(existing) = self.metadata.resolve_global_alias(&i.bucket).await? {
            return Err(if key.bucket_permissions(&existing).allow_owner {
                ApiError::BucketAlreadyOwnedByYou(i.bucket)
            } else {
                ApiError::BucketAlreadyExists(i.bucket)
            });
        }
        let by_identity =
            ctx.who
                .identity_decision(ctx.who.action, &i.bucket, None, ctx.who.values(None, None));
        let by_flag = key.params().is_some_and(|p| *p.allow_create_bucket.get());
        if by_identity == Decision::Deny || !(by_flag || by_identity == Decision::Allow) {
            return Err(ApiError::AccessDenied(match ctx.who.user_name() {
                Some(u) => format!("{u} may not create bucket {} (its identity policies do not allow s3:CreateBucket)", i.bucket),
                None => format!(
                    "key {} may not create buckets (garage key allow --create-bucket)",
                    key.key_id
                ),
            }));
        }
        let bucket = match self.metadata.create_bucket(&i.bucket).await {
            Ok(b) => b,
            Err(HelperError::AliasTaken(n)) => return Err(ApiError::BucketAlreadyExists(n)),
            Err(e) => return Err(e.into()),
        };
        // Before the creator may use it: object lock from the first write,
        // the ownership setting asked for.
        let lock = i.object_lock_enabled_for_bucket == Some(true);
        if lock || ownership.is_some() {
            self.update_bucket(bucket.clone(), |p| {
                if lock {
                    p.versioning
                        .update(garage_model::bucket_table::Versioning::Enabled);
                    p.object_lock.set();
                }
                if let Some(o) = ownership {
                    p.access.ownership.update(Some(o));
                }
            })
            .await?;
        }
        self.metadata
            .set_permissions(bucket.id, &key.key_id, BucketKeyPerm::ALL)
            .await?;
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{}", i.bucket)),
        }))
    }

    pub async fn head_bucket(
        self: Arc<Self>,
        _req: S3Request<HeadBucketInput>,
        _ctx: Ctx<Access>,
    ) -> ApiResult<S3Response<HeadBucketOutput>> {
        Ok(S3Response::new(HeadBucketOutput {
            bucket_region: Some(self.region().to_string()),
            ..Default::default()
        }))
    }

    pub async fn get_bucket_location(
        self: Arc<Self>,
        _req: S3Request<GetBucketLocationInput>,
        _ctx: Ctx<KeyBucket>,
    ) -> ApiResult<S3Response<GetBucketLocationOutput>> {
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(BucketLocationConstraint::from(self.region().to_string())),
        }))
    }

    pub async fn delete_bucket(
        self: Arc<Self>,
        req: S3Request<DeleteBucketInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketOutput>> {
        let name = req.input.bucket;
        let Owned { id, bucket, .. } = ctx.granted;
        // Any object, upload or version (delete markers included, as in
        // S3) keeps the bucket.
        let (objects, versions) = tokio::join!(
            self.objects
                .get_range(&id, None, Some(ObjectFilter::HasVersions), 1, false),
            self.history.get_range(&id, None, None, 1, false)
        );
        if !objects?.is_empty() || !versions?.is_empty() {
            return Err(ApiError::BucketNotEmpty(name));
        }
        self.metadata.delete_bucket(&bucket).await?;
        let mut resp = S3Response::new(DeleteBucketOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}
