//! The admin HTTP API, end to end: real nodes, real HTTP (curl), real S3
//! client (aws-cli).

use crate::common;

use std::process::Command;

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::s3::{aws_ok, endpoint};
use serde_json::{json, Value};

const TOKEN: &str = "admin-token-for-the-test-7f3a9c";

/// Adds an `[admin]` section to node `i`'s configuration (before it
/// starts); returns the admin API's base URL.
fn enable_admin(c: &Cluster, i: usize, token: Option<&str>) -> String {
    let n = &c.nodes[i];
    let mut text = std::fs::read_to_string(&n.config).unwrap();
    text.push_str(&format!("\n[admin]\napi_bind_addr = \"{}:3903\"\n", n.ip));
    if let Some(t) = token {
        text.push_str(&format!("admin_token = \"{t}\"\n"));
    }
    std::fs::write(&n.config, text).unwrap();
    format!("http://{}:3903", n.ip)
}

/// One HTTP request with curl; (status, body).
fn http(
    base: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--max-time",
        "60",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
    ]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(b) = body {
        cmd.args(["--data-binary", &b.to_string()]);
    }
    match base.strip_prefix("unix:") {
        Some(sock) => cmd
            .args(["--unix-socket", sock])
            .arg(format!("http://localhost{path}")),
        None => cmd.arg(format!("{base}{path}")),
    };
    let out = cmd.output().expect("curl runs");
    assert!(out.status.success(), "curl {method} {path} failed: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

/// A request with the token that must answer 200 with JSON.
fn api(base: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, text) = http(base, Some(TOKEN), method, path, body.as_ref());
    assert_eq!(status, 200, "{method} {path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
}

/// A request with the token that must fail with `status` and `code`.
fn api_err(base: &str, method: &str, path: &str, body: Option<Value>, status: u16, code: &str) {
    let (got, text) = http(base, Some(TOKEN), method, path, body.as_ref());
    assert_eq!(got, status, "{method} {path}: {text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["code"], code, "{method} {path}: {text}");
    assert_eq!(v["path"], path.split('?').next().unwrap(), "{text}");
    assert_eq!(v["region"], "garage", "{text}");
    assert!(!v["message"].as_str().unwrap().is_empty());
}

#[test]
fn layout_keys_buckets_and_s3_through_the_admin_api() {
    let mut c = Cluster::new(3, 3);
    let base = enable_admin(&c, 0, Some(TOKEN));
    c.start_all();
    wait_until("three nodes up", CLUSTER_DEADLINE, || {
        let s = api(&base, "GET", "/v2/GetClusterStatus", None);
        s["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["isUp"] == true)
            .count()
            == 3
    });

    // No layout yet: no partition has a quorum.
    let (status, text) = http(&base, None, "GET", "/health", None);
    assert_eq!(status, 503, "{text}");
    let h = api(&base, "GET", "/v2/GetClusterHealth", None);
    assert_eq!(h["status"], "unavailable");
    assert_eq!(h["partitionsQuorum"], 0);

    // Tokens: missing or wrong -> 403 AccessDenied, as the reference does.
    for token in [None, Some("wrong-token"), Some("")] {
        let (status, text) = http(&base, token, "GET", "/v2/GetClusterStatus", None);
        assert_eq!(status, 403, "token {token:?}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["code"], "AccessDenied");
    }
    // A wrong token is refused on writes too, and changes nothing.
    let (status, _) = http(
        &base,
        Some("wrong-token"),
        "POST",
        "/v2/CreateKey",
        Some(&json!({"name": "intruder"})),
    );
    assert_eq!(status, 403);

    // The layout, staged and applied through the API.
    let ids: Vec<String> = c.nodes.iter().map(|n| n.id().to_string()).collect();
    let roles: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"id": id, "zone": format!("dc{}", i + 1), "capacity": 1_000_000_000u64, "tags": ["api"]}))
        .collect();
    let staged = api(
        &base,
        "POST",
        "/v2/UpdateClusterLayout",
        Some(json!({"roles": roles})),
    );
    assert_eq!(staged["version"], 0);
    assert_eq!(staged["stagedRoleChanges"].as_array().unwrap().len(), 3);
    api_err(
        &base,
        "POST",
        "/v2/ApplyClusterLayout",
        Some(json!({"version": 7})),
        400,
        "InvalidRequest",
    );
    api_err(
        &base,
        "POST",
        "/v2/UpdateClusterLayout",
        Some(json!({"roles": [{"id": "zz", "zone": "x", "capacity": 1}]})),
        400,
        "InvalidRequest",
    );
    let applied = api(
        &base,
        "POST",
        "/v2/ApplyClusterLayout",
        Some(json!({"version": 1})),
    );
    assert_eq!(applied["layout"]["version"], 1);
    let layout = api(&base, "GET", "/v2/GetClusterLayout", None);
    assert_eq!(layout["version"], 1);
    assert_eq!(layout["stagedRoleChanges"], json!([]));
    let mut zones: Vec<String> = layout["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["storedPartitions"], 256, "{r}");
            r["zone"].as_str().unwrap().to_string()
        })
        .collect();
    zones.sort();
    assert_eq!(zones, ["dc1", "dc2", "dc3"]);
    let status = api(&base, "GET", "/v2/GetClusterStatus", None);
    assert_eq!(status["layoutVersion"], 1);
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["role"]["tags"], json!(["api"]), "{n}");
    }
    // The other nodes got it by gossip: the CLI on node 2 shows it.
    wait_until("node 2 has layout version 1", CLUSTER_DEADLINE, || {
        c.garage_json(2, &["layout", "show"])["version"] == 1
    });
    let history = api(&base, "GET", "/v2/GetClusterLayoutHistory", None);
    assert_eq!(history["currentVersion"], 1);
    assert_eq!(history["versions"][0]["status"], "Current");
    wait_until("cluster healthy", CLUSTER_DEADLINE, || {
        api(&base, "GET", "/v2/GetClusterHealth", None)["status"] == "healthy"
    });
    let (status, text) = http(&base, None, "GET", "/health", None);
    assert_eq!(status, 200, "{text}");
    // The refused CreateKey made nothing.
    assert_eq!(api(&base, "GET", "/v2/ListKeys", None), json!([]));
    // IAM through the admin API: any action by name, AWS's answer and
    // AWS's error codes.
    let u = api(
        &base,
        "POST",
        "/v2/IamCall",
        Some(json!({"action": "CreateUser", "params": {"UserName": "http-user"}})),
    );
    assert_eq!(u["User"]["UserName"], "http-user", "{u}");
    assert_eq!(u["User"]["Arn"], "arn:aws:iam:::user/http-user", "{u}");
    api_err(
        &base,
        "POST",
        "/v2/IamCall",
        Some(json!({"action": "CreateUser", "params": {"UserName": "http-user"}})),
        409,
        "EntityAlreadyExists",
    );
    api_err(
        &base,
        "POST",
        "/v2/IamCall",
        Some(json!({"action": "GetUser", "params": {"UserName": "nobody"}})),
        404,
        "NoSuchEntity",
    );
    let done = api(
        &base,
        "POST",
        "/v2/IamCall",
        Some(json!({"action": "DeleteUser", "params": {"UserName": "http-user"}})),
    );
    assert_eq!(done, Value::Null);

    // A key and a bucket, made and linked through the API...
    let key = api(
        &base,
        "POST",
        "/v2/CreateKey",
        Some(json!({"name": "api-key"})),
    );
    let key_id = key["accessKeyId"].as_str().unwrap().to_string();
    let secret = key["secretAccessKey"].as_str().unwrap().to_string();
    assert_eq!(key["name"], "api-key");
    let bucket = api(
        &base,
        "POST",
        "/v2/CreateBucket",
        Some(json!({"globalAlias": "api-bucket"})),
    );
    let bucket_id = bucket["id"].as_str().unwrap().to_string();
    api_err(
        &base,
        "POST",
        "/v2/CreateBucket",
        Some(json!({"globalAlias": "api-bucket"})),
        409,
        "BucketAlreadyExists",
    );
    let allowed = api(
        &base,
        "POST",
        "/v2/AllowBucketKey",
        Some(json!({"bucketId": bucket_id, "accessKeyId": key_id,
                    "permissions": {"read": true, "write": true, "owner": false}})),
    );
    assert_eq!(allowed["keys"][0]["accessKeyId"], key_id.as_str());
    assert_eq!(
        allowed["keys"][0]["permissions"],
        json!({"read": true, "write": true, "owner": false})
    );
    let info = api(&base, "GET", &format!("/v2/GetKeyInfo?id={key_id}"), None);
    assert!(
        info.get("secretAccessKey").is_none(),
        "secret shown without showSecretKey"
    );
    assert_eq!(info["buckets"][0]["globalAliases"], json!(["api-bucket"]));
    let info = api(
        &base,
        "GET",
        "/v2/GetKeyInfo?search=api-key&showSecretKey=true",
        None,
    );
    assert_eq!(info["secretAccessKey"], secret.as_str());

    // ...used by a real S3 client, through another node.
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.path().join("up.bin"), &payload).unwrap();
    let s3key = (key_id.clone(), secret.clone());
    let ep = endpoint(&c, 1);
    aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &["s3", "cp", "up.bin", "s3://api-bucket/obj.bin"],
    );
    aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &["s3", "cp", "s3://api-bucket/obj.bin", "down.bin"],
    );
    assert_eq!(std::fs::read(dir.path().join("down.bin")).unwrap(), payload);
    // InspectObject: its one complete version and the block holding it.
    let bid = api(
        &base,
        "GET",
        "/v2/GetBucketInfo?globalAlias=api-bucket",
        None,
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ins = api(
        &base,
        "GET",
        &format!("/v2/InspectObject?bucketId={bid}&key=obj.bin"),
        None,
    );
    let v = ins["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["state"] == "complete")
        .unwrap_or_else(|| panic!("{ins}"));
    assert_eq!(v["size"], 100_000, "{ins}");
    assert_eq!(v["blocks"].as_array().unwrap().len(), 1, "{ins}");
    assert_eq!(v["blocks"][0]["size"], 100_000, "{ins}");
    api_err(
        &base,
        "GET",
        &format!("/v2/InspectObject?bucketId={bid}&key=missing"),
        None,
        404,
        "NoSuchObject",
    );
    wait_until("bucket counters", CLUSTER_DEADLINE, || {
        let b = api(
            &base,
            "GET",
            "/v2/GetBucketInfo?globalAlias=api-bucket",
            None,
        );
        b["objects"] == 1 && b["bytes"] == 100_000
    });

    // Revoking write: the S3 client is refused.
    api(
        &base,
        "POST",
        "/v2/DenyBucketKey",
        Some(json!({"bucketId": bucket_id, "accessKeyId": key_id,
                    "permissions": {"read": false, "write": true, "owner": false}})),
    );
    let o = common::s3::aws(
        &s3key,
        &ep,
        dir.path(),
        &["s3", "cp", "up.bin", "s3://api-bucket/two.bin"],
    );
    assert!(!o.status.success(), "write allowed after DenyBucketKey");

    // A website configuration with a routing rule, set over S3 by the
    // bucket's owner...
    api(
        &base,
        "POST",
        "/v2/AllowBucketKey",
        Some(json!({"bucketId": bucket_id, "accessKeyId": key_id,
                    "permissions": {"read": false, "write": false, "owner": true}})),
    );
    std::fs::write(
        dir.path().join("website.json"),
        r#"{"IndexDocument": {"Suffix": "start.html"},
            "RoutingRules": [{"Condition": {"KeyPrefixEquals": "old/"},
                              "Redirect": {"ReplaceKeyPrefixWith": "new/"}}]}"#,
    )
    .unwrap();
    aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &[
            "s3api",
            "put-bucket-website",
            "--bucket",
            "api-bucket",
            "--website-configuration",
            "file://website.json",
        ],
    );

    // Website access and quotas.
    let upd = api(
        &base,
        "POST",
        &format!("/v2/UpdateBucket?id={bucket_id}"),
        Some(
            json!({"websiteAccess": {"enabled": true, "indexDocument": "index.html", "errorDocument": "404.html"},
                    "quotas": {"maxSize": 1_000_000, "maxObjects": null}}),
        ),
    );
    assert_eq!(upd["websiteAccess"], true);
    assert_eq!(upd["websiteConfig"]["indexDocument"], "index.html");
    // ...is kept by UpdateBucket, which changes only the documents (as
    // `garage bucket website --allow` does).
    let web: Value = serde_json::from_str(&aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &["s3api", "get-bucket-website", "--bucket", "api-bucket"],
    ))
    .unwrap();
    assert_eq!(web["IndexDocument"]["Suffix"], "index.html", "{web}");
    assert_eq!(web["ErrorDocument"]["Key"], "404.html", "{web}");
    assert_eq!(
        web["RoutingRules"][0]["Redirect"]["ReplaceKeyPrefixWith"], "new/",
        "{web}"
    );
    assert_eq!(
        upd["quotas"],
        json!({"maxSize": 1_000_000, "maxObjects": null})
    );
    // Aliases.
    let aliased = api(
        &base,
        "POST",
        "/v2/AddBucketAlias",
        Some(json!({"bucketId": bucket_id, "globalAlias": "other-name"})),
    );
    let mut aliases = aliased["globalAliases"].as_array().unwrap().clone();
    aliases.sort_by_key(|a| a.to_string());
    assert_eq!(aliases, [json!("api-bucket"), json!("other-name")]);
    let local = api(
        &base,
        "POST",
        "/v2/AddBucketAlias",
        Some(json!({"bucketId": bucket_id, "localAlias": "mine", "accessKeyId": key_id})),
    );
    assert_eq!(local["keys"][0]["bucketLocalAliases"], json!(["mine"]));
    api(
        &base,
        "POST",
        "/v2/RemoveBucketAlias",
        Some(json!({"bucketId": bucket_id, "globalAlias": "other-name"})),
    );
    let listed = api(&base, "GET", "/v2/ListBuckets", None);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["globalAliases"], json!(["api-bucket"]));

    // A bucket known only by a key's local alias.
    let private = api(
        &base,
        "POST",
        "/v2/CreateBucket",
        Some(
            json!({"localAlias": {"accessKeyId": key_id, "alias": "private",
                                   "allow": {"read": true, "write": true}}}),
        ),
    );
    assert_eq!(private["globalAliases"], json!([]));
    assert_eq!(private["keys"][0]["bucketLocalAliases"], json!(["private"]));
    // A taken local alias refuses the whole creation: no bucket is left
    // behind under the global alias.
    api_err(
        &base,
        "POST",
        "/v2/CreateBucket",
        Some(json!({"globalAlias": "orphan-check",
                    "localAlias": {"accessKeyId": key_id, "alias": "private"}})),
        409,
        "BucketAlreadyExists",
    );
    api_err(
        &base,
        "GET",
        "/v2/GetBucketInfo?globalAlias=orphan-check",
        None,
        404,
        "NoSuchBucket",
    );
    assert_eq!(
        api(&base, "GET", "/v2/ListBuckets", None)
            .as_array()
            .unwrap()
            .len(),
        2
    );
    aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &["s3", "cp", "up.bin", "s3://private/p.bin"],
    );
    let ls = aws_ok(&s3key, &ep, dir.path(), &["s3", "ls", "s3://private/"]);
    assert!(ls.contains("p.bin"), "{ls}");
    aws_ok(&s3key, &ep, dir.path(), &["s3", "rm", "s3://private/p.bin"]);
    let private_id = private["id"].as_str().unwrap();
    api(
        &base,
        "POST",
        &format!("/v2/DeleteBucket?id={private_id}"),
        None,
    );

    // Errors with their codes and statuses.
    api_err(
        &base,
        "POST",
        &format!("/v2/DeleteBucket?id={bucket_id}"),
        None,
        409,
        "BucketNotEmpty",
    );
    api_err(
        &base,
        "GET",
        &format!("/v2/GetBucketInfo?id={}", "ab".repeat(32)),
        None,
        404,
        "NoSuchBucket",
    );
    api_err(
        &base,
        "GET",
        "/v2/GetBucketInfo?globalAlias=nope",
        None,
        404,
        "NoSuchBucket",
    );
    api_err(
        &base,
        "GET",
        "/v2/GetKeyInfo?id=GK0123456789abcdef01234567",
        None,
        404,
        "NoSuchAccessKey",
    );
    api_err(
        &base,
        "POST",
        "/v2/CreateBucket",
        Some(json!({"globalAlias": "Bad_Name!"})),
        400,
        "InvalidBucketName",
    );
    api_err(
        &base,
        "POST",
        "/v2/CreateKey",
        Some(json!({"name": 5})),
        400,
        "InvalidRequest",
    );
    let (status, text) = http(&base, Some(TOKEN), "POST", "/v2/CreateKey", None);
    assert_eq!(status, 400, "{text}");
    api_err(
        &base,
        "GET",
        "/v2/NoSuchOperation",
        None,
        404,
        "NoSuchEndpoint",
    );
    api_err(&base, "GET", "/v2/CreateKey", None, 405, "MethodNotAllowed");

    // Node operations, on this node and (through RPC) on the others.
    let info = api(&base, "GET", "/v2/GetNodeInfo?node=*", None);
    assert_eq!(info["success"].as_object().unwrap().len(), 3, "{info}");
    for id in &ids {
        assert_eq!(info["success"][id]["nodeId"], id.as_str());
    }
    let stats = api(
        &base,
        "GET",
        &format!("/v2/GetNodeStatistics?node={}", &ids[2][..16]),
        None,
    );
    assert!(stats["success"][&ids[2]]["freeform"]
        .as_str()
        .unwrap()
        .contains("Table stats"));
    let workers = api(&base, "POST", "/v2/ListWorkers?node=self", Some(json!({})));
    let list = workers["success"][&ids[0]].as_array().unwrap();
    assert!(
        list.iter().any(|w| w["name"] == "Block scrub worker"),
        "{workers}"
    );
    let errors = api(&base, "GET", "/v2/ListBlockErrors?node=self", None);
    assert_eq!(errors["success"][&ids[0]], json!([]));
    api_err(
        &base,
        "POST",
        "/v2/GetBlockInfo?node=self",
        Some(json!({"blockHash": "00".repeat(32)})),
        404,
        "NoSuchBlock",
    );
    api_err(
        &base,
        "GET",
        "/v2/GetNodeInfo?node=ffffffffffff",
        None,
        404,
        "NoSuchNode",
    );
    let repair = api(
        &base,
        "POST",
        "/v2/LaunchRepairOperation?node=*",
        Some(json!({"repairType": "tables"})),
    );
    assert_eq!(repair["success"].as_object().unwrap().len(), 3, "{repair}");

    // Deleting the key and the emptied bucket (write allowed again first).
    api(
        &base,
        "POST",
        "/v2/AllowBucketKey",
        Some(json!({"bucketId": bucket_id, "accessKeyId": key_id,
                    "permissions": {"write": true}})),
    );
    aws_ok(
        &s3key,
        &ep,
        dir.path(),
        &["s3", "rm", "s3://api-bucket/obj.bin"],
    );
    api(
        &base,
        "POST",
        &format!("/v2/DeleteBucket?id={bucket_id}"),
        None,
    );
    api(&base, "POST", &format!("/v2/DeleteKey?id={key_id}"), None);
    assert_eq!(api(&base, "GET", "/v2/ListKeys", None), json!([]));
    assert_eq!(api(&base, "GET", "/v2/ListBuckets", None), json!([]));
}

