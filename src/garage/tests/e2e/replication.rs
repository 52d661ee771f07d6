//! Bucket replication (issue 48) between real clusters: remotes added with
//! `garage remote add`, rules set with `aws s3api put-bucket-replication`,
//! writes through the AWS SDK, and the destination's versions compared
//! with the source's (ids, ETags, bodies, `REPLICA`), with the link
//! between the clusters slowed (50 ms round trips) and cut, a source node
//! killed, the destination killed, and writes on both sides of two
//! clusters that replicate to each other.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::common;

use common::cluster::{fresh_subnet, wait_until, Cluster};
use common::proxy::{Net, Proxy};
use common::s3::{aws_ok, endpoint, make_key, put_object, sdk_client};

/// One cluster in a replication test: its key and a client per node.
struct Site {
    c: Cluster,
    key: (String, String),
}

impl Site {
    fn one_node() -> Self {
        let mut c = Cluster::new(1, 1);
        c.start_all();
        c.apply_layout(&["dc1"], "1G");
        let key = make_key(&c, "repl");
        Self { c, key }
    }

    fn three_zones() -> Self {
        let c = Cluster::three_zones();
        let key = make_key(&c, "repl");
        Self { c, key }
    }

    fn cli(&self, args: &[&str]) -> String {
        aws_ok(&self.key, &endpoint(&self.c, 0), &self.c.nodes[0].dir, args)
    }

    /// A bucket with versioning enabled.
    fn versioned_bucket(&self, name: &str) {
        self.cli(&["s3api", "create-bucket", "--bucket", name]);
        self.cli(&[
            "s3api",
            "put-bucket-versioning",
            "--bucket",
            name,
            "--versioning-configuration",
            "Status=Enabled",
        ]);
    }

    /// Adds remote `name` (the S3 endpoint `url` with `key`) with the
    /// CLI; returns the ARN of its bucket `bucket`.
    fn add_remote(&self, name: &str, url: &str, key: &(String, String), bucket: &str) -> String {
        self.c.note_secret(&key.1);
        let out = self.c.garage_ok(
            0,
            &[
                "remote",
                "add",
                name,
                "--endpoint",
                url,
                "--access-key-id",
                &key.0,
                "--secret-access-key",
                &key.1,
            ],
        );
        let arn = format!("arn:garage:s3:::{name}/{bucket}");
        assert!(out.contains(&format!("arn:garage:s3:::{name}/")), "{out}");
        assert!(!out.contains(&key.1), "the secret is shown: {out}");
        arn
    }

    /// Replicates `bucket` to `arn`: every key, delete markers too.
    fn replicate(&self, bucket: &str, arn: &str) {
        let config = serde_json::json!({
            "Role": "arn:aws:iam::000000000000:role/replication",
            "Rules": [{
                "ID": "all", "Priority": 1, "Status": "Enabled",
                "Filter": {"Prefix": ""},
                "DeleteMarkerReplication": {"Status": "Enabled"},
                "Destination": {"Bucket": arn},
            }]
        });
        self.cli(&[
            "s3api",
            "put-bucket-replication",
            "--bucket",
            bucket,
            "--replication-configuration",
            &config.to_string(),
        ]);
    }
}

/// A version as listed: (key, version id) -> (ETag, delete marker).
type Versions = BTreeMap<(String, String), (String, bool)>;

async fn versions(cl: &aws_sdk_s3::Client, bucket: &str) -> Versions {
    try_versions(cl, bucket)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`versions`], or the error of a node that does not answer.
