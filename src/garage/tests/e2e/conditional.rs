//! Conditional writes decided by the per-object compare-and-set register:
//! 32 boto3 clients race `If-None-Match: *` and then `If-Match` PUTs of one
//! key through every node; exactly one wins each race and the others get
//! 412, on one node, on three nodes in three zones, and while a node is
//! SIGKILLed in the middle of a race (tests/s3/race.py).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::Cluster;
use common::s3::{endpoint, make_key};

/// Runs the race script; calls `on_line` with each line it prints.
fn race(
    key: &(String, String),
    rounds: usize,
    fragile: Option<usize>,
    eps: &[String],
    mut on_line: impl FnMut(&str),
) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/race.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(&key.0)
        .arg(&key.1)
        .arg(rounds.to_string())
        .arg(fragile.map_or(-1, |f| f as i64).to_string())
        .args(eps)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (CI installs it with boto3)");
    let mut printed = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        eprintln!("race: {line}");
        on_line(&line);
        printed.push_str(&line);
        printed.push('\n');
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && printed.contains("all races passed"),
        "race failed:\n{printed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn conditional_writes_race_on_one_node() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "race");
    race(&key, 2, None, &[endpoint(&c, 0)], |_| {});
}

#[test]
fn conditional_writes_race_on_three_nodes_with_one_killed() {
    let mut c = Cluster::three_zones();
    let key = make_key(&c, "race");
    let eps: Vec<String> = (0..3).map(|i| endpoint(&c, i)).collect();
    // Node 2 dies as round 2 starts (its clients' PUTs are in flight);
    // rounds 3 and 4 run on the two others.
    let mut killed = false;
    race(&key, 5, Some(2), &eps, |line| {
        if line == "round 2 started" {
            c.kill(2);
            killed = true;
        }
    });
    assert!(killed, "the race never reached round 2");
}

/// Issue 14, bug 3 (Terraform/OpenTofu state locking): lock with
/// `If-None-Match: *`, delete, wait until the delete's tombstone is
/// collected, lock again: the new lock wins, and the deleted lock's
/// content never comes back. (On the code before the fix: 412, and a GET
/// returned the deleted lock.)
#[test]
fn a_deleted_lock_can_be_taken_again_after_gc() {
    use common::cluster::{table_stats, wait_until};
    use common::s3::{aws, aws_ok};
    let mut c = Cluster::new(1, 1);
    c.env
        .push(("GARAGE_TABLE_GC_DELAY_SECS".into(), "4".into()));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "lock");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = endpoint(&c, 0);
    aws_ok(&key, &e, d, &["s3", "mb", "s3://locks"]);
    std::fs::write(d.join("first"), b"lock held by the first run").unwrap();
    std::fs::write(d.join("second"), b"lock held by the second run").unwrap();
    let lock = |body: &str| {
        aws(
            &key,
            &e,
            d,
            &[
                "s3api",
                "put-object",
                "--bucket",
                "locks",
                "--key",
                "state.tflock",
                "--body",
                body,
                "--if-none-match",
                "*",
            ],
        )
    };
    assert!(lock("first").status.success(), "the first lock is taken");
    assert!(!lock("second").status.success(), "a held lock is refused");
    aws_ok(&key, &e, d, &["s3", "rm", "s3://locks/state.tflock"]);
    // The delete's tombstone is collected (the object table is empty).
    wait_until(
        "the tombstone is collected",
        Duration::from_secs(60),
        || table_stats(&c, 0).get("object").is_some_and(|s| s.0 == 0),
    );
    let o = lock("second");
    assert!(
        o.status.success(),
        "the lock was deleted, taking it again must succeed: {}",
        common::stderr(&o)
    );
    aws_ok(&key, &e, d, &["s3", "cp", "s3://locks/state.tflock", "got"]);
    assert_eq!(
        std::fs::read(d.join("got")).unwrap(),
        b"lock held by the second run"
    );
}
