//! End to end: `garage convert-db` between the two engines, checked tree by
//! tree.

use crate::common;

use common::{garage, stderr, stdout};
use garage_db::{open, Db, Engine, OpenOptions};

fn fill(db: &Db) {
    for (t, n) in [
        ("object", 3000u32),
        ("version", 700),
        ("block_ref", 1),
        ("empty", 0),
    ] {
        let tree = db.open_tree(t).unwrap();
        for i in 0..n {
            let key = format!("{t}/{i:06}").into_bytes();
            let value: Vec<u8> = (0..(i % 300)).map(|b| (b as u8) ^ (i as u8)).collect();
            tree.insert(key, value).unwrap();
        }
    }
}

fn assert_same(a: &Db, b: &Db) {
    let trees = a.list_trees().unwrap();
    assert_eq!(trees, b.list_trees().unwrap());
    for t in trees {
        let x: Vec<_> = a
            .open_tree(&t)
            .unwrap()
            .iter()
            .map(Result::unwrap)
            .collect();
        let y: Vec<_> = b
            .open_tree(&t)
            .unwrap()
            .iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(x.len(), y.len(), "tree {t}");
        assert!(x == y, "tree {t} differs");
    }
}

fn reopen(engine: Engine, path: &std::path::Path) -> Db {
    open(
        engine,
        path,
        &OpenOptions {
            create: false,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn lmdb_to_sqlite_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let lmdb = dir.path().join("db.lmdb");
    let sqlite = dir.path().join("db.sqlite");
    let back = dir.path().join("back.lmdb");
    {
        let db = open(Engine::Lmdb, &lmdb, &OpenOptions::default()).unwrap();
        fill(&db);
    }
    let o = garage(
        dir.path(),
        &[
            "convert-db",
            "-a",
            "lmdb",
            "-i",
            lmdb.to_str().unwrap(),
            "-b",
            "sqlite",
            "-o",
            sqlite.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("4 trees, 3701 entries"),
        "{}",
        stdout(&o)
    );
    let o = garage(
        dir.path(),
        &[
            "convert-db",
            "-a",
            "sqlite",
            "-i",
            sqlite.to_str().unwrap(),
            "-b",
            "lmdb",
            "-o",
            back.to_str().unwrap(),
            "--lmdb-map-size",
            "1GiB",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));

    let original = reopen(Engine::Lmdb, &lmdb);
    assert_same(&original, &reopen(Engine::Sqlite, &sqlite));
    assert_same(&original, &reopen(Engine::Lmdb, &back));
}

#[test]
fn bad_invocations_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let lmdb = dir.path().join("db.lmdb");
    {
        let db = open(Engine::Lmdb, &lmdb, &OpenOptions::default()).unwrap();
        fill(&db);
    }
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();

    let o = garage(
        dir.path(),
        &[
            "convert-db",
            "-a",
            "lmdb",
            "-i",
            &p("nope.lmdb"),
            "-b",
            "sqlite",
            "-o",
            &p("x.sqlite"),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no lmdb database at"), "{}", stderr(&o));
    assert!(!dir.path().join("x.sqlite").exists());

    let o = garage(
        dir.path(),
        &[
            "convert-db",
            "-a",
            "postgres",
            "-i",
            &p("db.lmdb"),
            "-b",
            "sqlite",
            "-o",
            &p("x.sqlite"),
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("-a") && stderr(&o).contains("postgres"),
        "{}",
        stderr(&o)
    );

    std::fs::write(dir.path().join("exists.sqlite"), b"").unwrap();
    let o = garage(
        dir.path(),
        &[
            "convert-db",
            "-a",
            "lmdb",
            "-i",
            &p("db.lmdb"),
            "-b",
            "sqlite",
            "-o",
            &p("exists.sqlite"),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
}
