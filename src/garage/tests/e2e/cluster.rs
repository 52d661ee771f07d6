//! End to end: real `garage server` processes forming a cluster over TCP.

use crate::common;

use std::io::Write;
use std::time::Duration;

use common::cluster::{wait_until, Cluster, CLUSTER_DEADLINE};
use common::stderr;

fn status(c: &Cluster, i: usize) -> (Vec<String>, Vec<String>) {
    c.health(i)
}

fn layout_version(c: &Cluster, i: usize) -> Option<u64> {
    c.try_garage_json(i, &["layout", "show"])?["version"].as_u64()
}

#[test]
fn five_nodes_in_three_zones() {
    let mut c = Cluster::new(5, 3);
    c.start_all();
    let short = |c: &Cluster, i: usize| c.nodes[i].id()[..16].to_string();

    // Everyone finds everyone through the one bootstrap peer.
    wait_until("node 0 sees 5 healthy nodes", CLUSTER_DEADLINE, || {
        status(&c, 0).0.len() == 5
    });

    c.apply_layout(&["dc1", "dc2", "dc3", "dc1", "dc2"], "1G");
    for i in 0..5 {
        wait_until(
            &format!("node {i} has layout version 1 and sees 5 healthy nodes"),
            CLUSTER_DEADLINE,
            || layout_version(&c, i) == Some(1) && status(&c, i).0.len() == 5,
        );
    }
    let layout = c.garage_json(3, &["layout", "show"]);
    assert_eq!(
        layout["parameters"]["zoneRedundancy"], "maximum",
        "{layout}"
    );
    let roles = layout["roles"].as_array().expect("the layout's roles");
    for i in 0..5 {
        assert!(
            roles.iter().any(|r| r["id"] == c.nodes[i].id()),
            "node {i} missing from layout:\n{layout}"
        );
    }
    let history = c.json_api(4, "GetClusterLayoutHistory", serde_json::json!({}));
    assert!(
        history["versions"].as_array().is_some_and(|v| v
            .iter()
            .any(|v| v["version"] == 1 && v["status"] == "Current")),
        "{history}"
    );

    // SIGKILL node 4: every other node reports it failed within 15 s and
    // keeps answering.
    let dead = short(&c, 4);
    c.kill(4);
    for i in 0..4 {
        let t = wait_until(
            &format!("node {i} reports node 4 failed"),
            Duration::from_secs(15),
            || {
                let (healthy, failed) = status(&c, i);
                failed.contains(&dead) && healthy.len() == 4
            },
        );
        eprintln!("node {i} reported node 4 failed after {t:?}");
    }

    // Restarted, it is healthy again everywhere, with the same id.
    c.start(4);
    for i in 0..5 {
        wait_until(
            &format!("node {i} sees node 4 healthy again"),
            CLUSTER_DEADLINE,
            || {
                let (healthy, failed) = status(&c, i);
                healthy.contains(&dead) && failed.is_empty() && healthy.len() == 5
            },
        );
    }
    assert_eq!(
        layout_version(&c, 4),
        Some(1),
        "the layout survived the restart"
    );

    // Cut node 2 off without closing any connection, as when a site's link
    // fails: only missed pings tell. Both sides notice.
    let cut = short(&c, 2);
    c.set_isolated(2, true);
    for i in [0, 1, 3, 4] {
        let t = wait_until(
            &format!("node {i} reports isolated node 2 failed"),
            Duration::from_secs(15),
            || status(&c, i).1.contains(&cut),
        );
        eprintln!("node {i} reported isolated node 2 failed after {t:?}");
    }
    wait_until(
        "isolated node 2 reports the 4 others failed",
        Duration::from_secs(15),
        || status(&c, 2).1.len() == 4,
    );
    c.set_isolated(2, false);
    for i in 0..5 {
        wait_until(
            &format!("node {i} sees 5 healthy nodes after the link is back"),
            CLUSTER_DEADLINE,
            || {
                let (healthy, failed) = status(&c, i);
                healthy.len() == 5 && failed.is_empty()
            },
        );
    }

    // A peer that connects and sends garbage is dropped without harm.
    let mut s = std::net::TcpStream::connect(c.nodes[0].rpc_addr()).unwrap();
    let junk: Vec<u8> = (0..4096).map(|_| rand::random::<u8>()).collect();
    let _ = s.write_all(&junk);
    drop(s);
    wait_until(
        "node 0 counts the failed handshake",
        CLUSTER_DEADLINE,
        || c.counter(0, "rpc_handshakes_failed_total") >= 1,
    );
    assert_eq!(status(&c, 0).0.len(), 5);
}

