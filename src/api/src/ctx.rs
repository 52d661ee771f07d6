//! The request context of every S3 handler ([`Api`]: the node's `Garage`,
//! its tables and block manager, the region); the lookups the
//! authorization step (`access::step`) makes (an access key, and the
//! bucket its name designates for that key, with the permission needed);
//! and the bucket helpers every family shares (an update of its
//! parameters from a quorum read).

use std::sync::Arc;

use garage_block::manager::BlockManager;
use garage_model::block_ref_table::BlockRefTable;
use garage_model::bucket_table::{Bucket, BucketParams};
use garage_model::ec_catch_up::EcCatchUp;
use garage_model::garage::Garage;
use garage_model::helper::Metadata;
use garage_model::history_table::HistoryTable;
use garage_model::key_table::Key;
use garage_model::kms::Kms;
use garage_model::mpu_table::MpuTable;
use garage_model::object_table::ObjectTable;
use garage_model::object_write::ObjectWriter;
use garage_model::version_table::VersionTable;
use garage_table::{CasRegisters, EmptyKey, Table};
use garage_util::crdt::Crdt;
use garage_util::data::Uuid;

use crate::error::{ApiError, ApiResult};

/// The request context of the S3 API (and of the website endpoint): the
/// node's [`Garage`] and the endpoint's settings, built once per listener.
/// The tables and services below are the `Garage`'s, named here for the
/// handlers.
pub struct Api {
    pub garage: Arc<Garage>,
    pub metadata: Metadata,
    /// The object-write protocol: every write of an object entry goes
    /// through it (its tables are also the fields below, for reads).
    pub writer: ObjectWriter,
    pub objects: Arc<Table<ObjectTable>>,
    pub versions: Arc<Table<VersionTable>>,
    pub block_refs: Arc<Table<BlockRefTable>>,
    pub mpus: Arc<Table<MpuTable>>,
    /// Versions written with versioning enabled.
    pub history: Arc<Table<HistoryTable>>,
    pub blocks: Arc<BlockManager>,
    /// Compare-and-set registers, for conditional writes only.
    pub cas: Arc<CasRegisters>,
    /// `s3_region` (the only location constraint accepted, and the region
    /// requests are signed for) and the other regions accepted (see
    /// `access::auth_scope`).
    pub regions: Regions,
    /// The cluster's keys: they wrap the data keys of SSE-S3 and SSE-KMS
    /// objects.
    pub kms: Arc<Kms>,
    /// Versions with blocks written replicated for an erasure-coded
    /// class, for the catch-up worker (`lifecycle::catch_up`).
    pub ec_catch_up: EcCatchUp,
}

/// The region AWS's global endpoint signs for, and SDKs default to.
pub const US_EAST_1: &str = "us-east-1";

/// The regions a SigV4 credential scope may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    /// `s3_region`: the one errors tell clients to use.
    pub region: String,
    /// `s3_api.also_accept_regions`: accepted for every request too.
    pub also: Vec<String>,
}

impl Regions {
    pub fn new(region: &str, also: &[String]) -> Self {
        Self {
            region: region.to_string(),
            also: also.to_vec(),
        }
    }

    /// Whether a request signed for `given` is accepted; `global`: the
    /// request is one AWS serves on its global endpoint (see
    /// `access::auth_scope::is_global`), which `us-east-1` may sign.
    pub(crate) fn accepts(&self, given: &str, global: bool) -> bool {
        given == self.region
            || self.also.iter().any(|r| r == given)
            || (global && given == US_EAST_1)
    }
}

/// The permission an operation needs on its bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Owner,
}

impl Api {
    /// The context of a listener of `garage` accepting `regions`.
    pub fn new(garage: &Arc<Garage>, regions: Regions) -> Arc<Self> {
        let writer = garage.writer.clone();
        Arc::new(Self {
            garage: garage.clone(),
            metadata: garage.metadata(),
            objects: writer.objects.clone(),
            versions: writer.versions.clone(),
            block_refs: writer.block_refs.clone(),
            mpus: writer.mpus.clone(),
            history: writer.history.clone(),
            writer,
            blocks: garage.block_manager.clone(),
            cas: garage.cas_registers.clone(),
            regions,
            kms: garage.kms.clone(),
            ec_catch_up: garage.ec_catch_up.clone(),
        })
    }

    /// `s3_region`.
    pub fn region(&self) -> &str {
        &self.regions.region
    }

    /// The live key with this id, from this node's copy of the key table
    /// (fully replicated: no round trip; a quorum read when the local copy
    /// lacks it, see [`garage_table::Table::get`]).
    pub async fn fetch_key(&self, key_id: &str) -> ApiResult<Option<Key>> {
        Ok(self
            .metadata
            .keys
            .get(&EmptyKey, &key_id.to_string())
            .await?
            .filter(|k| k.params().is_some()))
    }

