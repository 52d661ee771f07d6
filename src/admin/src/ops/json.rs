//! `garage json-api ENDPOINT REQUEST`: an admin API endpoint by name and
//! its JSON request (query parameters and body fields given together, as
//! one object) read into the typed request the CLI sends over the admin
//! RPC, and the typed answer written as the JSON the HTTP API answers.
//! The query parameters are read as the HTTP API reads them (URL-encoded
//! strings), the body fields as JSON.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::kms::{KmsKeyQuery, KmsRequest, KmsResponse};
use super::node::{MultiResponse, NodeRequest, NodeResponse};
use super::remote::{RemoteQuery, RemoteRequest, RemoteResponse};
use super::token::{pattern, TokenQuery, TokenRequest, TokenResponse};
use super::topic::{TopicQuery, TopicRequest, TopicResponse};
use super::{AdminRequest, AdminResponse};

/// What a `json-api` call runs.
#[derive(Debug)]
pub enum Call {
    /// A cluster-wide operation.
    Op(AdminRequest),
    /// A node-local operation on the nodes `node` names (`self` unless
    /// the request names others).
    OnNodes { node: String, req: NodeRequest },
}

/// The request's fields, as an object.
fn fields(request: &str) -> Result<Map<String, Value>, String> {
    match request.trim() {
        "" => Ok(Map::new()),
        r => match serde_json::from_str(r) {
            Ok(Value::Object(m)) => Ok(m),
            // A list body (node addresses, block hashes).
            Ok(Value::Array(a)) => Ok(Map::from_iter([("body".to_string(), Value::Array(a))])),
            Ok(_) => Err("the request must be a JSON object".into()),
            Err(e) => Err(format!("the request is not JSON: {e}")),
        },
    }
}

/// The query parameters `names` taken out of `f`, read as the HTTP API
/// reads a query string.
fn query<T: DeserializeOwned>(f: &mut Map<String, Value>, names: &[&str]) -> Result<T, String> {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for name in names {
        match f.remove(*name) {
            Some(Value::String(v)) => {
                q.append_pair(name, &v);
            }
            Some(Value::Null) | None => (),
            Some(v) => {
                q.append_pair(name, &v.to_string());
            }
        }
    }
    serde_urlencoded::from_str(&q.finish()).map_err(|e| format!("query parameters: {e}"))
}

/// The body: the fields left.
fn body<T: DeserializeOwned>(f: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(f)).map_err(|e| format!("request body: {e}"))
}

fn id(f: &mut Map<String, Value>) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    Ok(query::<Id>(f, &["id"])?.id)
}