#[test]
fn openapi_document_matches_what_is_served() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c, 0, Some(TOKEN));
    c.start(0);
    let (status, text) = http(&base, None, "GET", "/v2/openapi.json", None);
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 30, "{} paths", paths.len());
    for name in [
        "GetClusterStatus",
        "UpdateClusterLayout",
        "CreateKey",
        "AllowBucketKey",
        "PurgeBlocks",
    ] {
        assert!(paths.contains_key(&format!("/v2/{name}")), "{name} missing");
    }
    // Every documented operation is routed: without a token, the
    // protected ones answer 403 (never 404 or 405) and the others 200 (or
    // 503 for /health on a node without a layout).
    // (`/check` without its `domain` parameter: 400.)
    let free = [
        "/health",
        "/check",
        "/v2/GetClusterHealth",
        "/v2/openapi.json",
    ];
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let (status, text) = http(&base, None, &method.to_uppercase(), path, None);
            if free.contains(&path.as_str()) {
                assert!(
                    status == 200 || status == 503 || (path == "/check" && status == 400),
                    "{method} {path}: {status} {text}"
                );
                assert_eq!(
                    op["security"],
                    json!([{}]),
                    "{path} must say it needs no token"
                );
            } else {
                assert_eq!(status, 403, "{method} {path}: {text}");
            }
        }
    }
    let (status, _) = http(&base, None, "GET", "/v2/NotAnOperation", None);
    assert_eq!(status, 404);
    // CORS preflights are answered without a token.
    let (status, _) = http(&base, None, "OPTIONS", "/v2/ListBuckets", None);
    assert_eq!(status, 204);
}

