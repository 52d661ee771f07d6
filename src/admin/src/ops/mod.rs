//! The admin operations, one implementation each: typed requests and
//! answers, run on a node's [`Garage`]. They know nothing of HTTP or of
//! the RPC. The admin HTTP API (`admin_api`) wraps them in its handlers,
//! the admin RPC (`admin_rpc`) runs them for the CLI (`garage`'s `cli/`)
//! and for other nodes, and [`json`] reads `garage json-api` requests
//! into them.
//!
//! Modules only point down: `admin_api` → `admin_rpc` → `ops`; nothing
//! here names those modules (the structure test checks it).

pub mod blocks;
pub mod bucket;
pub mod cluster;
pub mod error;
pub mod history;
pub mod iam;
pub mod json;
pub mod key;
pub mod kms;
pub mod layout;
pub mod node;
pub mod presign;
pub mod remote;
pub mod repair;
pub mod stats;
pub mod token;
pub mod topic;

use serde::{Deserialize, Serialize};

use error::ApiError;
use garage_model::garage::Garage;

/// What some operations need of the answering node's configuration.
#[derive(Debug, Clone, Default)]
pub struct NodeConfig {
    /// `s3_api.s3_region`.
    pub region: String,
    /// The S3 endpoint as `ip:port` (`s3_api.api_bind_addr`, an unspecified
    /// address made loopback), for presigned requests; none when S3
    /// listens on a Unix socket.
    pub s3_host: Option<String>,
}

/// A cluster-wide admin operation (the cluster, its layout, buckets, keys,
/// admin tokens, KMS keys, notification topics, replication remotes), as the CLI sends it to a node. Node-local operations are
/// [`node::NodeRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminRequest {
    GetClusterStatus,
    GetClusterHealth,
    GetClusterStatistics,
    ConnectClusterNodes(Vec<String>),
    GetClusterLayout,
    UpdateClusterLayout(layout::UpdateClusterLayoutRequest),
    ApplyClusterLayout(layout::ApplyClusterLayoutRequest),
    RevertClusterLayout,
    GetClusterLayoutHistory,
    PreviewClusterLayoutChanges,
    ClusterLayoutSkipDeadNodes(layout::ClusterLayoutSkipDeadNodesRequest),
    /// Sent only to nodes of v0.2.0 and later (v0.1.0 cannot decode it).
    FinalizeUpgrade,
    ListBuckets,
    GetBucketInfo(bucket::GetBucketInfoQuery),
    CreateBucket(bucket::CreateBucketRequest),
    UpdateBucket {
        id: String,
        body: bucket::UpdateBucketRequestBody,
    },
    DeleteBucket {
        id: String,
    },
    AddBucketAlias(bucket::BucketAliasRequest),
    RemoveBucketAlias(bucket::BucketAliasRequest),
    AllowBucketKey(bucket::BucketKeyPermChangeRequest),
    DenyBucketKey(bucket::BucketKeyPermChangeRequest),
    InspectObject(bucket::InspectObjectQuery),
    CleanupIncompleteUploads(bucket::CleanupIncompleteUploadsRequest),
    ListKeys,
    GetKeyInfo(key::GetKeyInfoQuery),
    CreateKey(key::CreateKeyRequest),
    ImportKey(key::ImportKeyRequest),
    UpdateKey {
        id: String,
        body: key::UpdateKeyRequestBody,
    },
    DeleteKey {
        id: String,
    },
    Token(token::TokenRequest),
    Kms(kms::KmsRequest),
    PresignS3Request(presign::PresignS3Request),
    /// Bucket notification topics (sent only to nodes of v0.3.0 and
    /// later).
    Topic(topic::TopicRequest),
    /// Bucket replication remotes (sent only to nodes of v0.3.0 and
    /// later).
    Remote(remote::RemoteRequest),
    /// Queues a bucket's versions for replication again, on the node
    /// reached.
    ResyncBucketReplication(remote::ResyncBucketReplicationRequest),
    /// An IAM action (sent only to nodes of v0.3.0 and later).
    Iam(iam::IamCallRequest),
}

/// The answer to an [`AdminRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminResponse {
    ClusterStatus(cluster::GetClusterStatusResponse),
    ClusterHealth(cluster::GetClusterHealthResponse),
    ClusterStatistics(cluster::GetClusterStatisticsResponse),
    Connected(Vec<cluster::ConnectNodeResponse>),
    Layout(Box<layout::GetClusterLayoutResponse>),
    LayoutApplied(Box<layout::ApplyClusterLayoutResponse>),
    LayoutHistory(layout::GetClusterLayoutHistoryResponse),
    LayoutPreview(Box<layout::PreviewClusterLayoutChangesResponse>),
    DeadNodesSkipped(layout::ClusterLayoutSkipDeadNodesResponse),
    UpgradeFinalized(cluster::FinalizeUpgradeResponse),
    Presigned(presign::PresignS3Response),
    Buckets(Vec<bucket::ListBucketsResponseItem>),
    Bucket(Box<bucket::GetBucketInfoResponse>),
    Object(bucket::InspectObjectResponse),
    UploadsCleaned(bucket::CleanupIncompleteUploadsResponse),
    Keys(Vec<key::ListKeysResponseItem>),
    Key(key::GetKeyInfoResponse),
    Token(token::TokenResponse),
    Kms(kms::KmsResponse),
    /// Done, nothing to say (deletions).
    Done,
    Topic(topic::TopicResponse),
    Remote(remote::RemoteResponse),
    ReplicationResynced(remote::ResyncBucketReplicationResponse),
    /// An IAM action's answer, as JSON text.
    Iam(String),
}

