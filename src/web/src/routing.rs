//! The website rules as pure functions: the object a path names (with the
//! index document), which routing rule applies to a request, and where a
//! rule or a redirect-all configuration sends the browser.
//!
//! Routing rules are tried in order and the first that applies wins, as in
//! S3. A rule whose condition has an error code applies only once the
//! object was looked up and that error came out; the others (a key prefix
//! condition alone, or no condition) apply before any lookup.

use garage_model::bucket_table::{RedirectAll, RoutingRule};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Characters escaped in a key put back into a URL: all but RFC 3986's
/// unreserved ones and `/`.
const KEY_IN_URL: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The key a request path names: percent-decoded, without its leading
/// `/`. `None` when the path is not UTF-8 once decoded.
pub fn path_key(path: &str) -> Option<String> {
    let decoded = percent_decode_str(path).decode_utf8().ok()?;
    Some(decoded.strip_prefix('/').unwrap_or(&decoded).to_string())
}

/// Whether a key names a directory: empty (the site root) or ending in `/`.
pub fn is_directory(key: &str) -> bool {
    key.is_empty() || key.ends_with('/')
}

/// The object served for a key: the index document of a directory, else
/// the key itself.
pub fn object_key(key: &str, index: &str) -> String {
    if is_directory(key) {
        format!("{key}{index}")
    } else {
        key.to_string()
    }
}

/// `key` escaped for a URL path.
pub fn key_in_url(key: &str) -> String {
    utf8_percent_encode(key, KEY_IN_URL).to_string()
}

/// The URL path of `key`: `/` and the escaped key. A key starting with
/// `/` gets it escaped, so that the path never starts with `//`, which a
/// browser would take for another host (an open redirect).
pub fn path_of(key: &str) -> String {
    let escaped = key_in_url(key);
    match escaped.strip_prefix('/') {
        Some(rest) => format!("/%2F{rest}"),
        None => format!("/{escaped}"),
    }
}

fn prefix_matches(rule: &RoutingRule, key: &str) -> bool {
    rule.condition
        .as_ref()
        .and_then(|c| c.key_prefix.as_deref())
        .is_none_or(|p| key.starts_with(p))
}

/// The first rule applying to `key` before the object is looked up: its
/// condition has no error code.
pub fn rule_before_lookup<'a>(rules: &'a [RoutingRule], key: &str) -> Option<&'a RoutingRule> {
    rules.iter().find(|r| {
        r.condition
            .as_ref()
            .is_none_or(|c| c.http_error_code.is_none())
            && prefix_matches(r, key)
    })
}

/// The first rule applying to `key` once its lookup ended with HTTP
/// status `code`: its condition names that code.
pub fn rule_after_error<'a>(
    rules: &'a [RoutingRule],
    key: &str,
    code: u16,
) -> Option<&'a RoutingRule> {
    rules.iter().find(|r| {
        r.condition
            .as_ref()
            .is_some_and(|c| c.http_error_code == Some(code))
            && prefix_matches(r, key)
    })
}

/// A redirection: the HTTP status and the `Location`.
#[derive(Debug, PartialEq, Eq)]
pub struct Redirection {
    pub status: u16,
    pub location: String,
}

/// The start of an absolute URL on `host`: `<protocol>://<host>`, or the
/// scheme-relative `//<host>` (the browser keeps the request's scheme,
/// which is right behind a TLS proxy too) when no protocol is set.
fn origin(protocol: Option<&str>, host: &str) -> String {
    match protocol {
        Some(p) => format!("{p}://{host}"),
        None => format!("//{host}"),
    }
}

/// Where `rule` sends a request for `key` arriving on `request_host`:
/// the key replaced whole, or its prefix replaced, or kept; on the rule's
/// host and protocol when it sets them, else on the same site (a path).
pub fn redirect(rule: &RoutingRule, key: &str, request_host: &str) -> Redirection {
    let r = &rule.redirect;
    let new_key = match (&r.replace_key_with, &r.replace_key_prefix_with) {
        (Some(k), _) => k.clone(),
        (None, Some(p)) => {
            let prefix = rule
                .condition
                .as_ref()
                .and_then(|c| c.key_prefix.as_deref())
                .unwrap_or("");
            format!("{p}{}", key.strip_prefix(prefix).unwrap_or(key))
        }
        (None, None) => key.to_string(),
    };
    let path = path_of(&new_key);
    let location = match (&r.host_name, &r.protocol) {
        (None, None) => path,
        (host, protocol) => format!(
            "{}{path}",
            origin(protocol.as_deref(), host.as_deref().unwrap_or(request_host))
        ),
    };
    Redirection {
        status: r.http_redirect_code.unwrap_or(301),
        location,
    }
}