#[test]
fn without_admin_token_only_health_answers() {
    let mut c = Cluster::new(1, 1);
    // On a Unix socket, this time.
    let sock = c.nodes[0].dir.join("admin.sock");
    let config = &c.nodes[0].config;
    // S3 on a Unix socket too (the listener loop shared by S3, the
    // website endpoint and the admin API).
    let s3_sock = c.nodes[0].dir.join("s3.sock");
    let text = std::fs::read_to_string(config).unwrap().replace(
        &format!("api_bind_addr = \"{}:3900\"", c.nodes[0].ip),
        &format!("api_bind_addr = \"{}\"", s3_sock.display()),
    );
    assert!(text.contains("s3.sock"), "{text}");
    std::fs::write(
        config,
        format!("{text}\n[admin]\napi_bind_addr = \"{}\"\n", sock.display()),
    )
    .unwrap();
    let base = format!("unix:{}", sock.display());
    c.start(0);
    c.nodes[0].proc().wait_log("no admin.admin_token");
    c.nodes[0]
        .proc()
        .wait_log(&format!("S3 API listening on unix:{}", s3_sock.display()));
    let (status, text) = http(
        &format!("unix:{}", s3_sock.display()),
        None,
        "GET",
        "/",
        None,
    );
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("<Code>AccessDenied</Code>"), "{text}");
    let (status, text) = http(&base, None, "GET", "/v2/GetClusterHealth", None);
    assert_eq!(status, 200, "{text}");
    for token in [None, Some("anything")] {
        let (status, text) = http(&base, token, "GET", "/v2/ListKeys", None);
        assert_eq!(status, 403, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["code"], "AccessDenied");
        assert!(
            v["message"].as_str().unwrap().contains("admin_token"),
            "{text}"
        );
    }
}

