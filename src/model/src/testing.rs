//! Shared checks and fixtures for this crate's tests.

use garage_db::{Db, Engine, OpenOptions};
use garage_table::queue::queue_tree_name;
use garage_table::TableSchema;
use garage_util::crdt::Crdt;

fn merged<T: Crdt + Clone>(a: &T, b: &T) -> T {
    let mut x = a.clone();
    x.merge(b);
    x
}

/// Merge must be commutative, associative and idempotent.
pub fn check_laws<T: Crdt + Clone + PartialEq + std::fmt::Debug>(a: &T, b: &T, c: &T) {
    assert_eq!(merged(a, b), merged(b, a), "commutative");
    assert_eq!(
        merged(&merged(a, b), c),
        merged(a, &merged(b, c)),
        "associative"
    );
    assert_eq!(merged(a, a), *a, "idempotent");
    assert_eq!(
        merged(&merged(a, b), b),
        merged(a, b),
        "idempotent after merge"
    );
}

/// A fresh database of `engine` in a temporary directory (kept alive by
/// the returned guard).
pub fn temp_db(engine: Engine) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = garage_db::open(engine, &engine.db_path(dir.path()), &OpenOptions::default())
        .expect("open test database");
    (dir, db)
}

/// The entries queued for insertion into table `F` (see
/// [`garage_table::InsertQueue`]), in queue order.
pub fn queued<F: TableSchema>(db: &Db) -> Vec<F::E> {
    let tree = db
        .open_tree(&queue_tree_name(F::TABLE_NAME))
        .expect("queue tree");
    tree.iter()
        .map(|kv| garage_table::encoding::decode(&kv.expect("queue item").1).expect("decode"))
        .collect()
}

/// Empties the insert queue of table `F`.
pub fn clear_queue<F: TableSchema>(db: &Db) {
    db.open_tree(&queue_tree_name(F::TABLE_NAME))
        .expect("queue tree")
        .clear()
        .expect("clear queue");
}
