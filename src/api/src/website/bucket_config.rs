//! Bucket configuration documents kept in the bucket entry: CORS rules and
//! the website configuration (index and error documents and routing rules,
//! or a redirection of every request; the web endpoint serves them). Each
//! PUT or DELETE replaces the whole document (a last-writer-wins register),
//! as in S3. Needs the owner permission. Lifecycle rules: `lifecycle.rs`.

use std::sync::Arc;

use garage_model::bucket_table::{
    self as model, CorsRule, RedirectAll, RoutingCondition, WebsiteConfig,
};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

/// At most this many CORS rules per bucket (S3's limit).
const MAX_CORS_RULES: usize = 100;
/// At most this many website routing rules (S3's limit).
const MAX_ROUTING_RULES: usize = 50;

impl Api {
    pub async fn get_bucket_cors(
        self: Arc<Self>,
        _req: S3Request<GetBucketCorsInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketCorsOutput>> {
        let b = ctx.granted.bucket;
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
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketCorsOutput>> {
        let b = ctx.granted.bucket;
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
        _req: S3Request<DeleteBucketCorsInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketCorsOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.cors_config.update(None))
            .await?;
        let mut resp = S3Response::new(DeleteBucketCorsOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub async fn get_bucket_website(
        self: Arc<Self>,
        _req: S3Request<GetBucketWebsiteInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketWebsiteOutput>> {
        let b = ctx.granted.bucket;
        let w = b
            .params()
            .and_then(|p| p.website_config.get().clone())
            .ok_or(ApiError::NoSuchWebsiteConfiguration)?;
        Ok(S3Response::new(website_to_dto(&w)))
    }

    pub async fn put_bucket_website(
        self: Arc<Self>,
        req: S3Request<PutBucketWebsiteInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketWebsiteOutput>> {
        let b = ctx.granted.bucket;
        let config = website_from_dto(req.input.website_configuration)?;
        // As in S3 (and Garage), a website configuration makes the bucket
        // served: this also turns on a switch `garage bucket website
        // --deny` turned off.
        self.update_bucket(b, |p| {
            p.website_config.update(Some(config));
            if !*p.website_access.get() {
                p.website_access.update(true);
            }
        })
        .await?;
        Ok(S3Response::new(PutBucketWebsiteOutput::default()))
    }

    pub async fn delete_bucket_website(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketWebsiteInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketWebsiteOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.website_config.update(None))
            .await?;
        let mut resp = S3Response::new(DeleteBucketWebsiteOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}

fn check_protocol(p: Option<Protocol>) -> ApiResult<Option<String>> {
    match p.as_ref().map(|p| p.as_str()) {
        None => Ok(None),
        Some(s @ ("http" | "https")) => Ok(Some(s.to_string())),
        Some(_) => Err(ApiError::InvalidArgument(
            "Invalid protocol, protocol can be http or https. If not defined the protocol will be selected automatically.".into(),
        )),
    }
}

fn parse_code(what: &str, code: &str, ok: impl Fn(u16) -> bool) -> ApiResult<u16> {
    code.parse::<u16>().ok().filter(|c| ok(*c)).ok_or_else(|| {
        ApiError::InvalidArgument(format!("The provided {what} ({code}) is not valid"))
    })
}

/// Checks a website configuration as S3 does, and converts it to the
/// model's.
pub fn website_from_dto(w: WebsiteConfiguration) -> ApiResult<WebsiteConfig> {
    if let Some(r) = w.redirect_all_requests_to {
        if w.index_document.is_some() || w.error_document.is_some() || w.routing_rules.is_some() {
            return Err(ApiError::InvalidArgument(
                "RedirectAllRequestsTo cannot be provided in conjunction with other Routing Rules."
                    .into(),
            ));
        }
        if r.host_name.is_empty() {
            return Err(ApiError::InvalidArgument(
                "RedirectAllRequestsTo needs a HostName".into(),
            ));
        }
        return Ok(WebsiteConfig {
            index_document: None,
            error_document: None,
            redirect_all: Some(RedirectAll {
                protocol: check_protocol(r.protocol)?,
                host_name: r.host_name,
            }),
            routing_rules: Vec::new(),
        });
    }
    let index = w.index_document.map(|i| i.suffix).ok_or_else(|| {
        ApiError::InvalidArgument(
            "A value for IndexDocument Suffix must be provided if RedirectAllRequestsTo is empty"
                .into(),
        )
    })?;
    if index.is_empty() || index.contains('/') {
        return Err(ApiError::InvalidArgument(
            "The IndexDocument Suffix is not well formed".into(),
        ));
    }
    let rules = w.routing_rules.unwrap_or_default();
    if rules.len() > MAX_ROUTING_RULES {
        return Err(ApiError::InvalidArgument(format!(
            "A website configuration has at most {MAX_ROUTING_RULES} routing rules"
        )));
    }
    let mut routing_rules = Vec::new();
    for r in rules {
        let condition = match r.condition {
            None => None,
            Some(c) => {
                if c.http_error_code_returned_equals.is_none() && c.key_prefix_equals.is_none() {
                    return Err(ApiError::InvalidArgument(
                        "A routing rule Condition needs HttpErrorCodeReturnedEquals or KeyPrefixEquals"
                            .into(),
                    ));
                }
                Some(RoutingCondition {
                    http_error_code: c
                        .http_error_code_returned_equals
                        .as_deref()
                        .map(|c| {
                            parse_code("HttpErrorCodeReturnedEquals", c, |c| {
                                (400..600).contains(&c)
                            })
                        })
                        .transpose()?,
                    key_prefix: c.key_prefix_equals,
                })
            }
        };
        let d = r.redirect;
        if d.replace_key_prefix_with.is_some() && d.replace_key_with.is_some() {
            return Err(ApiError::InvalidArgument(
                "You can only define ReplaceKeyPrefix or ReplaceKey but not both.".into(),
            ));
        }
        if d.host_name.is_none()
            && d.http_redirect_code.is_none()
            && d.protocol.is_none()
            && d.replace_key_prefix_with.is_none()
            && d.replace_key_with.is_none()
        {
            return Err(ApiError::InvalidArgument(
                "A routing rule Redirect needs at least one of HostName, HttpRedirectCode, Protocol, ReplaceKeyPrefixWith, ReplaceKeyWith".into(),
            ));
        }
        let redirect = model::Redirect {
            http_redirect_code: d
                .http_redirect_code
                .as_deref()
                .map(|c| {
                    parse_code("HTTP redirect code", c, |c| {
                        (301..400).contains(&c) && c != 304
                    })
                })
                .transpose()?,
            protocol: check_protocol(d.protocol)?,
            host_name: d.host_name,
            replace_key_prefix_with: d.replace_key_prefix_with,
            replace_key_with: d.replace_key_with,
        };
        routing_rules.push(model::RoutingRule {
            condition,
            redirect,
        });
    }
    Ok(WebsiteConfig {
        index_document: Some(index),
        error_document: w.error_document.map(|e| e.key),
        redirect_all: None,
        routing_rules,
    })
}

/// The stored website configuration as GetBucketWebsite returns it.
pub fn website_to_dto(w: &WebsiteConfig) -> GetBucketWebsiteOutput {
    GetBucketWebsiteOutput {
        index_document: w
            .index_document
            .clone()
            .map(|suffix| IndexDocument { suffix }),
        error_document: w.error_document.clone().map(|key| ErrorDocument { key }),
        redirect_all_requests_to: w.redirect_all.as_ref().map(|r| RedirectAllRequestsTo {
            host_name: r.host_name.clone(),
            protocol: r.protocol.clone().map(Protocol::from),
        }),
        routing_rules: (!w.routing_rules.is_empty()).then(|| {
            w.routing_rules
                .iter()
                .map(|r| RoutingRule {
                    condition: r.condition.as_ref().map(|c| Condition {
                        http_error_code_returned_equals: c.http_error_code.map(|c| c.to_string()),
                        key_prefix_equals: c.key_prefix.clone(),
                    }),
                    redirect: Redirect {
                        host_name: r.redirect.host_name.clone(),
                        http_redirect_code: r.redirect.http_redirect_code.map(|c| c.to_string()),
                        protocol: r.redirect.protocol.clone().map(Protocol::from),
                        replace_key_prefix_with: r.redirect.replace_key_prefix_with.clone(),
                        replace_key_with: r.redirect.replace_key_with.clone(),
                    },
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(s: &str) -> Option<IndexDocument> {
        Some(IndexDocument { suffix: s.into() })
    }

    fn redirect() -> Redirect {
        Redirect {
            host_name: None,
            http_redirect_code: None,
            protocol: None,
            replace_key_prefix_with: None,
            replace_key_with: None,
        }
    }

    fn rule(r: Redirect) -> RoutingRule {
        RoutingRule {
            condition: Some(Condition {
                http_error_code_returned_equals: Some("404".into()),
                key_prefix_equals: Some("docs/".into()),
            }),
            redirect: r,
        }
    }

    fn invalid(w: WebsiteConfiguration) -> String {
        match website_from_dto(w) {
            Err(ApiError::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn routing_rules_round_trip() {
        let w = WebsiteConfiguration {
            index_document: index("index.html"),
            error_document: Some(ErrorDocument {
                key: "e.html".into(),
            }),
            redirect_all_requests_to: None,
            routing_rules: Some(vec![rule(Redirect {
                host_name: Some("example.com".into()),
                http_redirect_code: Some("301".into()),
                protocol: Some(Protocol::from_static("https")),
                replace_key_prefix_with: Some("documents/".into()),
                replace_key_with: None,
            })]),
        };
        let c = website_from_dto(w.clone()).unwrap();
        assert_eq!(c.routing_rules[0].redirect.http_redirect_code, Some(301));
        assert_eq!(
            c.routing_rules[0]
                .condition
                .as_ref()
                .unwrap()
                .http_error_code,
            Some(404)
        );
        let out = website_to_dto(&c);
        assert_eq!(out.index_document, w.index_document);
        assert_eq!(out.error_document, w.error_document);
        assert_eq!(out.routing_rules, w.routing_rules);
        assert_eq!(out.redirect_all_requests_to, None);
    }

    #[test]
    fn redirect_all_round_trips_and_excludes_the_rest() {
        let r = Some(RedirectAllRequestsTo {
            host_name: "example.com".into(),
            protocol: Some(Protocol::from_static("https")),
        });
        let c = website_from_dto(WebsiteConfiguration {
            redirect_all_requests_to: r.clone(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.index_document, None);
        let out = website_to_dto(&c);
        assert_eq!(out.redirect_all_requests_to, r);
        assert_eq!(out.index_document, None);
        invalid(WebsiteConfiguration {
            redirect_all_requests_to: r.clone(),
            index_document: index("index.html"),
            ..Default::default()
        });
        invalid(WebsiteConfiguration {
            redirect_all_requests_to: r.clone(),
            routing_rules: Some(vec![rule(Redirect {
                host_name: Some("x".into()),
                ..redirect()
            })]),
            ..Default::default()
        });
        invalid(WebsiteConfiguration {
            redirect_all_requests_to: Some(RedirectAllRequestsTo {
                host_name: "example.com".into(),
                protocol: Some(Protocol::from_static("ftp")),
            }),
            ..Default::default()
        });
    }

    #[test]
    fn bad_rules_are_invalid_arguments() {
        let with = |r: Redirect| WebsiteConfiguration {
            index_document: index("index.html"),
            routing_rules: Some(vec![rule(r)]),
            ..Default::default()
        };
        assert!(invalid(with(Redirect {
            replace_key_with: Some("a".into()),
            replace_key_prefix_with: Some("b".into()),
            ..redirect()
        }))
        .contains("ReplaceKey"));
        for code in ["200", "404", "300", "30x"] {
            assert!(invalid(with(Redirect {
                http_redirect_code: Some(code.into()),
                ..redirect()
            }))
            .contains(code));
        }
        invalid(with(redirect()));
        invalid(WebsiteConfiguration::default());
        invalid(WebsiteConfiguration {
            index_document: index("a/b"),
            ..Default::default()
        });
    }
}
