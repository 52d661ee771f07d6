//! The cluster's bucket replication remotes (see
//! [`garage_model::replication::remote_table`]): listed, shown, added,
//! deleted; and a bucket's replication resync. One implementation,
//! [`handle`], serves the HTTP endpoints and `garage remote` (over the
//! admin RPC, as a typed [`RemoteRequest`]); [`resync`] serves
//! `ResyncBucketReplication` and `garage bucket replication resync`.
//!
//! A remote's secret key goes in (AddRemote) and never comes out: no
//! answer, no log line and no `Debug` output shows it (the `Debug` of
//! [`AddRemoteRequest`] masks it, as the model's `RemoteConfig`'s does).
//!
//! Each node's queue of versions to send (per destination) is a
//! node-local operation: [`node_backlog`], run by the node operation
//! `GetReplicationBacklog` (which names this module, not the reverse).

use garage_model::notify::endpoint::redact_url;
use garage_model::replication::config::destination_arn;
use garage_model::replication::remote_table::{
    check_remote_name, Remote, RemoteConfig, RemoteFilter,
};
use garage_rpc::system::versions::BUCKET_REPLICATION;
use garage_table::EmptyKey;
use garage_util::time::rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::bucket::{find_bucket, GetBucketInfoQuery};
use super::error::ApiError;
use garage_model::garage::Garage;

/// Remotes read at most by a listing.
const MAX_REMOTES: usize = 10_000;

/// The region of a remote added without one: garage's default
/// `s3_region`.
pub const DEFAULT_REGION: &str = "garage";

/// A remote as the admin shows it: never its secret key.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteInfo {
    pub name: String,
    /// Its S3 endpoint, `http(s)://host:port`.
    pub endpoint: String,
    /// The region its requests are signed for.
    pub region: String,
    /// The remote's access key id the replication uses (its secret key
    /// is never shown).
    pub access_key_id: String,
    /// RFC 3339.
    pub created: String,
    /// How a replication rule's `Destination.Bucket` names a bucket of
    /// this remote: `arn:garage:s3:::NAME/<bucket>`, `<bucket>` the
    /// bucket's name on the remote.
    pub destination_arn_pattern: String,
}

fn default_region() -> String {
    DEFAULT_REGION.into()
}

#[derive(Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddRemoteRequest {
    /// 1 to 64 ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// Its S3 endpoint: `http(s)://host[:port]`, without a path, a query
    /// or a user name (buckets are addressed in the path).
    pub endpoint: String,
    /// The region requests are signed for; `garage` by default.
    #[serde(default = "default_region")]
    pub region: String,
    /// An access key of the remote, with write rights on the destination
    /// buckets.
    pub access_key_id: String,
    /// Its secret key: stored in the cluster's metadata, never shown.
    pub secret_access_key: String,
}

impl std::fmt::Debug for AddRemoteRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddRemoteRequest")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"****")
            .finish()
    }
}

/// The `?name=` naming one remote.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RemoteQuery {
    pub name: String,
}

/// A remote operation, as the HTTP API and the CLI send it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RemoteRequest {
    List,
    Info(String),
    Add(AddRemoteRequest),
    Delete(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RemoteResponse {
    Remotes(Vec<RemoteInfo>),
    Remote(RemoteInfo),
    /// The remote is deleted.
    Deleted,
}

/// The bucket whose versions to queue again: by `bucketId` or by
/// `globalAlias` (exactly one).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResyncBucketReplicationRequest {
    /// The bucket's full id.
    #[serde(default)]
    pub bucket_id: Option<String>,
    /// One of its global aliases.
    #[serde(default)]
    pub global_alias: Option<String>,
    /// Queue every version the rules send somewhere, even those a
    /// destination has (for a destination that lost data); by default
    /// only those it has not acknowledged (pending, failed, or written
    /// before the rules).
    #[serde(default)]
    pub all: bool,
}

