//! Conditional writes decided by the per-object compare-and-set register:
//! 32 boto3 clients race `If-None-Match: *` and then `If-Match` PUTs of one
//! key through every node; exactly one wins each race and the others get
//! 412, on one node, on three nodes in three zones, and while a node is
//! SIGKILLed in the middle of a race (tests/s3/race.py).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

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