#[test]
fn node_with_another_secret_cannot_join() {
    let mut c = Cluster::new(2, 1);
    c.start(0);
    let boot = vec![format!("{}@{}", c.nodes[0].id(), c.nodes[0].rpc_addr())];
    let other_secret = common::cluster::random_secret();
    c.write_config(1, &other_secret, &boot);
    c.start(1);
    // Both sides say why in their logs.
    c.nodes[0].proc().wait_log("handshake failed");
    c.nodes[1].proc().wait_log("rpc_secret");
    let (healthy, _) = status(&c, 0);
    assert_eq!(healthy, vec![c.nodes[0].id()[..16].to_string()]);
    // The CLI with the wrong secret cannot talk to node 0 either.
    let o = c.garage(1, &["-h", &boot[0], "status"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("rpc_secret"), "{}", stderr(&o));
}

#[test]
fn layout_commands_explain_mistakes() {
    let mut c = Cluster::new(1, 1);
    c.start(0);
    let id = c.nodes[0].id().to_string();
    // Apply with nothing staged, or without a version.
    let o = c.garage(0, &["layout", "apply", "--version", "1"]);
    assert!(
        stderr(&o).contains("no changes are staged"),
        "{}",
        stderr(&o)
    );
    let o = c.garage(0, &["layout", "apply"]);
    assert!(stderr(&o).contains("--version"), "{}", stderr(&o));
    // Assign without a zone or capacity.
    let o = c.garage(0, &["layout", "assign", &id[..8]]);
    assert!(stderr(&o).contains("-z"), "{}", stderr(&o));
    let o = c.garage(0, &["layout", "assign", "-z", "dc1", &id[..8]]);
    assert!(stderr(&o).contains("-c"), "{}", stderr(&o));
    let o = c.garage(0, &["layout", "assign", "-z", "dc1", "-c", "1G", "ffff"]);
    assert!(
        stderr(&o).contains("no node id starts with"),
        "{}",
        stderr(&o)
    );
    c.garage_ok(0, &["layout", "assign", "-z", "dc1", "-c", "1G", &id[..8]]);
    let o = c.garage(0, &["layout", "apply", "--version", "5"]);
    assert!(stderr(&o).contains("--version 1"), "{}", stderr(&o));
    // Revert needs --yes, then drops the staged change.
    let o = c.garage(0, &["layout", "revert"]);
    assert!(stderr(&o).contains("--yes"), "{}", stderr(&o));
    c.garage_ok(0, &["layout", "revert", "--yes"]);
    let layout = c.garage_json(0, &["layout", "show"]);
    assert!(
        layout["stagedRoleChanges"] == serde_json::json!([])
            && layout["stagedParameters"].is_null(),
        "{layout}"
    );
    // node id prints <id>@<addr>.
    let out = c.garage_ok(0, &["node", "id", "-q"]);
    assert_eq!(out.trim(), format!("{id}@{}", c.nodes[0].public_addr()));
}

/// The documented way to add a node: `garage node connect <A>` run on B,
/// then at once `garage layout assign <B>` run on A. A must know B as soon
/// as the connect command returns (it used to learn B only at B's next
/// ping, about 1.5 s later: "no node id starts with …"). Done three times,
/// with a new node each time, and the other way round too.
#[test]
fn a_connected_node_is_known_to_both_sides_at_once() {
    let mut c = Cluster::new(4, 1);
    c.start(0);
    let a = format!("{}@{}", c.nodes[0].id(), c.nodes[0].public_addr());
    for b in 1..4 {
        c.start(b);
        let b_id = c.nodes[b].id().to_string();
        c.garage_ok(b, &["node", "connect", &a]);
        // No wait: the assignment on A right after the connect on B.
        c.garage_ok(
            0,
            &["layout", "assign", "-z", "dc1", "-c", "1G", &b_id[..16]],
        );
        let a_id = c.nodes[0].id().to_string();
        c.garage_ok(
            b,
            &["layout", "assign", "-z", "dc1", "-c", "1G", &a_id[..16]],
        );
    }
    let layout = c.garage_json(0, &["layout", "show"]);
    let staged = layout["stagedRoleChanges"]
        .as_array()
        .expect("staged changes");
    for b in 1..4 {
        assert!(
            staged.iter().any(|r| r["id"] == c.nodes[b].id()),
            "{layout}"
        );
    }
}

/// `garage json-api`: any admin API endpoint by name, over the cluster RPC
/// (no admin listener, no admin token), with its query parameters and
/// body fields in one JSON object; JSON out, errors on standard error.
#[test]
fn json_api_calls_any_admin_endpoint_over_rpc() {
    let mut c = Cluster::new(1, 1);
    c.start(0);
    c.apply_layout(&["dc1"], "1G");
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["json-api"];
        all.extend_from_slice(args);
        serde_json::from_str(&c.garage_ok(0, &all)).unwrap()
    };
    let status = json(&["GetClusterStatus"]);
    assert_eq!(status["nodes"].as_array().unwrap().len(), 1, "{status}");
    let b = json(&["CreateBucket", r#"{"globalAlias": "from-json"}"#]);
    let id = b["id"].as_str().unwrap().to_string();
    // A query parameter (globalAlias) taken from the object.
    let info = json(&["GetBucketInfo", r#"{"globalAlias": "from-json"}"#]);
    assert_eq!(info["id"], id.as_str(), "{info}");
    // Query (id) and body (quotas) together.
    let req = format!(r#"{{"id": "{id}", "quotas": {{"maxObjects": 7, "maxSize": null}}}}"#);
    let upd = json(&["UpdateBucket", &req]);
    assert_eq!(upd["quotas"]["maxObjects"], 7, "{upd}");
    // A per-node endpoint: this node unless `node` is given.
    let node = json(&["GetNodeInfo"]);
    assert_eq!(node["success"].as_object().unwrap().len(), 1, "{node}");
    // Errors: the answer's JSON on standard error, a failure exit.
    let o = c.garage(
        0,
        &["json-api", "GetBucketInfo", r#"{"globalAlias": "nope"}"#],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("NoSuchBucket"), "{}", stderr(&o));
    let o = c.garage(0, &["json-api", "FlyToTheMoon"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no admin API endpoint FlyToTheMoon"),
        "{}",
        stderr(&o)
    );

    // `--json` on the read commands: one JSON document each, the fields
    // of the admin API endpoint behind it.
    let key = json(&["CreateKey", r#"{"name": "json-key"}"#]);
    let key_id = key["accessKeyId"].as_str().unwrap().to_string();
    let cli = |args: &[&str]| -> serde_json::Value {
        let out = c.garage_ok(0, args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
    };
    let me = c.nodes[0].id().to_string();
    assert_eq!(cli(&["status", "--json"])["nodes"][0]["id"], me.as_str());
    assert_eq!(cli(&["--json", "layout", "show"])["version"], 1);
    let buckets = cli(&["bucket", "list", "--json"]);
    assert_eq!(buckets[0]["id"], id.as_str(), "{buckets}");
    let b = cli(&["bucket", "info", "from-json", "--json"]);
    assert_eq!(
        (&b["quotas"]["maxObjects"], &b["bytesByClass"]["STANDARD"]),
        (&serde_json::json!(7), &serde_json::json!(0)),
        "{b}"
    );
    assert_eq!(cli(&["key", "list", "--json"])[0]["id"], key_id.as_str());
    let k = cli(&["key", "info", "json-key", "--json"]);
    assert_eq!(
        (&k["name"], &k["secretAccessKey"]),
        (&serde_json::json!("json-key"), &serde_json::Value::Null),
        "{k}"
    );
    let k = cli(&["key", "info", "json-key", "--show-secret", "--json"]);
    assert_eq!(k["secretAccessKey"], key["secretAccessKey"], "{k}");
    let stats = cli(&["stats", "--json"]);
    let tables = &stats["success"][&me]["tables"];
    assert!(
        tables
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "bucket_v2" || t["name"] == "bucket"),
        "{stats}"
    );
    let workers = cli(&["worker", "list", "--json"]);
    let list = workers["success"][&me].as_array().unwrap();
    assert!(
        list.iter()
            .any(|w| w["name"] == "Lifecycle transition worker"),
        "{workers}"
    );
    let first = list[0]["id"].as_u64().unwrap().to_string();
    assert!(cli(&["worker", "info", &first, "--json"])["success"][&me]["name"].is_string());
    assert!(cli(&["block", "list-errors", "--json"])["success"][&me].is_array());
    assert!(cli(&["admin-token", "list", "--json"]).is_array());
    // A command that changes something is refused, saying what to do.
    let o = c.garage(0, &["bucket", "create", "x", "--json"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--json is for read commands"),
        "{}",
        stderr(&o)
    );
}

/// Bootstrap peers given by address alone, as the Helm chart writes them
/// (every pod by its DNS name, itself included): the nodes learn each
/// other's ids by connecting and form the cluster, a node skips its own
/// address, and the CLI reaches a node by address alone.
#[test]
fn bootstrap_peers_by_address_alone() {
    let mut c = Cluster::new(3, 3);
    let addrs: Vec<String> = (0..3).map(|i| c.nodes[i].public_addr()).collect();
    for i in 0..3 {
        c.write_config(i, &c.secret.clone(), &addrs);
    }
    for i in 0..3 {
        c.start(i);
    }
    for i in 0..3 {
        wait_until(
            "every node finds the others by address",
            CLUSTER_DEADLINE,
            || status(&c, i).0.len() == 3,
        );
    }
    // Node 0 may see the others first through their connections to it;
    // its own dialing of their addresses (retried 3 s apart while a peer
    // is not listening yet) logs what it learned, within the deadline.
    for (j, addr) in addrs.iter().enumerate().skip(1) {
        let short = c.nodes[j].id()[..16].to_string();
        let learned = |c: &Cluster| {
            c.nodes[0]
                .proc()
                .log()
                .lines()
                .any(|l| l.contains(&format!("bootstrap peer {addr}")) && l.contains(&short))
        };
        wait_until(
            "node 0 logs learning each peer's id from its address",
            CLUSTER_DEADLINE,
            || learned(&c),
        );
    }
    let log = c.nodes[0].proc().log();
    assert!(
        !log.contains(&format!("cannot connect to {}", addrs[0])),
        "node 0 tried to connect to itself:\n{log}"
    );
    // The CLI by address alone.
    let out = c.garage_ok(0, &["-h", &addrs[2], "node", "id", "-q"]);
    assert!(out.starts_with(c.nodes[2].id()), "{out}");
    let o = c.garage(0, &["-h", "not-a-peer", "status"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("invalid peer"), "{}", stderr(&o));
}
