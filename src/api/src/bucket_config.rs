//! Bucket configuration documents kept in the bucket entry: CORS rules and
//! the website configuration (index and error documents). Each PUT or
//! DELETE replaces the whole document (a last-writer-wins register), as in
//! S3. Needs the owner permission.

use std::sync::Arc;

use garage_model::bucket_table::{Bucket, BucketParams, CorsRule, WebsiteConfig};
use garage_util::data::Uuid;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::{Api, Need};
use crate::error::{ApiError, ApiResult};

/// At most this many CORS rules per bucket (S3's limit).
const MAX_CORS_RULES: usize = 100;

impl Api {
    async fn owned_bucket(
        &self,
        creds: &Option<s3s::auth::Credentials>,
        name: &str,
    ) -> ApiResult<(Uuid, Bucket)> {
        let key = self.key(creds).await?;
        let id = self.bucket_id(&key, name, Need::Owner).await?;
        Ok((id, self.bucket(id, name).await?))
    }

    async fn update_bucket(
        &self,
        mut b: Bucket,
        f: impl FnOnce(&mut BucketParams),
    ) -> ApiResult<()> {
        if let Some(p) = b.params_mut() {
            f(p);
        }
        self.metadata.buckets.insert(&b).await?;
        Ok(())
    }

    pub async fn get_bucket_cors(
        self: Arc<Self>,
        req: S3Request<GetBucketCorsInput>,
    ) -> ApiResult<S3Response<GetBucketCorsOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        let rules = b
            .params()
            .and_then(|p| p.cors_config.get().clone())
            .ok_or(ApiError::NoSuchCorsConfiguration)?;
        Ok(S3Response::new(GetBucketCorsOutput {
            cors_rules: Some(
                rules
                    .into_iter()
                    .map(|r| CORSRule {
                        id: r.id,
                        max_age_seconds: r.max_age_seconds.map(|s| s as i32),
                        allowed_origins: r.allow_origins,
                        allowed_methods: r.allow_methods,
                        allowed_headers: Some(r.allow_headers).filter(|v| !v.is_empty()),
                        expose_headers: Some(r.expose_headers).filter(|v| !v.is_empty()),
                    })
                    .collect(),
            ),
        }))
    }

    pub async fn put_bucket_cors(
        self: Arc<Self>,
        req: S3Request<PutBucketCorsInput>,
    ) -> ApiResult<S3Response<PutBucketCorsOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        let rules = req.input.cors_configuration.cors_rules;
        if rules.is_empty() || rules.len() > MAX_CORS_RULES {
            return Err(ApiError::MalformedXml(format!(
                "a CORS configuration has 1 to {MAX_CORS_RULES} rules"
            )));
        }
        let mut out = Vec::new();
        for r in rules {
            for m in r.allowed_methods.iter() {
                if !["GET", "PUT", "HEAD", "POST", "DELETE"].contains(&m.as_str()) {
                    return Err(ApiError::InvalidRequest(format!(
                        "Found unsupported HTTP method in CORS config. Unsupported method is {m}"
                    )));
                }
            }
            if r.max_age_seconds.is_some_and(|s| s < 0) {
                return Err(ApiError::MalformedXml("MaxAgeSeconds is negative".into()));
            }
            out.push(CorsRule {
                id: r.id,
                max_age_seconds: r.max_age_seconds.map(|s| s as u64),
                allow_origins: r.allowed_origins,
                allow_methods: r.allowed_methods,
                allow_headers: r.allowed_headers.unwrap_or_default(),
                expose_headers: r.expose_headers.unwrap_or_default(),
            });
        }
        self.update_bucket(b, |p| p.cors_config.update(Some(out)))
            .await?;
        Ok(S3Response::new(PutBucketCorsOutput::default()))
    }

    pub async fn delete_bucket_cors(
        self: Arc<Self>,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> ApiResult<S3Response<DeleteBucketCorsOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        self.update_bucket(b, |p| p.cors_config.update(None))
            .await?;
        let mut resp = S3Response::new(DeleteBucketCorsOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub async fn get_bucket_website(
        self: Arc<Self>,
        req: S3Request<GetBucketWebsiteInput>,
    ) -> ApiResult<S3Response<GetBucketWebsiteOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        let w = b
            .params()
            .and_then(|p| p.website_config.get().clone())
            .ok_or(ApiError::NoSuchWebsiteConfiguration)?;
        Ok(S3Response::new(GetBucketWebsiteOutput {
            index_document: Some(IndexDocument {
                suffix: w.index_document,
            }),
            error_document: w.error_document.map(|key| ErrorDocument { key }),
            ..Default::default()
        }))
    }

    pub async fn put_bucket_website(
        self: Arc<Self>,
        req: S3Request<PutBucketWebsiteInput>,
    ) -> ApiResult<S3Response<PutBucketWebsiteOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        let w = req.input.website_configuration;
        if w.redirect_all_requests_to.is_some() || w.routing_rules.is_some() {
            return Err(ApiError::NotImplemented(
                "RedirectAllRequestsTo and RoutingRules are not supported yet".into(),
            ));
        }
        let index = w
            .index_document
            .map(|i| i.suffix)
            .ok_or_else(|| ApiError::MalformedXml("IndexDocument is required".into()))?;
        if index.is_empty() || index.contains('/') {
            return Err(ApiError::InvalidArgument(
                "The IndexDocument Suffix is not well formed".into(),
            ));
        }
        let config = WebsiteConfig {
            index_document: index,
            error_document: w.error_document.map(|e| e.key),
        };
        self.update_bucket(b, |p| p.website_config.update(Some(config)))
            .await?;
        Ok(S3Response::new(PutBucketWebsiteOutput::default()))
    }

    pub async fn delete_bucket_website(
        self: Arc<Self>,
        req: S3Request<DeleteBucketWebsiteInput>,
    ) -> ApiResult<S3Response<DeleteBucketWebsiteOutput>> {
        let (_, b) = self
            .owned_bucket(&req.credentials, &req.input.bucket)
            .await?;
        self.update_bucket(b, |p| p.website_config.update(None))
            .await?;
        let mut resp = S3Response::new(DeleteBucketWebsiteOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}