/// The typed request of `endpoint` given `request`.
pub fn call(endpoint: &str, request: &str) -> Result<Call, String> {
    use AdminRequest as R;
    use NodeRequest as N;
    let mut f = fields(request)?;
    let f = &mut f;
    let take = std::mem::take::<Map<String, Value>>;
    let op = match endpoint {
        "GetClusterStatus" => R::GetClusterStatus,
        "GetClusterHealth" => R::GetClusterHealth,
        "GetClusterStatistics" => R::GetClusterStatistics,
        "ConnectClusterNodes" => R::ConnectClusterNodes(body_value(take(f))?),
        "GetClusterLayout" => R::GetClusterLayout,
        "UpdateClusterLayout" => R::UpdateClusterLayout(body(take(f))?),
        "ApplyClusterLayout" => R::ApplyClusterLayout(body(take(f))?),
        "RevertClusterLayout" => R::RevertClusterLayout,
        "GetClusterLayoutHistory" => R::GetClusterLayoutHistory,
        "PreviewClusterLayoutChanges" => R::PreviewClusterLayoutChanges,
        "ClusterLayoutSkipDeadNodes" => R::ClusterLayoutSkipDeadNodes(body(take(f))?),
        "FinalizeUpgrade" => R::FinalizeUpgrade,
        "ListBuckets" => R::ListBuckets,
        "GetBucketInfo" => R::GetBucketInfo(query(f, &["id", "globalAlias", "search"])?),
        "CreateBucket" => R::CreateBucket(body(take(f))?),
        "UpdateBucket" => R::UpdateBucket {
            id: id(f)?,
            body: body(take(f))?,
        },
        "DeleteBucket" => R::DeleteBucket { id: id(f)? },
        "AddBucketAlias" => R::AddBucketAlias(body(take(f))?),
        "RemoveBucketAlias" => R::RemoveBucketAlias(body(take(f))?),
        "AllowBucketKey" => R::AllowBucketKey(body(take(f))?),
        "DenyBucketKey" => R::DenyBucketKey(body(take(f))?),
        "InspectObject" => R::InspectObject(query(f, &["bucketId", "key"])?),
        "CleanupIncompleteUploads" => R::CleanupIncompleteUploads(body(take(f))?),
        "ListKeys" => R::ListKeys,
        "GetKeyInfo" => R::GetKeyInfo(query(f, &["id", "search", "showSecretKey"])?),
        "CreateKey" => R::CreateKey(body(take(f))?),
        "ImportKey" => R::ImportKey(body(take(f))?),
        "UpdateKey" => R::UpdateKey {
            id: id(f)?,
            body: body(take(f))?,
        },
        "DeleteKey" => R::DeleteKey { id: id(f)? },
        "ListAdminTokens" => R::Token(TokenRequest::List),
        "GetAdminTokenInfo" => R::Token(TokenRequest::Info(token(f)?)),
        "CreateAdminToken" => R::Token(TokenRequest::Create(body(take(f))?)),
        "UpdateAdminToken" => {
            let t = token(f)?;
            R::Token(TokenRequest::Update(t, body(take(f))?))
        }
        "DeleteAdminToken" => R::Token(TokenRequest::Delete(token(f)?)),
        "ListKmsKeys" => R::Kms(KmsRequest::List),
        "GetKmsKeyInfo" => R::Kms(KmsRequest::Info(kms_key(f)?)),
        "CreateKmsKey" => R::Kms(KmsRequest::Create(body(take(f))?)),
        "UpdateKmsKey" => {
            let k = kms_key(f)?;
            R::Kms(KmsRequest::Update(k, body(take(f))?))
        }
        "RotateKmsKey" => R::Kms(KmsRequest::Rotate(kms_key(f)?)),
        "ListTopics" => R::Topic(TopicRequest::List),
        "GetTopicInfo" => R::Topic(TopicRequest::Info(topic(f)?)),
        "CreateTopic" => R::Topic(TopicRequest::Create(body(take(f))?)),
        "DeleteTopic" => R::Topic(TopicRequest::Delete(topic(f)?)),
        "ListRemotes" => R::Remote(RemoteRequest::List),
        "GetRemoteInfo" => R::Remote(RemoteRequest::Info(remote(f)?)),
        "AddRemote" => R::Remote(RemoteRequest::Add(body(take(f))?)),
        "DeleteRemote" => R::Remote(RemoteRequest::Delete(remote(f)?)),
        "ResyncBucketReplication" => R::ResyncBucketReplication(body(take(f))?),
        "IamCall" => R::Iam(body(take(f))?),
        "PresignS3Request" => R::PresignS3Request(body(take(f))?),
        _ => {
            // A node-local operation: `node` is `self` unless given.
            #[derive(serde::Deserialize)]
            struct NodeQuery {
                node: Option<String>,
            }
            let node = query::<NodeQuery>(f, &["node"])?
                .node
                .unwrap_or_else(|| "self".into());
            let req = match endpoint {
                "GetNodeInfo" => N::GetNodeInfo,
                "GetNodeStatistics" => N::GetNodeStatistics,
                "GetNodeMetricsHistory" => N::GetNodeMetricsHistory,
                "LaunchRepairOperation" => N::LaunchRepairOperation(body(take(f))?),
                "ListWorkers" => N::ListWorkers(body(take(f))?),
                "GetWorkerInfo" => N::GetWorkerInfo(body(take(f))?),
                "ListBlockErrors" => N::ListBlockErrors,
                "GetBlockInfo" => N::GetBlockInfo(body(take(f))?),
                "RetryBlockResync" => N::RetryBlockResync(body(take(f))?),
                "PurgeBlocks" => N::PurgeBlocks(body_value(take(f))?),
                "GetWorkerVariable" => N::GetWorkerVariable(body(take(f))?),
                "SetWorkerVariable" => N::SetWorkerVariable(body(take(f))?),
                "CreateMetadataSnapshot" => N::CreateMetadataSnapshot,
                "GetNodeStorage" => N::GetNodeStorage,
                "GetNotificationBacklog" => N::GetNotificationBacklog,
                "GetReplicationBacklog" => N::GetReplicationBacklog,
                other => {
                    return Err(format!(
                        "no admin API endpoint {other}: see /v2/openapi.json for the list"
                    ))
                }
            };
            return Ok(Call::OnNodes { node, req });
        }
    };
    Ok(Call::Op(op))
}

/// A body that is a list (node addresses, block hashes): the request is
/// the list itself.
fn body_value<T: DeserializeOwned>(mut f: Map<String, Value>) -> Result<T, String> {
    let v = f.remove("body").unwrap_or(Value::Array(vec![]));
    serde_json::from_value(v).map_err(|e| format!("request body: {e}"))
}

