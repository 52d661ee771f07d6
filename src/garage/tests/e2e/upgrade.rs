//! The mixed-version test: a 3-zone cluster on the previous release (built
//! from this repository's history by `script/build-previous-release.sh`)
//! with data of every kind, upgraded node by node in a random order under
//! a live writer and reader, one node rolled back and forward again,
//! finalized, then its layout changed; nothing lost, no request failed but
//! those sent to a stopped node. Then a node of the previous release is
//! refused by the finalized cluster, naming both versions. See
//! doc/upgrading.md.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cluster::{wait_until, Cluster};
use crate::common::s3::{aws, aws_ok, endpoint, make_key};
use crate::common::{stderr, stdout};

const PREVIOUS: &str = "0.2.0";
const DEADLINE: Duration = Duration::from_secs(90);

/// The previous release's binary: `GARAGE_PREVIOUS_RELEASE_BIN`, else the
/// one `script/build-previous-release.sh` made (which `script/test` runs
/// before the tests), else built now in a target directory of its own.
fn previous_release() -> PathBuf {
    if let Ok(p) = std::env::var("GARAGE_PREVIOUS_RELEASE_BIN") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = root.join(format!("target/previous-release/garage-v{PREVIOUS}"));
    if !bin.exists() {
        let out = Command::new("bash")
            .arg(root.join("script/build-previous-release.sh"))
            .env(
                "CARGO_TARGET_DIR",
                root.join("target/previous-release/target"),
            )
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "cannot build the previous release:\n{}",
            stderr(&out)
        );
    }
    bin
}

/// The traffic script's process, killed if the test fails before it ends.
struct Traffic(Option<Child>);

impl Drop for Traffic {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A small deterministic generator for the upgrade order.
fn shuffle(v: &mut [usize], seed: u64) {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

fn script(c: &Cluster, key: &(String, String), mode: &str, dir: &Path, env: &[(&str, &str)]) {
    script_through(c, key, mode, dir, env, [0, 1, 2]);
}

/// [`script`] with the endpoints of nodes `via`, in that order.
fn script_through(
    c: &Cluster,
    key: &(String, String),
    mode: &str,
    dir: &Path,
    env: &[(&str, &str)],
    via: [usize; 3],
) {
    let eps: Vec<String> = via.iter().map(|&i| endpoint(c, i)).collect();
    let out = script_command(key, mode, dir, &eps)
        .envs(env.iter().copied())
        .output()
        .expect("python3 runs");
    let so = stdout(&out);
    eprintln!("upgrade.py {mode}: {so}");
    assert!(
        out.status.success(),
        "upgrade.py {mode} failed:\n{so}\n{}",
        stderr(&out)
    );
}

fn script_command(key: &(String, String), mode: &str, dir: &Path, eps: &[String]) -> Command {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/upgrade.py");
    let mut cmd = Command::new("python3");
    cmd.arg(path)
        .arg(&key.0)
        .arg(&key.1)
        .arg(mode)
        .arg(dir)
        .args(eps);
    cmd
}

/// Waits until every running node sees every node of the cluster up.
fn wait_all_up(c: &Cluster, what: &str) {
    wait_until(what, DEADLINE, || {
        (0..3)
            .filter(|i| c.nodes[*i].proc.is_some())
            .all(|i| c.health(i).0.len() == 3)
    });
}

/// Restarts node `i` on `bin` (`None`: this build), as an operator does:
/// SIGTERM, new binary, start; returns how long until every node saw it
/// up again.
fn restart_on(c: &mut Cluster, i: usize, bin: Option<PathBuf>) -> Duration {
    let t = Instant::now();
    c.stop(i);
    c.nodes[i].bin = bin;
    c.start(i);
    wait_all_up(c, &format!("every node sees node {i} up after its restart"));
    t.elapsed()
}

/// Gives node `node` capacity `cap` (its zone kept) through node `via`,
/// applies, and waits until every node has the new layout version.
fn change_capacity(c: &Cluster, via: usize, node: usize, cap: &str) {
    let zone = ["dc1", "dc2", "dc3"][node];
    let id = c.nodes[node].id().to_string();
    c.garage_ok(via, &["layout", "assign", "-z", zone, "-c", cap, &id[..16]]);
    let cur = c.garage_json(via, &["layout", "show"])["version"]
        .as_u64()
        .unwrap();
    c.garage_ok(
        via,
        &["layout", "apply", "--version", &(cur + 1).to_string()],
    );
    wait_until("every node has the new layout", DEADLINE, || {
        (0..3).all(|i| c.garage_json(i, &["layout", "show"])["version"] == cur + 1)
    });
}

/// `garage --json status` through node `i` (this build's CLI or the
/// previous release's, as the node runs).
fn status(c: &Cluster, i: usize) -> serde_json::Value {
    c.garage_json(i, &["status"])
}

/// The bucket of the feature gate's check.
const GATED: &str = "gated";

/// PutBucketLifecycleConfiguration with a NoncurrentVersionTransition
/// (gated on v0.3.0) on bucket [`GATED`], through node `i`: aws-cli's
/// output.
fn put_noncurrent_transition(
    c: &Cluster,
    key: &(String, String),
    i: usize,
    dir: &Path,
) -> std::process::Output {
    let config = r#"{"Rules": [{"ID": "cold", "Status": "Enabled", "Filter": {"Prefix": ""},
        "NoncurrentVersionTransitions": [{"NoncurrentDays": 30, "StorageClass": "STANDARD_IA"}]}]}"#;
    aws(
        key,
        &endpoint(c, i),
        dir,
        &[
            "s3api",
            "put-bucket-lifecycle-configuration",
            "--bucket",
            GATED,
            "--lifecycle-configuration",
            config,
        ],
    )
}

