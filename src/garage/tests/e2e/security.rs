//! Security edge cases, end to end on real processes: which signatures
//! authenticate a request, the region of the credential scope, request
//! limits, and that no secret reaches the log even at `RUST_LOG=trace`.

use crate::common;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::http::curl;
use common::s3::{aws_ok, endpoint, make_key};
use common::{stderr, stdout};

const ADMIN_TOKEN: &str = "admin-token-that-must-stay-out-of-logs-51d2";
const METRICS_TOKEN: &str = "metrics-token-that-must-stay-out-of-logs-9e0b";

/// One node with the admin API (both tokens set), started with `RUST_LOG`
/// = `log_level`, a layout applied; returns its admin URL.
fn one_node(c: &mut Cluster, log_level: &str) -> String {
    let n = &c.nodes[0];
    let mut text = std::fs::read_to_string(&n.config).unwrap();
    text.push_str(&format!(
        "\n[admin]\napi_bind_addr = \"{}:3903\"\nadmin_token = \"{ADMIN_TOKEN}\"\nmetrics_token = \"{METRICS_TOKEN}\"\n",
        n.ip
    ));
    std::fs::write(&n.config, text).unwrap();
    let admin = format!("http://{}:3903", n.ip);
    c.note_secret(ADMIN_TOKEN);
    c.note_secret(METRICS_TOKEN);
    c.env.push(("RUST_LOG".into(), log_level.into()));
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    admin
}

/// The value of query parameter `name` in `url`.
fn query_param(url: &str, name: &str) -> String {
    url.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {url}"))
        .to_string()
}

/// Every path where a secret passes through the server, at
/// `RUST_LOG=trace`: signed requests, a presigned URL whose signature was
/// tampered with (the server computes the right one: it must not log it),
/// SSE-C uploads and downloads, a PostObject form carrying an SSE-C key,
/// admin and metrics requests with their tokens (and wrong ones). Then
/// the whole log is searched for each secret.
#[test]
fn no_secret_reaches_the_log_at_trace_level() {
    let mut c = Cluster::new(1, 1);
    let admin = one_node(&mut c, "trace");
    let key = make_key(&c, "logs");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"hello, logs").unwrap();
    let f = file.to_str().unwrap();

    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://logs"]);
    aws_ok(&key, &ep, dir.path(), &["s3", "cp", f, "s3://logs/plain"]);
    aws_ok(&key, &ep, dir.path(), &["s3", "cp", "s3://logs/plain", "-"]);

    // SSE-C: the key travels base64-encoded in a header.
    let sse_key = "0123456789abcdefFEDCBA9876543210";
    let b64 = base64::engine::general_purpose::STANDARD;
    c.note_secret(sse_key);
    c.note_secret(&b64.encode(sse_key));
    let sse = ["--sse-c", "AES256", "--sse-c-key", sse_key];
    let mut put = vec!["s3", "cp", f, "s3://logs/sse"];
    put.extend_from_slice(&sse);
    aws_ok(&key, &ep, dir.path(), &put);
    let mut get = vec!["s3", "cp", "s3://logs/sse", "-"];
    get.extend_from_slice(&sse);
    assert_eq!(aws_ok(&key, &ep, dir.path(), &get), "hello, logs");

    // A presigned URL with its signature replaced: the server computes the
    // correct signature (the original one) to compare.
    let url = aws_ok(&key, &ep, dir.path(), &["s3", "presign", "s3://logs/plain"]);
    let url = url.trim();
    let good_sig = query_param(url, "X-Amz-Signature");
    c.note_secret(&good_sig);
    assert_eq!(curl(&[url]).status, 200, "the untouched URL works");
    let bad = url.replace(&good_sig, &"0".repeat(good_sig.len()));
    let a = curl(&[&bad]);
    assert_eq!(a.status, 403, "{}", a.text());
    assert!(a.text().contains("SignatureDoesNotMatch"), "{}", a.text());

    // A PostObject form with an SSE-C key field (not signed: refused, but
    // parsed, and s3s logs forms at debug level).
    let post_key = b64.encode("another-32-byte-key-for-a-form!!");
    c.note_secret(&post_key);
    let a = curl(&[
        "-H",
        "Expect:",
        "-F",
        "key=posted",
        "-F",
        "x-amz-server-side-encryption-customer-algorithm=AES256",
        "-F",
        &format!("x-amz-server-side-encryption-customer-key={post_key}"),
        "-F",
        &format!("file=@{f}"),
        &format!("{ep}/logs"),
    ]);
    assert!(a.status >= 400, "an unsigned form is refused: {}", a.text());

    // The admin API and /metrics, with the right and wrong tokens.
    for (token, want) in [(ADMIN_TOKEN, 200), ("wrong-admin-token-0000", 403)] {
        let a = curl(&[
            "-H",
            &format!("Authorization: Bearer {token}"),
            &format!("{admin}/v2/GetClusterStatus"),
        ]);
        assert_eq!(a.status, want, "{}", a.text());
    }
    for (token, want) in [(METRICS_TOKEN, 200), ("wrong-metrics-token-00", 403)] {
        let a = curl(&[
            "-H",
            &format!("Authorization: Bearer {token}"),
            &format!("{admin}/metrics"),
        ]);
        assert_eq!(a.status, want, "{}", a.text());
    }

    // Stop the node so that its log is complete, then search it.
    let p = c.nodes[0].proc.as_mut().unwrap();
    p.signal("TERM");
    p.wait_log("garage stopped");
    let log = p.log();
    assert!(
        log.contains(" DEBUG S3 connection from "),
        "the node logged below info level"
    );
    assert!(
        log.contains("s3.bucket=\"logs\""),
        "the log has the requests' lines: the search reads real lines"
    );
    c.assert_no_secret_logged();
}

