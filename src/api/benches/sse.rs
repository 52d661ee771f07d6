//! The CPU cost of encryption at rest, per MiB, next to what every
//! block already costs: `cargo bench -p garage_api --bench sse`.
//!
//! Times, on one core, sealing and opening 1 MiB blocks with AES-256-GCM
//! (what SSE-C, SSE-S3 and SSE-KMS do to each block), next to the blake2
//! hash every stored block gets (its address) and zstd at level 3 on
//! text-like data (what `compression_level` does to plain blocks; sealed
//! blocks do not compress). `GARAGE_BENCH_MIB` sets the amount (default
//! 256).

use std::time::{Duration, Instant};

use base64::Engine;
use garage_api::encryption::sse::SseKey;
use md5::{Digest, Md5};

fn main() {
    let mib: u32 = std::env::var("GARAGE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let b64 = base64::engine::general_purpose::STANDARD;
    let raw = [7u8; 32];
    let key = SseKey::from_headers(
        Some("AES256"),
        Some(&b64.encode(raw)),
        Some(&b64.encode(Md5::digest(raw))),
    )
    .unwrap()
    .unwrap();
    // Text-like data: compressible, as logs or documents are (words and
    // numbers in a pseudo-random order).
    let words = [
        "garage",
        "object",
        "storage",
        "block",
        "bucket",
        "zone",
        "the",
        "of",
        "node",
        "request",
        "GET",
        "PUT",
        "200",
        "404",
        "layout",
        "partition",
        "replica",
        "write",
        "read",
        "key",
    ];
    let mut block = Vec::with_capacity(1 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while block.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = words[(x % words.len() as u64) as usize];
        block.extend_from_slice(w.as_bytes());
        if x % 5 == 0 {
            block.extend_from_slice(format!(" {}", x % 100_000).as_bytes());
        }
        block.push(if x % 11 == 0 { b'\n' } else { b' ' });
    }
    block.truncate(1 << 20);

    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..mib {
            f();
        }
        t.elapsed()
    };
    let mut sealed = key.seal(&block);
    let seal = time(&mut || sealed = key.seal(&block));
    let open = time(&mut || assert_eq!(key.open(&sealed).unwrap().len(), block.len()));
    let hash = time(&mut || {
        std::hint::black_box(garage_util::data::blake2sum(&block));
    });
    let mut z = Vec::new();
    let zstd = time(&mut || z = zstd::encode_all(&block[..], 3).unwrap());
    let zsealed = zstd::encode_all(&sealed[..], 3).unwrap();
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / mib as f64;
    let rate = |d: Duration| mib as f64 / d.as_secs_f64();
    println!("{mib} MiB in 1 MiB blocks, one core");
    println!("| step | ms per MiB | MiB/s |");
    println!("|---|---:|---:|");
    for (what, d) in [
        ("AES-256-GCM seal (SSE write)", seal),
        ("AES-256-GCM open (SSE read)", open),
        ("blake2 hash (every block)", hash),
        ("zstd level 3 (plain blocks)", zstd),
    ] {
        println!("| {what} | {:.3} | {:.0} |", per(d), rate(d));
    }
    println!(
        "zstd level 3 on this text: {} -> {} bytes; on the same block sealed: {} -> {} bytes",
        block.len(),
        z.len(),
        sealed.len(),
        zsealed.len()
    );
}
