//! Access keys: id `GK` + 24 hex digits, a 64-hex-digit secret, a name, and
//! the buckets they may use. One partition holds them all (partition key
//! [`EmptyKey`], sort key the key id), so `garage key list` is one range
//! read; access keys are few.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Crdt, Deletable, Lww, LwwMap};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::permission::BucketKeyPerm;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub key_id: String,
    pub state: Deletable<KeyParams>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyParams {
    /// Set at creation (or import); merge keeps the larger for determinism.
    pub secret_key: String,
    pub name: Lww<String>,
    pub allow_create_bucket: Lww<bool>,
    pub authorized_buckets: LwwMap<Uuid, BucketKeyPerm>,
    /// Bucket names private to this key (`None`: alias removed).
    pub local_aliases: LwwMap<String, Option<Uuid>>,
}

impl Crdt for KeyParams {
    fn merge(&mut self, other: &Self) {
        if other.secret_key > self.secret_key {
            self.secret_key = other.secret_key.clone();
        }
        self.name.merge(&other.name);
        self.allow_create_bucket.merge(&other.allow_create_bucket);
        self.authorized_buckets.merge(&other.authorized_buckets);
        self.local_aliases.merge(&other.local_aliases);
    }
}

/// Why a key id or secret given by an operator is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("invalid access key id {0:?}: expected GK followed by 24 hexadecimal digits")]
    BadId(String),
    #[error("invalid secret key: expected 64 hexadecimal digits")]
    BadSecret,
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.chars().all(|c| c.is_ascii_hexdigit())
}

impl Key {
    /// A new key with a random id and secret.
    pub fn new(name: &str) -> Self {
        let id: [u8; 12] = rand::random();
        let secret: [u8; 32] = rand::random();
        Self::with_secret(format!("GK{}", hex::encode(id)), hex::encode(secret), name)
    }

    /// A key with a given id and secret (`garage key import`).
    pub fn import(key_id: &str, secret_key: &str, name: &str) -> Result<Self, KeyFormatError> {
        match key_id.strip_prefix("GK") {
            Some(h) if is_hex(h, 24) => (),
            _ => return Err(KeyFormatError::BadId(key_id.to_string())),
        }
        if !is_hex(secret_key, 64) {
            return Err(KeyFormatError::BadSecret);
        }
        Ok(Self::with_secret(key_id.into(), secret_key.into(), name))
    }

    /// The key IAM makes for user `user` (its id and secret already
    /// drawn, see `iam::Iam::create_access_key`).
    pub fn for_user(key_id: &str, secret_key: &str, user: &str) -> Self {
        Self::with_secret(key_id.into(), secret_key.into(), user)
    }

    fn with_secret(key_id: String, secret_key: String, name: &str) -> Self {
        Self {
            key_id,
            state: Deletable::Present(KeyParams {
                secret_key,
                name: Lww::new(name.to_string()),
                allow_create_bucket: Lww::new(false),
                authorized_buckets: LwwMap::new(),
                local_aliases: LwwMap::new(),
            }),
        }
    }

    /// The tombstone of `key_id`.
    pub fn deleted(key_id: &str) -> Self {
        Self {
            key_id: key_id.to_string(),
            state: Deletable::Deleted,
        }
    }

    pub fn params(&self) -> Option<&KeyParams> {
        self.state.get()
    }

    pub fn params_mut(&mut self) -> Option<&mut KeyParams> {
        self.state.get_mut()
    }

    pub fn name(&self) -> &str {
        self.params().map(|p| p.name.get().as_str()).unwrap_or("")
    }

    /// This key's permissions on `bucket`.
    pub fn bucket_permissions(&self, bucket: &Uuid) -> BucketKeyPerm {
        self.params()
            .and_then(|p| p.authorized_buckets.get(bucket).copied())
            .unwrap_or(BucketKeyPerm::NONE)
    }
}

impl Crdt for Key {
    fn merge(&mut self, other: &Self) {
        self.state.merge(&other.state);
    }
}

impl Entry<EmptyKey, String> for Key {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &String {
        &self.key_id
    }
    fn is_tombstone(&self) -> bool {
        self.state.is_deleted()
    }
}

/// Which keys a range read returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum KeyFilter {
    /// Keys whose id starts with, or whose name equals, this string.
    Matches(String),
}

pub struct KeyTable;

impl TableSchema for KeyTable {
    const TABLE_NAME: &'static str = "key";
    /// Read by every request: every node holds it and reads it locally.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = Key;
    type Filter = KeyFilter;

    fn matches_filter(entry: &Key, filter: &KeyFilter) -> bool {
        match filter {
            KeyFilter::Matches(pat) => {
                entry.key_id.starts_with(pat.as_str()) || entry.name() == pat
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::check_laws;

    fn key() -> impl Strategy<Value = Key> {
        (
            0u8..2,
            0u64..4,
            0u64..4,
            proptest::collection::vec((0u8..3, 0u64..3, any::<bool>()), 0..3),
        )
            .prop_map(|(del, ts_name, secret, buckets)| {
                if del == 0 {
                    return Key::deleted("GK1");
                }
                let mut auth = LwwMap::new();
                for (b, ts, r) in buckets {
                    auth.merge_raw(
                        Uuid::from([b; 32]),
                        ts,
                        BucketKeyPerm {
                            allow_read: r,
                            ..BucketKeyPerm::NONE
                        },
                    );
                }
                Key {
                    key_id: "GK1".into(),
                    state: Deletable::Present(KeyParams {
                        secret_key: format!("{secret}"),
                        name: Lww::raw(ts_name, format!("n{ts_name}")),
                        allow_create_bucket: Lww::raw(ts_name, ts_name % 2 == 0),
                        authorized_buckets: auth,
                        local_aliases: LwwMap::new(),
                    }),
                }
            })
    }

    proptest! {
        #[test]
        fn key_merge_laws(a in key(), b in key(), c in key()) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn generated_and_imported_keys_have_the_reference_format() {
        let k = Key::new("photos");
        assert!(k.key_id.starts_with("GK") && k.key_id.len() == 26);
        assert_eq!(k.params().unwrap().secret_key.len(), 64);
        assert_eq!(k.name(), "photos");
        let secret = k.params().unwrap().secret_key.clone();
        assert!(Key::import(&k.key_id, &secret, "x").is_ok());
        assert_eq!(
            Key::import("AKIA123", &secret, "x"),
            Err(KeyFormatError::BadId("AKIA123".into()))
        );
        assert_eq!(
            Key::import(&k.key_id, "short", "x"),
            Err(KeyFormatError::BadSecret)
        );
    }
}