/// SigV2 (header, query string, POST form) is refused with an error that
/// says to use SigV4, whether or not its signature is right; SigV4 signed
/// for another region than `s3_region` is refused with AWS's errors naming
/// both regions; nothing is stored by a refused form (`s3/auth.py`).
#[test]
fn only_sigv4_for_the_configured_region_authenticates() {
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "auth");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/auth.py");
    let out = Command::new("python3")
        .arg(script)
        .args([&key.0, &key.1, &endpoint(&c, 0), "garage"])
        .output()
        .expect("python3 runs (CI installs it with boto3)");
    assert!(
        out.status.success() && stdout(&out).contains("all checks passed"),
        "authentication checks failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
}

/// DeleteObjects of 1001 keys, a 9 MB XML body, a 100 KiB form field and
/// 150 headers: each refused with AWS's error (`s3/limits.py`).
#[test]
fn request_bodies_and_headers_are_bounded() {
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "limits");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/limits.py");
    let out = Command::new("python3")
        .arg(script)
        .args([&key.0, &key.1, &endpoint(&c, 0)])
        .output()
        .expect("python3 runs (CI installs it with boto3)");
    assert!(
        out.status.success() && stdout(&out).contains("all checks passed"),
        "limit checks failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Keeps opening silent TCP connections to `target` from 1 000 source
/// addresses (127.230.0-3.1-250) until `stop` is set (at most 120 waves of
/// 1 000), holding each for 5 s; `opened` counts them.
fn flood(
    target: SocketAddr,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut held: VecDeque<(Instant, tokio::net::TcpStream)> = VecDeque::new();
            for wave in 0..120u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut set = tokio::task::JoinSet::new();
                for i in 0..1000u32 {
                    let ip = Ipv4Addr::new(127, 230, (wave % 4) as u8, (i % 250) as u8 + 1);
                    set.spawn(async move {
                        let sock = tokio::net::TcpSocket::new_v4()?;
                        sock.bind(SocketAddr::new(ip.into(), 0))?;
                        tokio::time::timeout(Duration::from_secs(1), sock.connect(target))
                            .await
                            .map_err(std::io::Error::other)?
                    });
                }
                while let Some(r) = set.join_next().await {
                    if let Ok(Ok(s)) = r {
                        held.push_back((Instant::now(), s));
                        opened.fetch_add(1, Ordering::Relaxed);
                    }
                }
                while held
                    .front()
                    .is_some_and(|(t, _)| t.elapsed() > Duration::from_secs(5))
                {
                    held.pop_front();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    })
}

