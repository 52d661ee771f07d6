//! `garage layout ...`: the layout requests of
//! [`garage_admin::ops::layout`], their answers printed.

use anyhow::{anyhow, bail};
use garage_admin::ops::layout::{
    find_id, ApiClassDef, ApiLayoutParameters, ApiZoneRedundancy, ApplyClusterLayoutRequest,
    ClusterLayoutSkipDeadNodesRequest, GetClusterLayoutResponse, NodeRoleChange,
    UpdateClusterLayoutRequest,
};
use garage_admin::ops::{AdminRequest as R, AdminResponse as A};
use garage_rpc::layout::{classes::parse_class_setting, ZoneRedundancy};
use garage_util::config::parse_size;

use super::{expect, Admin, NodeError};
use crate::args::{AssignRoleOpt, ClassOpt, LayoutOperation};
use garage_admin::columns as table;

/// A node's capacity as the layout commands print it.
pub fn capacity_string(c: Option<u64>) -> String {
    match c {
        Some(c) => bytesize::ByteSize::b(c).display().si().to_string(),
        None => "gateway".into(),
    }
}

fn zone_redundancy(z: &ApiZoneRedundancy) -> String {
    match z {
        ApiZoneRedundancy::Maximum => "maximum".into(),
        ApiZoneRedundancy::AtLeast(n) => n.to_string(),
    }
}

pub async fn run(admin: &Admin, op: &LayoutOperation) -> anyhow::Result<()> {
    match op {
        LayoutOperation::Show => show(admin).await,
        LayoutOperation::Assign(opt) => assign(admin, opt).await,
        LayoutOperation::Remove { node_id } => {
            let ids = node_ids(admin, &admin.layout().await?).await?;
            let id = find_node(&ids, node_id)?;
            stage(
                admin,
                UpdateClusterLayoutRequest {
                    roles: vec![NodeRoleChange {
                        id,
                        remove: Some(true),
                        zone: None,
                        capacity: None,
                        tags: None,
                    }],
                    parameters: None,
                },
            )
            .await?;
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
            let layout = admin.layout().await?;
            let mut params = layout
                .staged_parameters
                .unwrap_or(layout.parameters.clone());
            params.storage_classes.clear();
            params.class_definitions.clear();
            if let Some(r) = redundancy {
                params.zone_redundancy = match r.parse().map_err(|e: String| anyhow!(e))? {
                    ZoneRedundancy::Maximum => ApiZoneRedundancy::Maximum,
                    ZoneRedundancy::AtLeast(n) => ApiZoneRedundancy::AtLeast(n),
                };
            }
            for c in storage_class {
                let (name, spec) = parse_class_setting(c).map_err(|e| anyhow!(e))?;
                params.storage_classes.insert(name, spec.to_string());
            }
            let shown = zone_redundancy(&params.zone_redundancy);
            stage_parameters(admin, params).await?;
            if redundancy.is_some() {
                println!("The zone redundancy parameter has been set to '{shown}'.");
            }
            for c in storage_class {
                println!("Storage class {c} is staged.");
            }
            Ok(())
        }
        LayoutOperation::Class(opt) => class(admin, opt).await,
        LayoutOperation::Apply { version } => {
            let Some(version) = version else {
                bail!(
                    "give the new layout version with --version, to make sure you apply the changes you reviewed: \
                     `garage layout show` prints it"
                );
            };
            let req = R::ApplyClusterLayout(ApplyClusterLayoutRequest { version: *version });
            expect!(admin.op(req).await?, A::LayoutApplied(_) => ())?;
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
            expect!(admin.op(R::RevertClusterLayout).await?, A::Layout(_) => ())?;
            println!("All proposed role changes in cluster layout have been canceled.");
            Ok(())
        }
        LayoutOperation::History => history(admin).await,
        LayoutOperation::SkipDeadNodes {
            version,
            allow_missing_data,
        } => {
            let req = R::ClusterLayoutSkipDeadNodes(ClusterLayoutSkipDeadNodesRequest {
                version: *version,
                allow_missing_data: *allow_missing_data,
            });
            expect!(admin.op(req).await?, A::DeadNodesSkipped(_) => ())?;
            println!(
                "The trackers of the nodes that are down now count them at version {version}."
            );
            Ok(())
        }
    }
}

