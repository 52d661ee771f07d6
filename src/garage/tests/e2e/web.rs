//! The website endpoint end to end: a static site uploaded with aws-cli,
//! served by real `garage server` processes on one node and through a
//! gateway node (no capacity) of a 3-node cluster in 3 zones; checked with
//! curl (statuses, bodies, headers, ranges, conditions, CORS) and loaded
//! in a headless Chromium whose rendered DOM proves the page's stylesheet
//! arrived with its content type.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::http::{curl, Answer};
use common::s3::{aws_ok, endpoint, make_key};
use common::{stderr, stdout};

const WEB_PORT: u16 = 3902;
const ROOT_DOMAIN: &str = "web.garage.localhost";

/// The stylesheet sets this color on `#probe`; the page's script writes
/// the computed color into the DOM.
const PROBE_COLOR: &str = "rgb(1, 2, 3)";

const INDEX: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Home</title><link rel="stylesheet" href="style.css"></head>
<body><h1>Home page</h1><p id="probe">probe</p>
<script>
var p = document.getElementById('probe');
p.setAttribute('data-color', getComputedStyle(p).color);
</script>
</body></html>
"#;

const NESTED: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Nested</title><link rel="stylesheet" href="../style.css"></head>
<body><h1>Nested index</h1><p id="probe">probe</p>
<script>
var p = document.getElementById('probe');
p.setAttribute('data-color', getComputedStyle(p).color);
</script>
</body></html>
"#;

const NOT_FOUND: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Lost</title></head>
<body><h1>Custom 404 page</h1></body></html>
"#;

/// Index and error documents, and a rule sending the old section's
/// missing pages to the new one.
const WEBSITE: &str = r#"{
  "IndexDocument": {"Suffix": "index.html"},
  "ErrorDocument": {"Key": "404.html"},
  "RoutingRules": [{
    "Condition": {"KeyPrefixEquals": "old/", "HttpErrorCodeReturnedEquals": "404"},
    "Redirect": {"ReplaceKeyPrefixWith": "dir/"}
  }]
}"#;

const CORS: &str = r#"{"CORSRules": [{
  "AllowedOrigins": ["https://app.example"],
  "AllowedMethods": ["GET"],
  "AllowedHeaders": ["range"],
  "MaxAgeSeconds": 600
}]}"#;

/// The site's files, in a directory for `aws s3 sync`.
fn write_site(dir: &Path) -> Vec<u8> {
    let site = dir.join("site");
    std::fs::create_dir_all(site.join("dir")).unwrap();
    std::fs::write(site.join("index.html"), INDEX).unwrap();
    std::fs::write(site.join("dir/index.html"), NESTED).unwrap();
    std::fs::write(site.join("404.html"), NOT_FOUND).unwrap();
    std::fs::write(
        site.join("style.css"),
        format!("#probe {{ color: {PROBE_COLOR}; }}\n"),
    )
    .unwrap();
    // Larger than a block (1 MiB): streamed from several blocks.
    let big: Vec<u8> = (0..(3 << 19) + 7)
        .map(|i: u32| (i * 7 % 251) as u8)
        .collect();
    std::fs::write(site.join("big.bin"), &big).unwrap();
    std::fs::write(dir.join("website.json"), WEBSITE).unwrap();
    std::fs::write(dir.join("cors.json"), CORS).unwrap();
    big
}

/// The Unix socket of node `i`'s website endpoint, when it has one.
fn web_socket(c: &Cluster, i: usize) -> std::path::PathBuf {
    c.nodes[i].dir.join("web.sock")
}

/// Adds the `[s3_web]` section to node `i`'s configuration: listening on
/// its address, or on [`web_socket`] with `unix`.
fn add_web_config(c: &Cluster, i: usize, unix: bool) {
    let n = &c.nodes[i];
    let bind = if unix {
        web_socket(c, i).display().to_string()
    } else {
        format!("{}:{WEB_PORT}", n.ip)
    };
    let text = std::fs::read_to_string(&n.config).unwrap();
    std::fs::write(
        &n.config,
        format!("{text}\n[s3_web]\nbind_addr = \"{bind}\"\nroot_domain = \".{ROOT_DOMAIN}\"\n"),
    )
    .unwrap();
}