async fn try_versions(cl: &aws_sdk_s3::Client, bucket: &str) -> Result<Versions, String> {
    let mut out = Versions::new();
    let (mut key_marker, mut vid_marker): (Option<String>, Option<String>) = (None, None);
    for _ in 0..1000 {
        let r = cl
            .list_object_versions()
            .bucket(bucket)
            .set_key_marker(key_marker.clone())
            .set_version_id_marker(vid_marker.clone())
            .send()
            .await
            .map_err(|e| format!("ListObjectVersions: {:?}", e.into_service_error()))?;
        for v in r.versions() {
            out.insert(
                (v.key().unwrap().into(), v.version_id().unwrap().into()),
                (v.e_tag().unwrap_or("").into(), false),
            );
        }
        for m in r.delete_markers() {
            out.insert(
                (m.key().unwrap().into(), m.version_id().unwrap().into()),
                (String::new(), true),
            );
        }
        if r.is_truncated() != Some(true) {
            return Ok(out);
        }
        key_marker = r.next_key_marker().map(String::from);
        vid_marker = r.next_version_id_marker().map(String::from);
    }
    panic!("ListObjectVersions did not end");
}

/// `x-amz-replication-status` of a version.
async fn status(cl: &aws_sdk_s3::Client, bucket: &str, key: &str, vid: &str) -> Option<String> {
    let r = cl
        .head_object()
        .bucket(bucket)
        .key(key)
        .version_id(vid)
        .send()
        .await
        .unwrap_or_else(|e| panic!("HeadObject {key} {vid}: {:?}", e.into_service_error()));
    r.replication_status().map(|s| s.as_str().to_string())
}

/// Whether every version of `want` but delete markers shows `COMPLETED`.
async fn all_completed(cl: &aws_sdk_s3::Client, bucket: &str, want: &Versions) -> bool {
    for ((k, vid), (_, marker)) in want {
        if !*marker && status(cl, bucket, k, vid).await.as_deref() != Some("COMPLETED") {
            return false;
        }
    }
    true
}

/// A TCP proxy in front of `target`'s S3 endpoint, on an address of its
/// own: the link between two clusters, which a test cuts or slows.
fn link_to(target: &Cluster) -> (Arc<Net>, Proxy, String) {
    let (a, b) = fresh_subnet();
    let listen = SocketAddr::new(Ipv4Addr::new(127, a, b, 1).into(), 3900);
    let to: SocketAddr = format!("{}:3900", target.nodes[0].ip).parse().unwrap();
    let net = Net::new();
    let proxy = Proxy::start(net.clone(), listen, to);
    (net, proxy, format!("http://{listen}"))
}

/// A body of `n` bytes, different for each `seed`.
fn body(seed: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + seed * 7) % 251) as u8).collect()
}