/// The endpoints added for the reference v2 list: PreviewClusterLayoutChanges
/// (what applying would do, nothing applied), ClusterLayoutSkipDeadNodes,
/// Get/SetWorkerVariable (the same variables as `garage worker get/set`),
/// CreateMetadataSnapshot and `garage meta snapshot`; and /v1/ paths
/// refused with a message naming the v2 API.
#[test]
fn layout_preview_worker_variables_and_snapshots() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c, 0, Some(TOKEN));
    c.start_all();
    let id = c.nodes[0].id().to_string();
    api_err(
        &base,
        "POST",
        "/v2/PreviewClusterLayoutChanges",
        None,
        400,
        "InvalidRequest",
    );
    api(
        &base,
        "POST",
        "/v2/UpdateClusterLayout",
        Some(json!({"roles": [{"id": id, "zone": "dc1", "capacity": 1_000_000_000u64}]})),
    );
    let p = api(&base, "POST", "/v2/PreviewClusterLayoutChanges", None);
    assert_eq!(p["newLayout"]["version"], 1, "{p}");
    assert_eq!(p["newLayout"]["roles"][0]["storedPartitions"], 256, "{p}");
    assert!(p["message"][0].as_str().unwrap().contains("zones"), "{p}");
    // Nothing applied by the preview.
    let l = api(&base, "GET", "/v2/GetClusterLayout", None);
    assert_eq!(l["version"], 0, "{l}");
    api(
        &base,
        "POST",
        "/v2/ApplyClusterLayout",
        Some(json!({"version": 1})),
    );
    // Its one node is up: nothing to skip, said so.
    let (status, text) = http(
        &base,
        Some(TOKEN),
        "POST",
        "/v2/ClusterLayoutSkipDeadNodes",
        Some(&json!({"version": 1})),
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("no dead node"), "{text}");

    let v = api(
        &base,
        "POST",
        "/v2/GetWorkerVariable?node=self",
        Some(json!({})),
    );
    let vars = &v["success"][&id];
    assert!(vars["resync-tranquility"].is_string(), "{v}");
    assert!(vars["scrub-tranquility"].is_string(), "{v}");
    let set = api(
        &base,
        "POST",
        "/v2/SetWorkerVariable?node=self",
        Some(json!({"variable": "resync-tranquility", "value": "7"})),
    );
    assert_eq!(set["success"][&id]["value"], "7", "{set}");
    let v = api(
        &base,
        "POST",
        "/v2/GetWorkerVariable?node=self",
        Some(json!({"variable": "resync-tranquility"})),
    );
    assert_eq!(v["success"][&id], json!({"resync-tranquility": "7"}), "{v}");
    let cli = c.garage_ok(0, &["worker", "get", "resync-tranquility"]);
    assert!(cli.contains("resync-tranquility  7"), "{cli}");
    api_err(
        &base,
        "POST",
        "/v2/SetWorkerVariable?node=self",
        Some(json!({"variable": "speed", "value": "1"})),
        400,
        "InvalidRequest",
    );

    let snap = api(&base, "POST", "/v2/CreateMetadataSnapshot?node=*", None);
    let path = snap["success"][&id]["path"].as_str().unwrap().to_string();
    assert!(std::path::Path::new(&path).is_dir(), "{snap}");
    // The CLI's snapshot: a second one next to the first.
    c.garage_ok(0, &["meta", "snapshot", "--all"]);
    let dir = std::path::Path::new(&path).parent().unwrap();
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        2,
        "two snapshots kept"
    );

    let stats = api(&base, "GET", "/v2/GetClusterStatistics", None);
    let text = stats["freeform"].as_str().unwrap();
    assert!(text.contains(&id[..16]) && text.contains("dc1"), "{text}");
    assert!(
        text.contains("data: ") && !text.contains("data: ?"),
        "{text}"
    );

    let (status, text) = http(&base, Some(TOKEN), "GET", "/v1/status", None);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("/v2/"), "{text}");
}

