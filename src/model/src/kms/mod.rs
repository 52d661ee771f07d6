//! The cluster's key management: the keys of the [`table`] and what is
//! done with them. SSE-S3 wraps each object's data key with the reserved
//! key [`table::SSE_S3_KEY_ID`]; SSE-KMS with a key named by the request
//! (id, alias or ARN) or the default alias [`table::DEFAULT_KMS_ALIAS`].
//! Both keys are made by whichever node first needs them, so encryption at
//! rest needs no hand configuration.
//!
//! Key material is sealed (AES-256-GCM) under the key-encryption key,
//! derived (HKDF-SHA256) from the cluster's `rpc_secret`: every node has
//! it, and neither a data disk nor a metadata disk holds it. A data key is
//! sealed under a version of a key's material, with the request's
//! encryption context as associated data, and stored with the object as
//! `v1;<key id>;<version>;<base64>`. A value without the `v1;` prefix was
//! wrapped by the hand-configured `sse_master_key` of earlier releases,
//! which still opens it.
//!
//! A disabled key refuses to wrap and to unwrap (`KMS.DisabledException`
//! at the S3 edge). Unwrapped material is cached in memory; the enabled
//! flag is read from this node's copy of the table on every use.

pub mod table;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use garage_table::{EmptyKey, Table};
use garage_util::data::{gen_uuid, Uuid};

use table::{KmsKey, KmsKeyFilter, KmsKeyTable, Material, DEFAULT_KMS_ALIAS, SSE_S3_KEY_ID};

/// Bytes a sealed value has more than its plaintext: nonce and tag.
const SEAL_OVERHEAD: usize = 12 + 16;
/// The prefix of a data key wrapped by a key of the table.
const STORED_V1: &str = "v1;";

