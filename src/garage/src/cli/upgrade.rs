//! `garage upgrade status` and `garage upgrade finalize` (see
//! doc/upgrading.md).

use anyhow::bail;
use garage_admin::ops::cluster::{ClusterVersionResp, GetClusterStatusResponse};
use garage_admin::ops::{AdminRequest, AdminResponse};
use garage_net::Version;

use super::{expect, Admin};
use crate::args::UpgradeOperation;
use garage_admin::columns as table;

pub async fn run(admin: &Admin, op: &UpgradeOperation) -> anyhow::Result<()> {
    match op {
        UpgradeOperation::Status => status(admin).await,
        UpgradeOperation::Finalize => finalize(admin).await,
    }
}

async fn status(admin: &Admin) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let mut rows = vec!["ID\tHostname\tUp\tRelease\tKnows cluster at".to_string()];
    for n in &status.nodes {
        rows.push(format!(
            "{:.16}\t{}\t{}\t{}\t{}",
            n.id,
            n.hostname.as_deref().unwrap_or("?"),
            if n.is_up { "yes" } else { "no" },
            n.garage_version.as_deref().unwrap_or("?"),
            n.cluster_version.as_deref().unwrap_or("?"),
        ));
    }
    table::print(&rows);
    println!();
    print!("{}", summary(&status));
    Ok(())
}

/// The lines `garage status` and `garage upgrade status` end with.
pub fn summary(status: &GetClusterStatusResponse) -> String {
    let Some(v) = &status.cluster_version else {
        return "Cluster version: unknown (the node reached runs v0.1.0, which does not tell)\n"
            .into();
    };
    let mut out = format!("Cluster version: {} (active)", v.active);
    if v.lowest == v.highest {
        out += &format!("; every node runs {}", v.lowest);
    } else {
        out += &format!("; nodes run {} to {}", v.lowest, v.highest);
    }
    out += "\n";
    out += &finalize_advice(v);
    out
}

fn finalize_advice(v: &ClusterVersionResp) -> String {
    if !v.mixed {
        return String::new();
    }
    let target = v
        .release
        .parse::<Version>()
        .map(|r| r.series().to_string())
        .unwrap_or_else(|_| v.release.clone());
    if v.active == target {
        return "Upgrade under way: some nodes still run an older release than the cluster's.\n"
            .into();
    }
    if v.finalize_blockers.is_empty() {
        format!(
            "Upgrade under way: every node runs {target} or later. Rolling back is still possible; \
             when satisfied, run `garage upgrade finalize` (no rollback after it).\n"
        )
    } else {
        let mut s =
            format!("Upgrade under way: the cluster cannot be finalized at {target} yet:\n");
        for b in &v.finalize_blockers {
            s += &format!("  {b}\n");
        }
        s
    }
}

async fn finalize(admin: &Admin) -> anyhow::Result<()> {
    if let Some(v) = admin.target_version() {
        if v.release < Version::new(0, 2, 0) {
            bail!(
                "the node reached runs v{}, which has no finalize: run `garage upgrade finalize` \
                 against an upgraded node (-h <node_id>@<host>:<port>)",
                v.release
            );
        }
    }
    let r = expect!(
        admin.op(AdminRequest::FinalizeUpgrade).await?,
        AdminResponse::UpgradeFinalized(r) => r
    )?;
    println!(
        "The cluster is finalized at {}: nodes of older releases are refused from now on.",
        r.cluster_version
    );
    Ok(())
}
