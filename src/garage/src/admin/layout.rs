//! `garage layout ...`.

use anyhow::{anyhow, bail};
use garage_net::NodeId;
use garage_rpc::layout::{
    classes::parse_class_setting, LayoutHistory, LayoutParameters, LayoutVersion, NodeRole, Tracker,
};
use garage_rpc::system::{LayoutUpdate, SystemRpc};
use garage_util::config::parse_size;

use super::Admin;

/// A node's capacity as the layout commands print it.
pub fn capacity_string(c: Option<u64>) -> String {
    match c {
        Some(c) => bytesize::ByteSize::b(c).display().si().to_string(),
        None => "gateway".into(),
    }
}
use crate::cli::{AssignRoleOpt, LayoutOperation};
use crate::columns as table;

pub async fn run(admin: &Admin, op: &LayoutOperation) -> anyhow::Result<()> {
    match op {
        LayoutOperation::Show => show(admin).await,
        LayoutOperation::Assign(opt) => assign(admin, opt).await,
        LayoutOperation::Remove { node_id } => {
            let status = admin.cluster_status().await?;
            let id = find_node(&status, node_id)?;
            update(admin, LayoutUpdate::StageRoles(vec![(id, None)])).await?;
            println!("Role removal is staged but not yet committed.");
            println!("Use `garage layout show` to view staged role changes,");
            println!("and `garage layout apply` to enact staged changes.");
            Ok(())
        }
        LayoutOperation::Config {
            redundancy,
            storage_class,
        } => {
            if redundancy.is_none() && storage_class.is_empty() {
                bail!("nothing to configure: give -r <zone redundancy> (a number of zones, or \"maximum\") or --storage-class NAME=DATA+PARITY");
            }
            let status = admin.cluster_status().await?;
            let mut params: LayoutParameters = status.layout.staging.parameters.get().clone();
            if let Some(r) = redundancy {
                params.zone_redundancy = r.parse().map_err(|e: String| anyhow!(e))?;
            }
            for c in storage_class {
                let (name, spec) = parse_class_setting(c).map_err(|e| anyhow!(e))?;
                params.storage_classes.insert(name, spec);
            }
            update(admin, LayoutUpdate::StageParameters(params.clone())).await?;
            if redundancy.is_some() {
                println!(
                    "The zone redundancy parameter has been set to '{}'.",
                    params.zone_redundancy
                );
            }
            for c in storage_class {
                println!("Storage class {c} is staged.");
            }
            Ok(())
        }
        LayoutOperation::Apply { version } => {
            let Some(version) = version else {
                bail!(
                    "give the new layout version with --version, to make sure you apply the changes you reviewed: \
                     `garage layout show` prints it"
                );
            };
            update(admin, LayoutUpdate::Apply { version: *version }).await?;
            println!(
                "New cluster layout with updated role assignment has been applied in cluster."
            );
            println!("Data will now be moved around between nodes accordingly.");
            Ok(())
        }
        LayoutOperation::Revert { yes } => {
            if !yes {
                bail!("add the --yes flag to drop all staged layout changes");
            }
            update(admin, LayoutUpdate::Revert).await?;
            println!("All proposed role changes in cluster layout have been canceled.");
            Ok(())
        }
        LayoutOperation::History => history(admin).await,
        LayoutOperation::SkipDeadNodes {
            version,
            allow_missing_data,
        } => {
            update(
                admin,
                LayoutUpdate::SkipDeadNodes {
                    version: *version,
                    allow_missing_data: *allow_missing_data,
                },
            )
            .await?;
            println!(
                "The trackers of the nodes that are down now count them at version {version}."
            );
            Ok(())
        }
    }
}

