//! `garage stats` and `garage repair`.

use anyhow::bail;

use super::{expect, Admin};
use crate::cli::{RepairOpt, RepairWhat, ScrubCmd};
use crate::ops::node::{
    LaunchRepairOperationRequest, NodeRequest, NodeResponse, RepairType, ScrubCommand,
    SetWorkerVariableRequest,
};
use crate::ops::stats::NodeStats;

fn stats_of(r: NodeResponse) -> anyhow::Result<NodeStats> {
    expect!(r, NodeResponse::Stats(s) => *s)
}

pub async fn show(admin: &Admin, all_nodes: bool) -> anyhow::Result<()> {
    if !all_nodes {
        print_stats(&stats_of(admin.node(NodeRequest::Stats).await?)?);
        return Ok(());
    }
    // Every node the reached one knows and sees up, each asked directly.
    let status = admin.cluster_status().await?;
    let mut failed = Vec::new();
    for n in status.nodes.iter() {
        let Some(addr) = n.addr.filter(|_| n.is_up) else {
            failed.push(format!("{:.16}: down or address unknown", n.id.to_string()));
            continue;
        };
        println!("======================");
        match admin
            .node_on(n.id, addr, NodeRequest::Stats)
            .await
            .and_then(stats_of)
        {
            Ok(s) => print_stats(&s),
            Err(e) => failed.push(format!("{:.16}: {e:#}", n.id.to_string())),
        }
    }
    if !failed.is_empty() {
        println!("======================");
        println!("Nodes without statistics:");
        for f in failed {
            println!("  {f}");
        }
    }
    Ok(())
}

fn print_stats(stats: &NodeStats) {
    print!("{}", crate::ops::stats::format_stats(stats));
}

pub async fn repair(admin: &Admin, opt: &RepairOpt) -> anyhow::Result<()> {
    if !opt.yes {
        bail!("a repair can put load on the cluster: add --yes to confirm (garage repair --yes tables)");
    }
    let repair =
        |t| NodeRequest::LaunchRepairOperation(LaunchRepairOperationRequest { repair_type: t });
    let req = match &opt.what {
        RepairWhat::Tables => repair(RepairType::Tables),
        RepairWhat::Blocks => repair(RepairType::Blocks),
        RepairWhat::Rebalance => repair(RepairType::Rebalance),
        RepairWhat::BlockRc => repair(RepairType::BlockRc),
        RepairWhat::Versions => repair(RepairType::Versions),
        RepairWhat::Mpu => repair(RepairType::MultipartUploads),
        RepairWhat::BlockRefs => repair(RepairType::BlockRefs),
        RepairWhat::Aliases => repair(RepairType::Aliases),
        RepairWhat::Scrub(ScrubCmd::Start) => repair(RepairType::Scrub(ScrubCommand::Start)),
        RepairWhat::Scrub(ScrubCmd::Pause) => repair(RepairType::Scrub(ScrubCommand::Pause)),
        RepairWhat::Scrub(ScrubCmd::Resume) => repair(RepairType::Scrub(ScrubCommand::Resume)),
        RepairWhat::Scrub(ScrubCmd::Cancel) => repair(RepairType::Scrub(ScrubCommand::Cancel)),
        RepairWhat::Scrub(ScrubCmd::SetTranquility { tranquility }) => {
            admin
                .node(NodeRequest::SetWorkerVariable(SetWorkerVariableRequest {
                    variable: "scrub-tranquility".into(),
                    value: tranquility.to_string(),
                }))
                .await?;
            println!("Scrub tranquility set.");
            return Ok(());
        }
    };
    let launched = expect!(admin.node(req).await?, NodeResponse::RepairLaunched(l) => l)?;
    println!(
        "Repair launched on {}: {}",
        admin.target,
        launched.detail.as_deref().unwrap_or("see the node's log")
    );
    Ok(())
}
