//! `garage stats` and `garage repair`.

use anyhow::{bail, Context};

use super::{table, Admin};
use crate::admin_rpc::AdminRpc;
use crate::cli::{RepairOpt, RepairWhat};

pub async fn show(admin: &Admin) -> anyhow::Result<()> {
    let stats = match admin.call_admin(AdminRpc::Stats).await? {
        AdminRpc::StatsResponse(s) => s,
        other => bail!("unexpected answer from the node: {other:?}"),
    };
    println!("Node: {}", stats.node);
    println!("Database engine: {}", stats.db_engine);
    println!();
    println!("Table stats:");
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
    table::print(&rows);
    println!();
    println!("Block manager stats:");
    println!(
        "  number of referenced blocks (RC): {}",
        stats.block_rc_entries
    );
    println!("  resync queue length: {}", stats.resync_queue);
    println!("  blocks with resync errors: {}", stats.resync_errors);
    Ok(())
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
