//! The web console at `/ui/` on the admin listener: a page and its script
//! and style sheet, embedded in the binary (no build step, no CDN, works
//! offline). The script is a client of the admin HTTP API: every action is
//! one `/v2/…` request with the operator's admin token, so it goes through
//! the same token scopes and checks as any other API client.
//!
//! The token is held in the page's memory only: never in a URL, a cookie or
//! browser storage (a reload asks for it again). With no cookie there is
//! nothing for a cross-site request to ride on (no CSRF); the content
//! security policy allows only this origin's script and style (no inline
//! script), and the page cannot be framed.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// Sent with every console answer.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

pub async fn to_index() -> Redirect {
    Redirect::permanent("/ui/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX.contains(r#"src="/ui/app.js""#));
        assert!(INDEX.contains(r#"href="/ui/app.css""#));
        // No inline script: the policy would block it.
        assert_eq!(INDEX.matches("<script").count(), 1);
        for banned in [
            "http://",
            "https://",
            "localStorage",
            "sessionStorage",
            "innerHTML",
        ] {
            assert!(!SCRIPT.contains(banned), "app.js uses {banned}");
            assert!(!INDEX.contains(banned), "index.html uses {banned}");
        }
    }
}
