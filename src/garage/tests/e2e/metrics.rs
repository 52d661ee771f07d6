//! `/metrics` end to end: real nodes on loopback with `[admin]
//! api_bind_addr`, S3 traffic from aws-cli, the text checked by `promtool`,
//! scraped by a real Prometheus server whose HTTP API must report the
//! target up and the request counter rising; and the metrics token. The
//! Grafana dashboard and alert rules of `script/monitoring/`: promtool
//! checks and unit tests, and every dashboard query evaluated by a real
//! Prometheus scraping a three-zone cluster under traffic.
//!
//! Needs `promtool` and `prometheus` (Debian package `prometheus`; `.ci/run`
//! installs it), aws-cli and curl.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws_ok, endpoint, make_key};
use common::DEADLINE;

const ADMIN_PORT: u16 = 3903;
const TOKEN: &str = "metrics-token-for-the-test-0123456789";

/// Adds an `[admin]` section to node `i`'s configuration (before it
/// starts): the admin listener on its address, and `extra` lines.
fn enable_admin(c: &Cluster, i: usize, extra: &str) -> String {
    let n = &c.nodes[i];
    let mut text = std::fs::read_to_string(&n.config).unwrap();
    text.push_str(&format!(
        "\n[admin]\napi_bind_addr = \"{}:{ADMIN_PORT}\"\n{extra}\n",
        n.ip
    ));
    std::fs::write(&n.config, text).unwrap();
    format!("{}:{ADMIN_PORT}", n.ip)
}

fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: this test needs Debian's `prometheus` package \
         (apt-get install prometheus; .ci/run installs it)"
    );
}