fn token(f: &mut Map<String, Value>) -> Result<String, String> {
    pattern(query::<TokenQuery>(f, &["id", "search"])?).map_err(|e| e.to_string())
}

fn kms_key(f: &mut Map<String, Value>) -> Result<String, String> {
    Ok(query::<KmsKeyQuery>(f, &["id"])?.id)
}

fn topic(f: &mut Map<String, Value>) -> Result<String, String> {
    Ok(query::<TopicQuery>(f, &["name"])?.name)
}

fn remote(f: &mut Map<String, Value>) -> Result<String, String> {
    Ok(query::<RemoteQuery>(f, &["name"])?.name)
}

/// The JSON the HTTP API answers for `r`.
pub fn answer(r: AdminResponse) -> Value {
    use AdminResponse as A;
    let v = match r {
        A::ClusterStatus(x) => serde_json::to_value(x),
        A::ClusterHealth(x) => serde_json::to_value(x),
        A::ClusterStatistics(mut x) => {
            x.freeform = super::cluster::format_cluster_statistics(&x);
            serde_json::to_value(x)
        }
        A::Connected(x) => serde_json::to_value(x),
        A::Layout(x) => serde_json::to_value(x),
        A::LayoutApplied(x) => serde_json::to_value(x),
        A::LayoutHistory(x) => serde_json::to_value(x),
        A::LayoutPreview(x) => serde_json::to_value(x),
        A::DeadNodesSkipped(x) => serde_json::to_value(x),
        A::UpgradeFinalized(x) => serde_json::to_value(x),
        A::Presigned(x) => serde_json::to_value(x),
        A::Buckets(x) => serde_json::to_value(x),
        A::Bucket(x) => serde_json::to_value(x),
        A::Object(x) => serde_json::to_value(x),
        A::UploadsCleaned(x) => serde_json::to_value(x),
        A::Keys(x) => serde_json::to_value(x),
        A::Key(x) => serde_json::to_value(x),
        A::Token(TokenResponse::Tokens(x)) => serde_json::to_value(x),
        A::Token(TokenResponse::Token(x)) => serde_json::to_value(x),
        A::Token(TokenResponse::Deleted(x)) => serde_json::to_value(x),
        A::Kms(KmsResponse::Keys(x)) => serde_json::to_value(x),
        A::Kms(KmsResponse::Key(x)) => serde_json::to_value(x),
        A::Topic(TopicResponse::Topics(x)) => serde_json::to_value(x),
        A::Topic(TopicResponse::Topic(x)) => serde_json::to_value(x),
        A::Remote(RemoteResponse::Remotes(x)) => serde_json::to_value(x),
        A::Remote(RemoteResponse::Remote(x)) => serde_json::to_value(x),
        A::ReplicationResynced(x) => serde_json::to_value(x),
        A::Iam(x) => serde_json::from_str(&x),
        A::Topic(TopicResponse::Deleted) | A::Remote(RemoteResponse::Deleted) | A::Done => {
            Ok(Value::Null)
        }
    };
    v.unwrap_or_else(|e| Value::String(format!("cannot write the answer as JSON: {e}")))
}

