//! Fuzz targets of what a peer sends to be decoded: every RPC message type
//! (msgpack) and every table entry (`garage_table::encoding`), with bolero:
//! `cargo test -p garage_model --test fuzz` runs each for a short budget
//! (`GARAGE_FUZZ_SECONDS`, default 1 s; see doc/security.md). Decoded
//! entries are also merged, as a node merges what it receives.

use garage_util::fuzzing::budget;

use garage_block::manager::BlockRpc;
use garage_model::block_ref_table::{BlockRef, BlockRefTable};
use garage_model::bucket_alias_table::{BucketAlias, BucketAliasTable};
use garage_model::bucket_table::{Bucket, BucketTable};
use garage_model::counter_table::{CounterEntry, CounterTable};
use garage_model::key_table::{Key, KeyTable};
use garage_model::mpu_table::{MpuTable, MultipartUpload};
use garage_model::object_table::{Object, ObjectTable};
use garage_model::version_table::{Version, VersionTable};
use garage_rpc::system::SystemRpc;
use garage_table::cas::CasRpc;
use garage_table::encoding;
use garage_table::rpc::TableRpc;
use garage_util::crdt::Crdt;
use serde::de::DeserializeOwned;

fn decode_as<T: DeserializeOwned>(b: &[u8]) {
    let _ = rmp_serde::from_slice::<T>(b);
}

/// Any bytes, as each message type a node's endpoints decode.
#[test]
fn fuzz_rpc_messages() {
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(1 << 16)
        .for_each(|b: &[u8]| {
            decode_as::<SystemRpc>(b);
            decode_as::<BlockRpc>(b);
            decode_as::<CasRpc>(b);
            decode_as::<TableRpc<ObjectTable>>(b);
            decode_as::<TableRpc<VersionTable>>(b);
            decode_as::<TableRpc<BlockRefTable>>(b);
            decode_as::<TableRpc<MpuTable>>(b);
            decode_as::<TableRpc<BucketTable>>(b);
            decode_as::<TableRpc<BucketAliasTable>>(b);
            decode_as::<TableRpc<KeyTable>>(b);
            decode_as::<TableRpc<CounterTable>>(b);
        });
}

/// Decodes `a` and `b` as entries of type `E`; merges what decodes, both
/// ways and with itself, as a node merges a received entry into its own.
fn decode_and_merge<E: DeserializeOwned + Crdt + Clone>(a: &[u8], b: &[u8]) {
    let (Ok(x), Ok(y)) = (encoding::decode::<E>(a), encoding::decode::<E>(b)) else {
        return;
    };
    let mut xy = x.clone();
    xy.merge(&y);
    let mut yx = y;
    yx.merge(&x);
    let mut xx = x.clone();
    xx.merge(&x);
}

/// Any bytes as an encoded entry of each table (after the format byte, so
/// that the msgpack decoder is reached), two at a time to merge them.
#[test]
fn fuzz_table_entries() {
    // The format byte of the current encoding.
    let format = encoding::encode(&())[0];
    bolero::check!()
        .with_test_time(budget())
        .with_max_len(1 << 16)
        .with_type::<(Vec<u8>, Vec<u8>)>()
        .for_each(|(a, b)| {
            let framed = |v: &[u8]| {
                let mut f = vec![format];
                f.extend_from_slice(v);
                f
            };
            let (a, b) = (framed(a), framed(b));
            decode_and_merge::<Object>(&a, &b);
            decode_and_merge::<Version>(&a, &b);
            decode_and_merge::<BlockRef>(&a, &b);
            decode_and_merge::<MultipartUpload>(&a, &b);
            decode_and_merge::<Bucket>(&a, &b);
            decode_and_merge::<BucketAlias>(&a, &b);
            decode_and_merge::<Key>(&a, &b);
            decode_and_merge::<CounterEntry>(&a, &b);
        });
}