/// Where a bucket that redirects every request sends one for
/// `path_and_query` (as received, still escaped).
pub fn redirect_all(r: &RedirectAll, path_and_query: &str) -> Redirection {
    Redirection {
        status: 301,
        location: format!(
            "{}{path_and_query}",
            origin(r.protocol.as_deref(), &r.host_name)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_model::bucket_table::{Redirect, RoutingCondition};

    fn rule(code: Option<u16>, prefix: Option<&str>, redirect: Redirect) -> RoutingRule {
        RoutingRule {
            condition: (code.is_some() || prefix.is_some()).then(|| RoutingCondition {
                http_error_code: code,
                key_prefix: prefix.map(String::from),
            }),
            redirect,
        }
    }

    fn to(
        host: Option<&str>,
        proto: Option<&str>,
        prefix: Option<&str>,
        key: Option<&str>,
    ) -> Redirect {
        Redirect {
            host_name: host.map(String::from),
            http_redirect_code: None,
            protocol: proto.map(String::from),
            replace_key_prefix_with: prefix.map(String::from),
            replace_key_with: key.map(String::from),
        }
    }

    #[test]
    fn keys_of_paths() {
        assert_eq!(path_key("/").as_deref(), Some(""));
        assert_eq!(path_key("/a%20b/c.html").as_deref(), Some("a b/c.html"));
        assert_eq!(path_key("/%C3%A9t%C3%A9/").as_deref(), Some("été/"));
        assert_eq!(path_key("/%FF"), None);
        assert_eq!(object_key("", "index.html"), "index.html");
        assert_eq!(object_key("dir/", "index.html"), "dir/index.html");
        assert_eq!(object_key("dir", "index.html"), "dir");
        assert_eq!(key_in_url("a b/é?#.html"), "a%20b/%C3%A9%3F%23.html");
        assert_eq!(path_of("dir/"), "/dir/");
        assert_eq!(path_of("/evil.example/x"), "/%2Fevil.example/x");
        assert_eq!(
            path_key(&path_of("/evil.example/x")).as_deref(),
            Some("/evil.example/x")
        );
    }

    #[test]
    fn rules_in_order_and_by_phase() {
        let rules = vec![
            rule(Some(404), Some("old/"), to(None, None, Some("new/"), None)),
            rule(
                None,
                Some("docs/"),
                to(Some("docs.example"), Some("https"), None, None),
            ),
            rule(Some(404), None, to(None, None, None, Some("missing.html"))),
        ];
        assert_eq!(rule_before_lookup(&rules, "old/a.html"), None);
        let r = rule_before_lookup(&rules, "docs/x").unwrap();
        assert_eq!(
            redirect(r, "docs/x", "site.web"),
            Redirection {
                status: 301,
                location: "https://docs.example/docs/x".into()
            }
        );
        let r = rule_after_error(&rules, "old/a b.html", 404).unwrap();
        assert_eq!(
            redirect(r, "old/a b.html", "site.web").location,
            "/new/a%20b.html"
        );
        let r = rule_after_error(&rules, "other", 404).unwrap();
        assert_eq!(redirect(r, "other", "site.web").location, "/missing.html");
        assert_eq!(rule_after_error(&rules, "other", 403), None);
        // A key from a path like `//evil.example` stays on the site.
        let same = rule(
            Some(404),
            None,
            Redirect {
                http_redirect_code: Some(302),
                ..to(None, None, None, None)
            },
        );
        assert_eq!(
            redirect(&same, "/evil.example", "site.web").location,
            "/%2Fevil.example"
        );
        // A rule without condition applies to everything, first.
        let all = vec![rule(None, None, to(Some("elsewhere"), None, None, None))];
        let r = rule_before_lookup(&all, "x/y").unwrap();
        assert_eq!(redirect(r, "x/y", "site.web").location, "//elsewhere/x/y");
        // A protocol alone keeps the host of the request.
        let p = rule(None, None, to(None, Some("https"), None, None));
        assert_eq!(redirect(&p, "k", "site.web").location, "https://site.web/k");
        let mut coded = p.clone();
        coded.redirect.http_redirect_code = Some(307);
        assert_eq!(redirect(&coded, "k", "site.web").status, 307);
    }

    #[test]
    fn redirect_everything() {
        let r = RedirectAll {
            host_name: "www.example.org".into(),
            protocol: Some("https".into()),
        };
        assert_eq!(
            redirect_all(&r, "/a/b?x=1").location,
            "https://www.example.org/a/b?x=1"
        );
        let r = RedirectAll {
            host_name: "www.example.org".into(),
            protocol: None,
        };
        assert_eq!(redirect_all(&r, "/").location, "//www.example.org/");
    }
}