#[test]
fn versions_reach_another_cluster_through_a_slow_cut_link_and_killed_nodes() {
    let mut src = Site::three_zones();
    let mut dst = Site::one_node();
    dst.versioned_bucket("copy");
    let (link, _proxy, url) = link_to(&dst.c);
    // 50 ms round trips between the clusters.
    link.set_delay(Duration::from_millis(25));
    let arn = src.add_remote("dr", &url, &dst.key, "copy");
    src.versioned_bucket("photos");
    // Versioning is required, and the remote must exist.
    src.cli(&["s3api", "create-bucket", "--bucket", "plain"]);
    let bad = common::s3::aws(
        &src.key,
        &endpoint(&src.c, 0),
        &src.c.nodes[0].dir,
        &[
            "s3api",
            "put-bucket-replication",
            "--bucket",
            "plain",
            "--replication-configuration",
            &serde_json::json!({"Role": "r", "Rules": [{"Status": "Enabled", "Priority": 1,
                "Filter": {"Prefix": ""}, "DeleteMarkerReplication": {"Status": "Disabled"},
                "Destination": {"Bucket": arn}}]})
            .to_string(),
        ],
    );
    assert!(
        common::stderr(&bad).contains("Versioning must be 'Enabled'"),
        "{}",
        common::stderr(&bad)
    );
    src.replicate("photos", &arn);
    let got = src.cli(&["s3api", "get-bucket-replication", "--bucket", "photos"]);
    assert!(got.contains(&arn) && got.contains("\"all\""), "{got}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let clients: Vec<_> = (0..3).map(|i| sdk_client(&src.c, i, &src.key)).collect();
    let dcl = sdk_client(&dst.c, 0, &dst.key);
    // Sizes: inline, one block, several blocks.
    let size = |i: usize| match i % 3 {
        0 => 100 + i,
        1 => 200_000 + i,
        _ => 2_500_000 + i,
    };
    // Writes through the first `nodes` nodes in turn.
    let write = |from: std::ops::Range<usize>, nodes: usize| {
        for i in from {
            let k = format!("p/{:03}", i % 40);
            rt.block_on(put_object(
                &clients[i % nodes],
                "photos",
                &k,
                &body(i, size(i)),
                None,
            ))
            .unwrap();
        }
    };
    write(0..30, 3);
    // The link is cut: writes go on, their versions wait.
    link.set_isolated(dst.c.nodes[0].ip.into(), true);
    write(30..60, 3);
    // `garage bucket info` shows the rule and what waits on each node.
    let info = src.c.garage_ok(0, &["bucket", "info", "photos"]);
    assert!(
        info.contains("Replication:") && info.contains("dr/copy") && info.contains("oldest queued"),
        "{info}"
    );
    rt.block_on(
        clients[0]
            .delete_object()
            .bucket("photos")
            .key("p/001")
            .send(),
    )
    .unwrap();
    // Node 2 dies with versions queued, and comes back.
    src.c.kill(2);
    write(60..70, 2);
    src.c.start(2);
    link.set_isolated(dst.c.nodes[0].ip.into(), false);
    // The destination dies while the source catches up, and comes back.
    wait_until("the catch-up starts", Duration::from_secs(60), || {
        rt.block_on(versions(&dcl, "copy")).len() > 35
    });
    dst.c.kill(0);
    write(70..80, 3);
    dst.c.start(0);

    let want = rt.block_on(versions(&clients[0], "photos"));
    assert_eq!(want.len(), 81, "80 versions and a delete marker");
    wait_until(
        "the destination has every version",
        Duration::from_secs(180),
        || rt.block_on(try_versions(&dcl, "copy")).as_ref() == Ok(&want),
    );
    // Every source version is COMPLETED (as soon as node 1's copy of its
    // state has the write), every replica is REPLICA, and the current
    // bodies are the same.
    wait_until(
        "every version COMPLETED on the source",
        Duration::from_secs(60),
        || rt.block_on(all_completed(&clients[1], "photos", &want)),
    );
    for ((k, vid), (_, marker)) in &want {
        if *marker {
            continue;
        }
        assert_eq!(
            rt.block_on(status(&dcl, "copy", k, vid)).as_deref(),
            Some("REPLICA"),
            "{k} {vid}"
        );
    }
    for i in [2usize, 44, 65] {
        let k = format!("p/{:03}", i % 40);
        let (got, _) = rt
            .block_on(common::s3::get_object(&dcl, "copy", &k))
            .unwrap();
        let (here, _) = rt
            .block_on(common::s3::get_object(&clients[0], "photos", &k))
            .unwrap();
        assert!(got == here, "{k}: the replica's body differs");
    }
    // Nothing waits any more on any node (the admin API's backlog), and
    // the metrics count versions sent (node 2's since its restart).
    let backlog = src
        .c
        .json_api(0, "GetReplicationBacklog", serde_json::json!({"node": "*"}));
    let nodes = backlog["success"].as_object().expect("per node");
    assert_eq!(nodes.len(), 3, "{backlog}");
    for (n, b) in nodes {
        assert_eq!(b.as_array().map(|a| a.len()), Some(0), "{n}: {b}");
    }
    let sent: u64 = (0..2)
        .map(|i| src.c.counter(i, "replication_versions_sent_total"))
        .sum();
    assert!(sent > 0, "{sent} versions sent");
}

#[test]
fn two_clusters_replicating_to_each_other_converge_without_loops() {
    let a = Site::one_node();
    let b = Site::one_node();
    a.versioned_bucket("shared");
    b.versioned_bucket("shared");
    let (_la, _pa, url_a) = link_to(&a.c);
    let (_lb, _pb, url_b) = link_to(&b.c);
    let to_b = a.add_remote("b", &url_b, &b.key, "shared");
    let to_a = b.add_remote("a", &url_a, &a.key, "shared");
    a.replicate("shared", &to_b);
    b.replicate("shared", &to_a);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (ca, cb) = (sdk_client(&a.c, 0, &a.key), sdk_client(&b.c, 0, &b.key));
    for i in 0..20 {
        let (cl, n) = if i % 2 == 0 { (&ca, 10) } else { (&cb, 5_000) };
        rt.block_on(put_object(
            cl,
            "shared",
            &format!("k{}", i % 7),
            &body(i, n),
            None,
        ))
        .unwrap();
    }
    rt.block_on(cb.delete_object().bucket("shared").key("k3").send())
        .unwrap();
    wait_until(
        "both clusters hold the same versions",
        Duration::from_secs(120),
        || {
            let (va, vb) = (
                rt.block_on(versions(&ca, "shared")),
                rt.block_on(versions(&cb, "shared")),
            );
            va.len() == 21 && va == vb
        },
    );
    // No version came back: each side sent its own 10 (and the marker),
    // and the same key is current on both sides.
    let sent_a = a.c.counter(0, "replication_versions_sent_total");
    let sent_b = b.c.counter(0, "replication_versions_sent_total");
    assert_eq!((sent_a, sent_b), (10, 11));
    for k in ["k0", "k1", "k5"] {
        let (x, _) = rt
            .block_on(common::s3::get_object(&ca, "shared", k))
            .unwrap();
        let (y, _) = rt
            .block_on(common::s3::get_object(&cb, "shared", k))
            .unwrap();
        assert!(x == y, "{k} differs between the clusters");
    }
}

#[test]
fn a_multipart_object_keeps_its_etag_and_a_refusal_is_failed() {
    let src = Site::one_node();
    let dst = Site::one_node();
    dst.versioned_bucket("copy");
    let (_l, _p, url) = link_to(&dst.c);
    let arn = src.add_remote("dr", &url, &dst.key, "copy");
    // A rule to a bucket the destination does not have: refused there.
    let missing = "arn:garage:s3:::dr/nosuch".to_string();
    src.versioned_bucket("big");
    let config = serde_json::json!({
        "Role": "r",
        "Rules": [
            {"ID": "ok", "Priority": 2, "Status": "Enabled", "Filter": {"Prefix": "ok/"},
             "DeleteMarkerReplication": {"Status": "Disabled"}, "Destination": {"Bucket": arn}},
            {"ID": "ko", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": "ko/"},
             "DeleteMarkerReplication": {"Status": "Disabled"}, "Destination": {"Bucket": missing}},
        ]
    });
    src.cli(&[
        "s3api",
        "put-bucket-replication",
        "--bucket",
        "big",
        "--replication-configuration",
        &config.to_string(),
    ]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cl = sdk_client(&src.c, 0, &src.key);
    let dcl = sdk_client(&dst.c, 0, &dst.key);
    let up = rt
        .block_on(
            cl.create_multipart_upload()
                .bucket("big")
                .key("ok/mp")
                .send(),
        )
        .unwrap();
    let id = up.upload_id().unwrap();
    let mut parts = Vec::new();
    for n in 1..=2 {
        let p = rt
            .block_on(
                cl.upload_part()
                    .bucket("big")
                    .key("ok/mp")
                    .upload_id(id)
                    .part_number(n)
                    .body(body(n as usize, 5 * 1024 * 1024 + n as usize).into())
                    .send(),
            )
            .unwrap();
        parts.push(
            aws_sdk_s3::types::CompletedPart::builder()
                .part_number(n)
                .e_tag(p.e_tag().unwrap())
                .build(),
        );
    }
    let done = rt
        .block_on(
            cl.complete_multipart_upload()
                .bucket("big")
                .key("ok/mp")
                .upload_id(id)
                .multipart_upload(
                    aws_sdk_s3::types::CompletedMultipartUpload::builder()
                        .set_parts(Some(parts))
                        .build(),
                )
                .send(),
        )
        .unwrap();
    let etag = done.e_tag().unwrap().to_string();
    assert!(etag.ends_with("-2\""), "{etag}");
    let vid = done.version_id().unwrap().to_string();
    rt.block_on(put_object(&cl, "big", "ko/x", b"refused", None))
        .unwrap();
    wait_until(
        "the multipart object is replicated",
        Duration::from_secs(60),
        || {
            rt.block_on(
                dcl.head_object()
                    .bucket("copy")
                    .key("ok/mp")
                    .version_id(&vid)
                    .send(),
            )
            .is_ok_and(|h| h.e_tag() == Some(etag.as_str()))
        },
    );
    let ko = rt
        .block_on(cl.head_object().bucket("big").key("ko/x").send())
        .unwrap();
    let ko_vid = ko.version_id().unwrap().to_string();
    wait_until(
        "the refused version is FAILED",
        Duration::from_secs(60),
        || rt.block_on(status(&cl, "big", "ko/x", &ko_vid)).as_deref() == Some("FAILED"),
    );
    assert_eq!(src.c.counter(0, "replication_versions_failed_total"), 1);
    // Once the destination bucket exists, a resync sends it.
    dst.versioned_bucket("nosuch");
    let out = src
        .c
        .garage_ok(0, &["bucket", "replication", "resync", "big"]);
    assert!(out.contains("queued 1 "), "{out}");
    wait_until(
        "the resync sends the FAILED version",
        Duration::from_secs(60),
        || rt.block_on(status(&cl, "big", "ko/x", &ko_vid)).as_deref() == Some("COMPLETED"),
    );
    // Replica writes are the owner's only, under an id of their own.
    let put_replica = |cl: &aws_sdk_s3::Client, key: &str, vid: String| {
        let r = rt.block_on(
            cl.put_object()
                .bucket("copy")
                .key(key)
                .body(b"forged".to_vec().into())
                .customize()
                .mutate_request(move |r| {
                    r.headers_mut().insert("x-garage-replica", vid.clone());
                })
                .send(),
        );
        r.map(|_| ()).map_err(|e| {
            let e = e.into_service_error();
            format!(
                "{} {}",
                e.meta().code().unwrap_or(""),
                e.meta().message().unwrap_or("")
            )
        })
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let fresh = |ts: u64| format!("{ts:016x}{}", "ab".repeat(32));
    let writer = make_key(&dst.c, "writer-only");
    dst.c.garage_ok(
        0,
        &[
            "bucket", "allow", "copy", "--read", "--write", "--key", &writer.0,
        ],
    );
    let wcl = sdk_client(&dst.c, 0, &writer);
    let e = put_replica(&wcl, "f1", fresh(now_ms)).unwrap_err();
    assert!(e.starts_with("AccessDenied"), "{e}");
    let e = put_replica(&dcl, "f1", "zz".into()).unwrap_err();
    assert!(e.starts_with("InvalidArgument"), "{e}");
    let e = put_replica(&dcl, "f1", fresh(now_ms + 3 * 3600 * 1000)).unwrap_err();
    assert!(
        e.starts_with("ServiceUnavailable") && e.contains("ahead"),
        "{e}"
    );
    // The multipart object's version id, for another key.
    let e = put_replica(&dcl, "f1", vid.clone()).unwrap_err();
    assert!(
        e.starts_with("InvalidArgument") && e.contains("another object"),
        "{e}"
    );
    put_replica(&dcl, "f1", fresh(now_ms)).unwrap();
    let h = rt
        .block_on(dcl.head_object().bucket("copy").key("f1").send())
        .unwrap();
    assert_eq!(h.version_id(), Some(fresh(now_ms).as_str()));
    assert_eq!(h.replication_status().map(|s| s.as_str()), Some("REPLICA"));
    // Deleting the configuration: new versions are not sent.
    src.cli(&["s3api", "delete-bucket-replication", "--bucket", "big"]);
    let none = common::s3::aws(
        &src.key,
        &endpoint(&src.c, 0),
        &src.c.nodes[0].dir,
        &["s3api", "get-bucket-replication", "--bucket", "big"],
    );
    assert!(
        common::stderr(&none).contains("ReplicationConfigurationNotFoundError"),
        "{}",
        common::stderr(&none)
    );
}

/// The replication benchmark (script/bench-replicate.sh): a source of
/// three zones and a destination of one node, joined by a link with
/// `GARAGE_TEST_REPL_RTT_MS` round trips. PUT latency through one node
/// without and with a rule; then `GARAGE_TEST_REPL_OBJECTS` objects of
/// `GARAGE_TEST_REPL_SIZE` bytes written while the link is cut for
/// `GARAGE_TEST_REPL_CUT_SECS` (at least the writes' time), the time
/// the destination takes to hold every version once it is back
/// (versions/s and MB/s), and every version's status checked (COMPLETED
/// on the source, REPLICA on the destination). With the link up, the lag
/// of a live stream: how long after the last PUT the destination holds
/// every version.
#[test]
#[ignore = "a benchmark: script/bench-replicate.sh"]
fn bench_replication() {
    use crate::notifications::{knob, summary};
    let n = knob("GARAGE_TEST_REPL_OBJECTS", 2000);
    let size = knob("GARAGE_TEST_REPL_SIZE", 1024);
    let rtt = knob("GARAGE_TEST_REPL_RTT_MS", 0) as u64;
    let cut_secs = knob("GARAGE_TEST_REPL_CUT_SECS", 0) as u64;
    let src = Site::three_zones();
    let dst = Site::one_node();
    dst.versioned_bucket("copy");
    dst.versioned_bucket("live-copy");
    let (link, _proxy, url) = link_to(&dst.c);
    if rtt > 0 {
        link.set_delay(Duration::from_millis(rtt / 2));
    }
    src.add_remote("dr", &url, &dst.key, "copy");
    for b in ["plain", "bulk", "live"] {
        src.versioned_bucket(b);
    }
    src.replicate("bulk", "arn:garage:s3:::dr/copy");
    src.replicate("live", "arn:garage:s3:::dr/live-copy");
    let cl = sdk_client(&src.c, 0, &src.key);
    let dcl = sdk_client(&dst.c, 0, &dst.key);
    let puts = |bucket: &str, count: usize| -> Vec<f64> {
        common::run(async {
            let mut out = Vec::with_capacity(count);
            for i in 0..count {
                let t = std::time::Instant::now();
                put_object(&cl, bucket, &format!("o{i:06}"), &body(i, size), None)
                    .await
                    .unwrap();
                out.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            out
        })
    };
    let mb = (n * size) as f64 / 1e6;
    eprintln!("bench: RTT {rtt} ms between the clusters, {n} PUTs of {size} B through one node, one at a time");
    eprintln!("bench: PUT without a rule: {}", summary(puts("plain", n)));

    // Live: the link up.
    let t = std::time::Instant::now();
    let live = puts("live", n);
    let written = t.elapsed();
    wait_until(
        "the live stream replicated",
        Duration::from_secs(1800),
        || common::run(try_versions(&dcl, "live-copy")).is_ok_and(|v| v.len() >= n),
    );
    let all = t.elapsed();
    eprintln!("bench: PUT with a replication rule: {}", summary(live));
    eprintln!(
        "bench: live: every version at the destination {:.2} s after the last PUT ({:.0} versions/s, {:.1} MB/s over the whole run)",
        (all - written).as_secs_f64(),
        n as f64 / all.as_secs_f64(),
        mb / all.as_secs_f64()
    );

    // Cut: a backlog, then its drain.
    link.set_isolated(dst.c.nodes[0].ip.into(), true);
    let t = std::time::Instant::now();
    let queued_only = puts("bulk", n);
    eprintln!(
        "bench: PUT with a replication rule, link cut (queued, nothing sent meanwhile): {}",
        summary(queued_only)
    );
    let left = Duration::from_secs(cut_secs).saturating_sub(t.elapsed());
    std::thread::sleep(left);
    eprintln!(
        "bench: link cut {:.0} s while {n} versions were written",
        t.elapsed().as_secs_f64()
    );
    let want = common::run(versions(&cl, "bulk"));
    link.set_isolated(dst.c.nodes[0].ip.into(), false);
    let t = std::time::Instant::now();
    wait_until("the backlog replicated", Duration::from_secs(3600), || {
        common::run(try_versions(&dcl, "copy")).is_ok_and(|v| v == want)
    });
    let drain = t.elapsed().as_secs_f64();
    eprintln!(
        "bench: backlog of {n} versions at the destination {drain:.1} s after the link came back: {:.0} versions/s, {:.1} MB/s (the first retry waits up to 30 s)",
        n as f64 / drain,
        mb / drain
    );
    wait_until(
        "every version COMPLETED on the source",
        Duration::from_secs(120),
        || common::run(all_completed(&cl, "bulk", &want)),
    );
    let mut statuses: BTreeMap<(String, String), usize> = BTreeMap::new();
    common::run(async {
        for (k, vid) in want.keys() {
            let s = status(&cl, "bulk", k, vid).await.unwrap_or_default();
            let d = status(&dcl, "copy", k, vid).await.unwrap_or_default();
            *statuses.entry((s, d)).or_default() += 1;
        }
    });
    eprintln!("bench: statuses (source, destination): {statuses:?}");
    assert_eq!(
        statuses.get(&("COMPLETED".to_string(), "REPLICA".to_string())),
        Some(&n),
        "{statuses:?}"
    );
}

/// A destination whose clock is stepped back 20 minutes (past SigV4's
/// 15-minute window: it answers RequestTimeTooSkewed) makes versions
/// wait, `PENDING`, not fail; once its clock is back, they arrive.
#[test]
fn versions_wait_out_a_destination_clock_stepped_back() {
    let src = Site::one_node();
    let mut dst = Site::one_node();
    dst.c.stop(0);
    dst.c.fake_clock(0);
    dst.c.start(0);
    dst.versioned_bucket("copy");
    let (_l, _p, url) = link_to(&dst.c);
    let arn = src.add_remote("dr", &url, &dst.key, "copy");
    src.versioned_bucket("src");
    src.replicate("src", &arn);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cl = sdk_client(&src.c, 0, &src.key);
    let dcl = sdk_client(&dst.c, 0, &dst.key);
    // Whether the destination refuses requests signed now as skewed.
    let skewed = || {
        rt.block_on(dcl.list_buckets().send())
            .err()
            .and_then(|e| e.into_service_error().meta().code().map(String::from))
            .as_deref()
            == Some("RequestTimeTooSkewed")
    };
    dst.c.set_clock_offset(0, -20 * 60 * 1000);
    wait_until(
        "the destination's clock is behind",
        Duration::from_secs(30),
        skewed,
    );
    for i in 0..5 {
        rt.block_on(put_object(
            &cl,
            "src",
            &format!("k{i}"),
            &body(i, 100),
            None,
        ))
        .unwrap();
    }
    wait_until(
        "sends refused by the skewed clock",
        Duration::from_secs(60),
        || src.c.counter(0, "replication_send_errors_total") >= 2,
    );
    let want = rt.block_on(versions(&cl, "src"));
    for (k, vid) in want.keys() {
        assert_eq!(
            rt.block_on(status(&cl, "src", k, vid)).as_deref(),
            Some("PENDING"),
            "{k}"
        );
    }
    assert_eq!(src.c.counter(0, "replication_versions_failed_total"), 0);
    dst.c.set_clock_offset(0, 0);
    wait_until(
        "the destination's clock is back",
        Duration::from_secs(30),
        || !skewed(),
    );
    wait_until("the versions arrive", Duration::from_secs(90), || {
        rt.block_on(try_versions(&dcl, "copy")).as_ref() == Ok(&want)
    });
    wait_until(
        "every version COMPLETED on the source",
        Duration::from_secs(30),
        || rt.block_on(all_completed(&cl, "src", &want)),
    );
}
