//! CORS against a real node, as a browser sees it: the rules are set with
//! the Rust `aws-sdk-s3` crate, preflights (`OPTIONS`, unauthenticated)
//! and cross-origin GETs (presigned URLs) are sent with curl.

use crate::common;

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
use aws_sdk_s3::Client;

use common::cluster::Cluster;
use common::http::{curl, Answer};
use common::s3::make_key;

fn client(endpoint: &str, key: &(String, String)) -> Client {
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("garage"))
        .credentials_provider(Credentials::new(&key.0, &key.1, None, None, "test"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    Client::from_conf(conf)
}

fn preflight(url: &str, origin: &str, method: &str, headers: Option<&str>) -> Answer {
    let origin = format!("Origin: {origin}");
    let method = format!("Access-Control-Request-Method: {method}");
    let mut args = vec!["-X", "OPTIONS", "-H", &origin, "-H", &method];
    let h;
    if let Some(v) = headers {
        h = format!("Access-Control-Request-Headers: {v}");
        args.extend(["-H", &h]);
    }
    args.push(url);
    curl(&args)
}

fn assert_denied(a: &Answer) {
    assert_eq!(a.status, 403, "{}", a.text());
    assert!(
        a.text().contains("<Code>AccessDenied</Code>"),
        "{}",
        a.text()
    );
    assert!(a.text().contains("CORSResponse"), "{}", a.text());
    assert!(a.header("access-control-allow-origin").is_none());
}

#[test]
fn cors_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "cors");
    let endpoint = format!("http://{}:3900", c.nodes[0].ip);
    let s3 = client(&endpoint, &key);
    let url = format!("{endpoint}/web/page.html");
    let rt = tokio::runtime::Runtime::new().unwrap();

    rt.block_on(async {
        s3.create_bucket().bucket("web").send().await.unwrap();
        s3.put_object()
            .bucket("web")
            .key("page.html")
            .body(b"<p>hi</p>".to_vec().into())
            .send()
            .await
            .unwrap();
    });

    // No CORS configuration: every preflight is refused.
    assert_denied(&preflight(&url, "https://app.example", "GET", None));
    // A missing bucket is said so; a preflight without the method is
    // malformed.
    let a = preflight(
        &format!("{endpoint}/nope/x"),
        "https://app.example",
        "GET",
        None,
    );
    assert_eq!(a.status, 404, "{}", a.text());
    assert!(a.text().contains("NoSuchBucket"), "{}", a.text());
    let a = curl(&["-X", "OPTIONS", "-H", "Origin: https://app.example", &url]);
    assert_eq!(a.status, 400, "{}", a.text());

    rt.block_on(async {
        let rules = CorsConfiguration::builder()
            .cors_rules(
                CorsRule::builder()
                    .allowed_origins("https://app.example")
                    .allowed_methods("PUT")
                    .allowed_methods("GET")
                    .allowed_headers("content-type")
                    .allowed_headers("x-amz-*")
                    .expose_headers("ETag")
                    .max_age_seconds(600)
                    .build()
                    .unwrap(),
            )
            .cors_rules(
                CorsRule::builder()
                    .allowed_origins("https://*.cdn.example")
                    .allowed_methods("GET")
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        s3.put_bucket_cors()
            .bucket("web")
            .cors_configuration(rules)
            .send()
            .await
            .unwrap();
    });

    // The first rule, with allowed request headers (any case).
    let a = preflight(
        &url,
        "https://app.example",
        "PUT",
        Some("Content-Type, X-Amz-Date"),
    );
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(a.header("access-control-allow-methods"), Some("PUT, GET"));
    assert_eq!(
        a.header("access-control-allow-headers"),
        Some("content-type, x-amz-date")
    );
    assert_eq!(a.header("access-control-max-age"), Some("600"));
    assert_eq!(a.header("access-control-expose-headers"), Some("ETag"));
    // On the bucket itself too.
    let a = preflight(
        &format!("{endpoint}/web"),
        "https://app.example",
        "GET",
        None,
    );
    assert_eq!(a.status, 200, "{}", a.text());

    // The second rule: a wildcard origin, no headers allowed.
    let a = preflight(&url, "https://img.cdn.example", "GET", None);
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://img.cdn.example")
    );
    assert!(a.header("access-control-max-age").is_none());
    assert_denied(&preflight(
        &url,
        "https://img.cdn.example",
        "GET",
        Some("x-a"),
    ));
    assert_denied(&preflight(&url, "https://img.cdn.example", "PUT", None));
    assert_denied(&preflight(&url, "https://app.example", "DELETE", None));
    assert_denied(&preflight(&url, "https://evil.example", "GET", None));

    // Ordinary (signed) requests with Origin get the matching rule's
    // headers, errors included; a foreign origin gets none.
    let (get, missing) = rt.block_on(async {
        let cfg = PresigningConfig::expires_in(Duration::from_secs(600)).unwrap();
        let get = s3
            .get_object()
            .bucket("web")
            .key("page.html")
            .presigned(cfg.clone())
            .await
            .unwrap();
        let missing = s3
            .get_object()
            .bucket("web")
            .key("missing")
            .presigned(cfg)
            .await
            .unwrap();
        (get.uri().to_string(), missing.uri().to_string())
    });
    let a = curl(&["-H", "Origin: https://app.example", &get]);
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.text(), "<p>hi</p>");
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(a.header("access-control-expose-headers"), Some("ETag"));
    let a = curl(&["-H", "Origin: https://x.cdn.example", &missing]);
    assert_eq!(a.status, 404, "{}", a.text());
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://x.cdn.example")
    );
    let a = curl(&["-H", "Origin: https://evil.example", &get]);
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.header("access-control-allow-origin").is_none());
    let a = curl(&[&get]);
    assert!(a.header("access-control-allow-origin").is_none());

    // Rules removed: preflights refused again.
    rt.block_on(async {
        s3.delete_bucket_cors().bucket("web").send().await.unwrap();
    });
    assert_denied(&preflight(&url, "https://app.example", "GET", None));
}
