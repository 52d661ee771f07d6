//! The SigV4 time window, judged against the cluster's time: a signed
//! request dated more than 15 minutes from it is `RequestTimeTooSkewed`,
//! a presigned URL past its `X-Amz-Expires` is `AccessDenied`, as AWS.
//!
//! The cluster's time is this node's wall clock corrected by its measured
//! offset from the median of the nodes' clocks
//! ([`garage_util::clock::cluster_now_msec`]), so a node whose clock is
//! an hour off still serves correctly signed requests, and refuses a
//! replayed one as every other node does. s3s checks the same window
//! against the wall clock; [`ClusterTimeConfig`] widens its window by
//! this node's correction so that only this check decides (but for a
//! presigned URL's expiry on a node whose clock is ahead: s3s expires it
//! that much early, see doc/ordering.md).

use std::sync::{Arc, Mutex};

use hyper::header::{HeaderMap, DATE};
use hyper::Uri;
use s3s::config::{S3Config, S3ConfigProvider};

use super::auth_scope::Refusal;
use crate::request::query_pairs;

/// AWS's window between a request's date and the server's time.
pub const MAX_SKEW_SECS: u32 = 15 * 60;

/// Checks the date of a SigV4 request (header `x-amz-date` or `Date`, or
/// a presigned URL's `X-Amz-Date` and `X-Amz-Expires`) against `now_ms`.
/// A request without a date, or with one that does not parse, is left to
/// s3s, which refuses it.
pub fn check(headers: &HeaderMap, uri: &Uri, now_ms: u64) -> Result<(), Refusal> {
    let now = now_ms as i64 / 1000;
    let window = i64::from(MAX_SKEW_SECS);
    if let Some(query) = uri.query() {
        let (mut date, mut expires) = (None, None);
        for (name, value) in query_pairs(query) {
            match name.as_str() {
                "X-Amz-Date" => date = parse_amz_date(&value),
                "X-Amz-Expires" => expires = value.parse::<i64>().ok(),
                _ => (),
            }
        }
        if let Some(date) = date {
            if date - now > window {
                return Err(too_skewed(date, now));
            }
            if expires.is_some_and(|e| now - date > e) {
                return Err(Refusal::Expired);
            }
            return Ok(());
        }
    }
    let header = |n| headers.get(n).and_then(|v| v.to_str().ok());
    let date = match header("x-amz-date") {
        Some(d) => parse_amz_date(d),
        None => header(DATE.as_str()).and_then(parse_http_date),
    };
    match date {
        Some(date) if (date - now).abs() > window => Err(too_skewed(date, now)),
        _ => Ok(()),
    }
}

fn too_skewed(request: i64, server: i64) -> Refusal {
    Refusal::TimeTooSkewed {
        request: rfc3339(request),
        server: rfc3339(server),
    }
}

fn rfc3339(secs: i64) -> String {
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// `yyyymmddThhmmssZ`, in seconds since the epoch.
fn parse_amz_date(s: &str) -> Option<i64> {
    jiff::fmt::strtime::parse("%Y%m%dT%H%M%SZ", s)
        .ok()?
        .to_datetime()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp().as_second())
}

/// An RFC 7231 date (`Sun, 06 Nov 1994 08:49:37 GMT`), in seconds.
fn parse_http_date(s: &str) -> Option<i64> {
    jiff::fmt::rfc2822::parse(s)
        .ok()
        .map(|z| z.timestamp().as_second())
}

/// s3s's configuration with its time window widened by this node's
/// correction to the cluster's time, so that s3s (which judges with the
/// wall clock) does not refuse what [`check`] accepted.
pub struct ClusterTimeConfig {
    base: S3Config,
    /// The last snapshot, and the window it was made with.
    last: Mutex<(u32, Arc<S3Config>)>,
}

impl ClusterTimeConfig {
    pub fn new(base: S3Config) -> Self {
        let first = Arc::new(base.clone());
        Self {
            last: Mutex::new((first.presigned_url_max_skew_time_secs, first)),
            base,
        }
    }

    /// The window for a correction of `correction_ms`: AWS's, plus the
    /// correction rounded up, plus a second for the measure's own error.
    fn window(correction_ms: i64) -> u32 {
        let extra = correction_ms.unsigned_abs().div_ceil(1000) + 1;
        MAX_SKEW_SECS.saturating_add(u32::try_from(extra).unwrap_or(u32::MAX))
    }
}

impl S3ConfigProvider for ClusterTimeConfig {
    fn snapshot(&self) -> Arc<S3Config> {
        let window = Self::window(garage_util::clock::correction_ms());
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.0 != window {
            let mut c = self.base.clone();
            c.presigned_url_max_skew_time_secs = window;
            *last = (window, Arc::new(c));
        }
        last.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-27T12:00:00Z.
    const NOON: i64 = 1_795_780_800;

    fn at(headers: &[(&str, &str)], uri: &str, now: i64) -> Result<(), Refusal> {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        check(&h, &uri.parse().unwrap(), now as u64 * 1000)
    }

    #[test]
    fn dates_parse() {
        assert_eq!(parse_amz_date("20261127T120000Z"), Some(NOON));
        assert_eq!(parse_amz_date("2026-11-27"), None);
        assert_eq!(parse_http_date("Fri, 27 Nov 2026 12:00:00 GMT"), Some(NOON));
    }

    #[test]
    fn a_signed_request_is_judged_against_the_given_time() {
        let h = [("x-amz-date", "20261127T120000Z")];
        assert_eq!(at(&h, "/b/k", NOON), Ok(()));
        assert_eq!(at(&h, "/b/k", NOON + 900), Ok(()));
        assert_eq!(at(&h, "/b/k", NOON - 900), Ok(()));
        let e = at(&h, "/b/k", NOON + 901).unwrap_err();
        assert!(matches!(e, Refusal::TimeTooSkewed { .. }), "{e:?}");
        assert_eq!(e.code(), s3s::S3ErrorCode::RequestTimeTooSkewed);
        assert!(e.to_string().contains("2026-11-27T12:00:00Z"), "{e}");
        assert!(at(&h, "/b/k", NOON - 3600).is_err());
        // The Date header when there is no x-amz-date.
        let d = [("date", "Fri, 27 Nov 2026 12:00:00 GMT")];
        assert_eq!(at(&d, "/", NOON + 60), Ok(()));
        assert!(at(&d, "/", NOON + 3600).is_err());
        // No date, or one that does not parse: s3s's to refuse.
        assert_eq!(at(&[], "/", NOON), Ok(()));
        assert_eq!(at(&[("x-amz-date", "yesterday")], "/", NOON), Ok(()));
    }

    #[test]
    fn a_presigned_url_expires_and_may_not_be_dated_ahead() {
        let u = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261127T120000Z&X-Amz-Expires=3600&X-Amz-Signature=ab";
        assert_eq!(at(&[], u, NOON + 3599), Ok(()));
        assert_eq!(at(&[], u, NOON - 900), Ok(()));
        assert_eq!(at(&[], u, NOON + 3601), Err(Refusal::Expired));
        assert!(matches!(
            at(&[], u, NOON - 901),
            Err(Refusal::TimeTooSkewed { .. })
        ));
    }

    #[test]
    fn the_window_of_s3s_is_widened_by_the_correction() {
        assert_eq!(ClusterTimeConfig::window(0), 901);
        assert_eq!(ClusterTimeConfig::window(-3_600_000), 900 + 3601);
        assert_eq!(ClusterTimeConfig::window(1), 902);
    }
}
