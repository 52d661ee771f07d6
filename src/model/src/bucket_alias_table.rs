//! Global bucket names: name -> bucket id (`None` once the alias is
//! removed). One partition holds them all, sorted by name.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Crdt, Lww};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketAlias {
    pub name: String,
    pub state: Lww<Option<Uuid>>,
}

impl BucketAlias {
    pub fn new(name: &str, bucket: Option<Uuid>) -> Self {
        Self {
            name: name.to_string(),
            state: Lww::new(bucket),
        }
    }

    pub fn bucket(&self) -> Option<Uuid> {
        *self.state.get()
    }
}

impl Crdt for BucketAlias {
    fn merge(&mut self, other: &Self) {
        self.state.merge(&other.state);
    }
}

/// A removed alias is kept (not a tombstone): the name may be taken again
/// later with a newer timestamp, and the removal must keep winning over
/// older writes meanwhile.
impl Entry<EmptyKey, String> for BucketAlias {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &String {
        &self.name
    }
}

pub struct BucketAliasTable;

impl TableSchema for BucketAliasTable {
    const TABLE_NAME: &'static str = "bucket_alias";
    /// Read by every request: every node holds it and reads it locally.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = BucketAlias;
    type Filter = ();

    fn matches_filter(_: &BucketAlias, _: &()) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::check_laws;

    fn alias() -> impl Strategy<Value = BucketAlias> {
        (0u64..4, proptest::option::of(0u8..3)).prop_map(|(ts, b)| BucketAlias {
            name: "a".into(),
            state: Lww::raw(ts, b.map(|b| Uuid::from([b; 32]))),
        })
    }

    proptest! {
        #[test]
        fn alias_merge_laws(a in alias(), b in alias(), c in alias()) {
            check_laws(&a, &b, &c);
        }
    }
}
