//! The metadata cost of a large upload's block list:
//! `cargo bench -p garage_model --bench version_blocks`.
//!
//! Writes the version entries of one upload of `GARAGE_BENCH_BLOCKS`
//! blocks (default 4096: 4 GiB in 1 MiB blocks) into one replica's
//! version table, one block per transaction as a replica receives them
//! from a PUT, on a real database (LMDB, then SQLite; no fsync). Two
//! layouts of the same data:
//! - *one entry*: every block merged into the version's single entry (the
//!   layout before segments: each write rewrites the whole list);
//! - *segments*: each block merged into its segment of at most
//!   `SEGMENT_BLOCKS` blocks (today's layout).
//!
//! `GARAGE_BENCH_ENGINES=lmdb` runs one engine.
//!
//! Prints the time, the bytes of entries written (the encoded entry each
//! merge stores) and the largest entry.

use std::time::Instant;

use garage_model::block_ref_table::BlockRefTable;
use garage_model::version_table::{
    Version, VersionBacklink, VersionBlock, VersionBlockKey, VersionTable,
};
use garage_table::data::TableData;
use garage_table::encoding::encode;
use garage_table::InsertQueue;
use garage_util::data::{blake2sum, gen_uuid};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(engine: garage_db::Engine, n: u64, segments: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = garage_db::open(
        engine,
        &engine.db_path(dir.path()),
        &garage_db::OpenOptions::default(),
    )
    .expect("open database");
    let refs = InsertQueue::<BlockRefTable>::open(&db).expect("queue");
    let data = TableData::new(VersionTable { block_refs: refs }, db).expect("table");
    let uuid = gen_uuid();
    let backlink = VersionBacklink::Object {
        bucket_id: gen_uuid(),
        key: "big".into(),
    };
    let (mut written, mut largest) = (0usize, 0usize);
    let start = Instant::now();
    for i in 0..n {
        let key = VersionBlockKey {
            part_number: 1,
            offset: i << 20,
        };
        let block = VersionBlock {
            hash: blake2sum(&i.to_be_bytes()),
            size: 1 << 20,
            ec: None,
            recoded: 0,
        };
        let entry = if segments {
            Version::with_block(uuid, backlink.clone(), i, key, block)
        } else {
            let mut v = Version::new(uuid, backlink.clone());
            v.blocks.put(key, block);
            v
        };
        let stored = data
            .update_entry_with(&entry)
            .expect("update")
            .expect("changed");
        let len = encode(&stored).len();
        written += len;
        largest = largest.max(len);
    }
    let t = start.elapsed().as_secs_f64();
    println!(
        "| {} | {} | {n} | {t:.2} | {:.1} | {:.1} | {:.1} |",
        engine.as_str(),
        if segments { "segments" } else { "one entry" },
        written as f64 / 1e6,
        written as f64 / n as f64 / 1e3,
        largest as f64 / 1e3,
    );
}

fn main() {
    let n = env_u64("GARAGE_BENCH_BLOCKS", 4096);
    println!("| engine | layout | blocks | time (s) | MB written | KB written per block | largest entry (KB) |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let engines: Vec<garage_db::Engine> = match std::env::var("GARAGE_BENCH_ENGINES") {
        Ok(list) => list
            .split(',')
            .map(|e| e.trim().parse().expect("engine: lmdb or sqlite"))
            .collect(),
        Err(_) => garage_db::Engine::ALL.to_vec(),
    };
    for engine in engines {
        for segments in [false, true] {
            run(engine, n, segments);
        }
    }
}
