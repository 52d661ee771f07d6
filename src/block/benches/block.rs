//! Benchmark of the block manager: `cargo bench -p garage_block`.
//!
//! Nodes in one process over loopback TCP (2-thread runtime), each with its
//! own data dir on the local disk. Prints, for 1 node (replication 1) and
//! 3 nodes (replication 3, write quorum 2):
//! - write throughput of 1 MiB blocks, 4 in flight, with and without
//!   `data_fsync`, with random (incompressible) and compressible content
//!   (zstd level 1);
//! - read throughput of the same blocks through another node;
//! - the latency of a small table read while the node streams blocks,
//!   next to the same read on an idle node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use garage_block::dirs::DataDirs;
use garage_block::manager::BlockManager;
use garage_block::rc::BlockRc;
use garage_block::BlockStore;
use garage_table::testing::{cluster, temp_db, Node, TestEntry};
use garage_util::data::{blake2sum, Hash};

const BLOCK: usize = 1 << 20;

fn blocks(n: usize, compressible: bool) -> Vec<(Hash, Bytes)> {
    (0..n)
        .map(|i| {
            let data: Vec<u8> = if compressible {
                (0..BLOCK)
                    .map(|j| ((j / 64 + i) % 16) as u8 + b'a')
                    .collect()
            } else {
                (0..BLOCK).map(|_| rand::random::<u8>()).collect()
            };
            let data = Bytes::from(data);
            (blake2sum(&data), data)
        })
        .collect()
}

fn managers(
    nodes: &[Node],
    fsync: bool,
    level: Option<i32>,
    keep: &mut Vec<tempfile::TempDir>,
) -> Vec<Arc<BlockManager>> {
    nodes
        .iter()
        .map(|n| {
            // On the local disk, not tmpfs, so that fsync costs what it costs.
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let (db_dir, db) = temp_db();
            let store = Arc::new(BlockStore::new(DataDirs::single(dir.path()), fsync));
            keep.push(dir);
            keep.push(db_dir);
            BlockManager::new(
                n.system.clone(),
                store,
                BlockRc::open(&db, 600_000).unwrap(),
                level,
            )
        })
        .collect()
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p) as usize]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let n_blocks = std::env::var("GARAGE_BENCH_BLOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    for size in [1usize, 3] {
        for (fsync, compressible) in [(false, false), (true, false), (false, true)] {
            // A fresh cluster each time: a node serves one block manager.
            let nodes = cluster(size, size).await;
            let mut keep = Vec::new();
            let level = compressible.then_some(1);
            let ms = managers(&nodes, fsync, level, &mut keep);
            let data = blocks(n_blocks, compressible);
            let start = Instant::now();
            stream::iter(data.iter())
                .for_each_concurrent(4, |(h, d)| {
                    let m = ms[0].clone();
                    async move { m.put_block(*h, d.clone()).await.unwrap() }
                })
                .await;
            let w = start.elapsed();
            let reader = &ms[size - 1];
            let start = Instant::now();
            stream::iter(data.iter())
                .for_each_concurrent(4, |(h, _)| {
                    let m = reader.clone();
                    async move {
                        m.get_block(h).await.unwrap();
                    }
                })
                .await;
            let r = start.elapsed();
            println!(
                "{size} node(s), {} content, data_fsync {fsync}: write {:.0} MB/s, read {:.0} MB/s ({n_blocks} x 1 MiB, 4 in flight)",
                if compressible { "compressible (zstd 1)" } else { "random" },
                mbps(n_blocks * BLOCK, w),
                mbps(n_blocks * BLOCK, r),
            );
            for n in nodes.iter() {
                n.stop();
            }
        }
    }
    let nodes = cluster(3, 3).await;
    small_rpc_under_block_load(&nodes, n_blocks).await;
}

async fn small_rpc_under_block_load(nodes: &[Node], n_blocks: usize) {
    let mut keep = Vec::new();
    let ms = managers(nodes, false, None, &mut keep);
    let t = nodes[0].table.clone();
    t.insert(&TestEntry::new("p", "s", "v")).await.unwrap();
    let sample = |n: usize| {
        let t = t.clone();
        async move {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let s = Instant::now();
                t.get(&"p".to_string(), &"s".to_string()).await.unwrap();
                v.push(s.elapsed());
            }
            v
        }
    };
    let mut idle = sample(500).await;
    println!(
        "table get on 3 nodes, idle: median {:?} p99 {:?}",
        pct(&mut idle, 0.5),
        pct(&mut idle, 0.99)
    );
    let data = Arc::new(blocks(n_blocks, false));
    let peer = nodes[1].system.id();
    // Two loads on node 0: quorum writes, 4 in flight (each sends 3
    // encrypted copies, all decrypted and written in this same process), and
    // one block at a time streamed to one other node.
    for (what, in_flight, quorum) in [
        ("4 quorum block writes in flight", 4usize, true),
        ("1 block streamed to one peer at a time", 1, false),
    ] {
        let load = {
            let m = ms[0].clone();
            let data = data.clone();
            tokio::spawn(async move {
                for _ in 0..4 {
                    stream::iter(data.iter())
                        .for_each_concurrent(in_flight, |(h, d)| {
                            let m = m.clone();
                            async move {
                                if quorum {
                                    m.put_block(*h, d.clone()).await.unwrap()
                                } else {
                                    m.put_to(&peer, h, d.clone()).await.unwrap()
                                }
                            }
                        })
                        .await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut busy = sample(500).await;
        let still_loading = !load.is_finished();
        load.await.unwrap();
        println!(
            "table get on 3 nodes while node 0 runs {what}{}: median {:?} p99 {:?}",
            if still_loading {
                ""
            } else {
                " (load ended first)"
            },
            pct(&mut busy, 0.5),
            pct(&mut busy, 0.99)
        );
    }
}
