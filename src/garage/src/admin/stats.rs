//! `garage stats` and `garage repair`.

use anyhow::{bail, Context};

use super::{table, Admin};
use crate::admin_rpc::{AdminRpc, NodeStats};
use crate::cli::{RepairOpt, RepairWhat};

pub async fn show(admin: &Admin, all_nodes: bool) -> anyhow::Result<()> {
    if !all_nodes {
        let stats = match admin.call_admin(AdminRpc::Stats).await? {
            AdminRpc::StatsResponse(s) => s,
            other => bail!("unexpected answer from the node: {other:?}"),
        };
        print_stats(&stats);
        return Ok(());
    }
    // Every node the reached one knows and sees up, each asked directly.
    let status = super::status::get(admin).await?;
    let mut failed = Vec::new();
    for n in status.nodes.iter() {
        let Some(addr) = n.addr.filter(|_| n.is_up) else {
            failed.push(format!("{:.16}: down or address unknown", n.id.to_string()));
            continue;
        };
        println!("======================");
        match admin.call_admin_on(n.id, addr, AdminRpc::Stats).await {
            Ok(AdminRpc::StatsResponse(s)) => print_stats(&s),
            Ok(other) => failed.push(format!(
                "{:.16}: unexpected answer {other:?}",
                n.id.to_string()
            )),
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
    print!("{}", format_stats(stats));
}

/// What `garage stats` prints for one node (and GetNodeStatistics answers).
pub(crate) fn format_stats(stats: &NodeStats) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "Node: {}", stats.node);
    let _ = writeln!(out, "Database engine: {}", stats.db_engine);
    let _ = writeln!(out);
    let _ = writeln!(out, "Table stats:");
    let mut rows =
        vec!["  Table\tItems\tMklItems\tMklTodo\tGcTodo\tInsertQueue\tMerkleDigest".to_string()];
    for t in stats.tables.iter() {
        rows.push(format!(
            "  {}\t{}\t{}\t{}\t{}\t{}\t{}",
            t.name,
            t.items,
            t.merkle_nodes,
            t.merkle_todo,
            t.gc_todo,
            t.insert_queue,
            &t.merkle_digest.hex()[..16]
        ));
    }
    out.push_str(&table::format(&rows));
    let _ = writeln!(out);
    let _ = writeln!(out, "Block manager stats:");
    let _ = writeln!(
        out,
        "  number of referenced blocks (RC): {}",
        stats.block_rc_entries
    );
    let _ = writeln!(out, "  resync queue length: {}", stats.resync_queue);
    let _ = writeln!(out, "  blocks with resync errors: {}", stats.resync_errors);
    out
}

pub async fn repair(admin: &Admin, opt: &RepairOpt) -> anyhow::Result<()> {
    if !opt.yes {
        bail!("a repair can put load on the cluster: add --yes to confirm (garage repair --yes tables)");
    }
    match &opt.what {
        RepairWhat::Blocks | RepairWhat::Rebalance | RepairWhat::Scrub(_) => {
            match admin
                .call_admin(AdminRpc::RepairBlocks(opt.what.clone()))
                .await?
            {
                AdminRpc::Text(t) => print!("{t}"),
                other => bail!("unexpected answer from the node: {other:?}"),
            }
        }
        RepairWhat::Tables => {
            admin
                .call_admin(AdminRpc::RepairTables)
                .await
                .context("cannot launch the table repair")?;
            println!("Repair launched on {}: every table is being synced with the other nodes (see the node's log).", admin.target);
        }
    }
    Ok(())
}
