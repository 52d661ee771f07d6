//! Benchmark of replicated tables: `cargo bench -p garage_table`.
//!
//! Three nodes in one process, replication 3 (write and read quorums of 2),
//! talking over loopback TCP through the full RPC stack, each with its own
//! LMDB database (no fsync). Prints:
//! - quorum insert and get latency, one operation at a time;
//! - insert and get throughput with 32 operations in flight, and batched
//!   inserts (`insert_many`, 100 entries per call);
//! - the time for a replica that missed `GARAGE_BENCH_MISSED` entries
//!   (default 100 000) to catch up through one Merkle sync pass.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use garage_table::testing::{cluster, wait_for, TestEntry};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p) as usize]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
    let nodes = cluster(3, 3).await;
    let t0 = nodes[0].table.clone();
    let ops = env_usize("GARAGE_BENCH_OPS", 2000);

    // Latency, one at a time.
    let mut lat = Vec::with_capacity(ops);
    for i in 0..ops {
        let e = TestEntry::new(&format!("p{}", i % 97), &format!("k{i}"), "value");
        let s = Instant::now();
        t0.insert(&e).await.unwrap();
        lat.push(s.elapsed());
    }
    println!(
        "quorum insert, {ops} one at a time: median {:?}, p99 {:?}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
    let mut lat = Vec::with_capacity(ops);
    for i in 0..ops {
        let s = Instant::now();
        let got = t0
            .get(&format!("p{}", i % 97), &format!("k{i}"))
            .await
            .unwrap();
        lat.push(s.elapsed());
        assert!(got.is_some());
    }
    println!(
        "quorum get, {ops} one at a time: median {:?}, p99 {:?}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );

    // Throughput, 32 in flight.
    let n = ops * 5;
    let start = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let t = t0.clone();
            async move {
                let e = TestEntry::new(&format!("q{}", i % 997), &format!("k{i}"), "value");
                t.insert(&e).await.unwrap();
            }
        })
        .await;
    let el = start.elapsed();
    println!(
        "quorum insert, {n} with 32 in flight: {:.0} inserts/s",
        n as f64 / el.as_secs_f64()
    );
    let start = Instant::now();
    stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let t = t0.clone();
            async move {
                let got = t
                    .get(&format!("q{}", i % 997), &format!("k{i}"))
                    .await
                    .unwrap();
                assert!(got.is_some());
            }
        })
        .await;
    let el = start.elapsed();
    println!(
        "quorum get, {n} with 32 in flight: {:.0} gets/s",
        n as f64 / el.as_secs_f64()
    );
    let start = Instant::now();
    for b in 0..(n / 100) {
        let batch: Vec<TestEntry> = (0..100)
            .map(|i| {
                TestEntry::new(
                    &format!("b{}", (b * 100 + i) % 997),
                    &format!("k{b}-{i}"),
                    "v",
                )
            })
            .collect();
        t0.insert_many(&batch).await.unwrap();
    }
    let el = start.elapsed();
    println!(
        "insert_many, {} calls of 100 entries one at a time: {:.0} entries/s",
        n / 100,
        n as f64 / el.as_secs_f64()
    );

    // Catch-up of a replica that missed entries.
    let missed = env_usize("GARAGE_BENCH_MISSED", 100_000);
    let fill = Instant::now();
    let entries: Vec<TestEntry> = (0..missed)
        .map(|i| {
            TestEntry::new(
                &format!("m{}", i % 4099),
                &format!("key-{i:08}"),
                "some value",
            )
        })
        .collect();
    for chunk in entries.chunks(1000) {
        let bytes: Vec<Vec<u8>> = chunk.iter().map(garage_table::encoding::encode).collect();
        nodes[0].table.data.update_many(&bytes).unwrap();
        nodes[1].table.data.update_many(&bytes).unwrap();
    }
    eprintln!(
        "(filled {missed} entries on two replicas in {:?})",
        fill.elapsed()
    );
    let before = nodes[2].table.data.store.len().unwrap();
    let layout = nodes[0].system.layout();
    let start = Instant::now();
    let stats = nodes[0].table.sync_pass(&layout).await.unwrap();
    let pass = start.elapsed();
    let after = nodes[2].table.data.store.len().unwrap();
    assert_eq!(
        after - before,
        missed,
        "the lagging replica got every entry"
    );
    let n2 = Arc::new(&nodes[2]);
    wait_for("Merkle trees equal", Duration::from_secs(600), || {
        nodes[0].roots() == n2.roots()
    })
    .await;
    let total = start.elapsed();
    println!(
        "catch-up of {missed} missed entries by one sync pass: {:.2} s ({} Merkle requests, {} entries sent), Merkle trees equal after {:.2} s",
        pass.as_secs_f64(),
        stats.merkle_requests,
        stats.entries_sent,
        total.as_secs_f64()
    );
}