/// What a resync queued, on the node that ran it.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResyncBucketReplicationResponse {
    /// Versions of the bucket looked at.
    pub versions: u64,
    /// (version, destination) pairs queued.
    pub queued: u64,
}

/// What one node's replication queue holds for one destination.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationBacklog {
    /// `REMOTE/BUCKET`.
    pub destination: String,
    /// Versions waiting to be sent.
    pub versions: u64,
    /// Their queue records' bytes (not the objects' sizes).
    pub bytes: u64,
    /// When the oldest of them was queued (RFC 3339).
    #[serde(default)]
    pub oldest_queued: Option<String>,
}

fn info(r: &Remote, c: &RemoteConfig) -> RemoteInfo {
    RemoteInfo {
        name: r.name.clone(),
        endpoint: redact_url(&c.endpoint),
        region: c.region.clone(),
        access_key_id: c.access_key_id.clone(),
        created: rfc3339(r.created),
        destination_arn_pattern: destination_arn(&r.name, "<bucket>"),
    }
}

fn no_such_remote(name: &str) -> ApiError {
    ApiError::NoSuchRemote(format!(
        "no replication remote {name} (see `garage remote list`)"
    ))
}

/// The live remote `name` and its configuration.
async fn live(g: &Garage, name: &str) -> Result<(Remote, RemoteConfig), ApiError> {
    let r = g
        .remote_table
        .get(&EmptyKey, &name.to_string())
        .await?
        .ok_or_else(|| no_such_remote(name))?;
    let c = r.live().cloned().ok_or_else(|| no_such_remote(name))?;
    Ok((r, c))
}

/// Remotes are written only once every node reads them.
fn check_gate(g: &Garage) -> Result<(), ApiError> {
    let gate = &BUCKET_REPLICATION;
    if !g.system.feature_allowed(gate) {
        return Err(ApiError::BadRequest(format!(
            "bucket replication needs the cluster finalized at v{} or later (it is at v{}): \
             upgrade every node, then run `garage upgrade finalize`",
            gate.since,
            g.system.active_version()
        )));
    }
    Ok(())
}

async fn add(g: &Garage, r: AddRemoteRequest) -> Result<(Remote, RemoteConfig), ApiError> {
    check_remote_name(&r.name).map_err(ApiError::BadRequest)?;
    check_gate(g)?;
    let config = RemoteConfig {
        endpoint: r.endpoint,
        region: r.region,
        access_key_id: r.access_key_id,
        secret_access_key: r.secret_access_key,
    };
    config.check().map_err(ApiError::BadRequest)?;
    let existing = g.remote_table.get(&EmptyKey, &r.name).await?;
    let remote = match existing {
        Some(mut e) => {
            e.config.update(Some(config.clone()));
            e
        }
        None => Remote::new(
            r.name.clone(),
            config.clone(),
            garage_util::time::now_msec(),
        ),
    };
    g.remote_table.insert(&remote).await?;
    tracing::info!(
        remote = %r.name,
        endpoint = %redact_url(&config.endpoint),
        region = %config.region,
        access_key_id = %config.access_key_id,
        "replication remote added (admin)"
    );
    Ok((remote, config))
}

/// Runs a remote operation: the one implementation of the HTTP endpoints
/// and of `garage remote`.
pub async fn handle(g: &Garage, req: RemoteRequest) -> Result<RemoteResponse, ApiError> {
    match req {
        RemoteRequest::List => {
            let all = g
                .remote_table
                .get_range(
                    &EmptyKey,
                    None,
                    Some(RemoteFilter::Live),
                    MAX_REMOTES,
                    false,
                )
                .await?;
            Ok(RemoteResponse::Remotes(
                all.iter()
                    .filter_map(|r| Some(info(r, r.live()?)))
                    .collect(),
            ))
        }
        RemoteRequest::Info(name) => {
            let (r, c) = live(g, &name).await?;
            Ok(RemoteResponse::Remote(info(&r, &c)))
        }
        RemoteRequest::Add(req) => {
            let (r, c) = add(g, req).await?;
            Ok(RemoteResponse::Remote(info(&r, &c)))
        }
        RemoteRequest::Delete(name) => {
            let (mut r, _) = live(g, &name).await?;
            check_gate(g)?;
            r.config.update(None);
            g.remote_table.insert(&r).await?;
            tracing::info!(remote = %name, "replication remote deleted (admin)");
            Ok(RemoteResponse::Deleted)
        }
    }
}

