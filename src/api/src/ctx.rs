//! What every S3 handler needs: the tables, the block manager, the region;
//! and the two lookups each request starts with (its access key, and the
//! bucket its name designates for that key, with the permission needed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use garage_block::manager::BlockManager;
use garage_model::block_ref_table::BlockRefTable;
use garage_model::bucket_table::Bucket;
use garage_model::helper::Metadata;
use garage_model::key_table::Key;
use garage_model::mpu_table::MpuTable;
use garage_model::object_table::ObjectTable;
use garage_model::version_table::VersionTable;
use garage_table::{CasRegisters, EmptyKey, Table};
use garage_util::data::Uuid;
use s3s::auth::Credentials;

use crate::error::{ApiError, ApiResult};

/// The tables and services the S3 API works on.
pub struct Api {
    pub metadata: Metadata,
    pub objects: Arc<Table<ObjectTable>>,
    pub versions: Arc<Table<VersionTable>>,
    pub block_refs: Arc<Table<BlockRefTable>>,
    pub mpus: Arc<Table<MpuTable>>,
    pub blocks: Arc<BlockManager>,
    /// Compare-and-set registers, for conditional writes only.
    pub cas: Arc<CasRegisters>,
    /// `s3_region`: the only location constraint accepted, and the region
    /// requests must be signed for.
    pub region: String,
    /// Keys read by the signature check, reused by the handler of the same
    /// request (saves a round trip); an entry lives [`KEY_CACHE_TTL`].
    key_cache: Mutex<HashMap<String, (Instant, Key)>>,
}

/// How long a key read for a signature check is reused: a revoked key or
/// permission takes effect at most this much later.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(1);
const KEY_CACHE_MAX: usize = 10_000;

/// The permission an operation needs on its bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Owner,
}

impl Api {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        metadata: Metadata,
        objects: Arc<Table<ObjectTable>>,
        versions: Arc<Table<VersionTable>>,
        block_refs: Arc<Table<BlockRefTable>>,
        mpus: Arc<Table<MpuTable>>,
        blocks: Arc<BlockManager>,
        cas: Arc<CasRegisters>,
        region: String,
    ) -> Arc<Self> {
        Arc::new(Self {
            metadata,
            objects,
            versions,
            block_refs,
            mpus,
            blocks,
            cas,
            region,
            key_cache: Mutex::new(HashMap::new()),
        })
    }

    /// The live key with this id, fresh from the key table (and cached
    /// for the handler that follows the signature check).
    pub async fn fetch_key(&self, key_id: &str) -> ApiResult<Option<Key>> {
        let key = self
            .metadata
            .keys
            .get(&EmptyKey, &key_id.to_string())
            .await?
            .filter(|k| k.params().is_some());
        if let Some(k) = &key {
            let mut cache = self.key_cache.lock().expect("key cache lock");
            if cache.len() >= KEY_CACHE_MAX {
                cache.retain(|_, (t, _)| t.elapsed() < KEY_CACHE_TTL);
            }
            cache.insert(key_id.to_string(), (Instant::now(), k.clone()));
        }
        Ok(key)
    }

    /// The key that signed the request. Anonymous requests are refused.
    pub async fn key(&self, creds: &Option<Credentials>) -> ApiResult<Key> {
        let Some(c) = creds else {
            return Err(ApiError::AccessDenied(
                "anonymous requests are not allowed: sign the request with an access key".into(),
            ));
        };
        let cached = {
            let cache = self.key_cache.lock().expect("key cache lock");
            cache
                .get(&c.access_key)
                .filter(|(t, _)| t.elapsed() < KEY_CACHE_TTL)
                .map(|(_, k)| k.clone())
        };
        match cached {
            Some(k) => Ok(k),
            None => self
                .fetch_key(&c.access_key)
                .await?
                .ok_or_else(|| ApiError::AccessDenied(format!("no access key {}", c.access_key))),
        }
    }

    /// The id of the bucket `name` designates for `key` (its local alias
    /// first, then the global alias), once `key` has permission `need`.
    pub async fn bucket_id(&self, key: &Key, name: &str, need: Need) -> ApiResult<Uuid> {
        let local = key
            .params()
            .and_then(|p| p.local_aliases.get(&name.to_string()).copied().flatten());
        let id = match local {
            Some(id) => id,
            None => self
                .metadata
                .resolve_global_alias(name)
                .await?
                .ok_or_else(|| ApiError::NoSuchBucket(name.into()))?,
        };
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

    /// The live bucket entry.
    pub async fn bucket(&self, id: Uuid, name: &str) -> ApiResult<Bucket> {
        self.metadata
            .buckets
            .get(&EmptyKey, &id)
            .await?
            .filter(|b| b.params().is_some())
            .ok_or_else(|| ApiError::NoSuchBucket(name.into()))
    }
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
