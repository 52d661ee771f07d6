//! What the S3 tests share: an access key made with the CLI, the S3
//! endpoint of a node, and aws-cli runs.

use std::path::Path;
use std::process::{Command, Output};

use super::cluster::Cluster;
use super::{stderr, stdout};

/// An access key allowed to create buckets, made with the CLI on node 0.
pub fn make_key(c: &Cluster, name: &str) -> (String, String) {
    let k = c.json_api(0, "CreateKey", serde_json::json!({ "name": name }));
    let field = |f: &str| {
        k[f].as_str()
            .unwrap_or_else(|| panic!("no {f} in {k}"))
            .to_string()
    };
    let (id, secret) = (field("accessKeyId"), field("secretAccessKey"));
    c.note_secret(&secret);
    c.json_api(
        0,
        "UpdateKey",
        serde_json::json!({ "id": id, "allow": { "createBucket": true } }),
    );
    (id, secret)
}

/// The S3 endpoint of node `i`.
pub fn endpoint(c: &Cluster, i: usize) -> String {
    format!("http://{}:3900", c.nodes[i].ip)
}

/// Runs aws-cli against `endpoint` with `key`, in `dir`.
pub fn aws(key: &(String, String), endpoint: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new("aws")
        .current_dir(dir)
        .env("AWS_ACCESS_KEY_ID", &key.0)
        .env("AWS_SECRET_ACCESS_KEY", &key.1)
        .env("AWS_DEFAULT_REGION", "garage")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_MAX_ATTEMPTS", "1")
        .arg("--endpoint-url")
        .arg(endpoint)
        .args(args)
        .output()
        .expect("aws-cli runs (CI installs it)")
}

/// [`aws`], which must succeed; returns its standard output.
pub fn aws_ok(key: &(String, String), endpoint: &str, dir: &Path, args: &[&str]) -> String {
    let o = aws(key, endpoint, dir, args);
    assert!(
        o.status.success(),
        "aws {args:?} failed:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs the boto3 script `tests/s3/<name>` with a key and endpoints, and
/// checks that it succeeds and prints `done`. With `pause`, the script
/// waits in that directory for `go` after writing `ready`
/// (`s3util.pause()`), and `meanwhile` runs then. `env`: more
/// environment for the script.
#[allow(dead_code)]
pub fn run_script(
    name: &str,
    done: &str,
    key: &(String, String),
    endpoints: &[String],
    env: &[(&str, String)],
    pause: Option<&Path>,
    meanwhile: impl FnOnce(),
) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/s3")
        .join(name);
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .arg(&key.0)
        .arg(&key.1)
        .args(endpoints)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(d) = pause {
        cmd.env("GARAGE_TEST_PAUSE", d);
    }
    let child = cmd
        .spawn()
        .expect("python3 runs (CI installs it with boto3)");
    if let Some(d) = pause {
        let ready = d.join("ready");
        super::cluster::wait_until(
            "the script's first writes",
            std::time::Duration::from_secs(120),
            || ready.exists(),
        );
        meanwhile();
        std::fs::write(d.join("go"), b"").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    eprintln!("{so}");
    assert!(
        out.status.success() && so.contains(done),
        "{name} failed:\n{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `tests/s3/<name>` through nodes 0 and 1 of a three-node cluster
/// and SIGKILLs node 2 when the script pauses (`s3util.pause()`, after
/// its first writes): everything after goes through the two survivors.
#[allow(dead_code)]
pub fn run_script_killing_node_2(
    c: &mut Cluster,
    name: &str,
    done: &str,
    key: &(String, String),
    env: &[(&str, String)],
) {
    let eps: Vec<String> = (0..2).map(|i| endpoint(c, i)).collect();
    let dir = tempfile::tempdir().unwrap();
    run_script(name, done, key, &eps, env, Some(dir.path()), || c.kill(2));
}

/// An `aws-sdk-s3` client of node `i`: static credentials, region
/// `garage`, path-style addressing, plain HTTP, no retries (a retry would
/// hide a failure), every other setting the SDK's default.
#[allow(dead_code)]
pub fn sdk_client(c: &Cluster, i: usize, key: &(String, String)) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("garage"))
        .credentials_provider(Credentials::new(&key.0, &key.1, None, None, "test"))
        .endpoint_url(endpoint(c, i))
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// PutObject of `body` at `bucket`/`key` through the SDK, in storage class
/// `class` when given; the error names the key and the S3 error.
pub async fn put_object(
    cl: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &[u8],
    class: Option<&str>,
) -> Result<(), String> {
    let mut req = cl
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(aws_sdk_s3::primitives::ByteStream::from(body.to_vec()));
    if let Some(c) = class {
        req = req.storage_class(aws_sdk_s3::types::StorageClass::from(c));
    }
    req.send()
        .await
        .map(|_| ())
        .map_err(|e| format!("PutObject {key}: {:?}", e.into_service_error()))
}

/// GetObject of `bucket`/`key` through the SDK: the whole body, and the
/// storage class the answer names.
pub async fn get_object(
    cl: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<(Vec<u8>, Option<String>), String> {
    let out = cl
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| format!("GetObject {key}: {:?}", e.into_service_error()))?;
    let class = out.storage_class().map(|c| c.as_str().to_string());
    let body = out
        .body
        .collect()
        .await
        .map_err(|e| format!("GetObject {key}: body cut: {e}"))?;
    Ok((body.to_vec(), class))
}
