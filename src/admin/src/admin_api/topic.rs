//! The bucket notification topic endpoints: HTTP wrappers of
//! [`crate::ops::topic`]. Each node's backlog (`GetNotificationBacklog`)
//! is a node-local operation, in [`super::node`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::ops::topic::{
    handle, CreateTopicRequest, TopicInfo, TopicQuery, TopicRequest, TopicResponse,
};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_topics))
        .routes(routes!(get_topic_info))
        .routes(routes!(create_topic))
        .routes(routes!(delete_topic))
}

fn one(r: TopicResponse) -> Answer<TopicInfo> {
    match r {
        TopicResponse::Topic(t) => ok(t),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// Every notification topic of the cluster (endpoints shown without
/// their password).
#[utoipa::path(get, path = "/v2/ListTopics", tag = "Notification topic",
    responses((status = 200, body = Vec<TopicInfo>), (status = 403, body = ErrorBody)))]
pub async fn list_topics(State(st): State<St>) -> Answer<Vec<TopicInfo>> {
    match handle(&st.garage, TopicRequest::List).await? {
        TopicResponse::Topics(t) => ok(t),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// One notification topic, by name.
#[utoipa::path(get, path = "/v2/GetTopicInfo", tag = "Notification topic", params(TopicQuery),
    responses((status = 200, body = TopicInfo), (status = 404, body = ErrorBody)))]
pub async fn get_topic_info(
    State(st): State<St>,
    Query(q): Query<TopicQuery>,
) -> Answer<TopicInfo> {
    one(handle(&st.garage, TopicRequest::Info(q.name)).await?)
}

/// A new notification topic (`{"name", "endpoint", "attributes",
/// "owner"}`), or a new configuration for an existing one; the endpoint
/// and attributes are checked as the S3 endpoint's CreateTopic checks
/// them. Refused until the cluster is finalized at v0.3.0.
#[utoipa::path(post, path = "/v2/CreateTopic", tag = "Notification topic",
    request_body = CreateTopicRequest,
    responses((status = 200, body = TopicInfo), (status = 400, body = ErrorBody)))]
pub async fn create_topic(
    State(st): State<St>,
    Body(req): Body<CreateTopicRequest>,
) -> Answer<TopicInfo> {
    one(handle(&st.garage, TopicRequest::Create(req)).await?)
}

/// Deletes a notification topic, whoever owns it: the events waiting for
/// it are dropped.
#[utoipa::path(post, path = "/v2/DeleteTopic", tag = "Notification topic", params(TopicQuery),
    responses((status = 200), (status = 404, body = ErrorBody)))]
pub async fn delete_topic(State(st): State<St>, Query(q): Query<TopicQuery>) -> Answer<()> {
    match handle(&st.garage, TopicRequest::Delete(q.name)).await? {
        TopicResponse::Deleted => ok(()),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}