/// Admin tokens of the admin_token table, made by the CLI (over the admin
/// RPC) and by the API: scoped (endpoint names and prefixes), expiring,
/// revoked; the secret shown once.
#[test]
fn scoped_and_expiring_admin_tokens() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c, 0, Some(TOKEN));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let status = |token: &str, path: &str| http(&base, Some(token), "GET", path, None).0;

    let reader = c
        .garage_ok(
            0,
            &[
                "admin-token",
                "create",
                "reader",
                "--scope",
                "ListBuckets,GetKey*",
                "-q",
            ],
        )
        .trim()
        .to_string();
    c.note_secret(&reader);
    assert_eq!(status(&reader, "/v2/ListBuckets"), 200);
    assert_eq!(status(&reader, "/v2/GetKeyInfo?search=nothing"), 404);
    assert_eq!(status(&reader, "/v2/ListKeys"), 403);
    let (code, text) = http(
        &base,
        Some(&reader),
        "POST",
        "/v2/CreateBucket",
        Some(&json!({"globalAlias": "nope"})),
    );
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("scope does not allow CreateBucket"), "{text}");
    // A wrong secret with a real id: not told apart from an unknown token.
    let (id, _) = reader.split_once('.').unwrap();
    let (code, text) = http(
        &base,
        Some(&format!("{id}.{}", "0".repeat(64))),
        "GET",
        "/v2/ListBuckets",
        None,
    );
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("unknown or expired"), "{text}");

    // Through the API: one that expired already, one for everything.
    let old = api(
        &base,
        "POST",
        "/v2/CreateAdminToken",
        Some(json!({"name": "old", "expiration": "2001-01-01T00:00:00Z", "scope": ["*"]})),
    );
    let old_secret = old["secretToken"].as_str().unwrap().to_string();
    c.note_secret(&old_secret);
    assert_eq!(old["expired"], true, "{old}");
    assert_eq!(status(&old_secret, "/v2/ListBuckets"), 403);
    let all = api(
        &base,
        "POST",
        "/v2/CreateAdminToken",
        Some(json!({"name": "ops"})),
    );
    let all_secret = all["secretToken"].as_str().unwrap().to_string();
    c.note_secret(&all_secret);
    assert_eq!(all["scope"], json!(["*"]), "{all}");
    assert_eq!(status(&all_secret, "/v2/ListKeys"), 200);
    // The secret is never shown again.
    let info = api(&base, "GET", "/v2/GetAdminTokenInfo?search=ops", None);
    assert!(info.get("secretToken").is_none(), "{info}");
    let list = api(&base, "GET", "/v2/ListAdminTokens", None);
    assert_eq!(list.as_array().unwrap().len(), 3, "{list}");
    api_err(
        &base,
        "POST",
        "/v2/CreateAdminToken",
        Some(json!({"name": "x", "expiration": "tomorrow"})),
        400,
        "InvalidRequest",
    );
    api_err(
        &base,
        "GET",
        "/v2/GetAdminTokenInfo?id=ffff",
        None,
        404,
        "NoSuchAdminToken",
    );

    // Scope changes and revocations take effect at once.
    c.garage_ok(0, &["admin-token", "set", "reader", "--scope", "List*"]);
    assert_eq!(status(&reader, "/v2/ListKeys"), 200);
    // The token names `garage --json admin-token list` lists.
    let token_names = || -> Vec<String> {
        let list = c.garage_json(0, &["admin-token", "list"]);
        list.as_array()
            .unwrap_or_else(|| panic!("admin-token list is not a list: {list}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    c.garage_ok(0, &["admin-token", "delete-expired", "--yes"]);
    // The one expired token is revoked, the two others kept.
    let names = token_names();
    assert!(
        names.len() == 2 && names.iter().any(|n| n == "ops") && names.iter().any(|n| n == "reader"),
        "{names:?}"
    );
    let o = c.garage(0, &["admin-token", "delete", "reader"]);
    assert!(!o.status.success());
    c.garage_ok(0, &["admin-token", "delete", "reader", "--yes"]);
    assert_eq!(status(&reader, "/v2/ListBuckets"), 403);
    let names = token_names();
    assert!(
        names.iter().any(|n| n == "ops") && !names.iter().any(|n| n == "reader"),
        "{names:?}"
    );
}

/// CleanupIncompleteUploads and `garage bucket cleanup-incomplete-uploads`:
/// an upload younger than the limit stays, an older one is aborted (S3
/// no longer lists it).
#[test]
fn cleanup_incomplete_uploads() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c, 0, Some(TOKEN));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = common::s3::make_key(&c, "mpu");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    aws_ok(
        &key,
        &ep,
        d,
        &["s3api", "create-bucket", "--bucket", "uploads"],
    );
    std::fs::write(d.join("part"), vec![7u8; 1 << 20]).unwrap();
    let up = aws_ok(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            "uploads",
            "--key",
            "big",
        ],
    );
    let upload_id = serde_json::from_str::<Value>(&up).unwrap()["UploadId"]
        .as_str()
        .unwrap()
        .to_string();
    aws_ok(
        &key,
        &ep,
        d,
        &[
            "s3api",
            "upload-part",
            "--bucket",
            "uploads",
            "--key",
            "big",
            "--part-number",
            "1",
            "--upload-id",
            &upload_id,
            "--body",
            "part",
        ],
    );
    let listed = |k: &(String, String)| {
        aws_ok(
            k,
            &ep,
            d,
            &["s3api", "list-multipart-uploads", "--bucket", "uploads"],
        )
    };
    assert!(listed(&key).contains(&upload_id));
    let id = api(&base, "GET", "/v2/GetBucketInfo?globalAlias=uploads", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Younger than an hour: kept.
    let r = api(
        &base,
        "POST",
        "/v2/CleanupIncompleteUploads",
        Some(json!({"bucketId": id, "olderThanSecs": 3600})),
    );
    assert_eq!(r["uploadsDeleted"], 0, "{r}");
    assert!(listed(&key).contains(&upload_id));
    // Any age: the upload was started more than a millisecond ago.
    c.garage_ok(
        0,
        &[
            "bucket",
            "cleanup-incomplete-uploads",
            "--older-than",
            "0s",
            "uploads",
        ],
    );
    // The CLI aborted it: CleanupIncompleteUploads finds nothing left to
    // abort at any age.
    let r = c.json_api(
        0,
        "CleanupIncompleteUploads",
        json!({"bucketId": id, "olderThanSecs": 0}),
    );
    assert_eq!(r["uploadsDeleted"], 0, "{r}");
    assert!(!listed(&key).contains(&upload_id));
}