#[derive(Debug, thiserror::Error)]
pub enum KmsError {
    #[error("no KMS key {0:?}")]
    NotFound(String),
    #[error("KMS key {0} is disabled")]
    Disabled(String),
    /// The data key does not open: another encryption context, or the
    /// stored value was altered.
    #[error("the data key does not open with KMS key {0} and this encryption context")]
    InvalidCiphertext(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    Invalid(String),
    /// Something a client cannot fix (a corrupt stored value, a legacy
    /// key without `sse_master_key`, a material that does not open with
    /// this cluster's `rpc_secret`).
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    Table(#[from] garage_table::Error),
}

/// Which key wraps a new data key.
#[derive(Clone, Copy, Debug)]
pub enum KeyName<'a> {
    /// SSE-S3's key.
    SseS3,
    /// SSE-KMS: a key id, `alias/NAME`, or the ARN of either; `None`, the
    /// default `aws/s3` key.
    Kms(Option<&'a str>),
}

/// A fresh data key and how it is stored.
pub struct DataKey {
    pub key: [u8; 32],
    /// `v1;<key id>;<version>;<base64>`.
    pub stored: String,
    /// The id of the key that wraps it.
    pub key_id: String,
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

pub struct Kms {
    pub table: Arc<Table<KmsKeyTable>>,
    kek: [u8; 32],
    /// The hand-configured `sse_master_key` of earlier releases.
    legacy: Option<[u8; 32]>,
    /// Unsealed material versions.
    cache: Mutex<HashMap<Uuid, [u8; 32]>>,
}

fn seal(key: &[u8; 32], plain: &[u8], aad: &[u8]) -> Vec<u8> {
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let ct = Aes256Gcm::new(key.into())
        .encrypt(&nonce, Payload { msg: plain, aad })
        .expect("AES-GCM encrypts 32 bytes");
    let mut out = Vec::with_capacity(plain.len() + SEAL_OVERHEAD);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    out
}

fn open32(key: &[u8; 32], sealed: &[u8], aad: &[u8]) -> Option<[u8; 32]> {
    if sealed.len() != 32 + SEAL_OVERHEAD {
        return None;
    }
    let (nonce, ct) = sealed.split_at(12);
    Aes256Gcm::new(key.into())
        .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad })
        .ok()
        .and_then(|k| k.try_into().ok())
}

/// The associated data of a material version.
fn material_aad(key_id: &str, version: &Uuid) -> Vec<u8> {
    let mut aad = b"garage kms material\0".to_vec();
    aad.extend_from_slice(key_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(version.as_slice());
    aad
}

/// The key-encryption key of a cluster with this `rpc_secret` (hex).
pub fn key_encryption_key(rpc_secret: &str) -> [u8; 32] {
    let ikm = hex::decode(rpc_secret).unwrap_or_else(|_| rpc_secret.as_bytes().to_vec());
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(b"garage kms"), &ikm);
    let mut kek = [0u8; 32];
    hk.expand(b"key-encryption key v1", &mut kek)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    kek
}

/// A new key id, in AWS's form.
fn new_key_id() -> String {
    let h = hex::encode(&gen_uuid().as_slice()[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// What a request names: a key id or an alias (ARNs and `alias/`
/// stripped).
#[derive(Debug, PartialEq, Eq)]
enum Name<'a> {
    Id(&'a str),
    Alias(&'a str),
}

fn parse_name(name: &str) -> Name<'_> {
    // arn:aws:kms:REGION:ACCOUNT:key/ID or …:alias/NAME
    let rest = match name.strip_prefix("arn:") {
        Some(arn) => arn.splitn(5, ':').nth(4).unwrap_or(""),
        None => name,
    };
    if let Some(a) = rest.strip_prefix("alias/") {
        Name::Alias(a)
    } else {
        Name::Id(rest.strip_prefix("key/").unwrap_or(rest))
    }
}

/// Checks a key id chosen by an operator: 1 to 250 letters, digits,
/// `_` and `-` (no `/`: `alias/` and `key/` prefixes name the kind).
pub fn check_key_id(id: &str) -> Result<(), KmsError> {
    let ok = !id.is_empty()
        && id.len() <= 250
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    match ok {
        true => Ok(()),
        false => Err(KmsError::Invalid(format!(
            "key id {id:?}: 1 to 250 letters, digits, '_' or '-'"
        ))),
    }
}

/// Checks an alias name (without `alias/`): AWS's characters, and not
/// `aws/` (reserved for the keys the cluster makes).
pub fn check_alias(alias: &str) -> Result<(), KmsError> {
    let ok = !alias.is_empty()
        && alias.len() <= 250
        && alias
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_-".contains(c));
    if !ok {
        return Err(KmsError::Invalid(format!(
            "alias {alias:?}: 1 to 250 letters, digits, '/', '_' or '-'"
        )));
    }
    if alias.starts_with("aws/") {
        return Err(KmsError::Invalid(format!(
            "alias {alias:?}: names starting with aws/ are reserved"
        )));
    }
    Ok(())
}

impl Kms {
    pub fn new(
        table: Arc<Table<KmsKeyTable>>,
        rpc_secret: &str,
        legacy: Option<[u8; 32]>,
    ) -> Arc<Self> {
        Arc::new(Self {
            table,
            kek: key_encryption_key(rpc_secret),
            legacy,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Every key, SSE-S3's included.
    pub async fn list(&self) -> Result<Vec<KmsKey>, KmsError> {
        Ok(self
            .table
            .get_range(&EmptyKey, None, Some(KmsKeyFilter::All), 10_000, false)
            .await?)
    }

    /// The key a request names (id, alias, or an ARN of either).
    pub async fn find(&self, name: &str) -> Result<KmsKey, KmsError> {
        match parse_name(name) {
            Name::Id(id) => self
                .table
                .get(&EmptyKey, &id.to_string())
                .await?
                .ok_or_else(|| KmsError::NotFound(name.to_string())),
            Name::Alias(a) => self
                .by_alias(a)
                .await?
                .ok_or_else(|| KmsError::NotFound(name.to_string())),
        }
    }

    /// The key holding `alias`; if two nodes set it on two keys at once,
    /// the later stamp holds it.
    async fn by_alias(&self, alias: &str) -> Result<Option<KmsKey>, KmsError> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .filter_map(|k| Some((k.alias_stamp(alias)?, k)))
            .max_by(|(ta, a), (tb, b)| (ta, &a.id).cmp(&(tb, &b.id)))
            .map(|(_, k)| k))
    }

    /// A new key with its first material version, and `alias` if given.
    pub async fn create(&self, description: &str, alias: Option<&str>) -> Result<KmsKey, KmsError> {
        self.create_with(description, alias, None, None).await
    }

    /// A new key: with id `id` chosen by the operator (a configuration
    /// carried from Ceph or Vault names its keys) or a new one, and with
    /// `material` (the 32 bytes of an existing AES-256 key, imported) or
    /// new material; `alias` if given.
    pub async fn create_with(
        &self,
        description: &str,
        alias: Option<&str>,
        id: Option<&str>,
        material: Option<[u8; 32]>,
    ) -> Result<KmsKey, KmsError> {
        if let Some(a) = alias {
            check_alias(a)?;
            self.alias_is_free(a).await?;
        }
        let id = match id {
            Some(id) => {
                check_key_id(id)?;
                let existing = self.table.get(&EmptyKey, &id.to_string()).await?;
                if existing.is_some() {
                    return Err(KmsError::AlreadyExists(format!("a KMS key {id} exists")));
                }
                id.to_string()
            }
            None => new_key_id(),
        };
        let k = KmsKey::new(id, description.to_string(), garage_util::time::now_msec());
        self.write_with_material(k, alias, material).await
    }

    async fn alias_is_free(&self, alias: &str) -> Result<(), KmsError> {
        match self.by_alias(alias).await? {
            Some(k) => Err(KmsError::AlreadyExists(format!(
                "alias/{alias} already names key {}",
                k.id
            ))),
            None => Ok(()),
        }
    }

    /// Writes `k` with `alias` set and a material version: `material`,
    /// or new material.
    async fn write_with_material(
        &self,
        mut k: KmsKey,
        alias: Option<&str>,
        material: Option<[u8; 32]>,
    ) -> Result<KmsKey, KmsError> {
        if let Some(a) = alias {
            k.aliases.update(a.to_string(), true);
        }
        match material {
            Some(m) => self.add_given_material(&mut k, m),
            None => self.add_material(&mut k),
        }
        self.table.insert(&k).await?;
        Ok(k)
    }

    /// Adds a material version, stamped after every existing one.
    fn add_material(&self, k: &mut KmsKey) {
        let material: [u8; 32] = Aes256Gcm::generate_key(&mut OsRng).into();
        self.add_given_material(k, material)
    }

    /// Adds `material` as a version, stamped after every existing one.
    fn add_given_material(&self, k: &mut KmsKey, material: [u8; 32]) {
        let version = gen_uuid();
        let m = Material {
            created: k.next_material_stamp(),
            sealed: seal(&self.kek, &material, &material_aad(&k.id, &version)),
        };
        k.materials.put(version, m);
        self.cache.lock().unwrap().insert(version, material);
    }

    /// Makes a new material version of key `name` current; the earlier
    /// ones still open what they wrapped.
    pub async fn rotate(&self, name: &str) -> Result<KmsKey, KmsError> {
        let mut k = self.find(name).await?;
        self.add_material(&mut k);
        self.table.insert(&k).await?;
        Ok(k)
    }

    /// Changes a key's description, state or aliases.
    pub async fn update(
        &self,
        name: &str,
        description: Option<String>,
        enabled: Option<bool>,
        add_alias: Option<&str>,
        remove_alias: Option<&str>,
    ) -> Result<KmsKey, KmsError> {
        let mut k = self.find(name).await?;
        if k.id == SSE_S3_KEY_ID && enabled == Some(false) {
            return Err(KmsError::Invalid(
                "SSE-S3's key cannot be disabled: every SSE-S3 object would become unreadable"
                    .into(),
            ));
        }
        if let Some(d) = description {
            k.description.update(d);
        }
        if let Some(e) = enabled {
            k.enabled.update(e);
        }
        if let Some(a) = add_alias {
            check_alias(a)?;
            if k.alias_stamp(a).is_none() {
                self.alias_is_free(a).await?;
                k.aliases.update(a.to_string(), true);
            }
        }
        if let Some(a) = remove_alias {
            if k.alias_stamp(a).is_none() {
                return Err(KmsError::NotFound(format!("alias/{a} on key {}", k.id)));
            }
            k.aliases.update(a.to_string(), false);
        }
        self.table.insert(&k).await?;
        Ok(k)
    }

    /// The key a data key is wrapped with, made (with its first material)
    /// if it does not exist yet.
    async fn wrapping_key(&self, which: KeyName<'_>) -> Result<KmsKey, KmsError> {
        match which {
            KeyName::SseS3 => self.ensure(SSE_S3_KEY_ID, None).await,
            KeyName::Kms(Some(name)) => self.find(name).await,
            KeyName::Kms(None) => match self.by_alias(DEFAULT_KMS_ALIAS).await? {
                Some(k) => Ok(k),
                None => {
                    // A fixed id: two nodes making it at once make one key.
                    self.ensure("aws-s3-default", Some(DEFAULT_KMS_ALIAS)).await
                }
            },
        }
    }

    /// Key `id`, made if missing (or without material). Two nodes doing it
    /// at once each add a version; both are kept.
    pub async fn ensure(&self, id: &str, alias: Option<&str>) -> Result<KmsKey, KmsError> {
        let found = self.table.get(&EmptyKey, &id.to_string()).await?;
        if let Some(k) = &found {
            if !k.materials.is_empty() {
                return Ok(k.clone());
            }
        }
        let description = match id {
            SSE_S3_KEY_ID => "SSE-S3 (made by the cluster)",
            _ => "default SSE-KMS key (made by the cluster)",
        };
        let k = found.unwrap_or_else(|| {
            KmsKey::new(
                id.to_string(),
                description.to_string(),
                garage_util::time::now_msec(),
            )
        });
        let k = self.write_with_material(k, alias, None).await?;
        tracing::info!(key = %id, "made KMS key");
        Ok(k)
    }

    /// Makes SSE-S3's key once this node has a role in an applied layout,
    /// so that the first SSE-S3 write pays no extra round. The node with
    /// the lowest id does it at once, the others 30 s later if it is
    /// still missing (a write needing the key first makes it anyway; if
    /// several nodes make it at once, each adds a version and all are
    /// kept). Returns when the key exists or at `exit`.
    pub async fn make_sse_s3_key_at_first_layout(
        self: Arc<Self>,
        system: Arc<garage_rpc::system::System>,
        mut exit: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut waited = std::time::Duration::ZERO;
        let step = std::time::Duration::from_secs(3);
        while !*exit.borrow() {
            let layout = system.layout();
            let v = layout.current();
            let first = v.roles.keys().next() == Some(&system.id());
            let due = first || waited >= std::time::Duration::from_secs(30);
            if v.version > 0 && v.roles.contains_key(&system.id()) && due {
                match self.ensure(SSE_S3_KEY_ID, None).await {
                    Ok(_) => return,
                    Err(e) => tracing::warn!("cannot make SSE-S3's key yet: {e}"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(step) => waited += step,
                _ = exit.changed() => (),
            }
        }
    }

    /// The material of version `version` of `k`, unsealed (cached).
    fn material(&self, k: &KmsKey, version: &Uuid) -> Result<Option<[u8; 32]>, KmsError> {
        if let Some(m) = self.cache.lock().unwrap().get(version) {
            return Ok(Some(*m));
        }
        let Some(m) = k.materials.get(version) else {
            return Ok(None);
        };
        let plain =
            open32(&self.kek, &m.sealed, &material_aad(&k.id, version)).ok_or_else(|| {
                KmsError::Internal(format!(
                    "the material of KMS key {} does not open with this node's rpc_secret \
                     (was rpc_secret changed?)",
                    k.id
                ))
            })?;
        self.cache.lock().unwrap().insert(*version, plain);
        Ok(Some(plain))
    }

    /// A new data key wrapped by `which`, bound to `context` (empty for
    /// none).
    pub async fn new_data_key(
        &self,
        which: KeyName<'_>,
        context: &[u8],
    ) -> Result<DataKey, KmsError> {
        let k = self.wrapping_key(which).await?;
        if !k.is_enabled() {
            return Err(KmsError::Disabled(k.id));
        }
        let (version, _) = k
            .current_material()
            .ok_or_else(|| KmsError::Internal(format!("KMS key {} has no material", k.id)))?;
        let version = *version;
        let material = self
            .material(&k, &version)?
            .expect("the current material is in the key");
        let key: [u8; 32] = Aes256Gcm::generate_key(&mut OsRng).into();
        let sealed = seal(&material, &key, context);
        let b64 = base64::engine::general_purpose::STANDARD.encode(sealed);
        Ok(DataKey {
            key,
            stored: format!("{STORED_V1}{};{};{b64}", k.id, hex::encode(version)),
            key_id: k.id,
        })
    }

    /// The id of the key a stored data key names (none for a legacy one).
    pub fn key_id_of(stored: &str) -> Option<&str> {
        stored.strip_prefix(STORED_V1)?.split(';').next()
    }

    /// Unwraps a stored data key; `context` must be the one it was made
    /// with.
    pub async fn open_data_key(&self, stored: &str, context: &[u8]) -> Result<[u8; 32], KmsError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let Some(rest) = stored.strip_prefix(STORED_V1) else {
            let legacy = self.legacy.as_ref().ok_or_else(|| {
                KmsError::Internal(
                    "the object's data key was wrapped by an sse_master_key, and this node has \
                     none configured"
                        .into(),
                )
            })?;
            let sealed = b64
                .decode(stored)
                .map_err(|_| KmsError::Internal("corrupt stored data key".into()))?;
            return open32(legacy, &sealed, b"").ok_or_else(|| {
                KmsError::Internal(
                    "the object's data key does not open with this node's sse_master_key \
                     (was it changed?)"
                        .into(),
                )
            });
        };
        let corrupt = || KmsError::Internal("corrupt stored data key".into());
        let mut parts = rest.split(';');
        let (Some(id), Some(version), Some(sealed), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(corrupt());
        };
        let version = hex::decode(version)
            .ok()
            .and_then(|v| Uuid::try_from_slice(&v))
            .ok_or_else(corrupt)?;
        let sealed = b64.decode(sealed).map_err(|_| corrupt())?;
        let id = id.to_string();
        let mut k = self
            .table
            .get(&EmptyKey, &id)
            .await?
            .ok_or_else(|| KmsError::NotFound(id.clone()))?;
        if !k.is_enabled() {
            return Err(KmsError::Disabled(id));
        }
        let material = match self.material(&k, &version)? {
            Some(m) => m,
            None => {
                // Made on another node, not here yet: ask a quorum.
                if let Some(q) = self.table.get_quorum(&EmptyKey, &id).await? {
                    k = q;
                }
                self.material(&k, &version)?.ok_or_else(|| {
                    KmsError::Internal(format!(
                        "KMS key {id} has no material version {}",
                        hex::encode(version)
                    ))
                })?
            }
        };
        open32(&material, &sealed, context).ok_or(KmsError::InvalidCiphertext(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_ids_aliases_or_arns() {
        assert_eq!(parse_name("1234"), Name::Id("1234"));
        assert_eq!(parse_name("alias/photos"), Name::Alias("photos"));
        assert_eq!(
            parse_name("arn:aws:kms:garage:123456789012:key/1234-ab"),
            Name::Id("1234-ab")
        );
        assert_eq!(
            parse_name("arn:aws:kms:garage:123456789012:alias/a/b"),
            Name::Alias("a/b")
        );
        assert!(check_alias("photos/2026_x-y").is_ok());
        assert!(check_alias("aws/s3").is_err());
        assert!(check_alias("").is_err() && check_alias("a b").is_err());
        let id = new_key_id();
        assert!(check_key_id(&id).is_ok());
        assert!(check_key_id("my-app-key").is_ok());
        assert!(check_key_id("a/b").is_err() && check_key_id("").is_err());
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
    }

    #[test]
    fn sealing_binds_the_associated_data() {
        let kek = key_encryption_key(&"ab".repeat(32));
        assert_ne!(kek, key_encryption_key(&"cd".repeat(32)));
        let plain = [7u8; 32];
        let s = seal(&kek, &plain, b"ctx");
        assert_eq!(open32(&kek, &s, b"ctx"), Some(plain));
        assert_eq!(open32(&kek, &s, b"other"), None);
        assert_eq!(open32(&key_encryption_key("00"), &s, b"ctx"), None);
        let mut bad = s.clone();
        bad[20] ^= 1;
        assert_eq!(open32(&kek, &bad, b"ctx"), None);
        assert_eq!(Kms::key_id_of("v1;abc;00;xx"), Some("abc"));
        // Earlier releases sealed SSE-S3 data keys with sse_master_key and
        // no associated data: the same as empty associated data.
        let master = [9u8; 32];
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let mut legacy = nonce.to_vec();
        legacy.extend(
            Aes256Gcm::new((&master).into())
                .encrypt(&nonce, &plain[..])
                .unwrap(),
        );
        assert_eq!(open32(&master, &legacy, b""), Some(plain));
        assert_eq!(Kms::key_id_of("legacybase64"), None);
    }
}