/// Starts every node with a website endpoint (node 0 first, the others
/// with it as bootstrap peer; the nodes in `unix` on a Unix socket) and
/// waits until node 0 sees them all.
fn start_with_web(c: &mut Cluster, unix: &[usize]) {
    add_web_config(c, 0, unix.contains(&0));
    c.start(0);
    let boot = vec![format!("{}@{}", c.nodes[0].id(), c.nodes[0].public_addr())];
    for i in 1..c.nodes.len() {
        c.write_config(i, &c.secret.clone(), &boot);
        add_web_config(c, i, unix.contains(&i));
        c.start(i);
    }
    for n in &c.nodes {
        n.proc().wait_log("website endpoint listening on");
    }
    let n = c.nodes.len();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == n
    });
}

/// Uploads the site with aws-cli through node 0's S3 API into bucket
/// `site`, with its website and CORS configurations.
fn upload_site(c: &Cluster, dir: &Path) {
    let key = make_key(c, "web");
    let s3 = endpoint(c, 0);
    aws_ok(&key, &s3, dir, &["s3", "mb", "s3://site"]);
    aws_ok(&key, &s3, dir, &["s3", "sync", "site", "s3://site/"]);
    aws_ok(
        &key,
        &s3,
        dir,
        &[
            "s3api",
            "put-bucket-cors",
            "--bucket",
            "site",
            "--cors-configuration",
            "file://cors.json",
        ],
    );
    // The object keys and types aws-cli gave them.
    let ls = aws_ok(&key, &s3, dir, &["s3", "ls", "--recursive", "s3://site/"]);
    for k in [
        "index.html",
        "dir/index.html",
        "404.html",
        "style.css",
        "big.bin",
    ] {
        assert!(ls.contains(k), "{k} missing from the bucket:\n{ls}");
    }
}

fn put_website(c: &Cluster, dir: &Path) {
    let key = make_key(c, "web-owner");
    c.garage_ok(0, &["bucket", "allow", "--owner", "--key", &key.0, "site"]);
    aws_ok(
        &key,
        &endpoint(c, 0),
        dir,
        &[
            "s3api",
            "put-bucket-website",
            "--bucket",
            "site",
            "--website-configuration",
            "file://website.json",
        ],
    );
}

/// A request to the website endpoint of `ip` for `path`, with the Host
/// header `host`, and more curl arguments.
fn get(ip: &str, host: &str, path: &str, more: &[&str]) -> Answer {
    let url = format!("http://{ip}:{WEB_PORT}{path}");
    let h = format!("Host: {host}");
    let mut args = vec!["-H", &h];
    args.extend_from_slice(more);
    args.push(&url);
    curl(&args)
}

