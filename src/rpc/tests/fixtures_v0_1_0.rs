//! Fixtures of release v0.1.0 (commit cae52f3): the bytes that build wrote
//! for the cluster layout (the file `cluster_layout` in the metadata
//! directory, also sent in `SystemRpc::Layout`) and for each `SystemRpc`
//! message. Every later build must decode them into the values below.
//!
//! The files in `tests/fixtures/v0.1.0/` were written by v0.1.0 itself:
//! this test, copied into `git archive cae52f3`, run there with
//! `GARAGE_WRITE_FIXTURES=1 cargo test -p garage_rpc --test fixtures_v0_1_0`
//! (which writes missing files, never overwrites one). Never regenerate
//! them from a later build: for a new release's formats, add a new
//! directory and test. When a field is added to one of these types,
//! add it to the samples here with the value an older message decodes to.

use std::collections::BTreeMap;

use garage_rpc::layout::{
    ClassSpec, EcCode, EcRing, LayoutHistory, LayoutParameters, LayoutStaging, LayoutVersion,
    NodeRole, UpdateTrackers, ZoneRedundancy,
};
use garage_rpc::system::status::{FreeSpace, LayoutDigest, NodeStatus};
use garage_rpc::system::SystemRpc;
use garage_rpc::NodeId;
use garage_util::crdt::{Lww, LwwMap};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v0.1.0");

/// The bytes of fixture `name` (see `garage_util::fixtures`).
fn fixture(name: &str, encode: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    garage_util::fixtures::fixture(DIR, name, encode)
}

const T: u64 = 1_700_000_000_000;
const TB: u64 = 1_000_000_000_000;

fn node(b: u8) -> NodeId {
    NodeId([b; 32])
}

fn role(zone: &str, capacity: Option<u64>, tags: &[&str]) -> NodeRole {
    NodeRole {
        zone: zone.into(),
        capacity,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

/// For each partition, `n` distinct indices among 3 storage nodes.
fn ring(n: usize) -> Vec<Vec<u16>> {
    (0..256u16)
        .map(|p| (0..n as u16).map(|i| (p + i) % 3).collect())
        .collect()
}

fn version(v: u64, parameters: LayoutParameters, with_gateway: bool) -> LayoutVersion {
    let mut roles = BTreeMap::new();
    roles.insert(node(1), role("dc1", Some(TB), &["ssd"]));
    roles.insert(node(2), role("dc2", Some(2 * TB), &[]));
    roles.insert(node(3), role("dc3", Some(TB), &["hdd", "old"]));
    if with_gateway {
        roles.insert(node(4), role("dc1", None, &["gateway"]));
    }
    let ec = EcCode { data: 2, parity: 1 };
    let offers_ec = !parameters.storage_classes.is_empty();
    LayoutVersion {
        version: v,
        replication_factor: 3,
        parameters,
        partition_size: 3_906_250_000,
        roles,
        storage_nodes: vec![node(1), node(2), node(3)],
        ring: ring(3),
        classes: match offers_ec {
            true => [("STANDARD_IA".to_string(), ec), ("GLACIER".to_string(), ec)].into(),
            false => BTreeMap::new(),
        },
        ec_rings: match offers_ec {
            true => vec![EcRing {
                code: ec,
                ring: ring(3),
                scope: 0,
                zones: Default::default(),
                max_per_zone: None,
            }],
            false => vec![],
        },
        placed: BTreeMap::new(),
    }
}

/// Two applied versions (the second with storage classes and a gateway),
/// changes staged on top, and the trackers of a layout change under way.
fn layout() -> LayoutHistory {
    let classes = LayoutParameters {
        zone_redundancy: ZoneRedundancy::AtLeast(2),
        storage_classes: [
            ("STANDARD_IA".to_string(), ClassSpec::Auto),
            (
                "GLACIER".to_string(),
                ClassSpec::Code(EcCode { data: 2, parity: 1 }),
            ),
            ("ONEZONE_IA".to_string(), ClassSpec::Off),
        ]
        .into(),
        class_defs: BTreeMap::new(),
    };
    let mut roles = LwwMap::new();
    roles.merge_raw(node(5), T + 10, Some(role("dc2", Some(3 * TB), &[])));
    roles.merge_raw(node(4), T + 11, None);
    let tracker = |v: &[(u8, u64)]| v.iter().map(|(n, v)| (node(*n), *v)).collect();
    LayoutHistory {
        versions: vec![
            version(1, LayoutParameters::default(), false),
            version(2, classes.clone(), true),
        ],
        staging: LayoutStaging {
            roles,
            parameters: Lww::raw(T + 12, classes),
        },
        trackers: UpdateTrackers {
            ack: tracker(&[(1, 2), (2, 2), (3, 2), (4, 2)]),
            sync: tracker(&[(1, 2), (2, 1), (3, 1), (4, 2)]),
            sync_ack: tracker(&[(1, 1), (2, 1), (3, 1), (4, 1)]),
        },
    }
}

#[test]
fn cluster_layout_file() {
    let sample = layout();
    let bytes = fixture("cluster_layout", || sample.to_bytes());
    let decoded = LayoutHistory::from_bytes(&bytes).unwrap();
    assert_eq!(decoded, sample);
    assert_eq!(decoded.current().version, 2);
    assert!(decoded.has_staged_changes());
}

fn status() -> NodeStatus {
    NodeStatus {
        hostname: "node1.dc1".into(),
        replication_factor: 3,
        rpc_public_addr: Some("192.0.2.1:3901".parse().unwrap()),
        layout: LayoutDigest {
            version: 2,
            hash: [0x5a; 32],
        },
        metadata_space: Some(FreeSpace {
            available: 40 << 30,
            total: 100 << 30,
        }),
        data_space: Some(FreeSpace {
            available: 700 * TB / 1000,
            total: TB,
        }),
        clock_ms: T,
        // Added after v0.1.0 (absent from its messages, hence from the
        // copy of this test that wrote them).
        version: None,
    }
}

/// Messages travel as `rmp_serde::to_vec_named` (see
/// `garage_net::Message`). `SystemRpc` has no `PartialEq`: the decoded
/// message must encode, with this build, as the sample does.
#[test]
fn system_rpc() {
    let peers = vec![
        (node(2), "198.51.100.2:3901".parse().unwrap()),
        (node(3), "[2001:db8::3]:3901".parse().unwrap()),
    ];
    let messages = vec![
        ("ping", SystemRpc::Ping(status())),
        ("pong", SystemRpc::Pong(status(), peers)),
        ("pull_layout", SystemRpc::PullLayout),
        ("layout", SystemRpc::Layout(Box::new(layout()))),
        ("ok", SystemRpc::Ok),
        (
            "error",
            SystemRpc::Error("layout version 3 is not the next one".into()),
        ),
    ];
    let named = |m: &SystemRpc| rmp_serde::to_vec_named(m).unwrap();
    for (name, msg) in messages {
        let name = format!("system_rpc_{name}");
        let bytes = fixture(&name, || named(&msg));
        let decoded: SystemRpc =
            rmp_serde::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(named(&decoded), named(&msg), "{name}: {decoded:?}");
        if let (
            SystemRpc::Ping(d) | SystemRpc::Pong(d, _),
            SystemRpc::Ping(s) | SystemRpc::Pong(s, _),
        ) = (&decoded, &msg)
        {
            assert_eq!(d, s, "{name}");
        }
    }
}
