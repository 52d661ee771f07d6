//! `garage status`.

use garage_admin::ops::cluster::FreeSpaceResp;
use garage_admin::ops::{AdminRequest, AdminResponse};

use super::layout::{self, capacity_string};
use super::{expect, Admin};
use garage_admin::columns as table;

fn ago(secs: Option<u64>) -> String {
    match secs {
        None => "never seen".into(),
        Some(s) if s < 120 => format!("{s} seconds ago"),
        Some(s) if s < 7200 => format!("{} minutes ago", s / 60),
        Some(s) => format!("{} hours ago", s / 3600),
    }
}

pub async fn show(admin: &Admin) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let layout = admin.layout().await?;
    let health = expect!(
        admin.op(AdminRequest::GetClusterHealth).await?,
        AdminResponse::ClusterHealth(h) => h
    )?;
    let staged = |id: &str| layout.staged_role_changes.iter().any(|c| c.id == id);

    println!("==== HEALTHY NODES ====");
    let mut rows = vec![
        "ID\tHostname\tAddress\tTags\tZone\tCapacity\tDataAvail\tMetaAvail\tClock\tVersion"
            .to_string(),
    ];
    for n in status.nodes.iter().filter(|n| n.is_up) {
        let host = n.hostname.as_deref().unwrap_or("?");
        let addr = n.addr.as_deref().unwrap_or("N/A");
        let version = n.garage_version.as_deref().unwrap_or("?");
        match &n.role {
            Some(role) => {
                let avail = match role.capacity {
                    None => "N/A".to_string(),
                    Some(_) => free_space_string(n.data_partition.as_ref()),
                };
                let meta = free_space_string(n.metadata_partition.as_ref());
                rows.push(format!(
                    "{:.16}\t{host}\t{addr}\t[{}]\t{}\t{}\t{avail}\t{meta}\t{}\t{version}",
                    n.id,
                    role.tags.join(","),
                    role.zone,
                    capacity_string(role.capacity),
                    clock_string(n.clock_offset_ms),
                ));
            }
            None => {
                let what = if staged(&n.id) {
                    "pending..."
                } else if n.draining {
                    "draining metadata..."
                } else {
                    "NO ROLE ASSIGNED"
                };
                rows.push(format!(
                    "{:.16}\t{host}\t{addr}\t\t\t{what}\t\t{}\t{}\t{version}",
                    n.id,
                    free_space_string(n.metadata_partition.as_ref()),
                    clock_string(n.clock_offset_ms),
                ));
            }
        }
    }
    table::print(&rows);

    let failed: Vec<_> = status
        .nodes
        .iter()
        .filter(|n| !n.is_up)
        .filter_map(|n| Some((n, n.role.as_ref()?)))
        .collect();
    if !failed.is_empty() {
        println!();
        println!("==== FAILED NODES ====");
        let mut rows = vec!["ID\tHostname\tTags\tZone\tCapacity\tLast seen".to_string()];
        for (n, role) in failed {
            rows.push(format!(
                "{:.16}\t{}\t[{}]\t{}\t{}\t{}",
                n.id,
                n.hostname.as_deref().unwrap_or("?"),
                role.tags.join(","),
                role.zone,
                capacity_string(role.capacity),
                ago(n.last_seen_secs_ago),
            ));
        }
        table::print(&rows);
    }

    print_storage(admin, &status).await;

    println!();
    print!("{}", garage_admin::ops::cluster::format_health(&health));
    print!("{}", super::upgrade::summary(&status));

    if layout::print_staged_changes(&layout) {
        println!();
        println!("Please use `garage layout show` to check the proposed new layout and apply it.");
        println!();
    }
    Ok(())
}

/// The STORAGE CLASSES section: every node's last census summed by class
/// (bytes on disk, and what waits to be handed over while a class or the
/// layout moves data). Only nodes seen up are asked, each for at most
/// [`super::NODE_WAIT`] (the command is run when something is wrong); the
/// others are named; nothing is printed if no node answers.
async fn print_storage(
    admin: &Admin,
    status: &garage_admin::ops::cluster::GetClusterStatusResponse,
) {
    use garage_admin::ops::node::{NodeRequest, NodeResponse};
    use garage_admin::ops::stats::ClassStorage;
    let (answers, mut missing) =
        super::ask_up_nodes(admin, status, NodeRequest::GetNodeStorage, false).await;
    let mut censuses = Vec::new();
    for (id, answer) in answers {
        match answer {
            NodeResponse::Storage(st) => censuses.push((id, st)),
            _ => missing.push(format!("{id:.16} (answered another operation)")),
        }
    }
    let mut sum: std::collections::BTreeMap<(String, String), (ClassStorage, usize)> =
        Default::default();
    let mut oldest = 0;
    for (id, st) in censuses {
        let Some(age) = st.census_age_secs else {
            missing.push(format!("{id:.16} (not counted yet)"));
            continue;
        };
        oldest = oldest.max(age);
        for c in st.classes {
            let (t, moving_nodes) = sum
                .entry((c.class.clone(), c.redundancy.clone()))
                .or_insert_with(|| {
                    (
                        ClassStorage {
                            class: c.class.clone(),
                            redundancy: c.redundancy.clone(),
                            ..Default::default()
                        },
                        0,
                    )
                });
            t.files += c.files;
            t.bytes += c.bytes;
            t.to_hand_over_files += c.to_hand_over_files;
            t.to_hand_over_bytes += c.to_hand_over_bytes;
            if c.to_hand_over_files > 0 {
                *moving_nodes += 1;
            }
        }
    }
    if sum.is_empty() {
        return;
    }
    let b = |n: u64| bytesize::ByteSize::b(n).display().si().to_string();
    println!();
    println!("==== STORAGE CLASSES ====");
    let mut rows = vec!["Class\tRedundancy\tFiles\tOn disk\tMoving".to_string()];
    for (t, moving_nodes) in sum.values() {
        let moving = match t.to_hand_over_files {
            0 => "-".to_string(),
            n => format!(
                "{n} files ({}) to hand over, on {moving_nodes} node(s)",
                b(t.to_hand_over_bytes)
            ),
        };
        rows.push(format!(
            "{}\t{}\t{}\t{}\t{moving}",
            t.class,
            t.redundancy,
            t.files,
            b(t.bytes)
        ));
    }
    table::print(&rows);
    println!("(each node's count of its data directories, the oldest taken {oldest} s ago)");
    if !missing.is_empty() {
        println!("Not counted: {}", missing.join(", "));
    }
}

/// A node's clock offset from the cluster's (the median of the nodes'
/// clocks), e.g. `+1.002s`, or `?` when not measured.
pub fn clock_string(ms: Option<i64>) -> String {
    match ms {
        Some(ms) => format!("{:+.3}s", ms as f64 / 1000.0),
        None => "?".into(),
    }
}

/// Available space and its share of the total, or "?" when unknown.
fn free_space_string(f: Option<&FreeSpaceResp>) -> String {
    match f {
        Some(f) if f.total > 0 => format!(
            "{} ({:.1}%)",
            bytesize::ByteSize::b(f.available).display().si(),
            f.available as f64 * 100.0 / f.total as f64
        ),
        _ => "?".into(),
    }
}
