//! The `kms_key` table: the cluster's encryption keys, for SSE-S3 and
//! SSE-KMS. One partition holds them all, replicated on every node like
//! the access keys, so that a key is found without a round trip.
//!
//! A key is never deleted (the objects it protects would be lost with it);
//! it can be disabled. Its material is a grow-only set of versions, each
//! sealed under the cluster's key-encryption key (see [`super::Kms`]):
//! rotating adds a version, and two nodes making a version at once (the
//! SSE-S3 key is made by whichever node first needs it) both keep theirs.
//! Data keys name the version that wraps them, so every version stays
//! usable for reading; the newest wraps new data keys.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Crdt, Lww, LwwMap, Map};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

/// The reserved id of the key that wraps SSE-S3 data keys.
pub const SSE_S3_KEY_ID: &str = "sse-s3";
/// The alias of the key SSE-KMS uses when a request names none (as
/// AWS's `aws/s3` managed key); made when first needed.
pub const DEFAULT_KMS_ALIAS: &str = "aws/s3";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KmsKey {
    /// A UUID in AWS's form (`1234abcd-12ab-34cd-56ef-1234567890ab`), or
    /// [`SSE_S3_KEY_ID`].
    pub id: String,
    /// Milliseconds since the epoch (merge keeps the earliest).
    pub created: u64,
    pub description: Lww<String>,
    /// Alias names (without `alias/`) and whether each is set.
    pub aliases: LwwMap<String, bool>,
    pub enabled: Lww<bool>,
    /// The versions of its material.
    pub materials: Map<Uuid, Material>,
}

/// One version of a key's material: 32 bytes sealed under the cluster's
/// key-encryption key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Material {
    /// Hybrid-clock stamp: the newest version wraps new data keys.
    pub created: u64,
    #[serde(with = "serde_bytes")]
    pub sealed: Vec<u8>,
}

impl Crdt for Material {
    fn merge(&mut self, other: &Self) {
        // A version is written once; keep one deterministically if two
        // ever differ.
        if *other > *self {
            *self = other.clone();
        }
    }
}

impl Crdt for KmsKey {
    fn merge(&mut self, other: &Self) {
        self.created = self.created.min(other.created);
        self.description.merge(&other.description);
        self.aliases.merge(&other.aliases);
        self.enabled.merge(&other.enabled);
        self.materials.merge(&other.materials);
    }
}

impl KmsKey {
    /// A key with no material yet (see [`super::Kms::create`]).
    pub fn new(id: String, description: String, now: u64) -> Self {
        Self {
            id,
            created: now,
            description: Lww::new(description),
            aliases: LwwMap::new(),
            enabled: Lww::new(true),
            materials: Map::new(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        *self.enabled.get()
    }

    /// Its alias names, sorted.
    pub fn aliases(&self) -> Vec<String> {
        self.aliases
            .items()
            .filter(|(_, _, set)| **set)
            .map(|(a, _, _)| a.clone())
            .collect()
    }

    /// When `alias` was last set on this key, if it is set.
    pub fn alias_stamp(&self, alias: &str) -> Option<u64> {
        self.aliases
            .items()
            .find(|(a, _, set)| a.as_str() == alias && **set)
            .map(|(_, ts, _)| ts)
    }

    /// The version new data keys are wrapped with: the latest stamp, the
    /// larger id on a tie.
    pub fn current_material(&self) -> Option<(&Uuid, &Material)> {
        self.materials
            .items()
            .max_by(|(ia, a), (ib, b)| (a.created, *ia).cmp(&(b.created, *ib)))
    }

    /// A stamp for a new version: after every existing one, whatever the
    /// wall clock says.
    pub fn next_material_stamp(&self) -> u64 {
        let after = self
            .materials
            .items()
            .map(|(_, m)| m.created)
            .max()
            .unwrap_or(0);
        garage_util::time::increment_after(after)
    }
}

impl Entry<EmptyKey, String> for KmsKey {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &String {
        &self.id
    }
    fn is_tombstone(&self) -> bool {
        false
    }
}

/// Which keys a range read returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum KmsKeyFilter {
    All,
}

pub struct KmsKeyTable;

impl TableSchema for KmsKeyTable {
    const TABLE_NAME: &'static str = "kms_key";
    /// Read by every encrypted read and write: every node holds it.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = KmsKey;
    type Filter = KmsKeyFilter;

    fn matches_filter(_entry: &KmsKey, filter: &KmsKeyFilter) -> bool {
        match filter {
            KmsKeyFilter::All => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;
    use garage_util::data::gen_uuid;

    fn material(created: u64, byte: u8) -> Material {
        Material {
            created,
            sealed: vec![byte; 60],
        }
    }

    #[test]
    fn materials_accumulate_and_the_newest_is_current() {
        let mut a = KmsKey::new("k".into(), "d".into(), 5);
        let (m1, m2, m3) = (gen_uuid(), gen_uuid(), gen_uuid());
        a.materials.put(m1, material(10, 1));
        let mut b = a.clone();
        let mut c = a.clone();
        // Two nodes make a version at once: both are kept.
        b.materials.put(m2, material(20, 2));
        c.materials.put(m3, material(30, 3));
        c.enabled.update(false);
        c.aliases.update("photos".into(), true);
        check_laws(&a, &b, &c);
        let mut all = b.clone();
        all.merge(&c);
        assert_eq!(all.materials.len(), 3);
        assert_eq!(all.current_material().unwrap().0, &m3);
        assert!(all.next_material_stamp() > 30);
        assert!(!all.is_enabled());
        assert_eq!(all.aliases(), vec!["photos".to_string()]);
        assert!(all.alias_stamp("photos").is_some() && all.alias_stamp("x").is_none());
    }

    #[test]
    fn a_rotation_is_current_even_from_a_clock_behind() {
        let mut k = KmsKey::new("k".into(), String::new(), 5);
        let far = garage_util::time::now_msec() + 3_600_000;
        k.materials.put(gen_uuid(), material(far, 1));
        let stamp = k.next_material_stamp();
        assert!(stamp > far);
        let m = gen_uuid();
        k.materials.put(m, material(stamp, 2));
        assert_eq!(k.current_material().unwrap().0, &m);
    }
}
