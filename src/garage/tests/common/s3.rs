//! What the S3 tests share: an access key made with the CLI, and the S3
//! endpoint of a node.

use super::cluster::Cluster;

/// An access key allowed to create buckets, made with the CLI on node 0.
pub fn make_key(c: &Cluster, name: &str) -> (String, String) {
    let out = c.garage_ok(0, &["key", "create", name]);
    let field = |label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {label} in {out}"))
    };
    let (id, secret) = (field("Key ID:"), field("Secret key:"));
    c.garage_ok(0, &["key", "allow", "--create-bucket", &id]);
    (id, secret)
}

/// The S3 endpoint of node `i`.
pub fn endpoint(c: &Cluster, i: usize) -> String {
    format!("http://{}:3900", c.nodes[i].ip)
}
