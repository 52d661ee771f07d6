//! One conformance suite, run unchanged against every engine: whatever a
//! table layer may rely on is checked here, on real database files.

use std::collections::BTreeMap;
use std::ops::Bound;

use garage_db::{open, Db, Engine, Error, OpenOptions, TxError, ITER_BATCH, MAX_KEY_LEN};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct TestDb {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    engine: Engine,
    db: Db,
}

thread_local! {
    /// Set by the `lmdb_write_map` flavour of the suite: LMDB opened with
    /// `lmdb_write_map` (each test runs on a thread of its own).
    static WRITE_MAP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The options every database of a test is opened with.
fn opts() -> OpenOptions {
    OpenOptions {
        lmdb_write_map: WRITE_MAP.get(),
        ..Default::default()
    }
}

fn new_db(engine: Engine) -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let path = engine.db_path(dir.path());
    let db = open(engine, &path, &opts()).unwrap();
    TestDb {
        _dir: dir,
        path,
        engine,
        db,
    }
}

fn collect(
    it: impl Iterator<Item = garage_db::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<garage_db::Result<Vec<_>>>().unwrap()
}

fn keys(it: impl Iterator<Item = garage_db::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<Vec<u8>> {
    collect(it).into_iter().map(|(k, _)| k).collect()
}

fn basic_ops(engine: Engine) {
    let t = new_db(engine);
    assert_eq!(t.db.engine(), engine);
    let tree = t.db.open_tree("objects").unwrap();
    assert_eq!(tree.name(), "objects");
    assert_eq!(tree.len().unwrap(), 0);
    assert!(tree.is_empty().unwrap());
    assert_eq!(tree.get(b"a").unwrap(), None);
    assert_eq!(tree.first().unwrap(), None);

    tree.insert(b"a", b"1").unwrap();
    tree.insert(b"b", b"2").unwrap();
    tree.insert(b"a", b"3").unwrap(); // overwrite
    assert_eq!(tree.get(b"a").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(tree.len().unwrap(), 2);
    assert!(!tree.is_empty().unwrap());

    // Empty values and large values are stored as they are.
    tree.insert(b"empty", b"").unwrap();
    assert_eq!(tree.get(b"empty").unwrap(), Some(vec![]));
    let big = vec![0xa5u8; 3 << 20];
    tree.insert(b"big", &big).unwrap();
    assert_eq!(tree.get(b"big").unwrap(), Some(big));

    tree.remove(b"a").unwrap();
    tree.remove(b"never-there").unwrap();
    assert_eq!(tree.get(b"a").unwrap(), None);
    assert_eq!(tree.len().unwrap(), 3);

    // Key limits are the same on every engine.
    assert!(matches!(tree.insert(b"", b"x"), Err(Error::EmptyKey)));
    let long = vec![b'k'; MAX_KEY_LEN];
    tree.insert(&long, b"longest").unwrap();
    assert_eq!(tree.get(&long).unwrap().as_deref(), Some(&b"longest"[..]));
    let too_long = vec![b'k'; MAX_KEY_LEN + 1];
    assert!(matches!(
        tree.insert(&too_long, b"x"),
        Err(Error::KeyTooLong { .. })
    ));

    tree.clear().unwrap();
    assert_eq!(tree.len().unwrap(), 0);
    assert!(t.db.open_tree("").is_err());
}

fn trees_are_separate_and_listed(engine: Engine) {
    let t = new_db(engine);
    let a = t.db.open_tree("a").unwrap();
    let b = t.db.open_tree("b:with:colons").unwrap();
    let c = t.db.open_tree("c \"quoted\"").unwrap();
    a.insert(b"k", b"in a").unwrap();
    b.insert(b"k", b"in b").unwrap();
    assert_eq!(a.get(b"k").unwrap().unwrap(), b"in a");
    assert_eq!(b.get(b"k").unwrap().unwrap(), b"in b");
    assert_eq!(c.get(b"k").unwrap(), None);
    // Opening again gives the same tree.
    let a2 = t.db.open_tree("a").unwrap();
    assert_eq!(a2.get(b"k").unwrap().unwrap(), b"in a");
    assert_eq!(
        t.db.list_trees().unwrap(),
        vec![
            "a".to_string(),
            "b:with:colons".into(),
            "c \"quoted\"".into()
        ]
    );
}

fn ordering_is_bytewise(engine: Engine) {
    let t = new_db(engine);
    let tree = t.db.open_tree("t").unwrap();
    let mut ks: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"ab".to_vec(),
        b"b".to_vec(),
        vec![0x00],
        vec![0x00, 0x00],
        vec![0x7f],
        vec![0x80],
        vec![0xff],
        vec![0xff, 0xff],
        b"A".to_vec(),
    ];
    for k in ks.iter() {
        tree.insert(k, k).unwrap();
    }
    ks.sort();
    assert_eq!(keys(tree.iter()), ks);
    let mut rev = ks.clone();
    rev.reverse();
    assert_eq!(keys(tree.iter_rev()), rev);
    assert_eq!(tree.first().unwrap().unwrap().0, vec![0x00]);
    assert_eq!(tree.last().unwrap().unwrap().0, vec![0xff, 0xff]);
    // Prefix scan as the table layer does it.
    assert_eq!(
        keys(tree.range(&b"a"[..]..&b"b"[..])),
        vec![b"a".to_vec(), b"a\0".to_vec(), b"ab".to_vec()]
    );
}

/// Random operations against a BTreeMap model, then every kind of range in
/// both directions, over more entries than one iteration batch.
fn matches_model(engine: Engine) {
    let t = new_db(engine);
    let tree = t.db.open_tree("model").unwrap();
    let mut model = BTreeMap::<Vec<u8>, Vec<u8>>::new();
    let mut rng = StdRng::seed_from_u64(0x006a_7a6e);
    let rand_key = |rng: &mut StdRng| {
        let len = rng.random_range(1..4);
        (0..len)
            .map(|_| {
                *[0u8, 1, 0x41, 0x42, 0x7f, 0x80, 0xfe, 0xff]
                    .get(rng.random_range(0..8))
                    .unwrap()
            })
            .collect::<Vec<u8>>()
    };
    for i in 0..3000u32 {
        let k = rand_key(&mut rng);
        if rng.random_bool(0.8) {
            let v = i.to_be_bytes().to_vec();
            tree.insert(&k, &v).unwrap();
            model.insert(k, v);
        } else {
            tree.remove(&k).unwrap();
            model.remove(&k);
        }
    }
    assert!(model.len() > ITER_BATCH, "model too small: {}", model.len());
    assert_eq!(tree.len().unwrap(), model.len());
    assert_eq!(
        collect(tree.iter()),
        model.clone().into_iter().collect::<Vec<_>>()
    );

    for _ in 0..300 {
        let a = rand_key(&mut rng);
        let b = rand_key(&mut rng);
        let bound = |rng: &mut StdRng, k: Vec<u8>| match rng.random_range(0..3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        };
        let low = bound(&mut rng, a);
        let high = bound(&mut rng, b);
        let valid = match (&low, &high) {
            (Bound::Included(l), Bound::Included(h)) => l <= h,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
                l < h
            }
            _ => true,
        };
        let expected: Vec<_> = if valid {
            model
                .range((low.clone(), high.clone()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            vec![]
        };
        let got = collect(tree.range((low.clone(), high.clone())));
        assert_eq!(got, expected, "range {low:?}..{high:?}");
        let mut expected_rev = expected;
        expected_rev.reverse();
        let got_rev = collect(tree.range_rev((low.clone(), high.clone())));
        assert_eq!(got_rev, expected_rev, "range_rev {low:?}..{high:?}");
    }
}

fn transactions_commit_atomically(engine: Engine) {
    let t = new_db(engine);
    let objects = t.db.open_tree("objects").unwrap();
    let counters = t.db.open_tree("counters").unwrap();
    objects.insert(b"old", b"x").unwrap();

    let r: Result<u32, TxError<()>> = t.db.transaction(|tx| {
        tx.insert(&objects, b"o1", b"v1")?;
        tx.insert(&objects, b"o2", b"v2")?;
        tx.remove(&objects, b"old")?;
        // Reads inside see the transaction's own writes.
        assert_eq!(tx.get(&objects, b"o1")?.as_deref(), Some(&b"v1"[..]));
        assert_eq!(tx.get(&objects, b"old")?, None);
        assert_eq!(tx.len(&objects)?, 2);
        let ks: Vec<Vec<u8>> = tx
            .range::<&[u8], _>(&objects, ..)?
            .map(|kv| kv.map(|(k, _)| k))
            .collect::<garage_db::Result<_>>()?;
        assert_eq!(ks, vec![b"o1".to_vec(), b"o2".to_vec()]);
        let rev: Vec<Vec<u8>> = tx
            .range_rev::<&[u8], _>(&objects, ..)?
            .map(|kv| kv.map(|(k, _)| k))
            .collect::<garage_db::Result<_>>()?;
        assert_eq!(rev, vec![b"o2".to_vec(), b"o1".to_vec()]);
        tx.insert(&counters, b"n", 2u64.to_be_bytes())?;
        Ok(42)
    });
    assert_eq!(r.unwrap(), 42);
    assert_eq!(objects.len().unwrap(), 2);
    assert_eq!(objects.get(b"old").unwrap(), None);
    assert_eq!(counters.get(b"n").unwrap().unwrap(), 2u64.to_be_bytes());
}

fn aborted_transactions_write_nothing(engine: Engine) {
    let t = new_db(engine);
    let a = t.db.open_tree("a").unwrap();
    let b = t.db.open_tree("b").unwrap();
    a.insert(b"keep", b"1").unwrap();

    // Abort on purpose, with a value.
    let r = t.db.transaction(|tx| {
        tx.insert(&a, b"new", b"x")?;
        tx.remove(&a, b"keep")?;
        tx.insert(&b, b"new", b"y")?;
        tx.clear(&a)?;
        Err::<(), _>(TxError::Abort("changed my mind"))
    });
    assert!(matches!(r, Err(TxError::Abort("changed my mind"))));

    // Abort because an operation failed half way.
    let r: Result<(), TxError<()>> = t.db.transaction(|tx| {
        tx.insert(&a, b"new", b"x")?;
        tx.insert(&b, b"new", b"y")?;
        tx.insert(&a, b"", b"empty keys are refused")?;
        Ok(())
    });
    assert!(matches!(r, Err(TxError::Db(Error::EmptyKey))));

    assert_eq!(a.get(b"keep").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(a.len().unwrap(), 1);
    assert_eq!(b.len().unwrap(), 0);

    // A tree of another database is refused, not silently misused.
    let other = new_db(engine);
    let foreign = other.db.open_tree("a").unwrap();
    let r: Result<(), TxError<()>> = t.db.transaction(|tx| {
        tx.insert(&foreign, b"k", b"v")?;
        Ok(())
    });
    assert!(matches!(r, Err(TxError::Db(Error::ForeignTree(_)))));
    assert_eq!(foreign.len().unwrap(), 0);

    // Using the database itself inside its own transaction is an error, not
    // a deadlock; other databases stay usable.
    let r: Result<(), TxError<()>> = t.db.transaction(|tx| {
        tx.insert(&a, b"inside", b"1")?;
        assert!(matches!(a.get(b"keep"), Err(Error::InsideTransaction)));
        assert!(matches!(
            b.insert(b"k", b"v"),
            Err(Error::InsideTransaction)
        ));
        assert!(matches!(
            a.iter().next(),
            Some(Err(Error::InsideTransaction))
        ));
        assert!(matches!(t.db.open_tree("c"), Err(Error::InsideTransaction)));
        foreign.insert(b"other db", b"ok")?;
        let nested: Result<(), TxError<()>> = t.db.transaction(|_| Ok(()));
        assert!(matches!(nested, Err(TxError::Db(Error::InsideTransaction))));
        Ok(())
    });
    r.unwrap();
    assert_eq!(a.get(b"inside").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(foreign.len().unwrap(), 1);
}

fn data_persists_across_reopen(engine: Engine) {
    let TestDb { _dir, path, db, .. } = new_db(engine);
    {
        let tree = db.open_tree("persist").unwrap();
        for i in 0..1000u32 {
            tree.insert(i.to_be_bytes(), i.to_le_bytes()).unwrap();
        }
        db.transaction::<_, (), _>(|tx| {
            tx.insert(&tree, b"tx", b"committed")?;
            Ok(())
        })
        .unwrap();
    }
    drop(db);
    let db = open(engine, &path, &opts()).unwrap();
    assert_eq!(db.list_trees().unwrap(), vec!["persist".to_string()]);
    let tree = db.open_tree("persist").unwrap();
    assert_eq!(tree.len().unwrap(), 1001);
    assert_eq!(
        tree.get(7u32.to_be_bytes()).unwrap().unwrap(),
        7u32.to_le_bytes()
    );
    assert_eq!(tree.get(b"tx").unwrap().as_deref(), Some(&b"committed"[..]));
}

/// `sync` works on a database opened without fsync, refuses to run
/// inside a transaction, and what it made durable is there on reopen.
/// (That it survives a power loss cannot be observed from a test.)
fn sync_flushes_without_fsync(engine: Engine) {
    let TestDb { _dir, path, db, .. } = new_db(engine);
    {
        let tree = db.open_tree("s").unwrap();
        db.transaction::<_, (), _>(|tx| {
            tx.insert(&tree, b"promise", b"7")?;
            Ok(())
        })
        .unwrap();
        db.sync().unwrap();
        let inside = db.transaction::<_, (), _>(|_| {
            assert!(db.sync().is_err(), "sync inside a transaction is refused");
            Ok(())
        });
        inside.unwrap();
    }
    drop(db);
    let db = open(engine, &path, &opts()).unwrap();
    let tree = db.open_tree("s").unwrap();
    assert_eq!(tree.get(b"promise").unwrap().as_deref(), Some(&b"7"[..]));
}

fn snapshot_is_a_full_copy(engine: Engine) {
    let t = new_db(engine);
    let a = t.db.open_tree("a").unwrap();
    let b = t.db.open_tree("b").unwrap();
    for i in 0..500u32 {
        a.insert(i.to_be_bytes(), b"a").unwrap();
        b.insert(i.to_be_bytes(), b"b").unwrap();
    }
    let snap_dir = tempfile::tempdir().unwrap();
    let target = snap_dir.path().join("snap-1");
    t.db.snapshot(&target).unwrap();
    // Writes after the snapshot are not in it.
    a.insert(b"later", b"x").unwrap();
    // A second snapshot into the same, now non-empty, directory is refused.
    assert!(matches!(
        t.db.snapshot(&target),
        Err(Error::SnapshotDirNotEmpty(_))
    ));

    let copy = open(
        t.engine,
        &t.engine.snapshot_db_path(&target),
        &OpenOptions {
            create: false,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(
        copy.list_trees().unwrap(),
        vec!["a".to_string(), "b".into()]
    );
    let ca = copy.open_tree("a").unwrap();
    assert_eq!(ca.len().unwrap(), 500);
    assert_eq!(ca.get(b"later").unwrap(), None);
    assert_eq!(copy.open_tree("b").unwrap().len().unwrap(), 500);
    let _ = &t.path;
}

fn missing_database_is_reported(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let path = engine.db_path(dir.path());
    let r = open(
        engine,
        &path,
        &OpenOptions {
            create: false,
            ..opts()
        },
    );
    assert!(matches!(r, Err(Error::NotFound { .. })));
}

fn copy_between_engines(engine: Engine) {
    let t = new_db(engine);
    let other = if engine == Engine::Lmdb {
        Engine::Sqlite
    } else {
        Engine::Lmdb
    };
    let dst = new_db(other);
    for name in ["x", "y", "empty"] {
        let tree = t.db.open_tree(name).unwrap();
        if name != "empty" {
            for i in 0..2500u32 {
                tree.insert(format!("{name}{i:05}"), i.to_be_bytes())
                    .unwrap();
            }
        }
    }
    let (trees, entries) = garage_db::copy_all(&t.db, &dst.db, 1000).unwrap();
    assert_eq!((trees, entries), (3, 5000));
    assert_eq!(dst.db.list_trees().unwrap(), t.db.list_trees().unwrap());
    for name in t.db.list_trees().unwrap() {
        let a = collect(t.db.open_tree(&name).unwrap().iter());
        let b = collect(dst.db.open_tree(&name).unwrap().iter());
        assert_eq!(a, b, "tree {name}");
    }
}

/// Many threads reading at once (a server's blocking pool) must not run
/// out of reader slots.
fn many_concurrent_reader_threads(engine: Engine) {
    let t = new_db(engine);
    let tree = t.db.open_tree("t").unwrap();
    tree.insert(b"k", b"v").unwrap();
    let threads = 600;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let tree = tree.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let r = tree.get(b"k");
                // Keep every thread (and its reader slot) alive until all
                // have read.
                barrier.wait();
                r
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap().as_deref(), Some(&b"v"[..]));
    }
}

/// Opening trees while other threads read must not deadlock (it did in
/// the SQLite adapter: two locks taken in opposite orders).
fn open_tree_while_others_read(engine: Engine) {
    let t = new_db(engine);
    let db = t.db.clone();
    let tree = db.open_tree("busy").unwrap();
    for i in 0..300u32 {
        tree.insert(i.to_be_bytes(), b"v").unwrap();
    }
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut handles = Vec::new();
    for w in 0..4 {
        let db = db.clone();
        let tree = tree.clone();
        let done = done_tx.clone();
        handles.push(std::thread::spawn(move || {
            for i in 0..200 {
                if w % 2 == 0 {
                    db.open_tree(&format!("t{w}_{i}")).unwrap();
                } else {
                    assert_eq!(tree.iter().count(), 300);
                }
            }
            done.send(()).unwrap();
        }));
    }
    for _ in 0..4 {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("threads deadlocked");
    }
    for h in handles {
        h.join().unwrap();
    }
}

/// Grouped transactions: jobs queued while one runs share the next
/// transaction (a job sees the writes of the job before it, uncommitted);
/// each outcome arrives after its commit; a job that aborts writes
/// nothing and does not take the others of its group with it.
fn grouped_transactions_share_commits_and_abort_alone(engine: Engine) {
    use std::sync::mpsc;
    use std::time::Duration;
    let t = new_db(engine);
    let tree = t.db.open_tree("g").unwrap();
    let (done_tx, done_rx) = mpsc::channel::<(u32, Result<bool, String>)>();
    // Job 0 holds the committer until jobs 1..=5 are queued.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = std::sync::Mutex::new(go_rx);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let t0 = tree.clone();
    let d = done_tx.clone();
    t.db.transaction_grouped(
        move |tx| -> garage_db::TxResult<bool, String> {
            let _ = started_tx.send(());
            go_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30))
                .expect("the test queues the other jobs");
            tx.insert(&t0, b"k0", b"v")?;
            Ok(false)
        },
        move |r| d.send((0, r.map_err(|e| format!("{e:?}")))).unwrap(),
    );
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    for i in 1..=5u32 {
        let tr = tree.clone();
        let d = done_tx.clone();
        t.db.transaction_grouped(
            move |tx| -> garage_db::TxResult<bool, String> {
                if i == 3 {
                    tx.insert(&tr, b"k3", b"v")?;
                    return Err(TxError::Abort("job 3 aborts".into()));
                }
                // Whether the previous job's write is visible here.
                let saw_previous = tx.get(&tr, format!("k{}", i - 1).as_bytes())?.is_some();
                tx.insert(&tr, format!("k{i}").as_bytes(), b"v")?;
                Ok(saw_previous)
            },
            move |r| d.send((i, r.map_err(|e| format!("{e:?}")))).unwrap(),
        );
    }
    go_tx.send(()).unwrap();
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..6 {
        let (i, r) = done_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // Delivered after the commit: the write is readable.
        if r.is_ok() {
            assert!(
                tree.get(format!("k{i}").as_bytes()).unwrap().is_some(),
                "k{i}"
            );
        }
        outcomes.insert(i, r);
    }
    assert_eq!(outcomes[&0], Ok(false));
    assert!(
        matches!(&outcomes[&3], Err(e) if e.contains("job 3 aborts")),
        "{:?}",
        outcomes[&3]
    );
    for i in [1, 2, 4, 5] {
        assert!(outcomes[&i].is_ok(), "job {i}: {:?}", outcomes[&i]);
    }
    assert_eq!(
        tree.get(b"k3").unwrap(),
        None,
        "the aborted job wrote nothing"
    );
    assert_eq!(tree.len().unwrap(), 5);

    // Without an abort, the jobs queued behind a running one share a
    // transaction: each (after the first) sees its predecessor's write.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = std::sync::Mutex::new(go_rx);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let d = done_tx.clone();
    let t0 = tree.clone();
    t.db.transaction_grouped(
        move |tx| -> garage_db::TxResult<bool, String> {
            let _ = started_tx.send(());
            go_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30))
                .unwrap();
            tx.insert(&t0, b"m0", b"v")?;
            Ok(false)
        },
        move |r| d.send((100, r.map_err(|e| format!("{e:?}")))).unwrap(),
    );
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    for i in 1..=4u32 {
        let tr = tree.clone();
        let d = done_tx.clone();
        t.db.transaction_grouped(
            move |tx| -> garage_db::TxResult<bool, String> {
                let saw = tx.get(&tr, format!("m{}", i - 1).as_bytes())?.is_some();
                tx.insert(&tr, format!("m{i}").as_bytes(), b"v")?;
                Ok(saw)
            },
            move |r| d.send((100 + i, r.map_err(|e| format!("{e:?}")))).unwrap(),
        );
    }
    go_tx.send(()).unwrap();
    let mut saw = std::collections::BTreeMap::new();
    for _ in 0..5 {
        let (i, r) = done_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        saw.insert(i, r.unwrap());
    }
    // Jobs 2..=4 ran in one transaction with job 1 (queued together
    // while job 0 held the committer), so each saw the one before.
    for i in 2..=4 {
        assert!(saw[&(100 + i)], "job {i} did not see job {}'s write", i - 1);
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod lmdb {
            $( #[test] fn $name() { super::$name(garage_db::Engine::Lmdb) } )*
        }
        mod sqlite {
            $( #[test] fn $name() { super::$name(garage_db::Engine::Sqlite) } )*
        }
        mod lmdb_write_map {
            $( #[test] fn $name() {
                super::WRITE_MAP.set(true);
                super::$name(garage_db::Engine::Lmdb)
            } )*
        }
    };
}

conformance!(
    basic_ops,
    sync_flushes_without_fsync,
    trees_are_separate_and_listed,
    ordering_is_bytewise,
    matches_model,
    transactions_commit_atomically,
    aborted_transactions_write_nothing,
    data_persists_across_reopen,
    snapshot_is_a_full_copy,
    missing_database_is_reported,
    copy_between_engines,
    many_concurrent_reader_threads,
    open_tree_while_others_read,
    grouped_transactions_share_commits_and_abort_alone,
);
