//! The cluster's bucket notification topics (see
//! [`garage_model::notify::topic_table`]): listed, shown, made, deleted.
//! One implementation, [`handle`], serves the HTTP endpoints and `garage
//! topic` (over the admin RPC, as a typed [`TopicRequest`]). The admin is
//! the operator: unlike the SNS-compatible API of the S3 endpoint, it may
//! make over or delete any topic, whoever owns it. An endpoint is always
//! shown through [`redact_url`]: its password never leaves the node.
//!
//! Each node's backlog (the events its outbox holds per topic) is a
//! node-local operation: [`node_backlog`], run by the node operation
//! `GetNotificationBacklog` (which names this module, not the reverse).

use std::collections::BTreeMap;

use garage_model::notify::endpoint::{redact_url, Endpoint};
use garage_model::notify::topic_table::{
    check_topic_name, topic_arn, Topic, TopicConfig, TopicFilter,
};
use garage_rpc::system::versions::BUCKET_NOTIFICATIONS;
use garage_table::EmptyKey;
use garage_util::time::rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use garage_model::garage::Garage;

/// Topics read at most by a listing (as the S3 endpoint's ListTopics).
const MAX_TOPICS: usize = 10_000;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicInfo {
    pub name: String,
    /// `arn:aws:sns:REGION::NAME`: what a bucket's notification rules
    /// name it by.
    pub arn: String,
    /// The `push-endpoint` URL, its password (if any) shown as `****`.
    pub endpoint: String,
    /// `webhook`, `nats`, `amqp`, `kafka` or `mqtt` (`unknown` for an endpoint this node
    /// cannot read).
    pub kind: String,
    /// The access key id that owns it (empty when made by the admin
    /// without one).
    pub owner: String,
    /// Its other attributes (`OpaqueData`, `verify-ssl`, `nats-subject`,
    /// `mqtt-topic`, `mqtt-qos`, `time_to_live`, `max_retries`, …).
    pub attributes: BTreeMap<String, String>,
    /// RFC 3339.
    pub created: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTopicRequest {
    /// 1 to 256 ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// Where its events go (`push-endpoint`): `http(s)://…`,
    /// `nats://[user:password@]host:port`, `amqp(s)://[user:password@]host:port[/vhost]`,
    /// `kafka://host:port`,
    /// `mqtt(s)://[user:password@]host:port`.
    pub endpoint: String,
    /// The other attributes, as the S3 endpoint's CreateTopic takes them.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// The access key id that owns it (which may then change or delete it
    /// through the S3 endpoint); none by default.
    #[serde(default)]
    pub owner: Option<String>,
}

/// The `?name=` naming one topic.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopicQuery {
    pub name: String,
}

/// What one node's outbox holds for one topic.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicBacklog {
    pub topic: String,
    /// Events waiting to be sent.
    pub events: u64,
    /// Their records' bytes.
    pub bytes: u64,
}

/// A topic operation, as the HTTP API and the CLI send it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TopicRequest {
    List,
    Info(String),
    Create(CreateTopicRequest),
    Delete(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TopicResponse {
    Topics(Vec<TopicInfo>),
    Topic(TopicInfo),
    /// The topic is deleted.
    Deleted,
}

fn info(region: &str, t: &Topic, c: &TopicConfig) -> TopicInfo {
    TopicInfo {
        name: t.name.clone(),
        arn: topic_arn(region, &t.name),
        endpoint: redact_url(&c.endpoint),
        kind: c
            .endpoint()
            .map(|e| e.kind())
            .unwrap_or("unknown")
            .to_string(),
        owner: c.owner.clone(),
        attributes: c.attributes.clone(),
        created: rfc3339(t.created),
    }
}

fn no_such_topic(name: &str) -> ApiError {
    ApiError::NoSuchTopic(format!("no notification topic {name}"))
}

/// The live topic `name` and its configuration.
async fn live(g: &Garage, name: &str) -> Result<(Topic, TopicConfig), ApiError> {
    let t = g
        .topic_table
        .get(&EmptyKey, &name.to_string())
        .await?
        .ok_or_else(|| no_such_topic(name))?;
    let c = t.live().cloned().ok_or_else(|| no_such_topic(name))?;
    Ok((t, c))
}

/// Topics are made only once every node reads them.
fn check_gate(g: &Garage) -> Result<(), ApiError> {
    let gate = &BUCKET_NOTIFICATIONS;
    if !g.system.feature_allowed(gate) {
        return Err(ApiError::BadRequest(format!(
            "bucket notifications need the cluster finalized at v{} or later (it is at v{}): \
             upgrade every node, then run `garage upgrade finalize`",
            gate.since,
            g.system.active_version()
        )));
    }
    Ok(())
}

async fn create(g: &Garage, r: CreateTopicRequest) -> Result<(Topic, TopicConfig), ApiError> {
    check_topic_name(&r.name).map_err(ApiError::BadRequest)?;
    check_gate(g)?;
    if r.attributes.contains_key("push-endpoint") {
        return Err(ApiError::bad(
            "give the endpoint as `endpoint` (`--endpoint` in the CLI), not as the attribute push-endpoint",
        ));
    }
    let parsed = Endpoint::parse(&r.endpoint, &r.attributes).map_err(ApiError::BadRequest)?;
    let existing = g.topic_table.get(&EmptyKey, &r.name).await?;
    let config = TopicConfig {
        owner: r.owner.unwrap_or_default(),
        endpoint: r.endpoint,
        attributes: r.attributes,
    };
    let t = match existing {
        Some(mut t) => {
            t.config.update(Some(config.clone()));
            t
        }
        None => Topic::new(
            r.name.clone(),
            config.clone(),
            garage_util::time::now_msec(),
        ),
    };
    g.topic_table.insert(&t).await?;
    tracing::info!(
        topic = %r.name,
        kind = parsed.kind(),
        owner = %config.owner,
        "notification topic created (admin)"
    );
    Ok((t, config))
}

/// Runs a topic operation: the one implementation of the HTTP endpoints
/// and of `garage topic`.
pub async fn handle(g: &Garage, req: TopicRequest) -> Result<TopicResponse, ApiError> {
    let region = g.writer.notifier.region();
    match req {
        TopicRequest::List => {
            let all = g
                .topic_table
                .get_range(&EmptyKey, None, Some(TopicFilter::Live), MAX_TOPICS, false)
                .await?;
            Ok(TopicResponse::Topics(
                all.iter()
                    .filter_map(|t| Some(info(region, t, t.live()?)))
                    .collect(),
            ))
        }
        TopicRequest::Info(name) => {
            let (t, c) = live(g, &name).await?;
            Ok(TopicResponse::Topic(info(region, &t, &c)))
        }
        TopicRequest::Create(r) => {
            let (t, c) = create(g, r).await?;
            Ok(TopicResponse::Topic(info(region, &t, &c)))
        }
        TopicRequest::Delete(name) => {
            let (mut t, _) = live(g, &name).await?;
            t.config.update(None);
            g.topic_table.insert(&t).await?;
            tracing::info!(topic = %name, "notification topic deleted (admin)");
            Ok(TopicResponse::Deleted)
        }
    }
}

/// What this node's outbox holds, per topic (the topics with events
/// waiting only).
pub fn node_backlog(g: &Garage) -> Vec<TopicBacklog> {
    g.writer
        .notifier
        .outbox
        .backlog()
        .into_iter()
        .map(|(topic, b)| TopicBacklog {
            topic,
            events: b.events,
            bytes: b.bytes,
        })
        .collect()
}