async fn update(admin: &Admin, u: LayoutUpdate) -> anyhow::Result<()> {
    match admin.call(SystemRpc::UpdateLayout(u)).await? {
        SystemRpc::Ok => Ok(()),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

/// [`find_node`](crate::ops::layout::find_node), as a CLI error.
fn find_node(status: &garage_rpc::system::ClusterStatus, prefix: &str) -> anyhow::Result<NodeId> {
    crate::ops::layout::find_node(status, prefix).map_err(|e| anyhow!(e))
}

async fn assign(admin: &Admin, opt: &AssignRoleOpt) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let staged = status.layout.staged_roles();
    let mut changes = Vec::new();
    for r in opt.replace.iter() {
        changes.push((find_node(&status, r)?, None));
    }
    if opt.gateway && opt.capacity.is_some() {
        bail!("give either -c <capacity> or -g (gateway), not both");
    }
    let capacity = match &opt.capacity {
        Some(c) => {
            let c = parse_size(c).map_err(|e| anyhow!("-c: {e}"))?;
            if c == 0 {
                bail!("-c: a capacity must be more than 0 (use -g for a gateway node)");
            }
            Some(c)
        }
        None => None,
    };
    for n in opt.node_ids.iter() {
        let id = find_node(&status, n)?;
        let current = staged.get(&id);
        let zone = opt
            .zone
            .clone()
            .or_else(|| current.map(|r| r.zone.clone()))
            .ok_or_else(|| anyhow!("give the zone of node {:.16} with -z", id.to_string()))?;
        let capacity = if opt.gateway {
            None
        } else if capacity.is_some() {
            capacity
        } else {
            current
                .ok_or_else(|| {
                    anyhow!(
                        "give a capacity with -c, or make node {:.16} a gateway with -g",
                        id.to_string()
                    )
                })?
                .capacity
        };
        let tags = if opt.tags.is_empty() {
            current.map(|r| r.tags.clone()).unwrap_or_default()
        } else {
            opt.tags.clone()
        };
        changes.push((
            id,
            Some(NodeRole {
                zone,
                capacity,
                tags,
            }),
        ));
    }
    update(admin, LayoutUpdate::StageRoles(changes)).await?;
    println!("Role changes are staged but not yet committed.");
    println!("Use `garage layout show` to view staged role changes,");
    println!("and `garage layout apply` to enact staged changes.");
    Ok(())
}

fn print_layout(v: &LayoutVersion, empty: &str) {
    let per_node = v.partitions_per_node();
    let mut rows = vec!["ID\tTags\tZone\tCapacity\tUsable capacity".to_string()];
    for (id, role) in v.roles.iter() {
        let base = format!(
            "{:.16}\t{}\t{}\t{}",
            id.to_string(),
            role.tags.join(","),
            role.zone,
            capacity_string(role.capacity)
        );
        match role.capacity {
            Some(cap) if cap > 0 => {
                let usable = per_node.get(id).copied().unwrap_or(0) as u64 * v.partition_size;
                rows.push(format!(
                    "{base}\t{} ({:.1}%)",
                    bytesize::ByteSize::b(usable).display().si(),
                    usable as f64 * 100.0 / cap as f64
                ));
            }
            _ => rows.push(base),
        }
    }
    if rows.len() > 1 {
        table::print(&rows);
        println!();
        println!("Zone redundancy: {}", v.parameters.zone_redundancy);
        print_classes(v);
    } else {
        println!("{empty}");
    }
}

/// The storage classes a version offers.
fn print_classes(v: &LayoutVersion) {
    let mut line = format!(
        "Storage classes: STANDARD (replicated x{})",
        v.replication_factor
    );
    for (name, code) in v.classes.iter() {
        line.push_str(&format!(
            ", {name} (erasure code {code}, {:.2}x)",
            code.overhead()
        ));
    }
    println!("{line}");
    let retired: Vec<String> = v
        .ec_rings
        .iter()
        .filter(|r| !v.classes.values().any(|c| *c == r.code))
        .map(|r| r.code.to_string())
        .collect();
    if !retired.is_empty() {
        println!(
            "Codes kept for blocks stored earlier: {}",
            retired.join(", ")
        );
    }
}

/// Prints the staged changes, if any; returns whether there were some.
pub fn print_staged_changes(layout: &LayoutHistory) -> bool {
    if !layout.has_staged_changes() {
        return false;
    }
    let current = layout.current();
    println!();
    println!("==== STAGED ROLE CHANGES ====");
    let mut rows = vec!["ID\tTags\tZone\tCapacity".to_string()];
    for (id, _, role) in layout.staging.roles.items() {
        if current.roles.get(id) == role.as_ref() {
            continue;
        }
        match role {
            Some(r) => rows.push(format!(
                "{:.16}\t{}\t{}\t{}",
                id.to_string(),
                r.tags.join(","),
                r.zone,
                capacity_string(r.capacity)
            )),
            None => rows.push(format!("{:.16}\tREMOVED", id.to_string())),
        }
    }
    if rows.len() > 1 {
        table::print(&rows);
    }
    if *layout.staging.parameters.get() != current.parameters {
        println!(
            "Zone redundancy: {}",
            layout.staging.parameters.get().zone_redundancy
        );
    }
    true
}

async fn show(admin: &Admin) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let layout = &status.layout;
    println!("==== CURRENT CLUSTER LAYOUT ====");
    print_layout(
        layout.current(),
        "No nodes currently have a role in the cluster.\nSee `garage status` to view available nodes.",
    );
    println!();
    println!(
        "Current cluster layout version: {}",
        layout.current().version
    );
    if print_staged_changes(layout) {
        match layout.preview() {
            Ok((next, report)) => {
                println!();
                println!("==== NEW CLUSTER LAYOUT AFTER APPLYING CHANGES ====");
                print_layout(&next, "No nodes have a role in the new layout.");
                println!();
                println!(
                    "Partitions are replicated over {} distinct zones at least.",
                    report.zone_redundancy
                );
                println!(
                    "Optimal partition size: {}",
                    bytesize::ByteSize::b(report.partition_size).display().si()
                );
                println!("Partition copies that move to a new node: {}", report.moved);
                for (code, n) in report.shards_moved.iter() {
                    println!("Shards of erasure code {code} that move to a new node: {n}");
                }
                println!();
                println!("To enact the staged role changes, type:");
                println!();
                println!("    garage layout apply --version {}", next.version);
                println!();
                println!(
                    "You can also revert all proposed changes with: garage layout revert --yes"
                );
            }
            Err(e) => {
                println!();
                println!("Error while trying to compute the assignment: {e}");
                println!("This new layout cannot yet be applied.");
                println!(
                    "You can also revert all proposed changes with: garage layout revert --yes"
                );
            }
        }
    }
    Ok(())
}