/// Checks the site served by the endpoint on `ip` (the host name carries
/// a port, which must be ignored).
fn check_site(ip: &str, big: &[u8]) {
    let host = format!("site.{ROOT_DOMAIN}:{WEB_PORT}");
    let g = |path: &str, more: &[&str]| get(ip, &host, path, more);

    // The index document, for the root and for a directory.
    let a = g("/", &[]);
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.text(), INDEX);
    assert_eq!(a.header("content-type"), Some("text/html"));
    let etag = a.header("etag").expect("an ETag").to_string();
    assert!(a.header("last-modified").is_some());
    let a = g("/dir/", &[]);
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), NESTED);
    let a = g("/dir/index.html", &[]);
    assert_eq!(a.text(), NESTED);
    // A directory without its slash: redirected (the query kept).
    let a = g("/dir", &[]);
    assert_eq!(a.status, 302);
    assert_eq!(a.header("location"), Some("/dir/"));
    let a = g("/dir?x=1", &[]);
    assert_eq!(a.header("location"), Some("/dir/?x=1"));

    // The stylesheet with its type.
    let a = g("/style.css", &[]);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/css"));
    assert!(a.text().contains(PROBE_COLOR));

    // A missing page: the error document, with 404.
    let a = g("/nothing/here.html", &[]);
    assert_eq!(a.status, 404);
    assert_eq!(a.text(), NOT_FOUND);
    assert_eq!(a.header("content-type"), Some("text/html"));
    let head = raw_head(ip, &host, "/nothing/here.html");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(
        head.ends_with("\r\n\r\n"),
        "HEAD answered with a body: {head}"
    );

    // The routing rule: a missing page of the old section goes to the
    // new one; an existing key is not redirected.
    let a = g("/old/index.html", &[]);
    assert_eq!(a.status, 301, "{}", a.text());
    assert_eq!(a.header("location"), Some("/dir/index.html"));

    // HEAD: the headers of GET, no body.
    let head = raw_head(ip, &host, "/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-length: {}\r\n", INDEX.len())),
        "{head}"
    );
    assert!(
        head.ends_with("\r\n\r\n"),
        "HEAD answered with a body: {head}"
    );

    // Conditional requests.
    let inm = format!("If-None-Match: {etag}");
    let a = g("/", &["-H", &inm]);
    assert_eq!(a.status, 304);
    assert!(a.body.is_empty());
    assert_eq!(a.header("etag"), Some(etag.as_str()));
    let a = g("/", &["-H", "If-None-Match: \"other\""]);
    assert_eq!(a.status, 200);
    let inm = format!("If-None-Match: \"other\", {etag}");
    let a = g("/", &["-H", &inm]);
    assert_eq!(a.status, 304, "one of several ETags matches");
    let a = g("/", &["-H", "If-Match: \"other\""]);
    assert_eq!(a.status, 412);
    // The error document answers every 4xx, not only 404.
    assert_eq!(a.text(), NOT_FOUND);

    // If-Range: the range when the validator is the object's, else all.
    let ir = format!("If-Range: {etag}");
    let a = g("/", &["-H", "Range: bytes=0-14", "-H", &ir]);
    assert_eq!(a.status, 206);
    assert_eq!(a.text(), &INDEX[..15]);
    let a = g(
        "/",
        &["-H", "Range: bytes=0-14", "-H", "If-Range: \"other\""],
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), INDEX);
    let lm = format!("If-Range: {}", g("/", &[]).header("last-modified").unwrap());
    let a = g("/", &["-H", "Range: bytes=0-14", "-H", &lm]);
    assert_eq!(a.status, 206);
    let a = g(
        "/",
        &[
            "-H",
            "Range: bytes=0-14",
            "-H",
            "If-Range: Wed, 01 Jan 2020 00:00:00 GMT",
        ],
    );
    assert_eq!(a.status, 200);

    // Ranges, in one block and across blocks of the large object.
    let a = g("/", &["-H", "Range: bytes=0-14"]);
    assert_eq!(a.status, 206);
    assert_eq!(a.text(), &INDEX[..15]);
    assert_eq!(
        a.header("content-range").map(String::from),
        Some(format!("bytes 0-14/{}", INDEX.len()))
    );
    let a = g("/big.bin", &[]);
    assert_eq!(a.status, 200);
    assert!(a.body == big, "big.bin differs ({} bytes)", a.body.len());
    let (lo, hi) = ((1 << 20) - 10, (1 << 20) + 9);
    let a = g("/big.bin", &["-H", &format!("Range: bytes={lo}-{hi}")]);
    assert_eq!(a.status, 206);
    assert!(a.body == big[lo..=hi]);
    let a = g("/big.bin", &["-H", "Range: bytes=99999999-"]);
    assert_eq!(a.status, 416);
    assert_eq!(
        a.header("content-range").map(String::from),
        Some(format!("bytes */{}", big.len()))
    );

    // CORS from the bucket's rules.
    let cors_get = g("/style.css", &["-H", "Origin: https://app.example"]);
    assert_eq!(cors_get.status, 200);
    assert_eq!(
        cors_get.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let a = g("/style.css", &["-H", "Origin: https://evil.example"]);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("access-control-allow-origin"), None);
    let pre = [
        "-X",
        "OPTIONS",
        "-H",
        "Origin: https://app.example",
        "-H",
        "Access-Control-Request-Method: GET",
        "-H",
        "Access-Control-Request-Headers: Range",
    ];
    let a = g("/style.css", &pre);
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(a.header("access-control-allow-methods"), Some("GET"));
    assert_eq!(a.header("access-control-allow-headers"), Some("range"));
    assert_eq!(a.header("access-control-max-age"), Some("600"));
    let a = g(
        "/style.css",
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: https://app.example",
            "-H",
            "Access-Control-Request-Method: PUT",
        ],
    );
    assert_eq!(a.status, 403);

    // Only GET, HEAD and OPTIONS.
    let a = g("/", &["-X", "POST", "-d", "x"]);
    assert_eq!(a.status, 405);
    assert_eq!(a.header("allow"), Some("GET, HEAD, OPTIONS"));
    // A host with no bucket behind it.
    let a = get(ip, &format!("nope.{ROOT_DOMAIN}"), "/", &[]);
    assert_eq!(a.status, 404);
    assert!(
        a.text().contains("There is no website at nope."),
        "{}",
        a.text()
    );
}