/// `garage layout class NAME ...`: what is not given is kept from the
/// class's staged definition (so `--zones` alone moves a class).
async fn class(admin: &Admin, opt: &ClassOpt) -> anyhow::Result<()> {
    let layout = admin.layout().await?;
    let mut params = layout
        .staged_parameters
        .unwrap_or(layout.parameters.clone());
    let existing = params.class_definitions.get(&opt.name).cloned();
    params.storage_classes.clear();
    params.class_definitions.clear();
    let def = if opt.remove {
        if existing.is_none() {
            bail!(
                "there is no storage class with a place named {}: `garage layout show` lists them",
                opt.name
            );
        }
        ApiClassDef {
            remove: Some(true),
            ..Default::default()
        }
    } else {
        let mut def = existing.clone().unwrap_or_default();
        match (opt.replication, &opt.erasure) {
            (Some(n), _) => {
                def.replication = Some(n);
                def.erasure = None;
            }
            (None, Some(e)) => {
                def.replication = None;
                def.erasure = Some(e.clone());
            }
            (None, None) if existing.is_none() => bail!(
                "storage class {} is new: give its redundancy, --replication N (copies) or --erasure DATA+PARITY (or auto)",
                opt.name
            ),
            (None, None) => (),
        }
        if !opt.zones.is_empty() {
            def.zones = if opt.zones.iter().any(|z| z == "all") {
                vec![]
            } else {
                opt.zones.clone()
            };
        }
        def.allow_no_redundancy |= opt.allow_no_redundancy;
        // The same check the node makes, before the round trip.
        def.to_def(&opt.name).map_err(|e| anyhow!(e))?;
        def
    };
    params
        .class_definitions
        .insert(opt.name.clone(), def.clone());
    stage_parameters(admin, params).await?;
    if opt.remove {
        println!("The removal of storage class {} is staged.", opt.name);
    } else {
        println!(
            "Storage class {} is staged: {}.",
            opt.name,
            class_def_string(&def)
        );
    }
    println!("Use `garage layout show` to review what would move,");
    println!("and `garage layout apply` to enact staged changes.");
    Ok(())
}

/// `replication 2 in zones paris, berlin`.
fn class_def_string(d: &ApiClassDef) -> String {
    let r = match (d.replication, &d.erasure) {
        (Some(n), _) => format!("replication {n}"),
        (None, Some(e)) => format!("erasure {e}"),
        (None, None) => "?".into(),
    };
    if d.zones.is_empty() {
        format!("{r} in every zone")
    } else {
        format!("{r} in zones {}", d.zones.join(", "))
    }
}

/// Stages new layout parameters (the classes given in them are changed,
/// the others kept).
async fn stage_parameters(admin: &Admin, params: ApiLayoutParameters) -> anyhow::Result<()> {
    stage(
        admin,
        UpdateClusterLayoutRequest {
            roles: vec![],
            parameters: Some(params),
        },
    )
    .await
}

async fn stage(admin: &Admin, req: UpdateClusterLayoutRequest) -> anyhow::Result<()> {
    expect!(admin.op(R::UpdateClusterLayout(req)).await?, A::Layout(_) => ())
}

/// The ids of the known nodes and of those with a (current or staged)
/// role, among which a prefix names a node.
async fn node_ids(admin: &Admin, layout: &GetClusterLayoutResponse) -> anyhow::Result<Vec<String>> {
    let status = admin.cluster_status().await?;
    Ok(status
        .nodes
        .into_iter()
        .map(|n| n.id)
        .chain(layout.roles.iter().map(|r| r.id.clone()))
        .chain(layout.staged_role_changes.iter().map(|c| c.id.clone()))
        .collect())
}

/// The full id of the node whose id starts with `prefix`.
fn find_node(ids: &[String], prefix: &str) -> anyhow::Result<String> {
    find_id(ids.iter().cloned(), prefix).map_err(|e| anyhow!(e))
}