/// The JSON the HTTP API answers for a node-local operation.
pub fn node_answer(m: MultiResponse<NodeResponse>) -> Value {
    use NodeResponse as A;
    let one = |r: NodeResponse| {
        let v = match r {
            A::NodeInfo(x) => serde_json::to_value(x),
            A::Statistics(x) => serde_json::to_value(x),
            A::RepairLaunched(x) => serde_json::to_value(x),
            A::Workers(x) => serde_json::to_value(x),
            A::Worker(x) => serde_json::to_value(x),
            A::BlockErrors(x) => serde_json::to_value(x),
            A::Block(x) => serde_json::to_value(x),
            A::Retried(x) => serde_json::to_value(x),
            A::Purged(x) => serde_json::to_value(x),
            A::Variables(x) => serde_json::to_value(x),
            A::VariableSet(x) => serde_json::to_value(x),
            A::Snapshot(x) => serde_json::to_value(x),
            A::MetricsHistory(x) => serde_json::to_value(x),
            A::Storage(x) => serde_json::to_value(x),
            A::NotificationBacklog(x) => serde_json::to_value(x),
            A::ReplicationBacklog(x) => serde_json::to_value(x),
        };
        v.unwrap_or_else(|e| Value::String(format!("cannot write the answer as JSON: {e}")))
    };
    let success: Map<String, Value> = m
        .success
        .into_iter()
        .map(|(k, r)| (k, one(r.with_text())))
        .collect();
    serde_json::json!({ "success": success, "error": m.error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_body_fields_are_split() {
        let Call::Op(AdminRequest::UpdateKey { id, body }) =
            call("UpdateKey", r#"{"id": "GK1", "name": "n"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(id, "GK1");
        assert_eq!(body.name.as_deref(), Some("n"));
        // Query parameters read as strings, as from a URL.
        let Call::Op(AdminRequest::GetKeyInfo(q)) =
            call("GetKeyInfo", r#"{"search": "k", "showSecretKey": true}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(q.show_secret_key.as_deref(), Some("true"));
        let Call::OnNodes { node, req } = call("GetNodeStatistics", "").unwrap() else {
            panic!()
        };
        assert_eq!(node, "self");
        assert!(matches!(req, NodeRequest::GetNodeStatistics));
    }

    #[test]
    fn topic_requests_are_read() {
        let Call::Op(AdminRequest::Topic(TopicRequest::Create(r))) = call(
            "CreateTopic",
            r#"{"name": "t1", "endpoint": "http://h/", "attributes": {"OpaqueData": "a"}}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!((r.name.as_str(), r.endpoint.as_str()), ("t1", "http://h/"));
        assert_eq!(r.attributes["OpaqueData"], "a");
        assert_eq!(r.owner, None);
        let Call::Op(AdminRequest::Topic(TopicRequest::Delete(n))) =
            call("DeleteTopic", r#"{"name": "t1"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(n, "t1");
        let Call::OnNodes { node, req } =
            call("GetNotificationBacklog", r#"{"node": "*"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(node, "*");
        assert!(matches!(req, NodeRequest::GetNotificationBacklog));
        assert!(call("GetTopicInfo", "{}").unwrap_err().contains("name"));
    }

    #[test]
    fn remote_requests_are_read() {
        let Call::Op(AdminRequest::Remote(RemoteRequest::Add(r))) = call(
            "AddRemote",
            r#"{"name": "dr", "endpoint": "http://h:3900", "accessKeyId": "GK1", "secretAccessKey": "s3cr3t"}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (r.name.as_str(), r.endpoint.as_str()),
            ("dr", "http://h:3900")
        );
        assert_eq!(r.region, "garage");
        assert_eq!(r.access_key_id, "GK1");
        assert_eq!(r.secret_access_key, "s3cr3t");
        let Call::Op(AdminRequest::Remote(RemoteRequest::Add(r))) = call(
            "AddRemote",
            r#"{"name": "dr", "endpoint": "https://s3.example.org", "region": "eu-west-1", "accessKeyId": "AK", "secretAccessKey": "s"}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(r.region, "eu-west-1");
        let e = call("AddRemote", r#"{"name": "dr", "endpoint": "http://h"}"#).unwrap_err();
        assert!(e.contains("accessKeyId"), "{e}");
        let Call::Op(AdminRequest::Remote(RemoteRequest::Info(n))) =
            call("GetRemoteInfo", r#"{"name": "dr"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(n, "dr");
        let Call::Op(AdminRequest::Remote(RemoteRequest::Delete(n))) =
            call("DeleteRemote", r#"{"name": "dr"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(n, "dr");
        assert!(matches!(
            call("ListRemotes", "").unwrap(),
            Call::Op(AdminRequest::Remote(RemoteRequest::List))
        ));
        assert!(call("DeleteRemote", "{}").unwrap_err().contains("name"));
        let Call::OnNodes { node, req } =
            call("GetReplicationBacklog", r#"{"node": "*"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(node, "*");
        assert!(matches!(req, NodeRequest::GetReplicationBacklog));
    }

    #[test]
    fn resync_requests_are_read() {
        let Call::Op(AdminRequest::ResyncBucketReplication(r)) =
            call("ResyncBucketReplication", r#"{"globalAlias": "photos"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.global_alias.as_deref(), Some("photos"));
        assert_eq!(r.bucket_id, None);
        assert!(!r.all);
        let Call::Op(AdminRequest::ResyncBucketReplication(r)) = call(
            "ResyncBucketReplication",
            r#"{"bucketId": "0123", "all": true}"#,
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(r.bucket_id.as_deref(), Some("0123"));
        assert!(r.all);
        let a = answer(AdminResponse::ReplicationResynced(
            super::super::remote::ResyncBucketReplicationResponse {
                versions: 3,
                queued: 2,
            },
        ));
        assert_eq!(a, serde_json::json!({"versions": 3, "queued": 2}));
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let e = call("NoSuchThing", "{}").unwrap_err();
        assert!(e.contains("no admin API endpoint NoSuchThing"), "{e}");
        let e = call("ListKeys", "3").unwrap_err();
        assert!(e.contains("JSON object"), "{e}");
        let e = call("UpdateKey", r#"{"name": "n"}"#).unwrap_err();
        assert!(e.contains("id"), "{e}");
    }
}