/// Everything the endpoint on `ip` sends back to a `HEAD` request (the
/// connection closed after it), to check that no body follows the head.
fn raw_head(ip: &str, host: &str, path: &str) -> String {
    let mut s = TcpStream::connect((ip, WEB_PORT)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "HEAD {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Loads `url` in a headless Chromium (the site's host names mapped to
/// `ip`) and returns the DOM it rendered.
fn chromium_dom(ip: &str, url: &str) -> String {
    let found = Command::new("chromium").arg("--version").output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "this test needs Debian's chromium (`apt-get install -y chromium`; .ci/run installs it): {found:?}"
    );
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .args([
            "90",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--host-resolver-rules=MAP *.{ROOT_DOMAIN} {ip}"))
        .args(["--dump-dom", url])
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        stderr(&out)
    );
    stdout(&out)
}

/// The site in a browser: the home page with its stylesheet applied, a
/// directory reached without its slash, the custom 404 page, the
/// routing rule.
fn check_in_chromium(ip: &str, all: bool) {
    let base = format!("http://site.{ROOT_DOMAIN}:{WEB_PORT}");
    let color = format!("data-color=\"{PROBE_COLOR}\"");
    let dom = chromium_dom(ip, &format!("{base}/"));
    assert!(dom.contains("<h1>Home page</h1>"), "{dom}");
    assert!(
        dom.contains(&color),
        "the stylesheet was not applied:\n{dom}"
    );
    if !all {
        return;
    }
    let dom = chromium_dom(ip, &format!("{base}/dir"));
    assert!(dom.contains("<h1>Nested index</h1>"), "{dom}");
    assert!(dom.contains(&color), "../style.css not applied:\n{dom}");
    let dom = chromium_dom(ip, &format!("{base}/old/"));
    assert!(dom.contains("<h1>Nested index</h1>"), "{dom}");
    let dom = chromium_dom(ip, &format!("{base}/missing"));
    assert!(dom.contains("<h1>Custom 404 page</h1>"), "{dom}");
}

#[test]
fn website_on_one_node() {
    let mut c = Cluster::new(1, 1);
    start_with_web(&mut c, &[]);
    c.apply_layout(&["dc1"], "1G");
    let dir = tempfile::tempdir().unwrap();
    let big = write_site(dir.path());
    upload_site(&c, dir.path());
    let ip = c.nodes[0].ip.to_string();
    let host = format!("site.{ROOT_DOMAIN}");

    // Not a website yet.
    let a = get(&ip, &host, "/", &[]);
    assert_eq!(a.status, 404);
    let info = c.garage_json(0, &["bucket", "info", "site"]);
    assert_eq!(info["websiteAccess"], false, "{info}");

    // The CLI turns it on, with the documents.
    c.garage_ok(
        0,
        &[
            "bucket",
            "website",
            "--allow",
            "--error-document",
            "404.html",
            "site",
        ],
    );
    let info = c.garage_json(0, &["bucket", "info", "site"]);
    assert_eq!(info["websiteAccess"], true, "{info}");
    assert_eq!(
        info["websiteConfig"]["indexDocument"], "index.html",
        "{info}"
    );
    assert_eq!(info["websiteConfig"]["errorDocument"], "404.html", "{info}");
    let a = get(&ip, &host, "/", &[]);
    assert_eq!(a.status, 200, "{}", a.text());
    let a = get(&ip, &host, "/missing", &[]);
    assert_eq!(a.text(), NOT_FOUND);
    // Wrong uses are refused.
    for bad in [
        vec!["bucket", "website", "site"],
        vec!["bucket", "website", "--allow", "--deny", "site"],
        vec!["bucket", "website", "--deny", "-i", "a.html", "site"],
        vec!["bucket", "website", "--allow", "-i", "a/b.html", "site"],
    ] {
        let o = c.garage(0, &bad);
        assert!(!o.status.success(), "{bad:?} was accepted");
    }

    // --deny stops serving; PutBucketWebsite (with routing rules) serves
    // it again.
    c.garage_ok(0, &["bucket", "website", "--deny", "site"]);
    assert_eq!(get(&ip, &host, "/", &[]).status, 404);
    put_website(&c, dir.path());
    let info = c.garage_json(0, &["bucket", "info", "site"]);
    assert_eq!(info["websiteAccess"], true, "{info}");
    assert_eq!(info["websiteConfig"]["routingRules"], 1, "{info}");
    check_site(&ip, &big);

    // A global alias equal to the whole host name.
    c.garage_ok(0, &["bucket", "alias", "site", "www.example.test"]);
    let a = get(&ip, "www.example.test", "/dir/", &[]);
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), NESTED);

    check_in_chromium(&ip, true);

    // A redirect-all configuration.
    c.garage_ok(0, &["bucket", "create", "moved"]);
    let key = make_key(&c, "mover");
    c.garage_ok(0, &["bucket", "allow", "--owner", "--key", &key.0, "moved"]);
    aws_ok(
        &key,
        &endpoint(&c, 0),
        dir.path(),
        &[
            "s3api",
            "put-bucket-website",
            "--bucket",
            "moved",
            "--website-configuration",
            r#"{"RedirectAllRequestsTo": {"HostName": "new.example.org", "Protocol": "https"}}"#,
        ],
    );
    let a = get(&ip, &format!("moved.{ROOT_DOMAIN}"), "/a/b.html?q=1", &[]);
    assert_eq!(a.status, 301);
    assert_eq!(
        a.header("location"),
        Some("https://new.example.org/a/b.html?q=1")
    );
}