/// Queues on this node the bucket's versions its replication rules send
/// somewhere and that their destination lacks (every one with `all`):
/// `garage bucket replication resync`. A bucket without rules queues
/// nothing.
pub async fn resync(
    g: &Garage,
    req: ResyncBucketReplicationRequest,
) -> Result<ResyncBucketReplicationResponse, ApiError> {
    if req.bucket_id.is_some() == req.global_alias.is_some() {
        return Err(ApiError::bad(
            "give exactly one of bucketId and globalAlias",
        ));
    }
    let b = find_bucket(
        g,
        GetBucketInfoQuery {
            id: req.bucket_id,
            global_alias: req.global_alias,
            search: None,
        },
    )
    .await?;
    let r = g
        .writer
        .replicator
        .resync(&g.history_table, b.id, req.all)
        .await?;
    tracing::info!(
        bucket = %b.id.hex(),
        all = req.all,
        versions = r.versions,
        queued = r.queued,
        "bucket replication resync (admin)"
    );
    Ok(ResyncBucketReplicationResponse {
        versions: r.versions,
        queued: r.queued,
    })
}

/// What this node's replication queue holds, per destination
/// (`REMOTE/BUCKET`, those with versions waiting only).
pub fn node_backlog(g: &Garage) -> Vec<ReplicationBacklog> {
    let queue = &g.writer.replicator.queue;
    queue
        .backlog()
        .into_iter()
        .map(|(destination, b)| {
            let oldest_queued = match queue.peek(&destination, 1) {
                Ok(v) => v.first().map(|(_, q)| rfc3339(q.queued_ms)),
                Err(e) => {
                    tracing::warn!(%destination, "cannot read the replication queue: {e}");
                    None
                }
            };
            ReplicationBacklog {
                destination,
                versions: b.events,
                bytes: b.bytes,
                oldest_queued,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_never_shown() {
        let req = AddRemoteRequest {
            name: "dr".into(),
            endpoint: "http://127.0.0.1:3900".into(),
            region: DEFAULT_REGION.into(),
            access_key_id: "GK1".into(),
            secret_access_key: "s3cr3t".into(),
        };
        assert!(!format!("{req:?}").contains("s3cr3t"));
        assert!(!format!("{:?}", RemoteRequest::Add(req.clone())).contains("s3cr3t"));
        let c = RemoteConfig {
            endpoint: req.endpoint.clone(),
            region: req.region.clone(),
            access_key_id: req.access_key_id.clone(),
            secret_access_key: req.secret_access_key.clone(),
        };
        let r = Remote::new("dr".into(), c.clone(), 0);
        let shown = info(&r, &c);
        let json = serde_json::to_string(&shown).unwrap();
        assert!(!json.contains("s3cr3t"), "{json}");
        assert!(!format!("{shown:?}").contains("s3cr3t"));
        assert_eq!(shown.destination_arn_pattern, "arn:garage:s3:::dr/<bucket>");
        assert_eq!(shown.access_key_id, "GK1");
        assert_eq!(shown.region, "garage");
    }

    #[test]
    fn add_requests_default_the_region() {
        let r: AddRemoteRequest = serde_json::from_str(
            r#"{"name": "dr", "endpoint": "http://h:3900", "accessKeyId": "GK1", "secretAccessKey": "s"}"#,
        )
        .unwrap();
        assert_eq!(r.region, DEFAULT_REGION);
        assert!(serde_json::from_str::<AddRemoteRequest>(r#"{"name": "dr"}"#).is_err());
    }
}