/// An `If-None-Match: *` PUT of `object` (a lock) in bucket [`GATED`]
/// through node `i`: whether it took the lock; any answer but success or
/// 412 PreconditionFailed fails the test.
fn take_lock(c: &Cluster, key: &(String, String), i: usize, dir: &Path, object: &str) -> bool {
    std::fs::write(
        dir.join("lock-body"),
        format!("lock taken through node {i}"),
    )
    .unwrap();
    let out = aws(
        key,
        &endpoint(c, i),
        dir,
        &[
            "s3api",
            "put-object",
            "--bucket",
            GATED,
            "--key",
            object,
            "--body",
            "lock-body",
            "--if-none-match",
            "*",
        ],
    );
    let e = stderr(&out);
    assert!(
        out.status.success() || e.contains("PreconditionFailed"),
        "lock {object} through node {i}: {e}"
    );
    out.status.success()
}

fn releases(st: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["garageVersion"].as_str().unwrap_or("?").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn rolling_upgrade_from_the_previous_release_under_traffic() {
    let prev = previous_release();
    let current = env!("CARGO_PKG_VERSION");
    let seed = std::env::var("GARAGE_UPGRADE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("upgrade order seed: {seed} (GARAGE_UPGRADE_SEED={seed} repeats this run)");
    let t0 = Instant::now();

    // A cluster of the previous release, with data of every kind.
    let mut c = Cluster::new(3, 3);
    for n in c.nodes.iter_mut() {
        n.bin = Some(prev.clone());
    }
    c.start_all();
    wait_all_up(&c, "the previous release's nodes see each other");
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
    let key = make_key(&c, "upgrade");
    // A key with no permission, that object ACLs grant to.
    let grantee = make_key(&c, "upgrade-grantee");
    let kms = c.json_api(0, "CreateKmsKey", serde_json::json!({}));
    let kms_id = kms["id"].as_str().expect("a KMS key id").to_string();
    let dir = tempfile::tempdir().unwrap();
    script(&c, &key, "write", dir.path(), &[("KMS_KEY_ID", &kms_id)]);
    script(&c, &key, "check", dir.path(), &[]);

    // The live writer and reader.
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    let mut traffic = Traffic(Some(
        script_command(&key, "traffic", dir.path(), &eps)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs"),
    ));

    // Node by node, in a random order.
    let mut order = vec![0, 1, 2];
    shuffle(&mut order, seed);
    println!("upgrade order: {order:?}");
    let mut restarts = Vec::new();
    for (step, &i) in order.iter().enumerate() {
        restarts.push(restart_on(&mut c, i, None));
        let st = status(&c, i);
        let v = &st["clusterVersion"];
        assert_eq!(v["active"], PREVIOUS, "{st}");
        assert_eq!(v["release"], current, "{st}");
        if step < 2 {
            // Mixed: status says so, and finalize refuses naming the
            // nodes still on the previous release.
            assert_eq!(v["mixed"], true, "{st}");
            assert!(releases(&st).contains(&PREVIOUS.to_string()), "{st}");
            assert!(releases(&st).contains(&current.to_string()), "{st}");
            let out = c.garage(i, &["upgrade", "finalize"]);
            assert!(!out.status.success(), "finalize succeeded while mixed");
            let e = stderr(&out);
            assert!(e.contains(&format!("runs v{PREVIOUS}")), "{e}");
            let text = c.garage_ok(i, &["status"]);
            assert!(text.contains("Upgrade under way"), "{text}");
        }
        if step == 0 {
            // While mixed: a layout change made through an upgraded
            // node, repairs (table sync, block resync) on every node, and
            // statistics of every node asked through the upgraded one (its
            // admin RPC to the old nodes).
            change_capacity(&c, i, order[1], "2G");
            for j in 0..3 {
                c.garage_ok(j, &["repair", "--yes", "tables"]);
                c.garage_ok(j, &["repair", "--yes", "blocks"]);
            }
            // The census of each node's files by class, a request the
            // previous release does not serve: `garage status` on the
            // upgraded node counts it, and names the old nodes as not
            // counted rather than failing.
            wait_until(
                "the census in status while mixed",
                Duration::from_secs(60),
                || {
                    let text = c.garage_ok(i, &["status"]);
                    let not_counted = text
                        .lines()
                        .find(|l| l.starts_with("Not counted:"))
                        .unwrap_or_default();
                    text.contains("==== STORAGE CLASSES")
                        && text.lines().any(|l| l.starts_with("STANDARD"))
                        && order[1..]
                            .iter()
                            .all(|&j| not_counted.contains(&c.nodes[j].id()[..16]))
                },
            );
            let stats = c.garage_json(i, &["stats", "-a"]);
            for n in &c.nodes {
                assert!(
                    stats["success"].get(n.id()).is_some_and(|s| s.is_object()),
                    "no statistics of node {} in {stats}",
                    n.id()
                );
            }
            // A gated feature is refused by an upgraded node until the
            // cluster is finalized, saying so.
            aws_ok(
                &key,
                &endpoint(&c, i),
                dir.path(),
                &[
                    "s3api",
                    "create-bucket",
                    "--bucket",
                    GATED,
                    "--object-ownership",
                    "ObjectWriter",
                ],
            );
            let out = put_noncurrent_transition(&c, &key, i, dir.path());
            refused_until_finalized(&out, "NotImplemented");
            // So are notification topics; an empty notification
            // configuration (nothing to store) is accepted.
            let out = aws(
                &key,
                &endpoint(&c, i),
                dir.path(),
                &[
                    "sns",
                    "create-topic",
                    "--name",
                    "gated-topic",
                    "--attributes",
                    "push-endpoint=http://127.0.0.1:9/",
                ],
            );
            refused_until_finalized(&out, "bucket notifications");
            aws_ok(
                &key,
                &endpoint(&c, i),
                dir.path(),
                &[
                    "s3api",
                    "put-bucket-notification-configuration",
                    "--bucket",
                    GATED,
                    "--notification-configuration",
                    "{}",
                ],
            );
            // So are replication remotes and rules (the bucket is
            // versioned first: the check comes after the gate's).
            let out = c.garage(
                i,
                &[
                    "remote",
                    "add",
                    "gated-remote",
                    "--endpoint",
                    "http://127.0.0.1:9",
                    "--access-key-id",
                    "GK0",
                    "--secret-access-key",
                    "s",
                ],
            );
            refused_until_finalized(&out, "bucket replication");
            let out = aws(
                &key,
                &endpoint(&c, i),
                dir.path(),
                &[
                    "s3api",
                    "put-bucket-replication",
                    "--bucket",
                    GATED,
                    "--replication-configuration",
                    r#"{"Role":"r","Rules":[{"Status":"Enabled","Priority":1,"Filter":{"Prefix":""},"DeleteMarkerReplication":{"Status":"Disabled"},"Destination":{"Bucket":"arn:garage:s3:::x/y"}}]}"#,
                ],
            );
            refused_until_finalized(&out, "bucket replication");
            // So are object ACL grants to another key (a field of the
            // version the previous release cannot read); a canned ACL is
            // not.
            std::fs::write(dir.path().join("granted.txt"), b"for the grantee").unwrap();
            let grant = format!("id={}", grantee.0);
            let put_granted = |acl: &[&str]| {
                let mut args = vec![
                    "s3api",
                    "put-object",
                    "--bucket",
                    GATED,
                    "--key",
                    "granted.txt",
                    "--body",
                    "granted.txt",
                ];
                args.extend_from_slice(acl);
                aws(&key, &endpoint(&c, i), dir.path(), &args)
            };
            refused_until_finalized(&put_granted(&["--grant-read", &grant]), "object ACL grants");
            assert!(put_granted(&["--acl", "authenticated-read"])
                .status
                .success());
            // So are IAM users (their tables are new).
            let out = c.garage(i, &["iam", "create-user", "--user-name", "gated-user"]);
            refused_until_finalized(&out, "IAM");
            // So are classes with a place and pinned buckets.
            for args in [
                &["layout", "class", "EU", "--replication", "2"][..],
                &["bucket", "set-placement", GATED, "--allow", "STANDARD"][..],
            ] {
                let out = c.garage(i, args);
                let e = stderr(&out);
                assert!(
                    !out.status.success()
                        && e.contains("placement-classes")
                        && e.contains("finalized at v0.3.0"),
                    "{args:?}: {e}"
                );
            }
            // Conditional writes while mixed: until the cluster is
            // finalized, register values are written in the format the
            // previous release reads (`conditional-register-gc`), so a
            // lock taken through either release holds through the other.
            let old_node = order[1];
            assert!(take_lock(&c, &key, i, dir.path(), "lock-new"));
            assert!(!take_lock(&c, &key, old_node, dir.path(), "lock-new"));
            assert!(take_lock(&c, &key, old_node, dir.path(), "lock-old"));
            assert!(!take_lock(&c, &key, i, dir.path(), "lock-old"));
            // A multipart upload while mixed: created and a part written
            // through the upgraded node, a part through an old one, listed
            // and completed through an old one (its parts are listed in
            // the upload's entry, which the previous release reads:
            // `multipart-parts-apart` is gated).
            let via = [i, old_node, old_node];
            script_through(
                &c,
                &key,
                "multipart",
                dir.path(),
                &[("MPU_KEY", "mpu-mixed")],
                via,
            );
        }
    }
    let st = status(&c, order[0]);
    assert_eq!(releases(&st), vec![current; 3], "{st}");
    assert!(
        st["clusterVersion"]["finalizeBlockers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{st}"
    );

    // Roll one node back to the previous release, then forward again.
    let back = order[(seed % 3) as usize];
    println!("rolling node {back} back to v{PREVIOUS} and forward again");
    restarts.push(restart_on(&mut c, back, Some(prev.clone())));
    let other = (back + 1) % 3;
    let st = status(&c, other);
    assert!(releases(&st).contains(&PREVIOUS.to_string()), "{st}");
    restarts.push(restart_on(&mut c, back, None));

    // Finalize, through any node: every node learns it.
    let series = format!("{}.0", &current[..current.rfind('.').unwrap()]);
    c.garage_ok(other, &["upgrade", "finalize"]);
    let st = status(&c, other);
    assert_eq!(
        st["clusterVersion"]["active"],
        series.as_str(),
        "the finalizing node is finalized at {series}: {st}"
    );
    wait_until(
        "every node knows the cluster is finalized",
        DEADLINE,
        || {
            (0..3).all(|i| {
                let st = status(&c, i);
                st["clusterVersion"]["active"] == series.as_str()
                    && st["nodes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|n| n["clusterVersion"] == series.as_str())
            })
        },
    );

    // Object ACL grants to another key now: read through a node that
    // ran the previous release.
    aws_ok(
        &key,
        &endpoint(&c, order[0]),
        dir.path(),
        &[
            "s3api",
            "put-object-acl",
            "--bucket",
            GATED,
            "--key",
            "granted.txt",
            "--grant-read",
            &format!("id={}", grantee.0),
        ],
    );
    wait_until(
        "the grantee reads the object granted to it",
        DEADLINE,
        || {
            aws(
                &grantee,
                &endpoint(&c, order[1]),
                dir.path(),
                &[
                    "s3api",
                    "get-object",
                    "--bucket",
                    GATED,
                    "--key",
                    "granted.txt",
                    "granted-copy.txt",
                ],
            )
            .status
            .success()
        },
    );
    assert_eq!(
        std::fs::read(dir.path().join("granted-copy.txt")).unwrap(),
        b"for the grantee"
    );

    // Notifications now: a topic, a rule, and a write's event at a
    // webhook receiver.
    let hook_out = dir.path().join("upgrade-hook.jsonl");
    let port = crate::common::brokers::free_port();
    let _hook = crate::common::brokers::webhook(port, &hook_out);
    aws_ok(
        &key,
        &endpoint(&c, order[0]),
        dir.path(),
        &[
            "sns",
            "create-topic",
            "--name",
            "upgraded",
            "--attributes",
            &format!("push-endpoint=http://127.0.0.1:{port}/"),
        ],
    );
    aws_ok(
        &key,
        &endpoint(&c, order[0]),
        dir.path(),
        &[
            "s3api",
            "put-bucket-notification-configuration",
            "--bucket",
            GATED,
            "--notification-configuration",
            r#"{"TopicConfigurations":[{"TopicArn":"arn:aws:sns:garage::upgraded","Events":["s3:ObjectCreated:*"]}]}"#,
        ],
    );
    std::fs::write(dir.path().join("evt.txt"), b"event").unwrap();
    aws_ok(
        &key,
        &endpoint(&c, order[1]),
        dir.path(),
        &[
            "s3",
            "cp",
            "evt.txt",
            &format!("s3://{GATED}/after-finalize.txt"),
        ],
    );
    wait_until("the event of a write after finalizing", DEADLINE, || {
        std::fs::read_to_string(&hook_out).is_ok_and(|t| t.contains("after-finalize.txt"))
    });

    // The gated feature is used now: the rule is kept and read back
    // through every node.
    let out = put_noncurrent_transition(&c, &key, order[0], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    c.garage_ok(order[0], &["layout", "class", "EU", "--replication", "2"]);
    c.garage_ok(order[0], &["layout", "revert", "--yes"]);
    c.garage_ok(
        order[0],
        &["bucket", "set-placement", GATED, "--allow", "any"],
    );
    for i in 0..3 {
        let got = aws_ok(
            &key,
            &endpoint(&c, i),
            dir.path(),
            &[
                "s3api",
                "get-bucket-lifecycle-configuration",
                "--bucket",
                GATED,
            ],
        );
        assert!(
            got.contains("NoncurrentVersionTransitions") && got.contains("STANDARD_IA"),
            "{got}"
        );
    }

    // Locks after finalizing (register values that never void by age):
    // one winner; the locks taken while mixed still hold.
    assert!(take_lock(&c, &key, order[0], dir.path(), "lock-final"));
    for i in 0..3 {
        for lock in ["lock-final", "lock-new", "lock-old"] {
            assert!(
                !take_lock(&c, &key, i, dir.path(), lock),
                "{lock} taken again through node {i}"
            );
        }
    }

    // Multipart after finalizing: an upload created now (its parts in the
    // part table) spread over the three nodes, and the upload the
    // previous release left open (its parts in its entry) finished.
    script_through(
        &c,
        &key,
        "multipart",
        dir.path(),
        &[("MPU_KEY", "mpu-final")],
        [order[2], order[0], order[1]],
    );
    script_through(
        &c,
        &key,
        "multipart",
        dir.path(),
        &[("MPU_FINISH_OPEN", "1")],
        [order[1], order[2], order[0]],
    );

    // A layout change under traffic, finalized.
    change_capacity(&c, 0, order[2], "3G");

    // Stop the traffic; everything acknowledged is there, through every
    // node; no request failed but those sent to a stopped node.
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    let out = traffic.0.take().unwrap().wait_with_output().unwrap();
    let so = stdout(&out);
    println!("{so}");
    assert!(
        out.status.success() && so.contains("traffic done"),
        "the traffic failed:\n{so}\n{}",
        stderr(&out)
    );
    script(&c, &key, "verify", dir.path(), &[]);
    script(&c, &key, "check", dir.path(), &[]);
    let took = t0.elapsed();

    // The finalized cluster refuses the previous release. On a node's own
    // metadata_dir, which records the finalized version, its daemon does
    // not start, naming both versions.
    let old = order[2];
    c.stop(old);
    let mut refused = crate::common::Proc::spawn_with(
        crate::common::base_command_of(&prev, &c.nodes[old].dir).args([
            "-c",
            c.nodes[old].config.to_str().unwrap(),
            "server",
        ]),
    );
    let line = refused.wait_log("cannot be rolled back");
    assert!(
        line.contains(&format!("runs garage v{PREVIOUS}"))
            && line.contains(&format!("finalized at v{series}")),
        "{line}"
    );
    assert!(!refused.wait_exit().success(), "the old daemon started");
    // Without that record (a node whose metadata_dir predates the
    // finalization, say), it starts and every node refuses it at the
    // handshake, saying why with both versions.
    std::fs::remove_file(c.nodes[old].dir.join("meta/cluster_version"))
        .expect("the node recorded the finalized version");
    c.nodes[old].bin = Some(prev.clone());
    c.start(old);
    let witness = (old + 1) % 3;
    let line = c.nodes[witness].proc().wait_log("refused:");
    assert!(
        line.contains(&format!("v{PREVIOUS}")) && line.contains(&format!("finalized at v{series}")),
        "{line}"
    );
    let st = status(&c, witness);
    let seen_up = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["id"] == c.nodes[old].id() && n["isUp"] == true);
    assert!(!seen_up, "a refused node is listed up: {st}");
    restart_on(&mut c, old, None);

    let secs: Vec<String> = restarts
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64()))
        .collect();
    println!(
        "upgrade test: {:.0} s from the first start to the last check; restarts until every node saw the node up again (s): {}",
        took.as_secs_f64(),
        secs.join(", ")
    );
}

/// `out` is a refusal of a gated feature by an upgraded node: it names
/// `what` and the release to finalize at.
fn refused_until_finalized(out: &std::process::Output, what: &str) {
    let e = stderr(out);
    assert!(
        !out.status.success() && e.contains(what) && e.contains("finalized at v0.3.0"),
        "{e}"
    );
}
