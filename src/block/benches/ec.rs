//! Erasure coding cost per MiB on one core: `cargo bench -p garage_block --bench ec`.
//!
//! For 1 MiB blocks of random data, codes 2+1, 4+2 and 6+2: encoding
//! (cutting into shards, Reed–Solomon parity, shard headers with their
//! blake2 checksums), and decoding from the data shards only (no
//! Reed–Solomon work: the code is systematic) and from the worst case, as
//! many parity shards as the code has (each with its checksum checked,
//! and the rebuilt block's content hash). One thread, no I/O.

use std::time::Instant;

use bytes::Bytes;
use garage_block::block::DataBlock;
use garage_block::ec::{decode, ec_address, encode, Shard};
use garage_rpc::layout::EcCode;
use garage_util::data::blake2sum;

const BLOCK: usize = 1 << 20;
const ROUNDS: usize = 64;

fn main() {
    let data: Bytes = (0..BLOCK)
        .map(|_| rand::random::<u8>())
        .collect::<Vec<_>>()
        .into();
    let content = blake2sum(&data);
    let block = DataBlock::Plain(data.clone());
    println!("code   encode MiB/s  decode(data shards) MiB/s  decode(parity shards used) MiB/s");
    for code in ["2+1", "4+2", "6+2"] {
        let code: EcCode = code.parse().unwrap();
        let addr = ec_address(&content, code);
        let t = Instant::now();
        let mut wire = Vec::new();
        for _ in 0..ROUNDS {
            wire = encode(&block, content, code)
                .unwrap()
                .iter()
                .map(Shard::to_bytes)
                .collect::<Vec<_>>();
        }
        let enc = ROUNDS as f64 / t.elapsed().as_secs_f64();
        let parse = |idx: &[usize]| -> Vec<Shard> {
            idx.iter()
                .map(|&i| Shard::parse(wire[i].clone(), Some((&addr, i as u8))).unwrap())
                .collect()
        };
        let data_idx: Vec<usize> = (0..code.data()).collect();
        // The first `parity` data shards lost: parity shards stand in.
        let worst_idx: Vec<usize> = (code.parity()..code.shards()).collect();
        let mut rates = Vec::new();
        for idx in [data_idx, worst_idx] {
            let t = Instant::now();
            for _ in 0..ROUNDS {
                let got = decode(&addr, &parse(&idx)).unwrap();
                assert_eq!(got.len(), BLOCK);
            }
            rates.push(ROUNDS as f64 / t.elapsed().as_secs_f64());
        }
        println!("{code}    {enc:12.0}  {:25.0}  {:24.0}", rates[0], rates[1]);
    }
}
