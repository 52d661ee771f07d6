//! Benchmark of the layout computation: `cargo bench -p garage_rpc`.
//!
//! For 100, 500 and 1000 storage nodes over 3 zones with varied capacities,
//! replication 3: the time of a first layout, then of the next layout after
//! one node is added (which minimises moves against the first). Prints a
//! Markdown table. `GARAGE_BENCH_NODES=100,200` chooses the cluster sizes.

use std::time::Instant;

use garage_rpc::layout::{compute, AssignInput, NodeSpec, PARTITIONS};

fn cluster(n: usize) -> Vec<NodeSpec> {
    (0..n)
        .map(|i| NodeSpec {
            zone: format!("zone{}", i % 3),
            // 1 to 8 TB, varied.
            capacity: (1 + (i * 7919) % 8) as u64 * 1_000_000_000_000,
        })
        .collect()
}

fn main() {
    let sizes: Vec<usize> = std::env::var("GARAGE_BENCH_NODES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 500, 1000]);
    println!("| nodes | zones | replication | first layout (s) | after adding a node (s) | partitions moved |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let nodes = cluster(n);
        let t = Instant::now();
        let first = compute(&AssignInput {
            nodes: &nodes,
            replication_factor: 3,
            zone_redundancy: None,
            max_per_zone: None,
            partitions: PARTITIONS,
            previous: None,
        })
        .unwrap();
        let t_first = t.elapsed();
        let mut more = nodes.clone();
        more.push(NodeSpec {
            zone: "zone0".into(),
            capacity: 4_000_000_000_000,
        });
        let t = Instant::now();
        let next = compute(&AssignInput {
            nodes: &more,
            replication_factor: 3,
            zone_redundancy: None,
            max_per_zone: None,
            partitions: PARTITIONS,
            previous: Some(&first.partitions),
        })
        .unwrap();
        let t_next = t.elapsed();
        println!(
            "| {n} | 3 | 3 | {:.3} | {:.3} | {} |",
            t_first.as_secs_f64(),
            t_next.as_secs_f64(),
            next.moved
        );
    }
}