/// `/check?domain=` (for reverse proxies that get TLS certificates on
/// demand) answers 200 for a bucket with website access, by its name or
/// under the web root domain, and 400 saying why for anything else; no
/// token needed.
#[test]
fn check_answers_for_website_buckets_only() {
    let mut c = Cluster::new(1, 1);
    let base = enable_admin(&c, 0, Some(TOKEN));
    let config = &c.nodes[0].config;
    let mut text = std::fs::read_to_string(config).unwrap();
    text.push_str(&format!(
        "\n[s3_web]\nbind_addr = \"{}:3902\"\nroot_domain = \".web.test\"\n",
        c.nodes[0].ip
    ));
    std::fs::write(config, text).unwrap();
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    for b in ["site", "plain"] {
        c.garage_ok(0, &["bucket", "create", b]);
    }
    c.garage_ok(0, &["bucket", "website", "--allow", "site"]);
    for domain in ["site", "site.web.test", "site.web.test."] {
        let (status, text) = http(&base, None, "GET", &format!("/check?domain={domain}"), None);
        assert_eq!(status, 200, "{domain}: {text}");
        assert!(text.contains("is managed by Garage"), "{text}");
    }
    for (domain, why) in [
        ("plain.web.test", "no website access"),
        ("nothing.web.test", "no bucket is named \\\"nothing\\\""),
        ("web.test", "no bucket is named"),
    ] {
        let (status, text) = http(&base, None, "GET", &format!("/check?domain={domain}"), None);
        assert_eq!(status, 400, "{domain}: {text}");
        assert!(text.contains(why), "{domain}: {text}");
    }
    let (status, _) = http(&base, None, "GET", "/check", None);
    assert_eq!(status, 400);
}
