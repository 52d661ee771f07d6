//! Layout helpers shared by the CLI and the admin API.

use garage_net::NodeId;
use garage_rpc::layout::LayoutVersion;

/// The node whose id starts with `prefix`, among known nodes and nodes with
/// a (current or staged) role.
pub fn find_node(
    status: &garage_rpc::system::ClusterStatus,
    prefix: &str,
) -> Result<NodeId, String> {
    let prefix = prefix.to_ascii_lowercase();
    let mut found: Vec<NodeId> = status
        .nodes
        .iter()
        .map(|n| n.id)
        .chain(status.layout.staged_roles().into_keys())
        .chain(status.layout.current().roles.keys().copied())
        .filter(|id| id.to_string().starts_with(&prefix))
        .collect();
    found.sort();
    found.dedup();
    match found.as_slice() {
        [id] => Ok(*id),
        [] => Err(format!(
            "no node id starts with {prefix:?}: see `garage status` for the nodes"
        )),
        many => Err(format!(
            "{} nodes match {prefix:?}: give more characters of the id",
            many.len()
        )),
    }
}

/// How `layout history` and the admin API name a version's state.
pub fn version_status(v: &LayoutVersion, current: u64, min_live: u64) -> &'static str {
    if v.version == current {
        "Current"
    } else if v.version >= min_live {
        "Draining"
    } else {
        "Historical"
    }
}
