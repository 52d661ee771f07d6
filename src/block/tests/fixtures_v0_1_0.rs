//! Fixtures of release v0.1.0 (commit cae52f3): the bytes that build wrote
//! for each `BlockRpc` message, for the shards of an erasure-coded block
//! (as stored on disk and sent), and for what the block manager keeps in
//! the metadata database (reference counts, resync errors, scrub state).
//! Every later build must decode them into the values below.
//!
//! The files in `tests/fixtures/v0.1.0/` were written by v0.1.0 itself:
//! this test, copied into `git archive cae52f3`, run there with
//! `GARAGE_WRITE_FIXTURES=1 cargo test -p garage_block --test fixtures_v0_1_0`
//! (which writes missing files, never overwrites one). Never regenerate
//! them from a later build: for a new release's formats, add a new
//! directory and test.

use bytes::Bytes;
use garage_block::ec::{self, Shard, ShardInfo};
use garage_block::manager::BlockRpc;
use garage_block::rc::{BlockRc, RcEntry};
use garage_block::resync::ResyncError;
use garage_block::scrub::ScrubState;
use garage_block::DataBlock;
use garage_rpc::layout::EcCode;
use garage_util::data::{blake2sum, Hash};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v0.1.0");

/// The bytes of fixture `name` (see `garage_util::fixtures`).
fn fixture(name: &str, encode: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    garage_util::fixtures::fixture(DIR, name, encode)
}

const T: u64 = 1_700_000_000_000;

fn hash(b: u8) -> Hash {
    Hash::from([b; 32])
}

/// Messages travel as `rmp_serde::to_vec_named` (see
/// `garage_net::Message`). `BlockRpc` has no `PartialEq`: the decoded
/// message must encode, with this build, as the sample does.
#[test]
fn block_rpc() {
    let h = hash(0x01);
    let messages = vec![
        ("ok", BlockRpc::Ok),
        ("error", BlockRpc::Error("block not found".into())),
        (
            "put_block",
            BlockRpc::PutBlock {
                hash: h,
                compressed: true,
            },
        ),
        ("get_block", BlockRpc::GetBlock { hash: h }),
        ("block_header", BlockRpc::BlockHeader { compressed: false }),
        ("need_block", BlockRpc::NeedBlock(h)),
        ("need_block_reply", BlockRpc::NeedBlockReply(true)),
        ("put_shard", BlockRpc::PutShard { addr: h, index: 2 }),
        ("get_shard", BlockRpc::GetShard { addr: h, index: 1 }),
        ("shard_body", BlockRpc::ShardBody),
        (
            "missing_shards",
            BlockRpc::MissingShards {
                addr: h,
                indices: vec![0, 2, 5],
            },
        ),
        (
            "missing_shards_reply",
            BlockRpc::MissingShardsReply(vec![2]),
        ),
        ("delete_shards", BlockRpc::DeleteShards { addr: h }),
        ("counts_refs", BlockRpc::CountsRefs(h)),
        ("counts_refs_reply", BlockRpc::CountsRefsReply(false)),
    ];
    let named = |m: &BlockRpc| rmp_serde::to_vec_named(m).unwrap();
    for (name, msg) in messages {
        let name = format!("block_rpc_{name}");
        let bytes = fixture(&name, || named(&msg));
        let decoded: BlockRpc =
            rmp_serde::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(named(&decoded), named(&msg), "{name}: {decoded:?}");
    }
}

/// The three shards (2 data + 1 parity) of a zstd-compressed block: each
/// parses with its checksum, and any two of them rebuild the block.
#[test]
fn ec_shards() {
    let plain = Bytes::from("garage stores this block erasure-coded. ".repeat(100));
    let content = blake2sum(&plain);
    let code = EcCode { data: 2, parity: 1 };
    let addr = ec::ec_address(&content, code);
    let fresh = || {
        let block = DataBlock::from_plain(plain.clone(), Some(3));
        assert!(block.is_compressed());
        ec::encode(&block, content, code).unwrap()
    };
    let shards: Vec<Shard> = (0..3u8)
        .map(|i| {
            let bytes = fixture(&format!("ec_shard_{i}"), || {
                fresh()[i as usize].to_bytes().to_vec()
            });
            let shard = Shard::parse(Bytes::from(bytes), Some((&addr, i))).unwrap();
            let info = ShardInfo {
                code: code.into(),
                index: i,
                compressed: true,
                stored_len: shard.info.stored_len,
                content,
            };
            assert_eq!(shard.info, info);
            assert!(shard.info.stored_len < plain.len() as u32);
            shard
        })
        .collect();
    for pair in [[0, 1], [0, 2], [1, 2]] {
        let some: Vec<Shard> = pair.iter().map(|&i| shards[i].clone()).collect();
        assert_eq!(ec::decode(&addr, &some).unwrap(), plain, "shards {pair:?}");
    }
}

/// Reference counts, written and read by `BlockRc` itself.
#[test]
fn reference_counts() {
    const DELAY: u64 = 600_000;
    let (_dir, db) = garage_table::testing::temp_db();
    let rc = BlockRc::open(&db, DELAY).unwrap();
    let run = |f: &dyn Fn(&mut garage_db::Transaction<'_>) -> garage_db::Result<()>| {
        db.transaction(|tx| -> garage_db::TxResult<(), ()> { Ok(f(tx)?) })
            .unwrap()
    };
    let (present, deletable) = (hash(0x02), hash(0x03));
    let cases = [
        ("rc_present", present, RcEntry::Present { count: 2 }),
        (
            "rc_deletable",
            deletable,
            RcEntry::Deletable {
                deletable_after: T + 1 + DELAY,
            },
        ),
    ];
    for (name, h, want) in cases {
        let bytes = fixture(name, || {
            run(&|tx| {
                rc.incref(tx, &h, T)?;
                match want {
                    RcEntry::Present { .. } => rc.incref(tx, &h, T),
                    RcEntry::Deletable { .. } => rc.decref(tx, &h, T + 1),
                }
            });
            rc.rc.get(h.as_slice()).unwrap().unwrap()
        });
        rc.rc.insert(h.as_slice(), &bytes).unwrap();
        assert_eq!(rc.get(&h).unwrap(), Some(want), "{name}");
    }
}

/// What the resync and scrub workers keep in the metadata database
/// (`rmp_serde::to_vec`, as `BlockManager` writes them).
#[test]
fn worker_state() {
    let error = ResyncError {
        failures: 3,
        last_try: T,
        next_try: T + 8_000,
    };
    let bytes = fixture("resync_error", || rmp_serde::to_vec(&error).unwrap());
    assert_eq!(rmp_serde::from_slice::<ResyncError>(&bytes).unwrap(), error);

    let scrub = ScrubState {
        cursor: Some(hash(0x04)),
        running: true,
        paused: false,
        tranquility: 4,
        last_completed: Some(T - 30 * 86_400_000),
        checked: 123_456,
        corrupted: 2,
    };
    let bytes = fixture("scrub_state", || rmp_serde::to_vec(&scrub).unwrap());
    assert_eq!(rmp_serde::from_slice::<ScrubState>(&bytes).unwrap(), scrub);
}