/// Runs one admin operation on this node.
pub async fn run(
    g: &Garage,
    conf: &NodeConfig,
    req: AdminRequest,
) -> Result<AdminResponse, ApiError> {
    use AdminRequest as R;
    use AdminResponse as A;
    let bucket = |b| A::Bucket(Box::new(b));
    let sys = &g.system;
    Ok(match req {
        R::GetClusterStatus => A::ClusterStatus(cluster::get_cluster_status(g)),
        R::GetClusterHealth => A::ClusterHealth(cluster::cluster_health(sys)),
        R::GetClusterStatistics => A::ClusterStatistics(cluster::get_cluster_statistics(sys)),
        R::ConnectClusterNodes(peers) => {
            A::Connected(cluster::connect_cluster_nodes(g, peers).await?)
        }
        R::GetClusterLayout => A::Layout(Box::new(layout::get_cluster_layout(sys)?)),
        R::UpdateClusterLayout(r) => A::Layout(Box::new(layout::update_cluster_layout(sys, r)?)),
        R::ApplyClusterLayout(r) => {
            A::LayoutApplied(Box::new(layout::apply_cluster_layout(sys, r)?))
        }
        R::RevertClusterLayout => A::Layout(Box::new(layout::revert_cluster_layout(sys)?)),
        R::GetClusterLayoutHistory => A::LayoutHistory(layout::get_cluster_layout_history(sys)?),
        R::PreviewClusterLayoutChanges => {
            A::LayoutPreview(Box::new(layout::preview_cluster_layout_changes(sys)?))
        }
        R::ClusterLayoutSkipDeadNodes(r) => {
            A::DeadNodesSkipped(layout::cluster_layout_skip_dead_nodes(sys, r)?)
        }
        R::FinalizeUpgrade => A::UpgradeFinalized(cluster::finalize_upgrade(sys).await?),
        R::PresignS3Request(r) => A::Presigned(presign::presign_for(g, conf, r).await?),
        R::ListBuckets => A::Buckets(bucket::list_buckets(g).await?),
        R::GetBucketInfo(q) => bucket(bucket::get_bucket_info(g, q).await?),
        R::CreateBucket(r) => bucket(bucket::create_bucket(g, r).await?),
        R::UpdateBucket { id, body } => bucket(bucket::update_bucket(g, &id, body).await?),
        R::DeleteBucket { id } => {
            bucket::delete_bucket(g, &id).await?;
            A::Done
        }
        R::AddBucketAlias(r) => bucket(bucket::add_bucket_alias(g, r).await?),
        R::RemoveBucketAlias(r) => bucket(bucket::remove_bucket_alias(g, r).await?),
        R::AllowBucketKey(r) => bucket(bucket::change_perm(g, r, true).await?),
        R::DenyBucketKey(r) => bucket(bucket::change_perm(g, r, false).await?),
        R::InspectObject(q) => A::Object(bucket::inspect_object(g, q).await?),
        R::CleanupIncompleteUploads(r) => {
            A::UploadsCleaned(bucket::cleanup_incomplete_uploads(g, &r).await?)
        }
        R::ListKeys => A::Keys(key::list_keys(g).await?),
        R::GetKeyInfo(q) => A::Key(key::get_key_info(g, q).await?),
        R::CreateKey(r) => A::Key(key::create_key(g, r).await?),
        R::ImportKey(r) => A::Key(key::import_key(g, r).await?),
        R::UpdateKey { id, body } => A::Key(key::update_key(g, &id, body).await?),
        R::DeleteKey { id } => {
            key::delete_key(g, &id).await?;
            A::Done
        }
        R::Token(r) => A::Token(token::handle(g, r).await?),
        R::Kms(r) => A::Kms(kms::handle(g, r).await?),
        R::Topic(r) => A::Topic(topic::handle(g, r).await?),
        R::Remote(r) => A::Remote(remote::handle(g, r).await?),
        R::ResyncBucketReplication(r) => A::ReplicationResynced(remote::resync(g, r).await?),
        R::Iam(r) => A::Iam(iam::call(g, r).await?),
    })
}
