//! `garage stats` and `garage repair`.

use anyhow::bail;

use super::{expect, Admin};
use crate::args::{RepairOpt, RepairWhat, ScrubCmd};
use garage_admin::ops::node::format_stats;
use garage_admin::ops::node::NodeStatistics;
use garage_admin::ops::node::{
    LaunchRepairOperationRequest, NodeRequest, NodeResponse, RepairType, ScrubCommand,
    SetWorkerVariableRequest,
};

fn stats_of(r: NodeResponse) -> anyhow::Result<NodeStatistics> {
    expect!(r, NodeResponse::Statistics(s) => s)
}

pub async fn show(admin: &Admin, all_nodes: bool) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    let answers = super::on_nodes(admin, all_nodes, &NodeRequest::GetNodeStatistics).await?;
    for (i, (id, res)) in answers.into_iter().enumerate() {
        match res.and_then(stats_of) {
            Ok(s) => {
                if all_nodes {
                    println!("======================");
                } else if i > 0 {
                    println!();
                }
                print!("{}", format_stats(&s));
            }
            Err(e) => failed.push(format!("{id:.16}: {e:#}")),
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
