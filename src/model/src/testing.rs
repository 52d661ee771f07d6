//! Shared checks for this crate's tests.

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
}

/// A fresh database of `engine` in a temporary directory (kept alive by
/// the returned guard).
pub fn temp_db_of(engine: garage_db::Engine) -> (tempfile::TempDir, garage_db::Db) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = garage_db::open(
        engine,
        &engine.db_path(dir.path()),
        &garage_db::OpenOptions::default(),
    )
    .expect("open test database");
    (dir, db)
}

/// The entries queued for insertion into table `F` (see
/// [`garage_table::InsertQueue`]).
pub fn queued_in<F: garage_table::TableSchema>(db: &garage_db::Db) -> Vec<F::E> {
    db.open_tree(&garage_table::queue::queue_tree_name(F::TABLE_NAME))
        .expect("queue tree")
        .iter()
        .map(|kv| garage_table::encoding::decode(&kv.expect("queue item").1).expect("decode"))
        .collect()
}
