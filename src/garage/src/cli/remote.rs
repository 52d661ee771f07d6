//! `garage remote`: a client of the replication remote operations
//! ([`garage_admin::ops::remote::handle`], reached over the admin RPC),
//! formatting their answers. `remote info` also asks every node that is
//! up for its replication queue (`GetReplicationBacklog`), as `garage
//! topic info` asks for its outbox. A remote's secret key goes to the
//! node and never comes back: nothing here prints it.

use anyhow::{anyhow, bail, Context};

use super::Admin;
use crate::args::{RemoteOperation as Op, Secret};
use garage_admin::columns as table;
use garage_admin::ops::node::{NodeRequest, NodeResponse};
use garage_admin::ops::remote::{AddRemoteRequest, RemoteInfo, RemoteRequest, RemoteResponse};
use garage_admin::ops::{AdminRequest, AdminResponse};

async fn call(admin: &Admin, req: RemoteRequest) -> anyhow::Result<RemoteResponse> {
    match admin.op(AdminRequest::Remote(req)).await? {
        AdminResponse::Remote(r) => Ok(r),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

fn show(r: &RemoteInfo) {
    println!("Remote:         {}", r.name);
    println!("Endpoint:       {}", r.endpoint);
    println!("Region:         {}", r.region);
    println!("Access key id:  {}", r.access_key_id);
    println!("Created:        {}", super::date(&r.created));
    println!("Destination:    {}", r.destination_arn_pattern);
}

fn one(r: RemoteResponse) -> anyhow::Result<RemoteInfo> {
    match r {
        RemoteResponse::Remote(x) => Ok(x),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

/// The secret key given with `--secret-access-key`, or read from
/// `--secret-file` (its trailing whitespace and newline left out).
fn secret(value: &Option<Secret>, file: &Option<std::path::PathBuf>) -> anyhow::Result<String> {
    let s = match (value, file) {
        (Some(s), None) => s.0.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("--secret-file: cannot read {}", path.display()))?
            .trim_end()
            .to_string(),
        _ => {
            bail!("give the remote's secret key with one of --secret-access-key and --secret-file")
        }
    };
    if s.is_empty() {
        return Err(anyhow!("the remote's secret key is empty"));
    }
    Ok(s)
}

pub async fn run(admin: &Admin, op: &Op) -> anyhow::Result<()> {
    match op {
        Op::List => {
            let RemoteResponse::Remotes(all) = call(admin, RemoteRequest::List).await? else {
                bail!("unexpected answer from the node");
            };
            let mut rows = vec!["Name\tEndpoint\tRegion\tAccess key id".to_string()];
            for r in all {
                rows.push(format!(
                    "{}\t{}\t{}\t{}",
                    r.name, r.endpoint, r.region, r.access_key_id
                ));
            }
            table::print(&rows);
        }
        Op::Info { name } => {
            let r = one(call(admin, RemoteRequest::Info(name.clone())).await?)?;
            show(&r);
            let prefix = format!("{}/", r.name);
            print!("{}", backlog_text(admin, |d| d.starts_with(&prefix)).await?);
        }
        Op::Add {
            name,
            endpoint,
            region,
            access_key_id,
            secret_access_key,
            secret_file,
        } => {
            let req = AddRemoteRequest {
                name: name.clone(),
                endpoint: endpoint.clone(),
                region: region.clone(),
                access_key_id: access_key_id.clone(),
                secret_access_key: secret(secret_access_key, secret_file)?,
            };
            let r = one(call(admin, RemoteRequest::Add(req)).await?)?;
            show(&r);
            println!();
            println!(
                "Name a bucket BUCKET of this remote in a replication rule's Destination.Bucket as {}",
                garage_model::replication::config::destination_arn(&r.name, "BUCKET")
            );
        }
        Op::Delete { name } => match call(admin, RemoteRequest::Delete(name.clone())).await? {
            RemoteResponse::Deleted => println!("Remote {name} deleted."),
            other => bail!("unexpected answer from the node: {other:?}"),
        },
    }
    Ok(())
}

/// The versions waiting in each node's replication queue for the
/// destinations (`REMOTE/BUCKET`) `keep` takes: every node seen up is
/// asked (see [`super::ask_up_nodes`]); the nodes down, or that did not
/// answer, are named.
pub async fn backlog_text(admin: &Admin, keep: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    use std::fmt::Write;
    let status = admin.cluster_status().await?;
    let (answers, mut missing) =
        super::ask_up_nodes(admin, &status, NodeRequest::GetReplicationBacklog, true).await;
    let b = |n: u64| bytesize::ByteSize::b(n).display().si().to_string();
    let mut rows = Vec::new();
    let (mut versions, mut bytes) = (0, 0);
    for (id, answer) in answers {
        match answer {
            NodeResponse::ReplicationBacklog(all) => {
                let mine: Vec<_> = all.iter().filter(|x| keep(&x.destination)).collect();
                if mine.is_empty() {
                    rows.push(format!("  {id:.16}\t-\t0 versions"));
                }
                for x in mine {
                    versions += x.versions;
                    bytes += x.bytes;
                    rows.push(format!(
                        "  {id:.16}\t{}\t{} versions ({}){}",
                        x.destination,
                        x.versions,
                        b(x.bytes),
                        x.oldest_queued
                            .as_deref()
                            .map(|t| format!(", oldest queued {}", super::date(t)))
                            .unwrap_or_default()
                    ));
                }
            }
            _ => missing.push(format!("{id:.16} (answered another operation)")),
        }
    }
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Queued for replication on each node (node, destination, versions):"
    );
    rows.sort();
    out.push_str(&table::format(&rows));
    if rows.len() > 1 {
        let _ = writeln!(out, "  total: {versions} versions ({})", b(bytes));
    }
    if !missing.is_empty() {
        let _ = writeln!(out, "Not answered: {}", missing.join(", "));
    }
    Ok(out)
}