/// A node's role once the staged changes are applied: (zone, capacity,
/// tags), or none.
fn staged_role(
    layout: &GetClusterLayoutResponse,
    id: &str,
) -> Option<(String, Option<u64>, Vec<String>)> {
    match layout.staged_role_changes.iter().find(|c| c.id == id) {
        Some(c) if c.remove == Some(true) => None,
        Some(c) => Some((
            c.zone.clone().unwrap_or_default(),
            c.capacity,
            c.tags.clone().unwrap_or_default(),
        )),
        None => layout
            .roles
            .iter()
            .find(|r| r.id == id)
            .map(|r| (r.zone.clone(), r.capacity, r.tags.clone())),
    }
}

async fn assign(admin: &Admin, opt: &AssignRoleOpt) -> anyhow::Result<()> {
    let layout = admin.layout().await?;
    let ids = node_ids(admin, &layout).await?;
    let mut changes = Vec::new();
    for r in opt.replace.iter() {
        changes.push(NodeRoleChange {
            id: find_node(&ids, r)?,
            remove: Some(true),
            zone: None,
            capacity: None,
            tags: None,
        });
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
        let id = find_node(&ids, n)?;
        let current = staged_role(&layout, &id);
        let zone = opt
            .zone
            .clone()
            .or_else(|| current.as_ref().map(|r| r.0.clone()))
            .ok_or_else(|| anyhow!("give the zone of node {id:.16} with -z"))?;
        let capacity = if opt.gateway {
            None
        } else if capacity.is_some() {
            capacity
        } else {
            current
                .as_ref()
                .ok_or_else(|| {
                    anyhow!("give a capacity with -c, or make node {id:.16} a gateway with -g")
                })?
                .1
        };
        let tags = if opt.tags.is_empty() {
            current.map(|r| r.2).unwrap_or_default()
        } else {
            opt.tags.clone()
        };
        changes.push(NodeRoleChange {
            id,
            remove: None,
            zone: Some(zone),
            capacity,
            tags: Some(tags),
        });
    }
    stage(
        admin,
        UpdateClusterLayoutRequest {
            roles: changes,
            parameters: None,
        },
    )
    .await?;
    println!("Role changes are staged but not yet committed.");
    println!("Use `garage layout show` to view staged role changes,");
    println!("and `garage layout apply` to enact staged changes.");
    Ok(())
}

fn print_layout(l: &GetClusterLayoutResponse, empty: &str) {
    let mut rows = vec!["ID\tTags\tZone\tCapacity\tUsable capacity".to_string()];
    for r in l.roles.iter() {
        let base = format!(
            "{:.16}\t{}\t{}\t{}",
            r.id,
            r.tags.join(","),
            r.zone,
            capacity_string(r.capacity)
        );
        match (r.capacity, r.usable_capacity) {
            (Some(cap), Some(usable)) if cap > 0 => rows.push(format!(
                "{base}\t{} ({:.1}%)",
                bytesize::ByteSize::b(usable).display().si(),
                usable as f64 * 100.0 / cap as f64
            )),
            _ => rows.push(base),
        }
    }
    if rows.len() > 1 {
        table::print(&rows);
        println!();
        println!(
            "Zone redundancy: {}",
            zone_redundancy(&l.parameters.zone_redundancy)
        );
        print_classes(l);
    } else {
        println!("{empty}");
    }
}

/// The storage classes a layout offers.
fn print_classes(l: &GetClusterLayoutResponse) {
    println!();
    let mut rows = vec!["Storage class\tRedundancy\tOn disk\tZones\tSurvives".to_string()];
    for c in l.storage_classes.iter() {
        let redundancy = match c.kind.as_str() {
            "replicated" => format!("replication {}", c.redundancy),
            _ => format!("erasure {}", c.redundancy),
        };
        let zones = if c.zones.is_empty() {
            "all".to_string()
        } else {
            c.zones.join(",")
        };
        rows.push(format!(
            "{}\t{redundancy}\t{:.2}x\t{zones}\t{}",
            c.name, c.overhead, c.survives
        ));
    }
    table::print(&rows);
    if !l.kept_codes.is_empty() {
        println!(
            "Codes kept for blocks stored earlier: {}",
            l.kept_codes.join(", ")
        );
    }
}

