//! Fuzz targets of the S3 request parts parsed in this process: the
//! `Range` and conditional headers (parsed by s3s, used here: a range is
//! checked against the object and cut into block slices), the
//! credentials' region and the SigV2 markers ([`crate::access::auth_scope`]),
//! `Content-MD5`, CORS request headers, and the XML bodies s3s parses for
//! us, then our conversion of the website and lifecycle configurations.
//! They run with bolero: `cargo test -p garage_api fuzz_` for a short
//! budget (`GARAGE_FUZZ_SECONDS`, default 1 s each; see doc/security.md).

use garage_util::fuzzing::budget;

use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use s3s::dto::*;
use s3s::xml::{Deserialize, Deserializer};

const MIB: u64 = 1 << 20;

/// A `Range` header and an object size: the range checked against the
/// size lies inside the object, and its slices of 1 MiB blocks tile it.
fn range_within_object(header: &str, size: u64) {
    let Ok(range) = Range::parse(header) else {
        return;
    };
    let Ok(r) = range.check(size) else { return };
    assert!(
        r.start <= r.end && r.end <= size,
        "{header:?} on {size}: {r:?}"
    );
    let mut covered = 0u64;
    let mut block = 0u64;
    while block * MIB < r.end && block < 4096 {
        let b = block * MIB..((block + 1) * MIB).min(size);
        if b.end > r.start {
            let s = crate::objects::stream::in_block_for_tests(b.clone(), &r);
            assert!(s.start <= s.end && s.end as u64 <= b.end - b.start);
            covered += (s.end - s.start) as u64;
        }
        block += 1;
    }
    if block < 4096 {
        assert_eq!(covered, r.end - r.start, "{header:?} on {size}");
    }
}

#[test]
fn fuzz_request_headers() {
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(4096)
        .with_type::<(String, u64, Vec<u8>, String)>()
        .for_each(|(text, size, raw, query)| {
            range_within_object(text, *size % (1 << 40));
            range_within_object(&format!("bytes={text}"), *size % (1 << 40));
            let _ = ETagCondition::parse_http_header(raw);
            let _ = ETag::parse_http_header(raw);
            let _ = Timestamp::parse(TimestampFormat::HttpDate, text);
            let _ = crate::objects::block_writer::parse_content_md5(text);
            let _ = crate::website::cors::parse_request_headers(text);
            let mut headers = HeaderMap::new();
            for auth in [text.clone(), format!("AWS4-HMAC-SHA256 Credential={text}")] {
                if let Ok(v) = HeaderValue::from_str(&auth) {
                    headers.insert(AUTHORIZATION, v);
                }
                let uri: hyper::Uri = format!("/b/k?{query}")
                    .parse()
                    .unwrap_or_else(|_| "/b/k".parse().unwrap());
                let regions = crate::access::auth_scope::Regions::new("garage", &[]);
                let path = s3s::path::parse_path_style(uri.path()).ok();
                for method in [hyper::Method::GET, hyper::Method::PUT] {
                    let global = crate::access::auth_scope::is_global(&method, path.as_ref(), &uri);
                    let _ =
                        crate::access::auth_scope::check_request(&headers, &uri, &regions, global);
                }
            }
        });
}

fn xml<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Option<T> {
    let mut d = Deserializer::new(b);
    let v = T::deserialize(&mut d).ok()?;
    d.expect_eof().ok()?;
    Some(v)
}

/// `b` as each XML body; the website and lifecycle configurations that
/// parse go through garage's conversion.
fn parse_bodies(b: &[u8]) {
    let _ = xml::<CompletedMultipartUpload>(b);
    let _ = xml::<Delete>(b);
    let _ = xml::<CORSConfiguration>(b);
    let _ = xml::<CreateBucketConfiguration>(b);
    if let Some(w) = xml::<WebsiteConfiguration>(b) {
        let _ = crate::website::bucket_config::website_from_dto(w);
    }
    if let Some(l) = xml::<BucketLifecycleConfiguration>(b) {
        let _ = crate::lifecycle::lifecycle_from_dto(l);
    }
}

#[test]
fn fuzz_xml_bodies() {
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(1 << 16)
        .for_each(|b: &[u8]| parse_bodies(b));
}

/// The same XML parsers on well-formed documents with random content:
/// random bytes alone rarely get past the root element.
#[test]
fn fuzz_xml_bodies_structured() {
    const ROOTS: [&str; 6] = [
        "CompleteMultipartUpload",
        "Delete",
        "CORSConfiguration",
        "CreateBucketConfiguration",
        "WebsiteConfiguration",
        "LifecycleConfiguration",
    ];
    const TAGS: [&str; 24] = [
        "Part",
        "PartNumber",
        "ETag",
        "Object",
        "Key",
        "Quiet",
        "CORSRule",
        "AllowedOrigin",
        "AllowedMethod",
        "AllowedHeader",
        "MaxAgeSeconds",
        "LocationConstraint",
        "IndexDocument",
        "Suffix",
        "ErrorDocument",
        "RoutingRules",
        "RoutingRule",
        "Condition",
        "Redirect",
        "Rule",
        "Filter",
        "Prefix",
        "Expiration",
        "Days",
    ];
    bolero::check!()
        .with_test_time(budget())
        .with_type::<(u8, Vec<(u8, u8, String)>)>()
        .for_each(|(root, items)| {
            let root = ROOTS[usize::from(*root) % ROOTS.len()];
            let mut doc = format!("<{root}>");
            let mut open: Vec<&str> = Vec::new();
            for (op, tag, text) in items.iter().take(200) {
                let tag = TAGS[usize::from(*tag) % TAGS.len()];
                match op % 3 {
                    0 => {
                        doc.push_str(&format!("<{tag}>"));
                        open.push(tag);
                    }
                    1 => {
                        if let Some(t) = open.pop() {
                            doc.push_str(&format!("</{t}>"));
                        }
                    }
                    _ => {
                        let escaped = text
                            .replace('&', "&amp;")
                            .replace('<', "&lt;")
                            .replace('>', "&gt;");
                        doc.push_str(&format!("<{tag}>{escaped}</{tag}>"));
                    }
                }
            }
            while let Some(t) = open.pop() {
                doc.push_str(&format!("</{t}>"));
            }
            doc.push_str(&format!("</{root}>"));
            parse_bodies(doc.as_bytes());
        });
}
