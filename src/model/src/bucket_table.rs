//! Buckets, by id (a random 32-byte id; names are aliases, see
//! `bucket_alias_table`). One partition holds them all (partition key
//! [`EmptyKey`], sort key the id), so listing buckets is one range read.

use garage_table::{EmptyKey, Entry, TableSchema};
use garage_util::crdt::{Crdt, Deletable, Lww, LwwMap};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::permission::BucketKeyPerm;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub id: Uuid,
    pub state: Deletable<BucketParams>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketParams {
    /// Milliseconds since the epoch.
    pub creation_date: u64,
    /// Keys that may use the bucket.
    pub authorized_keys: LwwMap<String, BucketKeyPerm>,
    /// Global names (`true`: present).
    pub aliases: LwwMap<String, bool>,
    /// Names in one key's namespace: (key id, name).
    pub local_aliases: LwwMap<(String, String), bool>,
    pub website_config: Lww<Option<WebsiteConfig>>,
    pub cors_config: Lww<Option<Vec<CorsRule>>>,
    pub quotas: Lww<BucketQuotas>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WebsiteConfig {
    pub index_document: String,
    pub error_document: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CorsRule {
    pub id: Option<String>,
    pub max_age_seconds: Option<u64>,
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketQuotas {
    pub max_size: Option<u64>,
    pub max_objects: Option<u64>,
}

impl Crdt for BucketParams {
    fn merge(&mut self, other: &Self) {
        self.creation_date = self.creation_date.min(other.creation_date);
        self.authorized_keys.merge(&other.authorized_keys);
        self.aliases.merge(&other.aliases);
        self.local_aliases.merge(&other.local_aliases);
        self.website_config.merge(&other.website_config);
        self.cors_config.merge(&other.cors_config);
        self.quotas.merge(&other.quotas);
    }
}

impl Bucket {
    pub fn new(id: Uuid) -> Self {
        Self {
            id,
            state: Deletable::Present(BucketParams {
                creation_date: garage_util::time::now_msec(),
                authorized_keys: LwwMap::new(),
                aliases: LwwMap::new(),
                local_aliases: LwwMap::new(),
                website_config: Lww::new(None),
                cors_config: Lww::new(None),
                quotas: Lww::new(BucketQuotas::default()),
            }),
        }
    }

    pub fn deleted(id: Uuid) -> Self {
        Self {
            id,
            state: Deletable::Deleted,
        }
    }

    pub fn params(&self) -> Option<&BucketParams> {
        self.state.get()
    }

    pub fn params_mut(&mut self) -> Option<&mut BucketParams> {
        self.state.get_mut()
    }

    /// The global names of the bucket.
    pub fn global_aliases(&self) -> Vec<String> {
        self.params()
            .map(|p| {
                p.aliases
                    .items()
                    .filter(|(_, _, on)| **on)
                    .map(|(n, _, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// (key id, name) of the bucket's local aliases.
    pub fn local_aliases(&self) -> Vec<(String, String)> {
        self.params()
            .map(|p| {
                p.local_aliases
                    .items()
                    .filter(|(_, _, on)| **on)
                    .map(|(n, _, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Crdt for Bucket {
    fn merge(&mut self, other: &Self) {
        self.state.merge(&other.state);
    }
}

impl Entry<EmptyKey, Uuid> for Bucket {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &Uuid {
        &self.id
    }
    fn is_tombstone(&self) -> bool {
        self.state.is_deleted()
    }
}

pub struct BucketTable;

impl TableSchema for BucketTable {
    const TABLE_NAME: &'static str = "bucket";
    type P = EmptyKey;
    type S = Uuid;
    type E = Bucket;
    type Filter = ();

    fn matches_filter(_: &Bucket, _: &()) -> bool {
        true
    }
}

/// Checks a bucket name against S3's rules (3-63 characters: lowercase
/// letters, digits, `-` and `.`; starting and ending with a letter or digit;
/// not an IP address).
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&name.len())
        || !ok_chars
        || !ends_ok(name.chars().next())
        || !ends_ok(name.chars().last())
        || name.contains("..")
        || name.parse::<std::net::Ipv4Addr>().is_ok()
    {
        return Err(format!(
            "invalid bucket name {name:?}: use 3 to 63 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::check_laws;

    fn bucket() -> impl Strategy<Value = Bucket> {
        (
            0u8..3,
            0u64..4,
            proptest::collection::vec((0u8..3, 0u64..3, any::<bool>()), 0..3),
            0u64..3,
        )
            .prop_map(|(kind, date, aliases, qts)| {
                let id = Uuid::from([1; 32]);
                if kind == 0 {
                    return Bucket::deleted(id);
                }
                let mut b = Bucket::new(id);
                let p = b.params_mut().unwrap();
                p.creation_date = date;
                for (n, ts, on) in aliases {
                    p.aliases.merge_raw(format!("b{n}"), ts, on);
                }
                p.quotas = Lww::raw(
                    qts,
                    BucketQuotas {
                        max_size: Some(qts),
                        max_objects: None,
                    },
                );
                p.website_config = Lww::raw(0, None);
                p.cors_config = Lww::raw(0, None);
                b
            })
    }

    proptest! {
        #[test]
        fn bucket_merge_laws(a in bucket(), b in bucket(), c in bucket()) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn bucket_names_follow_s3_rules() {
        for ok in ["abc", "my-bucket.2", "0ab"] {
            assert!(check_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "192.168.1.1",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(bad).is_err(), "{bad}");
        }
    }
}
