//! Benchmark of the metadata engines: `cargo bench -p garage_db`.
//!
//! For each engine, on real files in a temporary directory (under
//! `GARAGE_BENCH_DIR`, default the system's temp dir): inserts per second
//! with and without fsync (batched 1000 per transaction, and one per
//! commit), random point reads, a full scan and short range scans, over
//! `GARAGE_BENCH_KEYS` keys (default 1,000,000). Keys are 32 pseudo-random
//! bytes, like the hashes that lead most garage table keys; values are
//! 200 bytes, about one object entry. Prints a Markdown table.
//! `GARAGE_BENCH_ENGINES=sqlite` runs one engine only.

use std::time::{Duration, Instant};

use garage_db::{open, Db, Engine, OpenOptions, Tree, TxError};

const VALUE_LEN: usize = 200;
const BATCH: u64 = 1000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(i: u64) -> [u8; 32] {
    let mut k = [0u8; 32];
    for (j, chunk) in k.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&splitmix(i.wrapping_mul(4).wrapping_add(j as u64)).to_be_bytes());
    }
    k
}

fn value(i: u64) -> Vec<u8> {
    (0..VALUE_LEN).map(|j| (i as usize + j) as u8).collect()
}

struct Row {
    engine: Engine,
    what: String,
    ops: u64,
    elapsed: Duration,
    unit: &'static str,
}

fn fresh(engine: Engine, base: &std::path::Path, name: &str, fsync: bool) -> Db {
    let path = engine.db_path(&base.join(name));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    open(
        engine,
        &path,
        &OpenOptions {
            fsync,
            ..Default::default()
        },
    )
    .unwrap()
}

fn batched_insert(db: &Db, tree: &Tree, n: u64) -> Duration {
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        db.transaction::<_, (), _>(|tx| {
            for j in i..end {
                tx.insert(tree, key(j), value(j))?;
            }
            Ok(())
        })
        .map_err(TxError::into_db_error)
        .unwrap();
        i = end;
    }
    start.elapsed()
}

fn single_inserts(tree: &Tree, n: u64) -> Duration {
    let start = Instant::now();
    for j in 0..n {
        tree.insert(key(j), value(j)).unwrap();
    }
    start.elapsed()
}

fn bench_engine(engine: Engine, base: &std::path::Path, n: u64, rows: &mut Vec<Row>) {
    let mut row = |what: String, ops: u64, elapsed: Duration, unit| {
        let r = Row {
            engine,
            what,
            ops,
            elapsed,
            unit,
        };
        eprintln!(
            "{} {}: {:.0} {}/s",
            r.engine,
            r.what,
            r.ops as f64 / r.elapsed.as_secs_f64(),
            r.unit
        );
        rows.push(r);
    };

    // Inserts, without and with fsync.
    for fsync in [false, true] {
        let db = fresh(engine, base, &format!("{engine}-batched-{fsync}"), fsync);
        let tree = db.open_tree("t").unwrap();
        let t = batched_insert(&db, &tree, n);
        row(
            format!("insert, {BATCH} per transaction, fsync={fsync}"),
            n,
            t,
            "inserts",
        );
    }
    for (fsync, count) in [(false, 20_000u64), (true, 1_000)] {
        let db = fresh(engine, base, &format!("{engine}-single-{fsync}"), fsync);
        let tree = db.open_tree("t").unwrap();
        let t = single_inserts(&tree, count);
        row(
            format!("insert, 1 per transaction, fsync={fsync}"),
            count,
            t,
            "inserts",
        );
    }

    // Reads and scans on the first database (n keys).
    let db = fresh(engine, base, &format!("{engine}-batched-false"), false);
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap() as u64, n);

    let reads = n.min(1_000_000);
    let start = Instant::now();
    for i in 0..reads {
        let j = splitmix(i ^ 0x5555) % n;
        let v = tree.get(key(j)).unwrap();
        assert!(v.is_some());
    }
    row(
        "point read (random existing key)".into(),
        reads,
        start.elapsed(),
        "reads",
    );

    let start = Instant::now();
    let mut count = 0u64;
    for kv in tree.iter() {
        kv.unwrap();
        count += 1;
    }
    assert_eq!(count, n);
    row(
        "full scan, forward".into(),
        count,
        start.elapsed(),
        "entries",
    );

    let scans = 10_000u64;
    let start = Instant::now();
    for i in 0..scans {
        let from = key(splitmix(i) % n).to_vec();
        let got = tree.range(from..).take(100).count();
        assert!(got > 0);
    }
    row(
        "range scan of 100 entries from a random key".into(),
        scans,
        start.elapsed(),
        "scans",
    );

    let start = Instant::now();
    for i in 0..scans {
        let to = key(splitmix(i) % n).to_vec();
        let got = tree.range_rev(..=to).take(100).count();
        assert!(got > 0);
    }
    row(
        "reverse range scan of 100 entries".into(),
        scans,
        start.elapsed(),
        "scans",
    );
}

fn main() {
    let n: u64 = std::env::var("GARAGE_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let base = match std::env::var("GARAGE_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let mut rows = Vec::new();
    let only = std::env::var("GARAGE_BENCH_ENGINES").ok();
    for engine in Engine::ALL {
        if let Some(only) = &only {
            if !only.split(',').any(|e| e == engine.as_str()) {
                continue;
            }
        }
        bench_engine(engine, base.path(), n, &mut rows);
    }
    println!(
        "\nKeys: {n}, 32-byte keys, {VALUE_LEN}-byte values, files under {}\n",
        base.path().display()
    );
    println!("| engine | operation | count | time (s) | rate |");
    println!("|---|---|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {:.2} | {:.0} {}/s |",
            r.engine,
            r.what,
            r.ops,
            r.elapsed.as_secs_f64(),
            r.ops as f64 / r.elapsed.as_secs_f64(),
            r.unit
        );
    }
}
