//! Operations on buckets, aliases and keys that keep the three tables
//! consistent with each other (a bucket's aliases and authorized keys are
//! recorded on both sides). Each is a read-modify-write of CRDT entries
//! with quorum reads and writes: concurrent changes merge field by field.

use std::sync::Arc;

use garage_table::{EmptyKey, Table};
use garage_util::data::{gen_uuid, Uuid};

use crate::bucket_alias_table::{BucketAlias, BucketAliasTable};
use crate::bucket_table::{check_bucket_name, Bucket, BucketQuotas, BucketTable};
use crate::key_table::{Key, KeyFilter, KeyFormatError, KeyTable};
use crate::permission::BucketKeyPerm;

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error(transparent)]
    Table(#[from] garage_table::Error),
    #[error("{0}")]
    BadName(String),
    #[error(transparent)]
    KeyFormat(#[from] KeyFormatError),
    #[error("no bucket named {0:?} (give a global alias, or the bucket id or a unique prefix of it; `garage bucket list` shows them)")]
    NoSuchBucket(String),
    #[error("no access key matches {0:?} (give its id, a unique prefix of it, or its name; `garage key list` shows them)")]
    NoSuchKey(String),
    #[error("{pattern:?} matches several access keys: {}; give more of the key id", .matches.join(", "))]
    AmbiguousKey {
        pattern: String,
        matches: Vec<String>,
    },
    #[error("{pattern:?} matches several buckets: {}; give more of the bucket id", .matches.join(", "))]
    AmbiguousBucket {
        pattern: String,
        matches: Vec<String>,
    },
    #[error("the bucket name {0:?} is already taken")]
    AliasTaken(String),
    #[error("access key {0} already exists")]
    KeyExists(String),
    #[error("{0}")]
    Refused(String),
}

pub type Result<T> = std::result::Result<T, HelperError>;

/// The bucket, alias and key tables together.
#[derive(Clone)]
pub struct Metadata {
    pub buckets: Arc<Table<BucketTable>>,
    pub aliases: Arc<Table<BucketAliasTable>>,
    pub keys: Arc<Table<KeyTable>>,
    /// `s3_api.encrypt_new_buckets`: new buckets get SSE-S3 as their
    /// default encryption.
    pub encrypt_new_buckets: bool,
    /// `s3_api.new_bucket_object_ownership`.
    pub new_bucket_ownership: crate::access::ObjectOwnership,
}

/// Entries read per range request when listing.
const LIST_LIMIT: usize = 100_000;

impl Metadata {
    // ---- Buckets ----

    /// The bucket a global alias points to, from this node's copy of the
    /// alias table (fully replicated: no round trip, unless the copy lacks
    /// the alias). For serving requests; changes use
    /// [`Metadata::resolve_global_alias`].
    pub async fn global_alias_target(&self, name: &str) -> Result<Option<Uuid>> {
        Ok(self
            .aliases
            .get(&EmptyKey, &name.to_string())
            .await?
            .and_then(|a| a.bucket()))
    }

    /// The bucket a global alias points to, read from a quorum.
    pub async fn resolve_global_alias(&self, name: &str) -> Result<Option<Uuid>> {
        Ok(self
            .aliases
            .get_quorum(&EmptyKey, &name.to_string())
            .await?
            .and_then(|a| a.bucket()))
    }

    /// A bucket by global alias, full id, or unique id prefix.
    pub async fn get_bucket(&self, pattern: &str) -> Result<Bucket> {
        if let Some(id) = self.resolve_global_alias(pattern).await? {
            if let Some(b) = self.buckets.get_quorum(&EmptyKey, &id).await? {
                if !b.state.is_deleted() {
                    return Ok(b);
                }
            }
        }
        if pattern.len() >= 4 && pattern.chars().all(|c| c.is_ascii_hexdigit()) {
            let matches: Vec<Bucket> = self
                .list_buckets()
                .await?
                .into_iter()
                .filter(|b| b.id.hex().starts_with(&pattern.to_ascii_lowercase()))
                .collect();
            match matches.len() {
                1 => return Ok(matches.into_iter().next().expect("one")),
                0 => (),
                _ => {
                    return Err(HelperError::AmbiguousBucket {
                        pattern: pattern.into(),
                        matches: matches.iter().map(|b| b.id.hex()).collect(),
                    })
                }
            }
        }
        Err(HelperError::NoSuchBucket(pattern.into()))
    }

    pub async fn list_buckets(&self) -> Result<Vec<Bucket>> {
        Ok(self
            .buckets
            .get_range(&EmptyKey, None, None, LIST_LIMIT, false)
            .await?)
    }

    /// A new bucket, with SSE-S3 as its default encryption if
    /// `encrypt_new_buckets`, and the ownership setting of
    /// `new_bucket_object_ownership`.
    fn new_bucket(&self) -> Bucket {
        let mut b = Bucket::new(gen_uuid());
        b.params_mut()
            .expect("new bucket")
            .access
            .ownership
            .update(Some(self.new_bucket_ownership));
        if self.encrypt_new_buckets {
            b.params_mut().expect("new bucket").encryption.update(Some(
                crate::bucket_table::DefaultEncryption {
                    bucket_key_enabled: false,
                    kms: false,
                    kms_key_id: None,
                },
            ));
        }
        b
    }

    /// Creates a bucket with global alias `name`.
    pub async fn create_bucket(&self, name: &str) -> Result<Bucket> {
        check_bucket_name(name).map_err(HelperError::BadName)?;
        if self.resolve_global_alias(name).await?.is_some() {
            return Err(HelperError::AliasTaken(name.into()));
        }
        let mut bucket = self.new_bucket();
        bucket
            .params_mut()
            .expect("new bucket")
            .aliases
            .update(name.to_string(), true);
        self.buckets.insert(&bucket).await?;
        self.aliases
            .insert(&BucketAlias::new(name, Some(bucket.id)))
            .await?;
        Ok(bucket)
    }

    /// Creates a bucket whose only name is alias `name` in `key`'s
    /// namespace.
    pub async fn create_bucket_local(&self, key: &Key, name: &str) -> Result<Bucket> {
        let key = self.check_local_alias_free(key, name).await?;
        let bucket = self.new_bucket();
        self.buckets.insert(&bucket).await?;
        self.set_local_alias(bucket.id, &key, name).await?;
        self.existing_bucket(bucket.id).await
    }

    /// Checks that `name` is a valid bucket name, free in `key`'s namespace
    /// (to be called before creating anything), and returns the key as
    /// stored now.
    pub async fn check_local_alias_free(&self, key: &Key, name: &str) -> Result<Key> {
        check_bucket_name(name).map_err(HelperError::BadName)?;
        let key = self.existing_key(&key.key_id).await?;
        let taken = key
            .params()
            .expect("existing")
            .local_aliases
            .get(&name.to_string())
            .is_some_and(|t| t.is_some());
        if taken {
            return Err(HelperError::AliasTaken(name.into()));
        }
        Ok(key)
    }

    /// Deletes a bucket: its aliases and key permissions go with it. The
    /// caller checks that it holds no object.
    pub async fn delete_bucket(&self, bucket: &Bucket) -> Result<()> {
        for name in bucket.global_aliases() {
            self.aliases.insert(&BucketAlias::new(&name, None)).await?;
        }
        let params = bucket.params().cloned();
        if let Some(p) = params {
            for (key_id, _, _) in p.authorized_keys.items() {
                if let Some(mut k) = self.keys.get_quorum(&EmptyKey, key_id).await? {
                    if let Some(kp) = k.params_mut() {
                        kp.authorized_buckets.update(bucket.id, BucketKeyPerm::NONE);
                        for (name, _, target) in kp.local_aliases.clone().items() {
                            if *target == Some(bucket.id) {
                                kp.local_aliases.update(name.clone(), None);
                            }
                        }
                        self.keys.insert(&k).await?;
                    }
                }
            }
        }
        self.buckets.insert(&Bucket::deleted(bucket.id)).await?;
        Ok(())
    }

    /// Adds global alias `name` to the bucket.
    pub async fn set_global_alias(&self, bucket_id: Uuid, name: &str) -> Result<()> {
        check_bucket_name(name).map_err(HelperError::BadName)?;
        match self.resolve_global_alias(name).await? {
            Some(b) if b == bucket_id => return Ok(()),
            Some(_) => return Err(HelperError::AliasTaken(name.into())),
            None => (),
        }
        let mut bucket = self.existing_bucket(bucket_id).await?;
        bucket
            .params_mut()
            .expect("existing")
            .aliases
            .update(name.into(), true);
        self.aliases
            .insert(&BucketAlias::new(name, Some(bucket_id)))
            .await?;
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    /// Removes global alias `name`; a bucket keeps at least one name.
    pub async fn unset_global_alias(&self, name: &str) -> Result<()> {
        let Some(id) = self.resolve_global_alias(name).await? else {
            return Err(HelperError::NoSuchBucket(name.into()));
        };
        let mut bucket = self.existing_bucket(id).await?;
        if bucket.global_aliases().len() + bucket.local_aliases().len() <= 1 {
            return Err(HelperError::Refused(format!(
                "{name:?} is the bucket's only name: give it another alias first, or delete the bucket"
            )));
        }
        bucket
            .params_mut()
            .expect("existing")
            .aliases
            .update(name.into(), false);
        self.aliases.insert(&BucketAlias::new(name, None)).await?;
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    /// Adds alias `name` in key `key_id`'s namespace.
    pub async fn set_local_alias(&self, bucket_id: Uuid, key: &Key, name: &str) -> Result<()> {
        check_bucket_name(name).map_err(HelperError::BadName)?;
        let mut key = self.existing_key(&key.key_id).await?;
        let kp = key.params_mut().expect("existing");
        if let Some(Some(b)) = kp.local_aliases.get(&name.to_string()) {
            if *b != bucket_id {
                return Err(HelperError::AliasTaken(name.into()));
            }
        }
        kp.local_aliases.update(name.into(), Some(bucket_id));
        let mut bucket = self.existing_bucket(bucket_id).await?;
        bucket
            .params_mut()
            .expect("existing")
            .local_aliases
            .update((key.key_id.clone(), name.into()), true);
        self.keys.insert(&key).await?;
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    pub async fn unset_local_alias(&self, key: &Key, name: &str) -> Result<()> {
        let mut key = self.existing_key(&key.key_id).await?;
        let kp = key.params_mut().expect("existing");
        let Some(Some(bucket_id)) = kp.local_aliases.get(&name.to_string()).cloned() else {
            return Err(HelperError::NoSuchBucket(name.into()));
        };
        let mut bucket = self.existing_bucket(bucket_id).await?;
        if bucket.global_aliases().len() + bucket.local_aliases().len() <= 1 {
            return Err(HelperError::Refused(format!(
                "{name:?} is the bucket's only name: give it another alias first, or delete the bucket"
            )));
        }
        kp.local_aliases.update(name.into(), None);
        bucket
            .params_mut()
            .expect("existing")
            .local_aliases
            .update((key.key_id.clone(), name.into()), false);
        self.keys.insert(&key).await?;
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    /// Sets what `key` may do on the bucket, on both sides.
    pub async fn set_permissions(
        &self,
        bucket_id: Uuid,
        key_id: &str,
        perm: BucketKeyPerm,
    ) -> Result<()> {
        let mut key = self.existing_key(key_id).await?;
        let mut bucket = self.existing_bucket(bucket_id).await?;
        key.params_mut()
            .expect("existing")
            .authorized_buckets
            .update(bucket_id, perm);
        bucket
            .params_mut()
            .expect("existing")
            .authorized_keys
            .update(key_id.into(), perm);
        self.keys.insert(&key).await?;
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    pub async fn set_quotas(&self, bucket_id: Uuid, quotas: BucketQuotas) -> Result<()> {
        let mut bucket = self.existing_bucket(bucket_id).await?;
        bucket.params_mut().expect("existing").quotas.update(quotas);
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    /// Sets the storage class of writes to the bucket that name none
    /// (`None`: `STANDARD`). The caller checks the class exists.
    pub async fn set_default_class(&self, bucket_id: Uuid, class: Option<String>) -> Result<()> {
        let mut bucket = self.existing_bucket(bucket_id).await?;
        bucket
            .params_mut()
            .expect("existing")
            .default_storage_class
            .update(class);
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    /// Sets the storage classes writes to the bucket may use (`None`: any)
    /// and its default class together. The caller checks both.
    pub async fn set_placement(
        &self,
        bucket_id: Uuid,
        default: Option<String>,
        allowed: Option<Vec<String>>,
    ) -> Result<()> {
        let mut bucket = self.existing_bucket(bucket_id).await?;
        let p = bucket.params_mut().expect("existing");
        p.default_storage_class.update(default);
        p.allowed_storage_classes.update(allowed);
        self.buckets.insert(&bucket).await?;
        Ok(())
    }

    async fn existing_bucket(&self, id: Uuid) -> Result<Bucket> {
        match self.buckets.get_quorum(&EmptyKey, &id).await? {
            Some(b) if !b.state.is_deleted() => Ok(b),
            _ => Err(HelperError::NoSuchBucket(id.hex())),
        }
    }

    // ---- Keys ----

    pub async fn list_keys(&self) -> Result<Vec<Key>> {
        Ok(self
            .keys
            .get_range(&EmptyKey, None, None, LIST_LIMIT, false)
            .await?)
    }

    async fn existing_key(&self, key_id: &str) -> Result<Key> {
        match self.keys.get_quorum(&EmptyKey, &key_id.to_string()).await? {
            Some(k) if !k.state.is_deleted() => Ok(k),
            _ => Err(HelperError::NoSuchKey(key_id.into())),
        }
    }

    /// A key by exact id, unique id prefix, or unique name.
    pub async fn get_key(&self, pattern: &str) -> Result<Key> {
        if let Ok(k) = self.existing_key(pattern).await {
            return Ok(k);
        }
        let matches = self
            .keys
            .get_range(
                &EmptyKey,
                None,
                Some(KeyFilter::Matches(pattern.into())),
                10,
                false,
            )
            .await?;
        match matches.len() {
            0 => Err(HelperError::NoSuchKey(pattern.into())),
            1 => Ok(matches.into_iter().next().expect("one")),
            _ => Err(HelperError::AmbiguousKey {
                pattern: pattern.into(),
                matches: matches.iter().map(|k| k.key_id.clone()).collect(),
            }),
        }
    }

    pub async fn create_key(&self, name: &str) -> Result<Key> {
        let key = Key::new(name);
        self.keys.insert(&key).await?;
        Ok(key)
    }

    pub async fn import_key(&self, key_id: &str, secret: &str, name: &str) -> Result<Key> {
        let key = Key::import(key_id, secret, name)?;
        if self
            .keys
            .get_quorum(&EmptyKey, &key.key_id)
            .await?
            .is_some()
        {
            return Err(HelperError::KeyExists(key.key_id));
        }
        self.keys.insert(&key).await?;
        Ok(key)
    }

    pub async fn update_key(&self, key: &Key, f: impl FnOnce(&mut Key)) -> Result<Key> {
        let mut key = self.existing_key(&key.key_id).await?;
        f(&mut key);
        self.keys.insert(&key).await?;
        Ok(key)
    }

    /// Deletes a key, revoking its permissions and local aliases on every
    /// bucket first.
    pub async fn delete_key(&self, key: &Key) -> Result<()> {
        let key = self.existing_key(&key.key_id).await?;
        let kp = key.params().expect("existing").clone();
        for (bucket_id, _, perm) in kp.authorized_buckets.items() {
            if perm.is_any() {
                if let Ok(mut b) = self.existing_bucket(*bucket_id).await {
                    b.params_mut()
                        .expect("existing")
                        .authorized_keys
                        .update(key.key_id.clone(), BucketKeyPerm::NONE);
                    self.buckets.insert(&b).await?;
                }
            }
        }
        for (name, _, target) in kp.local_aliases.items() {
            if let Some(bucket_id) = target {
                if let Ok(mut b) = self.existing_bucket(*bucket_id).await {
                    b.params_mut()
                        .expect("existing")
                        .local_aliases
                        .update((key.key_id.clone(), name.clone()), false);
                    self.buckets.insert(&b).await?;
                }
            }
        }
        self.keys.insert(&Key::deleted(&key.key_id)).await?;
        Ok(())
    }
}
