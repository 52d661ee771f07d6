//! `garage topic`: a client of the notification topic operations
//! ([`garage_admin::ops::topic::handle`], reached over the admin RPC),
//! formatting their answers. `topic info` also asks every node that is up
//! for its backlog (`GetNotificationBacklog`), as `garage status` asks
//! for storage. Endpoints come redacted from the node: no password is
//! ever printed.

use anyhow::bail;

use super::Admin;
use crate::args::TopicOperation as Op;
use garage_admin::columns as table;
use garage_admin::ops::node::{NodeRequest, NodeResponse};
use garage_admin::ops::topic::{CreateTopicRequest, TopicInfo, TopicRequest, TopicResponse};
use garage_admin::ops::{AdminRequest, AdminResponse};

async fn call(admin: &Admin, req: TopicRequest) -> anyhow::Result<TopicResponse> {
    match admin.op(AdminRequest::Topic(req)).await? {
        AdminResponse::Topic(r) => Ok(r),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

fn show(t: &TopicInfo) {
    println!("Topic:        {}", t.name);
    println!("ARN:          {}", t.arn);
    println!("Kind:         {}", t.kind);
    println!("Endpoint:     {}", t.endpoint);
    println!(
        "Owner:        {}",
        if t.owner.is_empty() { "-" } else { &t.owner }
    );
    println!("Created:      {}", t.created);
    let mut attrs = t.attributes.iter().map(|(k, v)| format!("{k}={v}"));
    println!("Attributes:   {}", attrs.next().as_deref().unwrap_or("-"));
    for a in attrs {
        println!("              {a}");
    }
}

fn one(r: TopicResponse) -> anyhow::Result<TopicInfo> {
    match r {
        TopicResponse::Topic(t) => Ok(t),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

pub async fn run(admin: &Admin, op: &Op) -> anyhow::Result<()> {
    match op {
        Op::List => {
            let TopicResponse::Topics(all) = call(admin, TopicRequest::List).await? else {
                bail!("unexpected answer from the node");
            };
            let mut rows = vec!["Name\tKind\tEndpoint\tOwner".to_string()];
            for t in all {
                rows.push(format!(
                    "{}\t{}\t{}\t{}",
                    t.name,
                    t.kind,
                    t.endpoint,
                    if t.owner.is_empty() { "-" } else { &t.owner }
                ));
            }
            table::print(&rows);
        }
        Op::Info { name } => {
            let t = one(call(admin, TopicRequest::Info(name.clone())).await?)?;
            show(&t);
            print_backlog(admin, &t.name).await?;
        }
        Op::Create {
            name,
            endpoint,
            attrs,
            owner,
        } => {
            let req = CreateTopicRequest {
                name: name.clone(),
                endpoint: endpoint.clone(),
                attributes: attrs.iter().cloned().collect(),
                owner: owner.clone(),
            };
            show(&one(call(admin, TopicRequest::Create(req)).await?)?);
        }
        Op::Delete { name } => match call(admin, TopicRequest::Delete(name.clone())).await? {
            TopicResponse::Deleted => println!("Topic {name} deleted."),
            other => bail!("unexpected answer from the node: {other:?}"),
        },
    }
    Ok(())
}

/// How long `topic info` waits for a node's backlog before naming it.
const BACKLOG_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The events waiting for `topic` in each node's outbox: every node seen
/// up is asked, each for at most [`BACKLOG_WAIT`]; the nodes down, or
/// that did not answer, are named.
async fn print_backlog(admin: &Admin, topic: &str) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let mut missing: Vec<String> = status
        .nodes
        .iter()
        .filter(|n| !n.is_up)
        .map(|n| format!("{:.16} (down)", n.id))
        .collect();
    let up = status
        .nodes
        .iter()
        .filter(|n| n.is_up)
        .map(|n| n.id.as_str());
    let answers = futures::future::join_all(up.map(|id| async move {
        let asked = admin.on_nodes(id, NodeRequest::GetNotificationBacklog);
        (id, tokio::time::timeout(BACKLOG_WAIT, asked).await)
    }))
    .await;
    let b = |n: u64| bytesize::ByteSize::b(n).display().si().to_string();
    let mut rows = Vec::new();
    let (mut events, mut bytes) = (0, 0);
    for (id, answer) in answers {
        let mut m = match answer {
            Err(_) => {
                missing.push(format!(
                    "{id:.16} (no answer within {} s)",
                    BACKLOG_WAIT.as_secs()
                ));
                continue;
            }
            Ok(Err(e)) => {
                missing.push(format!("{id:.16} ({e:#})"));
                continue;
            }
            Ok(Ok(m)) => m,
        };
        match m.success.remove(id) {
            Some(NodeResponse::NotificationBacklog(all)) => {
                let (e, by) = all
                    .iter()
                    .find(|x| x.topic == topic)
                    .map_or((0, 0), |x| (x.events, x.bytes));
                events += e;
                bytes += by;
                rows.push(format!("  {id:.16}\t{e} events ({})", b(by)));
            }
            Some(_) => missing.push(format!("{id:.16} (answered another operation)")),
            // An error: a node of an earlier release does not serve
            // the backlog.
            None => missing.push(match m.error.remove(id) {
                Some(e) => format!("{id:.16} ({e})"),
                None => format!("{id:.16} (no answer)"),
            }),
        }
    }
    println!();
    println!("Queued on each node:");
    rows.sort();
    table::print(&rows);
    if rows.len() > 1 {
        println!("  total: {events} events ({})", b(bytes));
    }
    if !missing.is_empty() {
        println!("Not answered: {}", missing.join(", "));
    }
    Ok(())
}