    /// The id of the bucket `name` designates for `key` (its local alias
    /// first, then the global alias), once `key` has permission `need`.
    ///
    /// Decided on this node's copies of the key and alias tables (no round
    /// trip). A refusal is confirmed by a quorum read of both before it is
    /// returned, so that a bucket or permission created through another
    /// node is never refused because its change is still on the way here.
    /// (A revocation, conversely, takes effect on this node when it
    /// arrives: see doc/geo-latency.md.)
    pub async fn bucket_id(&self, key: &Key, name: &str, need: Need) -> ApiResult<Uuid> {
        // Local copies only: a miss is decided by the quorum read below,
        // not by a second one inside `Table::get`.
        let alias = match local_alias(key, name) {
            Some(_) => None,
            None => self
                .metadata
                .aliases
                .get_local(&EmptyKey, &name.to_string())
                .await?
                .and_then(|a| a.bucket()),
        };
        if let Ok(id) = decide_bucket(key, name, alias, need) {
            return Ok(id);
        }
        // Confirmed before refusing: the key and the alias, read from a
        // quorum at once (one round trip).
        let (fresh_key, fresh_alias) = tokio::join!(
            self.metadata.keys.get_quorum(&EmptyKey, &key.key_id),
            self.metadata.resolve_global_alias(name),
        );
        let key = fresh_key?
            .filter(|k| k.params().is_some())
            .ok_or_else(|| ApiError::AccessDenied(format!("no access key {}", key.key_id)))?;
        let alias = match local_alias(&key, name) {
            Some(_) => None,
            None => fresh_alias?,
        };
        decide_bucket(&key, name, alias, need)
    }

    /// Writes the bucket entry with `f` applied to its parameters, as read
    /// from a quorum: each setting's new stamp comes after every write of
    /// it acknowledged before, whatever this node's clock says (the local
    /// copy `b` may not have the last one yet).
    pub(crate) async fn update_bucket(
        &self,
        b: Bucket,
        f: impl FnOnce(&mut BucketParams),
    ) -> ApiResult<()> {
        let mut b = match self.metadata.buckets.get_quorum(&EmptyKey, &b.id).await? {
            Some(mut fresh) => {
                fresh.merge(&b);
                fresh
            }
            None => b,
        };
        if let Some(p) = b.params_mut() {
            f(p);
        }
        self.metadata.buckets.insert(&b).await?;
        Ok(())
    }

    /// The bucket `name` designates for `key` (its local alias first) or
    /// for an anonymous request (global aliases only), whatever the
    /// permissions; a missing alias is confirmed by a quorum read before
    /// NoSuchBucket.
    pub async fn resolve_bucket(&self, key: Option<&Key>, name: &str) -> ApiResult<Uuid> {
        if let Some(id) = key.and_then(|k| local_alias(k, name)) {
            return Ok(id);
        }
        let local = self
            .metadata
            .aliases
            .get_local(&EmptyKey, &name.to_string())
            .await?
            .and_then(|a| a.bucket());
        match local {
            Some(id) => Ok(id),
            None => self
                .metadata
                .resolve_global_alias(name)
                .await?
                .ok_or_else(|| ApiError::NoSuchBucket(name.into())),
        }
    }

    /// The live bucket entry, from this node's copy (a quorum read
    /// confirms that it is missing or deleted before NoSuchBucket).
    pub async fn bucket(&self, id: Uuid, name: &str) -> ApiResult<Bucket> {
        let live = |b: Option<Bucket>| b.filter(|b| b.params().is_some());
        if let Some(b) = live(self.metadata.buckets.get_local(&EmptyKey, &id).await?) {
            return Ok(b);
        }
        live(self.metadata.buckets.get_quorum(&EmptyKey, &id).await?)
            .ok_or_else(|| ApiError::NoSuchBucket(name.into()))
    }
}

/// The bucket `name` designates for `key`: its local alias first, then
/// the global alias (`global`, resolved by the caller); refused unless the
/// key has permission `need` on it.
fn decide_bucket(key: &Key, name: &str, global: Option<Uuid>, need: Need) -> ApiResult<Uuid> {
    let id = local_alias(key, name)
        .or(global)
        .ok_or_else(|| ApiError::NoSuchBucket(name.into()))?;
    let perm = key.bucket_permissions(&id);
    let ok = match need {
        Need::Read => perm.allow_read,
        Need::Write => perm.allow_write,
        Need::Owner => perm.allow_owner,
    };
    if !ok {
        return Err(ApiError::AccessDenied(format!(
            "key {} has no {} permission on bucket {name}",
            key.key_id,
            match need {
                Need::Read => "read",
                Need::Write => "write",
                Need::Owner => "owner",
            }
        )));
    }
    Ok(id)
}

/// The bucket `name` designates in `key`'s own namespace.
fn local_alias(key: &Key, name: &str) -> Option<Uuid> {
    key.params()
        .and_then(|p| p.local_aliases.get(&name.to_string()).copied().flatten())
}

/// Checks an object key: S3 allows at most 1024 bytes.
pub fn check_key(key: &str) -> ApiResult<()> {
    if key.len() > 1024 {
        return Err(ApiError::KeyTooLong);
    }
    if key.is_empty() {
        return Err(ApiError::InvalidArgument("the object key is empty".into()));
    }
    Ok(())
}
