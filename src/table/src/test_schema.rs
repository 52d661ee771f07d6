//! A small table for the unit tests of this crate: string partition and
//! sort keys, an LWW value, and a tombstone flag.

use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};

use crate::schema::{Entry, TableSchema};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestEntry {
    pub p: String,
    pub s: String,
    /// `None`: deleted.
    pub value: Lww<Option<String>>,
}

impl TestEntry {
    pub fn new(p: &str, s: &str, value: &str) -> Self {
        Self::raw(p, s, 1, Some(value))
    }

    pub fn raw(p: &str, s: &str, ts: u64, value: Option<&str>) -> Self {
        Self {
            p: p.into(),
            s: s.into(),
            value: Lww::raw(ts, value.map(String::from)),
        }
    }
}

impl Crdt for TestEntry {
    fn merge(&mut self, other: &Self) {
        self.value.merge(&other.value);
    }
}

impl Entry<String, String> for TestEntry {
    fn partition_key(&self) -> &String {
        &self.p
    }
    fn sort_key(&self) -> &String {
        &self.s
    }
    fn is_tombstone(&self) -> bool {
        self.value.get().is_none()
    }
}

pub struct TestTable;

impl TableSchema for TestTable {
    const TABLE_NAME: &'static str = "test";
    type P = String;
    type S = String;
    type E = TestEntry;
    type Filter = ();
    fn matches_filter(_: &TestEntry, _: &()) -> bool {
        true
    }
}

pub fn temp_db() -> (tempfile::TempDir, garage_db::Db) {
    let dir = tempfile::tempdir().unwrap();
    let engine = garage_db::Engine::Lmdb;
    let db = garage_db::open(
        engine,
        &engine.db_path(dir.path()),
        &garage_db::OpenOptions::default(),
    )
    .unwrap();
    (dir, db)
}