/// Thousands of silent connections to a node's RPC port, from 1 000
/// addresses, with the node held to 1 024 open files: its S3, website and
/// admin endpoints keep answering, writes that need the other nodes (over
/// established connections) succeed, the refusals are logged (a line per
/// 10 s, not per connection), and the cluster is whole afterwards.
#[test]
fn s3_web_and_admin_keep_serving_while_the_rpc_port_is_flooded() {
    let mut c = Cluster::new(3, 3);
    let n0 = &c.nodes[0];
    let mut text = std::fs::read_to_string(&n0.config).unwrap();
    text.push_str(&format!(
        "\n[s3_web]\nbind_addr = \"{ip}:3902\"\nroot_domain = \".web.test\"\n\n[admin]\napi_bind_addr = \"{ip}:3903\"\nadmin_token = \"{ADMIN_TOKEN}\"\n",
        ip = n0.ip
    ));
    std::fs::write(&n0.config, text).unwrap();
    let (ip0, rpc0) = (n0.ip, n0.rpc_addr().parse::<SocketAddr>().unwrap());
    c.note_secret(ADMIN_TOKEN);
    c.start_all();
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 3
    });
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "flood");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"written during a flood").unwrap();
    let f = file.to_str().unwrap();
    aws_ok(&key, &ep, dir.path(), &["s3", "mb", "s3://flood"]);

    let pid = c.nodes[0].proc().pid().to_string();
    let st = Command::new("prlimit")
        .args(["--pid", &pid, "--nofile=1024:1024"])
        .status()
        .expect("prlimit runs (util-linux)");
    assert!(st.success(), "prlimit failed");

    let (stop, opened) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let flooder = flood(rpc0, stop.clone(), opened.clone());
    wait_until("3 000 connections opened", CLUSTER_DEADLINE, || {
        opened.load(Ordering::Relaxed) >= 3000
    });
    let timeouts = ["--cli-connect-timeout", "20", "--cli-read-timeout", "20"];
    for round in 0..5 {
        let target = format!("s3://flood/k{round}");
        let mut put = vec!["s3", "cp", f, &target];
        put.extend_from_slice(&timeouts);
        aws_ok(&key, &ep, dir.path(), &put);
        let mut get = vec!["s3", "cp", &target, "-"];
        get.extend_from_slice(&timeouts);
        assert_eq!(
            aws_ok(&key, &ep, dir.path(), &get),
            "written during a flood"
        );
        let a = curl(&[&format!("http://{ip0}:3903/health")]);
        assert_eq!(
            a.status,
            200,
            "admin /health during the flood: {}",
            a.text()
        );
        let a = curl(&["-H", "Host: flood.web.test", &format!("http://{ip0}:3902/")]);
        assert!(
            a.status == 404 || a.status == 403,
            "the website endpoint answers during the flood: {} {}",
            a.status,
            a.text()
        );
    }
    let during = opened.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    assert!(during >= 3000, "{during} connections opened");
    c.nodes[0]
        .proc()
        .wait_log("closed unauthenticated: too many handshakes running");
    let log = c.nodes[0].proc().log();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        count("Too many open files"),
        0,
        "the node never ran out of file descriptors"
    );
    for what in ["closed unauthenticated", "incoming connection from"] {
        assert!(
            count(what) < 20,
            "{} lines with {what:?} for {during} connections: such lines are rate-limited",
            count(what)
        );
    }
    wait_until(
        "the cluster is whole after the flood",
        CLUSTER_DEADLINE,
        || c.health(0).0.len() == 3,
    );
}
