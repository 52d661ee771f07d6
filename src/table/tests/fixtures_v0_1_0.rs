//! Fixtures of release v0.1.0 (commit cae52f3): the bytes that build wrote
//! for the messages between table replicas (`TableRpc`, `CasRpc`), for the
//! Merkle nodes it stores, and for the database keys of entries. Every
//! later build must decode them into the values below (and store entries
//! under the same keys).
//!
//! The files in `tests/fixtures/v0.1.0/` were written by v0.1.0 itself:
//! this test, copied into `git archive cae52f3`, run there with
//! `GARAGE_WRITE_FIXTURES=1 cargo test -p garage_table --test fixtures_v0_1_0`
//! (which writes missing files, never overwrites one). Never regenerate
//! them from a later build: for a new release's formats, add a new
//! directory and test. The entries of the model's tables have their
//! own fixtures in garage_model.

use garage_table::cas::{Ballot, CasRpc};
use garage_table::encoding;
use garage_table::merkle::MerkleNode;
use garage_table::rpc::TableRpc;
use garage_table::testing::{TestEntry, TestTable};
use garage_util::data::{blake2sum, Hash};
use serde::Serialize;
use serde_bytes::ByteBuf;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v0.1.0");

/// The bytes of fixture `name` (see `garage_util::fixtures`).
fn fixture(name: &str, encode: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    garage_util::fixtures::fixture(DIR, name, encode)
}

/// RPC messages travel as `rmp_serde::to_vec_named` (see
/// `garage_net::Message`). The message types have no `PartialEq`: the
/// decoded message must encode, with this build, as the sample does.
fn check_message<M>(name: &str, sample: &M) -> M
where
    M: Serialize + serde::de::DeserializeOwned,
{
    let named = |m: &M| rmp_serde::to_vec_named(m).unwrap();
    let bytes = fixture(name, || named(sample));
    let decoded: M = rmp_serde::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(named(&decoded), named(sample), "{name}");
    decoded
}

const T: u64 = 1_700_000_000_000;

fn hash(b: u8) -> Hash {
    Hash::from([b; 32])
}

fn entry(s: &str) -> ByteBuf {
    ByteBuf::from(encoding::encode(&TestEntry::raw("p", s, T, Some("v"))))
}

fn merkle_nodes() -> Vec<(&'static str, MerkleNode)> {
    vec![
        ("merkle_node_empty", MerkleNode::Empty),
        (
            "merkle_node_intermediate",
            MerkleNode::Intermediate(vec![
                (0x00, hash(0x01)),
                (0x7f, hash(0x02)),
                (0xff, hash(0x03)),
            ]),
        ),
        (
            "merkle_node_leaf",
            MerkleNode::Leaf(
                encoding::tree_key(&"p".to_string(), &"s".to_string()),
                hash(0x04),
            ),
        ),
    ]
}

#[test]
fn table_rpc() {
    let messages: Vec<(&str, TableRpc<TestTable>)> = vec![
        ("ok", TableRpc::Ok),
        ("error", TableRpc::Error("no such table".into())),
        ("read_entry", TableRpc::ReadEntry("p".into(), "s".into())),
        (
            "read_entry_response",
            TableRpc::ReadEntryResponse(Some(entry("s"))),
        ),
        (
            "read_entry_response_none",
            TableRpc::ReadEntryResponse(None),
        ),
        (
            "read_range",
            TableRpc::ReadRange {
                partition_key: "p".into(),
                start: Some("s".into()),
                limit: 1000,
                reverse: true,
            },
        ),
        ("entries", TableRpc::Entries(vec![entry("a"), entry("b")])),
        ("update", TableRpc::Update(vec![entry("a")])),
        (
            "get_merkle_nodes",
            TableRpc::GetMerkleNodes {
                partition: 7,
                prefixes: vec![ByteBuf::new(), ByteBuf::from(vec![0x12, 0x34])],
            },
        ),
        (
            "merkle_nodes",
            TableRpc::MerkleNodes(merkle_nodes().into_iter().map(|(_, n)| n).collect()),
        ),
        (
            "delete_if_equal_hash",
            TableRpc::DeleteIfEqualHash(vec![(ByteBuf::from(vec![1, 2, 3]), hash(0x05))]),
        ),
        ("update_ordered", TableRpc::UpdateOrdered(vec![entry("c")])),
        ("refused", TableRpc::Refused(vec![None, Some(T + 1)])),
    ];
    for (name, msg) in messages {
        let decoded = check_message(&format!("table_rpc_{name}"), &msg);
        assert_eq!(decoded.kind(), msg.kind());
    }
}

#[test]
fn cas_rpc() {
    let ballot = Ballot {
        round: T,
        proposer: 0x1234_5678,
    };
    let messages = vec![
        (
            "prepare",
            CasRpc::Prepare {
                key: hash(0x06),
                ballot,
            },
        ),
        (
            "accept",
            CasRpc::Accept {
                key: hash(0x06),
                ballot,
                value: ByteBuf::from(b"value".to_vec()),
                partition: None,
                handoff: false,
            },
        ),
        (
            "promise",
            CasRpc::Promise {
                accepted: Some((ballot, ByteBuf::from(b"value".to_vec()))),
            },
        ),
        ("promise_none", CasRpc::Promise { accepted: None }),
        ("accepted", CasRpc::Accepted),
        ("nack", CasRpc::Nack { promised: ballot }),
        ("error", CasRpc::Error("layout changed".into())),
    ];
    for (name, msg) in messages {
        check_message(&format!("cas_rpc_{name}"), &msg);
    }
}

/// Merkle nodes are stored in format 1 (field names), and their hashes
/// (of those bytes) are compared between nodes: a later build must decode
/// them, and encode each node to the same bytes, or replicas running
/// different builds would find every partition different.
#[test]
fn merkle_nodes_stored() {
    for (name, node) in merkle_nodes() {
        let bytes = fixture(name, || encoding::encode_named(&node));
        let decoded: MerkleNode =
            encoding::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, node, "{name}");
        assert_eq!(
            node.hash(),
            blake2sum(&bytes),
            "{name}: encoded differently now"
        );
    }
}

/// Where the database keeps an entry: its partition key's hash, then its
/// sort key (a sort key too long for the database cut, then hashed).
#[test]
fn tree_keys() {
    let keys = [
        ("tree_key", "photos/cat.jpg".to_string()),
        ("tree_key_long", "k".repeat(3000)),
    ];
    for (name, sort_key) in keys {
        let key = encoding::tree_key(&"bucket".to_string(), &sort_key);
        assert_eq!(fixture(name, || key.clone()), key, "{name}");
    }
}