/// Prints the staged changes, if any; returns whether there were some.
pub fn print_staged_changes(l: &GetClusterLayoutResponse) -> bool {
    if l.staged_role_changes.is_empty() && l.staged_parameters.is_none() {
        return false;
    }
    println!();
    println!("==== STAGED ROLE CHANGES ====");
    let mut rows = vec!["ID\tTags\tZone\tCapacity".to_string()];
    for c in l.staged_role_changes.iter() {
        match c.remove {
            Some(true) => rows.push(format!("{:.16}\tREMOVED", c.id)),
            _ => rows.push(format!(
                "{:.16}\t{}\t{}\t{}",
                c.id,
                c.tags.clone().unwrap_or_default().join(","),
                c.zone.clone().unwrap_or_default(),
                capacity_string(c.capacity)
            )),
        }
    }
    if rows.len() > 1 {
        table::print(&rows);
    }
    if let Some(p) = &l.staged_parameters {
        println!("Zone redundancy: {}", zone_redundancy(&p.zone_redundancy));
        let now = &l.parameters.class_definitions;
        for (name, d) in p.class_definitions.iter() {
            if now.get(name) != Some(d) {
                println!("Storage class {name}: {}", class_def_string(d));
            }
        }
        for name in now.keys() {
            if !p.class_definitions.contains_key(name) {
                println!("Storage class {name}: REMOVED");
            }
        }
    }
    true
}

async fn show(admin: &Admin) -> anyhow::Result<()> {
    let layout = admin.layout().await?;
    println!("==== CURRENT CLUSTER LAYOUT ====");
    print_layout(
        &layout,
        "No nodes currently have a role in the cluster.\nSee `garage status` to view available nodes.",
    );
    println!();
    println!("Current cluster layout version: {}", layout.version);
    if !print_staged_changes(&layout) {
        return Ok(());
    }
    let preview = match admin.op(R::PreviewClusterLayoutChanges).await {
        Ok(A::LayoutPreview(p)) => p,
        Ok(other) => bail!("unexpected answer from the node: {other:?}"),
        Err(e) if e.downcast_ref::<NodeError>().is_some() => {
            println!();
            println!("Error while trying to compute the assignment: {e}");
            println!("This new layout cannot yet be applied.");
            println!("You can also revert all proposed changes with: garage layout revert --yes");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    println!();
    println!("==== NEW CLUSTER LAYOUT AFTER APPLYING CHANGES ====");
    print_layout(
        &preview.new_layout,
        "No nodes have a role in the new layout.",
    );
    println!();
    for line in preview.message.iter() {
        println!("{line}");
    }
    println!();
    println!("To enact the staged role changes, type:");
    println!();
    println!(
        "    garage layout apply --version {}",
        preview.new_layout.version
    );
    println!();
    println!("You can also revert all proposed changes with: garage layout revert --yes");
    Ok(())
}

async fn history(admin: &Admin) -> anyhow::Result<()> {
    let h = expect!(admin.op(R::GetClusterLayoutHistory).await?, A::LayoutHistory(h) => h)?;
    println!("==== LAYOUT HISTORY ====");
    let mut rows = vec!["Version\tStatus\tStorage nodes\tGateway nodes".to_string()];
    for v in h.versions.iter() {
        rows.push(format!(
            "#{}\t{}\t{}\t{}",
            v.version, v.status, v.storage_nodes, v.gateway_nodes
        ));
    }
    table::print(&rows);
    println!();
    let Some(trackers) = &h.update_trackers else {
        println!("Your cluster is currently in a stable state with a single live layout version.");
        return Ok(());
    };
    println!(
        "A layout change is in progress: reads use version {}, writes go to versions {} to {}.",
        h.read_version, h.min_ack, h.current_version
    );
    println!();
    let status = admin.cluster_status().await?;
    println!("==== UPDATE TRACKERS ====");
    let mut rows = vec!["Node\tAck\tSync\tSync-ack\tUp".to_string()];
    for (n, t) in trackers.iter() {
        let up = status.nodes.iter().any(|k| &k.id == n && k.is_up);
        rows.push(format!(
            "{:.16}\t#{}\t#{}\t#{}\t{}",
            n,
            t.ack,
            t.sync,
            t.sync_ack,
            if up { "yes" } else { "NO" }
        ));
    }
    table::print(&rows);
    println!();
    println!("The change finishes once every node has synced; a node that is down holds it back.");
    println!(
        "If a node is gone for good, run: garage layout skip-dead-nodes --version {}",
        h.current_version
    );
    Ok(())
}