async fn history(admin: &Admin) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let layout = &status.layout;
    println!("==== LAYOUT HISTORY ====");
    let mut rows = vec!["Version\tStatus\tStorage nodes\tGateway nodes".to_string()];
    let current = layout.current().version;
    let min_live = layout.min_live_version();
    for v in layout.versions.iter().rev() {
        let storage = v.storage_nodes.len();
        rows.push(format!(
            "#{}\t{}\t{}\t{}",
            v.version,
            crate::ops::layout::version_status(v, current, min_live),
            storage,
            v.roles.len() - storage
        ));
    }
    table::print(&rows);
    println!();
    // One live version: every node has seen it synced.
    if min_live == current {
        println!("Your cluster is currently in a stable state with a single live layout version.");
        return Ok(());
    }
    println!(
        "A layout change is in progress: reads use version {}, writes go to versions {min_live} to {current}.",
        // As the nodes see it in `consistent` mode (majority writes).
        layout
            .read_version(layout.current().replication_factor / 2 + 1)
            .version
    );
    println!();
    println!("==== UPDATE TRACKERS ====");
    let mut rows = vec!["Node\tAck\tSync\tSync-ack\tUp".to_string()];
    for n in layout.tracked_nodes() {
        let up = status.nodes.iter().any(|k| k.id == n && k.is_up);
        rows.push(format!(
            "{}\t#{}\t#{}\t#{}\t{}",
            &n.to_string()[..16],
            layout.trackers.get(Tracker::Ack, &n),
            layout.trackers.get(Tracker::Sync, &n),
            layout.trackers.get(Tracker::SyncAck, &n),
            if up { "yes" } else { "NO" }
        ));
    }
    table::print(&rows);
    println!();
    println!("The change finishes once every node has synced; a node that is down holds it back.");
    println!("If a node is gone for good, run: garage layout skip-dead-nodes --version {current}");
    Ok(())
}