/// GET `url` with curl (optionally a bearer token): (status, body).
fn http_get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--max-time", "10", "-w", "\n%{http_code}"]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd.arg(url).output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn promtool_check(text: &str) {
    use std::io::Write;
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics refused /metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sum of a metric's samples (over all label sets) in the text format.
fn sum_of(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A Prometheus server on loopback scraping `target` every second; killed
/// when dropped.
struct Prometheus {
    child: Child,
    api: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(listen: &str, target: &str, token: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let auth = match token {
            Some(t) => format!("    authorization:\n      credentials: {t}\n"),
            None => String::new(),
        };
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: garage\n{auth}    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Self {
            child,
            api: format!("http://{listen}/api/v1"),
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let (code, body) = http_get(&format!("{}{path}", self.api), None);
        if code != 200 {
            return None;
        }
        serde_json::from_str(&body).ok()
    }

    /// Health of the scrape targets ("up", "down", "unknown").
    fn target_health(&self) -> Vec<String> {
        let Some(v) = self.get_json("/targets") else {
            return vec![];
        };
        v["data"]["activeTargets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["health"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The values of an instant PromQL query (any expression: sent URL
    /// encoded); `None` if Prometheus did not answer it.
    fn values(&self, q: &str) -> Option<Vec<f64>> {
        let o = Command::new("curl")
            .args(["-s", "--max-time", "10", "-G", "--data-urlencode"])
            .arg(format!("query={q}"))
            .arg(format!("{}/query", self.api))
            .output()
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        if v["status"] != "success" {
            return None;
        }
        Some(
            v["data"]["result"]
                .as_array()?
                .iter()
                .filter_map(|r| r["value"][1].as_str()?.parse().ok())
                .collect(),
        )
    }

    /// Waits until the server reports its scrape target up.
    fn wait_target_up(&self) {
        wait_until("Prometheus scrapes the node", DEADLINE, || {
            self.target_health().iter().any(|h| h == "up")
        });
    }

    /// The value of an instant PromQL query returning one sample.
    fn query(&self, q: &str) -> Option<f64> {
        let v = self.get_json(&format!("/query?query={q}"))?;
        v["data"]["result"].as_array()?.first()?["value"][1]
            .as_str()?
            .parse()
            .ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3_traffic(key: &(String, String), ep: &str, dir: &Path, bucket: &str, n: usize) {
    for i in 0..n {
        let f = dir.join(format!("obj{i}"));
        std::fs::write(&f, vec![b'x'; 5000 + i]).unwrap();
        aws_ok(
            key,
            ep,
            dir,
            &[
                "s3",
                "cp",
                f.to_str().unwrap(),
                &format!("s3://{bucket}/obj{i}"),
            ],
        );
    }
    aws_ok(key, ep, dir, &["s3", "ls", &format!("s3://{bucket}")]);
}

#[test]
fn single_node_metrics_promtool_prometheus_and_token() {
    require("promtool");
    require("prometheus");
    let mut c = Cluster::new(1, 1);
    c.env
        .push(("GARAGE_BLOCK_CENSUS_INTERVAL_SECS".into(), "1".into()));
    let admin = enable_admin(&c, 0, &format!("metrics_token = \"{TOKEN}\""));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "metrics");
    let ep = endpoint(&c, 0);
    let dir = c.nodes[0].dir.clone();
    aws_ok(&key, &ep, &dir, &["s3", "mb", "s3://metrics-bucket"]);
    s3_traffic(&key, &ep, &dir, "metrics-bucket", 3);
    // A 2 MB object of random bytes (so that compression keeps its size):
    // block writes and reads.
    let big = dir.join("big");
    let random: Vec<u8> = (0..2_000_000).map(|_| rand::random::<u8>()).collect();
    std::fs::write(&big, random).unwrap();
    aws_ok(
        &key,
        &ep,
        &dir,
        &["s3", "cp", big.to_str().unwrap(), "s3://metrics-bucket/big"],
    );
    aws_ok(
        &key,
        &ep,
        &dir,
        &[
            "s3",
            "cp",
            "s3://metrics-bucket/big",
            dir.join("big2").to_str().unwrap(),
        ],
    );

    // The token: none, wrong, right.
    let url = format!("http://{admin}/metrics");
    assert_eq!(http_get(&url, None).0, 401, "no token");
    assert_eq!(http_get(&url, Some("wrong-token")).0, 403, "wrong token");
    // The state gauges appear with the first refresh.
    let mut text = String::new();
    wait_until("state gauges published", DEADLINE, || {
        let (code, body) = http_get(&url, Some(TOKEN));
        assert_eq!(code, 200, "{body}");
        text = body;
        text.contains("\ncluster_healthy 1")
    });
    promtool_check(&text);
    for name in [
        "api_s3_requests_total{api_endpoint=\"PutObject\"}",
        "api_s3_requests_total{api_endpoint=\"CreateBucket\"}",
        "api_s3_request_duration_seconds_bucket{api_endpoint=\"GetObject\"",
        "rpc_requests_total{rpc_endpoint=\"garage_table/object\"",
        "rpc_duration_seconds_count{rpc_endpoint=\"garage_block/manager\"",
        "table_size{table_name=\"object\"}",
        "table_merkle_updater_todo_queue_length{table_name=\"object\"}",
        "table_gc_todo_queue_length{table_name=\"version\"}",
        "block_resync_queue_length",
        "block_resync_errored_blocks",
        "block_resync_lag_seconds",
        "garage_local_disk_avail{volume=\"data\"}",
        "garage_local_disk_capacity{volume=\"metadata\"}",
        "cluster_partitions_all_ok 256",
        "cluster_partitions_quorum 256",
        "cluster_layout_node_connected{",
        "garage_build_info{version=",
    ] {
        assert!(text.contains(name), "no {name} in /metrics:\n{text}");
    }
    assert_eq!(
        sum_of(&text, "api_s3_requests_total{api_endpoint=\"PutObject\"}"),
        4.0
    );
    // The census counts the block files on disk by class: the big object's
    // blocks are STANDARD's, nothing is to hand over.
    let standard = "block_class_bytes{class=\"STANDARD\",redundancy=\"replication 1\"}";
    wait_until("the census counts the big object", DEADLINE, || {
        text = http_get(&url, Some(TOKEN)).1;
        sum_of(&text, standard) >= 2_000_000.0
    });
    assert_eq!(
        sum_of(
            &text,
            "block_class_to_hand_over_files{class=\"STANDARD\",redundancy=\"replication 1\"}"
        ),
        0.0,
        "{text}"
    );
    let on_disk: u64 = c
        .block_files(0)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    assert_eq!(sum_of(&text, standard), on_disk as f64, "{text}");
    assert!(
        sum_of(&text, "block_bytes_written_total") >= 2_000_000.0,
        "{text}"
    );
    assert!(
        sum_of(&text, "block_bytes_read_total") >= 2_000_000.0,
        "{text}"
    );
    // What went up and came down through S3 was counted on its listener.
    for name in [
        "http_bytes_received_total{listener=\"s3\"}",
        "http_bytes_sent_total{listener=\"s3\"}",
    ] {
        assert!(sum_of(&text, name) >= 2_000_000.0, "{name}: {text}");
    }
    // An S3 error is counted by operation and status.
    let o = common::s3::aws(
        &key,
        &ep,
        &dir,
        &[
            "s3api",
            "head-object",
            "--bucket",
            "metrics-bucket",
            "--key",
            "missing",
        ],
    );
    assert!(!o.status.success());
    let (_, text) = http_get(&url, Some(TOKEN));
    assert!(
        text.contains("api_s3_errors_total{api_endpoint=\"HeadObject\",status_code=\"404\"} 1"),
        "{text}"
    );

    // `garage stats` prints the same counters.
    let human = c.garage_ok(0, &["stats"]);
    assert!(
        human.contains("Cluster health: healthy") && human.contains("S3 requests: "),
        "{human}"
    );
    let stats = c.garage_json(0, &["stats"]);
    let own = &stats["success"][c.nodes[0].id()];
    assert_eq!(own["health"]["status"], "healthy", "{stats}");
    let shown = own["counters"]["api_s3_requests_total"]
        .as_f64()
        .unwrap_or_else(|| panic!("no S3 request counter in {stats}"));
    let (_, text) = http_get(&url, Some(TOKEN));
    assert!(
        shown > 0.0 && shown <= sum_of(&text, "api_s3_requests_total"),
        "garage stats says {shown} S3 requests; /metrics: {}",
        sum_of(&text, "api_s3_requests_total")
    );

    // A real Prometheus server scrapes the node.
    let ip = c.nodes[0].ip.octets();
    let listen = format!("127.{}.{}.200:9090", ip[1], ip[2]);
    let prom = Prometheus::start(&listen, &admin, Some(TOKEN));
    let start = Instant::now();
    loop {
        if prom.target_health().iter().any(|h| h == "up") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "Prometheus never reported the target up: {:?}\n{}",
            prom.target_health(),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let q = "sum(api_s3_requests_total)";
    let mut before = 0.0;
    wait_until("Prometheus has the request counter", DEADLINE, || {
        prom.query(q)
            .inspect(|v| before = *v)
            .is_some_and(|v| v > 0.0)
    });
    s3_traffic(&key, &ep, &dir, "metrics-bucket", 3);
    wait_until("the scraped request counter rises", DEADLINE, || {
        prom.query(q).is_some_and(|v| v >= before + 4.0)
    });
}

#[test]
fn gateway_of_three_node_cluster_metrics_show_peers_and_health() {
    require("promtool");
    // Nodes 0-2 store data in three zones; node 3 is a gateway, scraped.
    let mut c = Cluster::new(4, 3);
    // As `start_all`, with the admin section added after the bootstrap
    // peer is written into the configurations.
    c.start(0);
    let boot = vec![format!("{}@{}", c.nodes[0].id(), c.nodes[0].public_addr())];
    for i in 1..4 {
        c.write_config(i, &c.secret.clone(), &boot);
    }
    let admin = enable_admin(&c, 3, "");
    for i in 1..4 {
        c.start(i);
    }
    wait_until("nodes see each other", CLUSTER_DEADLINE, || {
        c.health(0).0.len() == 4
    });
    let gw = c.nodes[3].id()[..16].to_string();
    c.garage_ok(0, &["layout", "assign", "-z", "dc1", "-g", &gw]);
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "metrics3");
    let ep = endpoint(&c, 3);
    let dir = c.nodes[3].dir.clone();
    // A real Prometheus scrapes the gateway from before the traffic, for
    // the dashboard's queries below.
    let ip = c.nodes[3].ip.octets();
    let prom = Prometheus::start(&format!("127.{}.{}.201:9090", ip[1], ip[2]), &admin, None);
    prom.wait_target_up();
    wait_until("the gateway has the layout", CLUSTER_DEADLINE, || {
        common::s3::aws(&key, &ep, &dir, &["s3", "mb", "s3://metrics3"])
            .status
            .success()
    });
    s3_traffic(&key, &ep, &dir, "metrics3", 2);

    let url = format!("http://{admin}/metrics");
    let mut text = String::new();
    wait_until("cluster gauges of a healthy cluster", DEADLINE, || {
        let (code, body) = http_get(&url, None);
        assert_eq!(code, 200, "no token configured: open access");
        text = body;
        text.contains("\ncluster_connected_nodes 4") && text.contains("\ncluster_healthy 1")
    });
    promtool_check(&text);
    assert!(text.contains("\ncluster_storage_nodes 3"), "{text}");
    assert!(text.contains("\ncluster_partitions_all_ok 256"), "{text}");
    assert!(
        text.contains(&format!("cluster_layout_node_connected{{id=\"{gw}\",role_zone=\"dc1\",role_capacity=\"0\",role_gateway=\"1\"}} 1")),
        "{text}"
    );
    // The gateway stores nothing: its object writes are RPCs to each of
    // the three storage nodes, counted under their ids.
    for i in 0..3 {
        let short = &c.nodes[i].id()[..16];
        assert!(
            text.contains(&format!(
                "rpc_requests_total{{rpc_endpoint=\"garage_table/object\",to=\"{short}\"}}"
            )),
            "no object-table RPCs to node {i} ({short}):\n{text}"
        );
    }
    assert!(
        text.contains("api_s3_requests_total{api_endpoint=\"PutObject\"} 2"),
        "{text}"
    );

    // Every query of the Grafana dashboard returns data (a value that is a
    // number) while the cluster serves traffic.
    let queries = dashboard_queries();
    assert!(queries.len() >= 30, "{queries:?}");
    let mut empty: Vec<&String> = queries.iter().collect();
    wait_until("every dashboard query returns data", DEADLINE, || {
        s3_traffic(&key, &ep, &dir, "metrics3", 1);
        empty.retain(|q| {
            let q = q.replace("$__rate_interval", "2m");
            !prom
                .values(&q)
                .is_some_and(|v| v.iter().any(|x| x.is_finite()))
        });
        empty.is_empty()
    });

    // One storage node down: degraded, every partition still has a quorum.
    c.kill(2);
    wait_until("node 2 seen down by the gauges", DEADLINE, || {
        let (_, body) = http_get(&url, None);
        text = body;
        text.contains("\ncluster_healthy 0") && text.contains("\ncluster_connected_nodes 3")
    });
    assert!(text.contains("\ncluster_available 1"), "{text}");
    assert!(text.contains("\ncluster_partitions_quorum 256"), "{text}");
    assert!(text.contains("\ncluster_partitions_all_ok 0"), "{text}");
    let health = c.json_api(3, "GetClusterHealth", serde_json::json!({}));
    assert_eq!(health["status"], "degraded", "{health}");
}

/// The monitoring files shipped in `script/monitoring/`.
fn monitoring_file(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../script/monitoring")
        .join(name)
}

/// Every PromQL expression of the Grafana dashboard.
fn dashboard_queries() -> Vec<String> {
    let text = std::fs::read_to_string(monitoring_file("grafana-dashboard.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(
                t["expr"]
                    .as_str()
                    .expect("a target has an expr")
                    .to_string(),
            );
        }
    }
    out
}

/// The metric names a PromQL expression reads: identifiers outside label
/// selectors and `by (…)` groupings, with an underscore, that are not
/// functions; histogram series suffixes removed.
fn metric_names(expr: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut depth_brace = 0;
    for c in expr.chars() {
        match c {
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            _ if depth_brace > 0 => (),
            c => plain.push(c),
        }
    }
    for kw in ["by", "on", "without", "ignoring"] {
        while let Some(i) = plain.find(&format!("{kw} (")) {
            let end = plain[i..]
                .find(')')
                .map(|e| i + e + 1)
                .unwrap_or(plain.len());
            plain.replace_range(i..end, " ");
        }
    }
    let functions = ["histogram_quantile", "__rate_interval"];
    plain
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| {
            t.contains('_')
                && !functions.contains(t)
                && !t.starts_with(|c: char| c.is_ascii_digit())
        })
        .map(|t| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| t.strip_suffix(s))
                .unwrap_or(t)
                .to_string()
        })
        .collect()
}

/// The alert rules pass `promtool check rules` and their unit tests (each
/// alert fires on synthetic series and clears); the dashboard is JSON with
/// a query in every panel; and every metric either names is one the
/// binary describes (so a renamed metric cannot leave a silent panel or
/// an alert that never fires).
#[test]
fn alert_rules_and_dashboard_check_out() {
    require("promtool");
    let dir = monitoring_file("");
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ] {
        let o = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let described = include_str!("../../src/telemetry.rs");
    let rules = std::fs::read_to_string(monitoring_file("alerts.yml")).unwrap();
    let exprs: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:").map(|e| e.trim().to_string()))
        .chain(dashboard_queries())
        .collect();
    assert!(exprs.len() >= 37, "{exprs:?}");
    for e in exprs.iter() {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no metric in {e:?}");
        for n in names {
            assert!(
                described.contains(&format!("\"{n}\"")),
                "{e:?} reads {n}, which the binary does not describe (src/garage/src/telemetry.rs)"
            );
        }
    }
    // The helper finds what it must and nothing else.
    assert_eq!(
        metric_names("histogram_quantile(0.95, sum by (le, to) (rate(rpc_duration_seconds_bucket{to=\"a_b\"}[$__rate_interval])))"),
        vec!["rpc_duration_seconds"]
    );
}
