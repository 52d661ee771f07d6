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

/// The events waiting for `topic` in each node's outbox: every node seen
/// up is asked (see [`super::ask_up_nodes`]); the nodes down, or that
/// did not answer, are named.
async fn print_backlog(admin: &Admin, topic: &str) -> anyhow::Result<()> {
    let status = admin.cluster_status().await?;
    let (answers, mut missing) =
        super::ask_up_nodes(admin, &status, NodeRequest::GetNotificationBacklog, true).await;
    let b = |n: u64| bytesize::ByteSize::b(n).display().si().to_string();
    let mut rows = Vec::new();
    let (mut events, mut bytes) = (0, 0);
    for (id, answer) in answers {
        match answer {
            NodeResponse::NotificationBacklog(all) => {
                let (e, by) = all
                    .iter()
                    .find(|x| x.topic == topic)
                    .map_or((0, 0), |x| (x.events, x.bytes));
                events += e;
                bytes += by;
                rows.push(format!("  {id:.16}\t{e} events ({})", b(by)));
            }
            _ => missing.push(format!("{id:.16} (answered another operation)")),
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
