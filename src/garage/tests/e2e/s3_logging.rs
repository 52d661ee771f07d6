//! Server access logging (issue 32) with real clients against real
//! `garage` processes: tests/s3/access_logs.py (boto3) on one node and on
//! three zones with node 2 killed after logging is set up; then
//! aws-cli's put-bucket-logging and the log objects read with aws-cli.

use crate::common;

use common::cluster::{wait_until, Cluster};
use common::s3::{aws, aws_ok, endpoint, make_key, run_script, run_script_killing_node_2};

const FLUSH: (&str, &str) = ("GARAGE_ACCESS_LOG_FLUSH_SECS", "1");

#[test]
fn access_logs_on_one_node_and_through_aws_cli() {
    let mut c = Cluster::new(1, 1);
    c.env.push((FLUSH.0.into(), FLUSH.1.into()));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "logging");
    run_script(
        "access_logs.py",
        "all logging checks passed",
        &key,
        &[endpoint(&c, 0)],
        &[],
        None,
        || {},
    );
    // aws-cli, end to end.
    let (ep, dir) = (endpoint(&c, 0), c.nodes[0].dir.clone());
    let cli = |args: &[&str]| aws_ok(&key, &ep, &dir, args);
    cli(&["s3", "mb", "s3://cli-source"]);
    cli(&["s3", "mb", "s3://cli-logs"]);
    cli(&[
        "s3api",
        "put-bucket-logging",
        "--bucket",
        "cli-source",
        "--bucket-logging-status",
        r#"{"LoggingEnabled":{"TargetBucket":"cli-logs","TargetPrefix":"access/"}}"#,
    ]);
    let got = cli(&["s3api", "get-bucket-logging", "--bucket", "cli-source"]);
    assert!(got.contains("\"TargetBucket\": \"cli-logs\""), "{got}");
    let bad = aws(
        &key,
        &ep,
        &dir,
        &[
            "s3api",
            "put-bucket-logging",
            "--bucket",
            "cli-source",
            "--bucket-logging-status",
            r#"{"LoggingEnabled":{"TargetBucket":"nowhere","TargetPrefix":"a/"}}"#,
        ],
    );
    assert!(
        common::stderr(&bad).contains("InvalidTargetBucketForLogging"),
        "{}",
        common::stderr(&bad)
    );
    std::fs::write(dir.join("up.txt"), b"hello").unwrap();
    let mut found = String::new();
    wait_until(
        "aws-cli's upload in the access log",
        std::time::Duration::from_secs(60),
        || {
            cli(&["s3", "cp", "up.txt", "s3://cli-source/up.txt"]);
            // `s3 ls` of an empty prefix exits with 1: nothing delivered yet.
            let list = common::stdout(&aws(
                &key,
                &ep,
                &dir,
                &["s3", "ls", "s3://cli-logs/access/"],
            ));
            for name in list.lines().filter_map(|l| l.split_whitespace().last()) {
                let text = cli(&["s3", "cp", &format!("s3://cli-logs/access/{name}"), "-"]);
                if let Some(l) = text.lines().find(|l| l.contains("REST.PUT.OBJECT up.txt")) {
                    found = l.to_string();
                    return true;
                }
            }
            false
        },
    );
    assert!(
        found.contains(" cli-source ") && found.contains(" 200 ") && found.contains(&key.0),
        "{found}"
    );
}

#[test]
fn access_logs_on_three_zones_with_a_node_killed() {
    let mut c = Cluster::three_zones_with_env(&[FLUSH]);
    let key = make_key(&c, "logging");
    run_script_killing_node_2(
        &mut c,
        "access_logs.py",
        "all logging checks passed",
        &key,
        &[],
    );
}
