//! Crash consistency on real files: a child process runs a stream of
//! multi-tree transactions and is SIGKILLed in the middle of it; the database
//! it leaves must hold every transaction it reported as committed, and every
//! transaction either whole or not at all.
//!
//! The child is this same test binary, re-executed to run only
//! `crash_child`, which does nothing unless `GARAGE_DB_CRASH_CHILD` is set.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use garage_db::{open, Db, Engine, OpenOptions, TxError};

const ENV_PATH: &str = "GARAGE_DB_CRASH_CHILD";
const ENV_ENGINE: &str = "GARAGE_DB_CRASH_ENGINE";
const ENV_FSYNC: &str = "GARAGE_DB_CRASH_FSYNC";
const ENV_WRITE_MAP: &str = "GARAGE_DB_CRASH_WRITE_MAP";
/// Keys rewritten by every transaction: a torn transaction would leave them
/// with different values.
const GROUP: u32 = 16;
/// How many of the newest sequence keys tree "b" keeps.
const WINDOW: u64 = 5;
/// How many times the writer is killed and restarted.
const ROUNDS: u64 = 8;

fn be(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

fn value(n: u64) -> Vec<u8> {
    // Values big enough that a transaction spans several pages.
    n.to_be_bytes().repeat(64)
}

fn last_committed(db: &Db) -> u64 {
    let meta = db.open_tree("meta").unwrap();
    meta.get(b"last")
        .unwrap()
        .map(|v| u64::from_be_bytes(v.try_into().unwrap()))
        .unwrap_or(0)
}

/// One transaction of the stream: sequence number `n` touches three trees.
fn write_step(db: &Db, n: u64) {
    let a = db.open_tree("a").unwrap();
    let b = db.open_tree("b").unwrap();
    let meta = db.open_tree("meta").unwrap();
    db.transaction::<_, (), _>(|tx| {
        tx.insert(&a, be(n), value(n))?;
        for g in 0..GROUP {
            tx.insert(&meta, format!("group{g:02}"), be(n))?;
        }
        tx.insert(&b, be(n), value(n))?;
        if n > WINDOW {
            tx.remove(&b, be(n - WINDOW))?;
        }
        tx.insert(&meta, b"last", be(n))?;
        Ok(())
    })
    .map_err(TxError::into_db_error)
    .unwrap();
}

/// Checks every invariant of the stream; returns the last sequence number.
fn check(db: &Db) -> u64 {
    let n = last_committed(db);
    let a = db.open_tree("a").unwrap();
    let b = db.open_tree("b").unwrap();
    let meta = db.open_tree("meta").unwrap();
    for g in 0..GROUP {
        let v = meta.get(format!("group{g:02}")).unwrap();
        if n == 0 {
            assert_eq!(v, None);
        } else {
            assert_eq!(v.unwrap(), be(n), "group key {g} torn at n={n}");
        }
    }
    let seq: Vec<(Vec<u8>, Vec<u8>)> = a.iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(
        seq.len() as u64,
        n,
        "tree a has {} sequence keys, last={n}",
        seq.len()
    );
    for (i, (k, v)) in seq.iter().enumerate() {
        let expect = i as u64 + 1;
        assert_eq!(k.as_slice(), be(expect), "hole in tree a at {expect}");
        assert_eq!(v, &value(expect), "bad value in tree a at {expect}");
    }
    let window: Vec<Vec<u8>> = b.iter().map(|kv| kv.unwrap().0).collect();
    let expect: Vec<Vec<u8>> = (n.saturating_sub(WINDOW) + 1..=n)
        .map(|i| be(i).to_vec())
        .collect();
    assert_eq!(
        window, expect,
        "tree b does not hold the last {WINDOW} keys at n={n}"
    );
    n
}

#[test]
#[ignore = "entry point of the child process of the crash tests; does nothing alone"]
fn crash_child() {
    let Ok(path) = std::env::var(ENV_PATH) else {
        return;
    };
    let engine: Engine = std::env::var(ENV_ENGINE).unwrap().parse().unwrap();
    let fsync = std::env::var(ENV_FSYNC).unwrap() == "1";
    let lmdb_write_map = std::env::var(ENV_WRITE_MAP).unwrap() == "1";
    let db = open(
        engine,
        Path::new(&path),
        &OpenOptions {
            fsync,
            lmdb_write_map,
            ..Default::default()
        },
    )
    .unwrap();
    let start = check(&db);
    println!("started {start}");
    // Bounded: the parent kills us long before this ends.
    for n in start + 1..start + 1_000_000 {
        write_step(&db, n);
        println!("committed {n}");
    }
}

fn crash_case(engine: Engine, write_map: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = engine.db_path(dir.path());
    let exe = std::env::current_exe().unwrap();
    let mut reported = 0u64;
    for round in 0..ROUNDS {
        let fsync = round % 2 == 1;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_PATH, &path)
            .env(ENV_ENGINE, engine.as_str())
            .env(ENV_FSYNC, if fsync { "1" } else { "0" })
            .env(ENV_WRITE_MAP, if write_map { "1" } else { "0" })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Let it commit a varying number of transactions, then kill it while
        // it is writing the next ones.
        let target = 40 + round * 37;
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0u64;
        let mut started = None;
        while seen < target {
            assert!(Instant::now() < deadline, "child made no progress in time");
            let Some(line) = lines.next() else {
                panic!("child exited early: {:?}", child.wait());
            };
            let line = line.unwrap();
            // The harness may print "test crash_child ... " before our line.
            if let Some((_, n)) = line.split_once("started ") {
                let n: u64 = n.parse().unwrap();
                assert!(
                    n >= reported,
                    "round {round}: lost commits: started at {n}, had reported {reported}"
                );
                started = Some(n);
            } else if let Some((_, n)) = line.split_once("committed ") {
                reported = n.parse().unwrap();
                seen += 1;
            }
        }
        assert!(started.is_some());
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // The child may have committed a few more than we read; nothing it
        // reported may be missing and nothing may be torn.
        let opts = OpenOptions {
            lmdb_write_map: write_map,
            ..Default::default()
        };
        let db = open(engine, &path, &opts).unwrap();
        let n = check(&db);
        assert!(
            n >= reported,
            "round {round}: last={n} but child reported {reported}"
        );
        reported = n;
    }
    assert!(reported >= (0..ROUNDS).map(|r| 40 + r * 37).sum::<u64>());
}

#[test]
fn lmdb_survives_sigkill() {
    crash_case(Engine::Lmdb, false);
}

/// The same through LMDB's writable map (`lmdb_write_map`), whose pages
/// the kernel holds once written, whatever becomes of the process.
#[test]
fn lmdb_write_map_survives_sigkill() {
    crash_case(Engine::Lmdb, true);
}

#[test]
fn sqlite_survives_sigkill() {
    crash_case(Engine::Sqlite, false);
}

/// The checker itself must see a torn transaction, or the tests above prove
/// nothing.
#[test]
fn checker_detects_torn_transactions() {
    for engine in Engine::ALL {
        let dir = tempfile::tempdir().unwrap();
        let db = open(engine, &engine.db_path(dir.path()), &OpenOptions::default()).unwrap();
        for n in 1..=10 {
            write_step(&db, n);
        }
        assert_eq!(check(&db), 10);
        // Half of a transaction: the sequence key without the group keys.
        db.open_tree("a")
            .unwrap()
            .insert(be(11), value(11))
            .unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert(b"last", be(11))
            .unwrap();
        let torn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&db)));
        assert!(torn.is_err(), "{engine}: torn transaction not detected");
    }
}
