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
    let space = |f: &Option<garage_rpc::system::status::FreeSpace>| match f {
        Some(f) => format!(
            // (Not 7 words: test parsers take 7-column lines for table rows.)
            "{} free of {} in total",
            bytesize::ByteSize::b(f.available).display().si(),
            bytesize::ByteSize::b(f.total).display().si()
        ),
        None => "unknown".into(),
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "Storage:");
    let _ = writeln!(out, "  data: {}", space(&stats.data_space));
    let _ = writeln!(out, "  metadata: {}", space(&stats.metadata_space));
    if let Some(h) = &stats.health {
        let _ = writeln!(out);
        out.push_str(&format_health(h));
    }
    if !stats.counters.is_empty() {
        // The same counters `/metrics` shows, summed over their labels.
        let c = |name: &str| stats.counters.get(name).copied().unwrap_or(0.0) as u64;
        let _ = writeln!(out);
        let _ = writeln!(out, "Since this node started (the counters of /metrics):");
        let _ = writeln!(
            out,
            "  S3 requests: {} ({} errors)",
            c("api_s3_requests_total"),
            c("api_s3_errors_total")
        );
        let _ = writeln!(
            out,
            "  RPC calls: {} ({} timeouts, {} communication errors)",
            c("rpc_requests_total"),
            c("rpc_timeouts_total"),
            c("rpc_netapp_errors_total")
        );
        let _ = writeln!(
            out,
            "  quorum failures: {} table, {} block",
            c("table_quorum_errors_total"),
            c("block_quorum_errors_total")
        );
        let _ = writeln!(
            out,
            "  block bytes read: {}, written: {}",
            c("block_bytes_read_total"),
            c("block_bytes_written_total")
        );
        let _ = writeln!(
            out,
            "  table entries sent by sync: {}",
            c("table_sync_items_sent_total")
        );
    }
    out
}

/// The cluster health lines of `garage stats` and `garage status`.
pub fn format_health(h: &garage_rpc::system::health::ClusterHealth) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "Cluster health: {}", h.status);
    let _ = writeln!(
        out,
        "  nodes: {} connected of {} known; storage nodes: {} of {} up",
        h.connected_nodes, h.known_nodes, h.storage_nodes_up, h.storage_nodes
    );
    let _ = writeln!(
        out,
        "  partitions: {} with quorum, {} with all nodes up, of {}",
        h.partitions_quorum, h.partitions_all_ok, h.partitions
    );
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
