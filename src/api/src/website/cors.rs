//! CORS: which of a bucket's rules a cross-origin request matches, and the
//! `Access-Control-*` headers to answer it with, for a preflight (`OPTIONS`
//! with `Origin` and `Access-Control-Request-Method`) and for an ordinary
//! request carrying `Origin`. Pure functions over the rules, so that the
//! website endpoint can use them too; the HTTP side is in `server.rs`.

use garage_model::bucket_table::CorsRule;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};

/// `*`, or a pattern with at most one `*` matching any (possibly empty)
/// run of characters. Without a `*`, equality. `fold` compares ASCII
/// letters case-insensitively (header names).
fn wildcard_match(pattern: &str, value: &str, fold: bool) -> bool {
    let eq = |a: &str, b: &str| {
        if fold {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    match pattern.split_once('*') {
        None => eq(pattern, value),
        Some((pre, post)) => {
            value.len() >= pre.len() + post.len()
                && value.is_char_boundary(pre.len())
                && value.is_char_boundary(value.len() - post.len())
                && eq(pre, &value[..pre.len()])
                && eq(post, &value[value.len() - post.len()..])
        }
    }
}

/// The header names of an `Access-Control-Request-Headers` value
/// (comma-separated), trimmed and lowercased.
pub fn parse_request_headers(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect()
}

/// The first rule (in document order, as S3 does) allowing `origin`,
/// `method` and every header of `request_headers`.
pub fn find_matching_rule<'a>(
    rules: &'a [CorsRule],
    origin: &str,
    method: &str,
    request_headers: &[String],
) -> Option<&'a CorsRule> {
    rules.iter().find(|r| {
        r.allow_origins
            .iter()
            .any(|o| wildcard_match(o, origin, false))
            && r.allow_methods.iter().any(|m| m == method)
            && request_headers.iter().all(|h| {
                r.allow_headers
                    .iter()
                    .any(|pattern| wildcard_match(pattern, h, true))
            })
    })
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

/// `Access-Control-Allow-Origin`: `*` when the rule allows any origin,
/// else the request's own origin.
fn allow_origin(rule: &CorsRule, origin: &str) -> String {
    if rule.allow_origins.iter().any(|o| o == "*") {
        "*".into()
    } else {
        origin.into()
    }
}

/// Headers common to preflight and ordinary answers.
fn common_headers(rule: &CorsRule, origin: &str, headers: &mut HeaderMap) {
    set(
        headers,
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        &allow_origin(rule, origin),
    );
    set(
        headers,
        header::ACCESS_CONTROL_ALLOW_METHODS,
        &rule.allow_methods.join(", "),
    );
    if !rule.expose_headers.is_empty() {
        set(
            headers,
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            &rule.expose_headers.join(", "),
        );
    }
    if let Some(age) = rule.max_age_seconds {
        set(headers, header::ACCESS_CONTROL_MAX_AGE, &age.to_string());
    }
}

/// The headers answering a preflight that `rule` matched: the requested
/// headers are echoed in `Access-Control-Allow-Headers`.
pub fn preflight_headers(rule: &CorsRule, origin: &str, request_headers: &[String]) -> HeaderMap {
    let mut h = HeaderMap::new();
    common_headers(rule, origin, &mut h);
    if !request_headers.is_empty() {
        set(
            &mut h,
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            &request_headers.join(", "),
        );
    }
    set(
        &mut h,
        header::VARY,
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    );
    h
}

/// Adds to the response of an ordinary request with `Origin` the headers
/// of the rule it matched.
pub fn add_response_headers(rule: &CorsRule, origin: &str, headers: &mut HeaderMap) {
    common_headers(rule, origin, headers);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

impl Api {
    /// The CORS rules of the bucket with global alias `bucket` (`None`
    /// when it has none). Cross-origin requests are matched without their
    /// credentials (a preflight has none), so a key's local aliases do
    /// not apply.
    pub async fn bucket_cors_rules(&self, bucket: &str) -> ApiResult<Option<Vec<CorsRule>>> {
        let id = self
            .metadata
            .global_alias_target(bucket)
            .await?
            .ok_or_else(|| ApiError::NoSuchBucket(bucket.into()))?;
        Ok(self
            .bucket(id, bucket)
            .await?
            .params()
            .and_then(|p| p.cors_config.get().clone()))
    }

    /// Answers a preflight for `bucket`: the `Access-Control-*` headers of
    /// the matching rule, or `CorsNotAllowed`.
    pub async fn preflight(&self, bucket: &str, req: &HeaderMap) -> ApiResult<HeaderMap> {
        let get = |n: HeaderName| req.get(n).and_then(|v| v.to_str().ok());
        let origin = get(header::ORIGIN).ok_or_else(|| {
            ApiError::InvalidRequest(
                "Insufficient information. Origin request header needed.".into(),
            )
        })?;
        let method = get(header::ACCESS_CONTROL_REQUEST_METHOD).ok_or_else(|| {
            ApiError::InvalidRequest(
                "Insufficient information. Access-Control-Request-Method request header needed."
                    .into(),
            )
        })?;
        let wanted = get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .map(parse_request_headers)
            .unwrap_or_default();
        let rules = self.bucket_cors_rules(bucket).await?.unwrap_or_default();
        let rule =
            find_matching_rule(&rules, origin, method, &wanted).ok_or(ApiError::CorsNotAllowed)?;
        Ok(preflight_headers(rule, origin, &wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CorsRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        CorsRule {
            id: None,
            max_age_seconds: None,
            allow_origins: v(origins),
            allow_methods: v(methods),
            allow_headers: v(headers),
            expose_headers: vec![],
        }
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*", "", false));
        assert!(wildcard_match("*", "https://a.example", false));
        assert!(wildcard_match(
            "https://*.example",
            "https://a.example",
            false
        ));
        assert!(wildcard_match(
            "https://*.example",
            "https://a.b.example",
            false
        ));
        assert!(!wildcard_match(
            "https://*.example",
            "https://example",
            false
        ));
        assert!(!wildcard_match(
            "https://*.example",
            "http://a.example",
            false
        ));
        assert!(wildcard_match(
            "http://a.example*",
            "http://a.example:8080",
            false
        ));
        assert!(wildcard_match(
            "http://a.example",
            "http://a.example",
            false
        ));
        assert!(!wildcard_match(
            "http://a.example",
            "http://A.example",
            false
        ));
        assert!(wildcard_match("x-amz-*", "X-Amz-Date", true));
        assert!(!wildcard_match("x-amz-*", "x-am", true));
        // The prefix and suffix must not overlap.
        assert!(!wildcard_match("ab*ba", "aba", false));
        // Not a char boundary: no panic, no match.
        assert!(!wildcard_match("é*", "e\u{301}", false));
    }

    #[test]
    fn request_headers() {
        assert_eq!(
            parse_request_headers(" Content-Type,x-amz-date ,, "),
            vec!["content-type", "x-amz-date"]
        );
        assert!(parse_request_headers("").is_empty());
    }

    #[test]
    fn matching() {
        let rules = vec![
            rule(
                &["https://app.example"],
                &["PUT", "POST"],
                &["content-type"],
            ),
            rule(&["https://*.example"], &["GET"], &["*"]),
            rule(&["*"], &["HEAD"], &[]),
        ];
        let m = |o, m, h: &[&str]| {
            let h: Vec<String> = h.iter().map(|s| s.to_string()).collect();
            find_matching_rule(&rules, o, m, &h).map(|r| r.allow_methods[0].clone())
        };
        assert_eq!(m("https://app.example", "PUT", &[]).as_deref(), Some("PUT"));
        assert_eq!(
            m("https://app.example", "PUT", &["content-type"]).as_deref(),
            Some("PUT")
        );
        // A header the first rule does not allow.
        assert_eq!(m("https://app.example", "PUT", &["x-amz-date"]), None);
        // Methods are case-sensitive, as in S3.
        assert_eq!(m("https://app.example", "put", &[]), None);
        assert_eq!(
            m("https://cdn.example", "GET", &["x-anything"]).as_deref(),
            Some("GET")
        );
        assert_eq!(m("https://cdn.example", "PUT", &[]), None);
        assert_eq!(m("http://other.org", "HEAD", &[]).as_deref(), Some("HEAD"));
        assert_eq!(m("http://other.org", "HEAD", &["x-a"]), None);
        assert_eq!(m("http://other.org", "DELETE", &[]), None);
        assert_eq!(find_matching_rule(&[], "http://a", "GET", &[]), None);
    }

    #[test]
    fn headers_of_answers() {
        let mut r = rule(&["https://*.example"], &["GET", "PUT"], &["*"]);
        r.max_age_seconds = Some(600);
        r.expose_headers = vec!["ETag".into(), "x-amz-meta-a".into()];
        let h = preflight_headers(&r, "https://a.example", &["content-type".into()]);
        let get = |h: &HeaderMap, n| h.get(n).unwrap().to_str().unwrap().to_string();
        assert_eq!(
            get(&h, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            "https://a.example"
        );
        assert_eq!(get(&h, header::ACCESS_CONTROL_ALLOW_METHODS), "GET, PUT");
        assert_eq!(
            get(&h, header::ACCESS_CONTROL_ALLOW_HEADERS),
            "content-type"
        );
        assert_eq!(get(&h, header::ACCESS_CONTROL_MAX_AGE), "600");
        assert_eq!(
            get(&h, header::ACCESS_CONTROL_EXPOSE_HEADERS),
            "ETag, x-amz-meta-a"
        );

        let any = rule(&["*"], &["GET"], &[]);
        let h = preflight_headers(&any, "https://a.example", &[]);
        assert_eq!(get(&h, header::ACCESS_CONTROL_ALLOW_ORIGIN), "*");
        assert!(h.get(header::ACCESS_CONTROL_ALLOW_HEADERS).is_none());
        assert!(h.get(header::ACCESS_CONTROL_MAX_AGE).is_none());
        assert!(h.get(header::ACCESS_CONTROL_EXPOSE_HEADERS).is_none());

        let mut h = HeaderMap::new();
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        add_response_headers(&r, "https://b.example", &mut h);
        assert_eq!(
            get(&h, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            "https://b.example"
        );
        assert_eq!(
            get(&h, header::ACCESS_CONTROL_EXPOSE_HEADERS),
            "ETag, x-amz-meta-a"
        );
        assert_eq!(h.get_all(header::VARY).iter().count(), 2);
    }
}