#[test]
fn website_through_a_gateway() {
    // Three storage nodes in three zones, and node 3 a gateway.
    // Node 2's website endpoint is on a Unix socket.
    let mut c = Cluster::new(4, 3);
    start_with_web(&mut c, &[2]);
    let gw = c.nodes[3].id().to_string();
    c.garage_ok(0, &["layout", "assign", "-z", "dc1", "-g", &gw[..16]]);
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let dir = tempfile::tempdir().unwrap();
    let big = write_site(dir.path());
    upload_site(&c, dir.path());
    put_website(&c, dir.path());

    let ip = c.nodes[3].ip.to_string();
    // The gateway has the layout once it serves the site.
    let host = format!("site.{ROOT_DOMAIN}");
    wait_until(
        "the gateway serves the site",
        Duration::from_secs(60),
        || get(&ip, &host, "/", &[]).status == 200,
    );
    // Node 3 has a gateway role (no capacity) in the layout it sees.
    let layout = c.garage_json(3, &["layout", "show"]);
    assert!(
        layout["roles"]
            .as_array()
            .is_some_and(|roles| roles.iter().any(|r| {
                r["id"].as_str().is_some_and(|id| id.starts_with(&gw[..16]))
                    && r["capacity"].is_null()
            })),
        "{layout}"
    );
    check_site(&ip, &big);
    check_in_chromium(&ip, false);

    let sock = web_socket(&c, 2);
    let a = curl(&[
        "--unix-socket",
        sock.to_str().unwrap(),
        "-H",
        &format!("Host: {host}"),
        "http://localhost/dir/",
    ]);
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), NESTED);
}
