//! How entries are laid out in the metadata database.
//!
//! Tree key: the 32-byte partition hash, then the sort key. The database
//! takes keys of at most [`garage_db::MAX_KEY_LEN`] (1982) bytes, so every
//! sort key the model makes (an S3 key is at most 1024 bytes) is kept
//! verbatim and entries are in exact sort-key order. A longer sort key
//! would be stored as its first [`MAX_INLINE_SORT_KEY`] bytes followed by
//! the blake2 hash of the whole sort key (ordered by hash among keys
//! sharing those first bytes).
//!
//! Databases written before the limit was raised (when it was 446 bytes)
//! are re-keyed once when a table opens: see [`OLD_LONG_TREE_KEY_LEN`].
//!
//! Value: one format byte, then the entry in MessagePack. Format 2 (written
//! today) lays structs out as arrays, fields in declaration order, without
//! their names: about a quarter smaller for an object entry. A field can
//! still be added, at the end of its struct with `#[serde(default)]`: an
//! older entry's shorter array decodes with the default. No field may be
//! skipped when serialized (`skip_serializing_if`), since positions would
//! shift; the one exception is a struct's last field, skipped when empty so
//! that values without it keep the bytes an older release reads (a gated
//! field: see `LifecycleRule::noncurrent_transitions`). Format 1 (field names, written before) is still read; an entry
//! stored in it is rewritten in format 2 the next time a write reaches it,
//! even one that changes nothing, so that replicas converge on the same
//! bytes and their Merkle trees agree (see `TableData::merge_in_tx`).
//!
//! Format 3 is how a table *stores* format 2 once the cluster is finalized
//! at v0.3.0 (feature `compressed-entries`): the bytes that repeat the
//! tree key (a bucket id and object key, a version id...) are cut out,
//! and the rest is compressed by zstd with a dictionary built into every
//! release ([`DICTIONARY`], frozen: a new dictionary would be a new
//! format), the frame stored without its 4 magic bytes. An object entry
//! of a 16-byte PUT takes about 110 bytes instead of 330. It is not
//! another encoding of an entry: it is read back with its tree key into
//! the entry's *canonical* bytes ([`canonical`]: format 2), which are what
//! leaves the node (RPC answers, sync) and what the value hash that Merkle
//! trees and the GC compare between nodes is taken over ([`value_hash`]),
//! so replicas that store an entry in different formats (or compressed by
//! another zstd release) agree on it, and the wire format does not change.
//!
//! Merkle nodes keep format 1, since their hashes are compared between
//! nodes: changing their bytes would make every tree differ.

use std::borrow::Cow;
use std::cell::RefCell;

use garage_util::crdt::Crdt;
use garage_util::data::{blake2sum, Hash};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::schema::{PartitionKey, SortKey};

/// Sort-key bytes kept verbatim in a tree key (32 + 1918 + 32 = 1982
/// bytes, the database's limit).
pub const MAX_INLINE_SORT_KEY: usize = garage_db::MAX_KEY_LEN - 64;

/// Length of the tree key of a long sort key in the previous layout
/// (32 + 446 + 32 bytes: sort keys were cut after 446 bytes).
pub const OLD_LONG_TREE_KEY_LEN: usize = 510;

/// MessagePack with field names (written before format 2; still read).
const FORMAT_NAMED: u8 = 1;
/// MessagePack with structs as arrays (written today).
const FORMAT_COMPACT: u8 = 2;
/// How a table stores format 2 once the cluster allows it, without the
/// parts of its tree key and compressed (see the module's doc).
const FORMAT_STORED: u8 = 3;

/// The dictionary of format 3: typical entries of the model's tables in
/// format 2 (objects, versions, block references, parts), as raw content.
/// Frozen: every value compressed with it needs these exact bytes to be
/// read back (a test checks their hash).
pub const DICTIONARY: &[u8] = include_bytes!("entries.dict");
/// The zstd frame's magic number, not stored in format 3.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// zstd level of format 3: entries are small and the dictionary does the
/// work; level 1 stores the same bytes as level 3 here in half the time
/// (about 1.2 µs for an object entry; `format_3_speed`).
const ZSTD_LEVEL: i32 = 1;
/// The largest entry format 3 will decompress: a corrupt frame header must
/// not make a node allocate without bound.
const MAX_DECOMPRESSED: u64 = 256 << 20;

/// The tree key of the entry with these keys.
pub fn tree_key<P: PartitionKey, S: SortKey>(p: &P, s: &S) -> Vec<u8> {
    tree_key_raw(p.hash().as_slice(), s.sort_key())
}

pub fn tree_key_raw(partition_hash: &[u8], sort_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + sort_key.len().min(MAX_INLINE_SORT_KEY + 32));
    k.extend_from_slice(partition_hash);
    if sort_key.len() <= MAX_INLINE_SORT_KEY {
        k.extend_from_slice(sort_key);
    } else {
        k.extend_from_slice(&sort_key[..MAX_INLINE_SORT_KEY]);
        k.extend_from_slice(blake2sum(sort_key).as_slice());
    }
    k
}

/// Why stored bytes are not an entry.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("empty value")]
    Empty,
    #[error("unknown entry format {0}")]
    UnknownFormat(u8),
    #[error("cannot decode entry: {0}")]
    Msgpack(#[from] rmp_serde::decode::Error),
    #[error("stored entry (format 3) read without its tree key")]
    NeedsKey,
    #[error("cannot restore stored entry (format 3): {0}")]
    Stored(String),
}

/// An entry's stored bytes, in the current format.
pub fn encode<E: Serialize>(entry: &E) -> Vec<u8> {
    let mut v = vec![FORMAT_COMPACT];
    rmp_serde::encode::write(&mut v, entry).expect("entries always serialize");
    v
}

/// Bytes in format 1 (field names): for Merkle nodes, whose hashes must
/// not change.
pub fn encode_named<E: Serialize>(entry: &E) -> Vec<u8> {
    let mut v = vec![FORMAT_NAMED];
    rmp_serde::encode::write_named(&mut v, entry).expect("entries always serialize");
    v
}

/// Whether stored bytes are in the format [`encode`] writes today.
pub fn is_current(bytes: &[u8]) -> bool {
    bytes.first() == Some(&FORMAT_COMPACT)
}

/// Decodes bytes in format 1 or 2 (as received from another node, or
/// canonical bytes). Stored bytes may be in format 3, which needs its tree
/// key: see [`decode_stored`].
pub fn decode<E: DeserializeOwned>(bytes: &[u8]) -> Result<E, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&(FORMAT_NAMED | FORMAT_COMPACT), rest)) => Ok(rmp_serde::from_slice(rest)?),
        Some((&FORMAT_STORED, _)) => Err(DecodeError::NeedsKey),
        Some((&f, _)) => Err(DecodeError::UnknownFormat(f)),
    }
}

/// Decodes a value read from a table's store at tree key `key`.
pub fn decode_stored<E: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<E, DecodeError> {
    decode(&canonical(key, bytes)?)
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// Appends `n` in LEB128 (7 bits a byte, low first).
fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a LEB128 number from the start of `b`; returns it and the rest.
fn get_varint(mut b: &[u8]) -> Result<(usize, &[u8]), DecodeError> {
    let mut n = 0usize;
    for shift in (0..usize::BITS).step_by(7) {
        let (&x, rest) = b
            .split_first()
            .ok_or_else(|| DecodeError::Stored("cut header ends early".into()))?;
        b = rest;
        n |= ((x & 0x7f) as usize) << shift;
        if x & 0x80 == 0 {
            return Ok((n, b));
        }
    }
    Err(DecodeError::Stored("cut header too long".into()))
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The two parts of a tree key that entries usually repeat: the partition
/// hash (a bucket id, a version id, a block hash) and the sort key.
fn key_parts(key: &[u8]) -> (&[u8], &[u8]) {
    key.split_at(key.len().min(32))
}

/// The header of format 3 (where the key's parts were cut) and what is
/// left of `canonical` to compress: what a dictionary of format 3 is built
/// from.
pub fn cut_key_parts(key: &[u8], canonical: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (phash, skey) = key_parts(key);
    let mut rest = canonical.to_vec();
    let mut header = Vec::with_capacity(4);
    for part in [phash, skey] {
        match find(&rest, part).filter(|_| part.len() >= 2) {
            Some(at) => {
                rest.drain(at..at + part.len());
                put_varint(&mut header, at + 1);
            }
            None => header.push(0),
        }
    }
    (header, rest)
}

/// How the value `canonical` (format 2 bytes, from [`encode`]) of the
/// entry at tree key `key` is stored when the cluster allows format 3: the
/// first occurrence of the key's partition hash, then the first occurrence
/// of its sort key in what is left, are cut out (they are in the tree key
/// already) and the rest is compressed. As it is when that is not smaller.
pub fn to_stored(key: &[u8], canonical: Vec<u8>) -> Vec<u8> {
    debug_assert!(is_current(&canonical));
    let (header, rest) = cut_key_parts(key, &canonical);
    let frame = COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = Some(
                zstd::bulk::Compressor::with_dictionary(ZSTD_LEVEL, DICTIONARY)
                    .map_err(|e| e.to_string())?,
            );
        }
        c.as_mut()
            .expect("just set")
            .compress(&rest)
            .map_err(|e| e.to_string())
    });
    match frame {
        Ok(f)
            if f.starts_with(&ZSTD_MAGIC)
                && 1 + header.len() + f.len() - ZSTD_MAGIC.len() < canonical.len() =>
        {
            let mut v = Vec::with_capacity(1 + header.len() + f.len() - ZSTD_MAGIC.len());
            v.push(FORMAT_STORED);
            v.extend_from_slice(&header);
            v.extend_from_slice(&f[ZSTD_MAGIC.len()..]);
            v
        }
        // zstd failing (out of memory) costs space, never the entry.
        _ => canonical,
    }
}

/// The canonical (format 2) bytes of format 3 bytes stored at `key`.
fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let (p_at, rest) = get_varint(&bytes[1..])?;
    let (s_at, body) = get_varint(rest)?;
    let mut frame = Vec::with_capacity(body.len() + ZSTD_MAGIC.len());
    frame.extend_from_slice(&ZSTD_MAGIC);
    frame.extend_from_slice(body);
    let size = match zstd::zstd_safe::get_frame_content_size(&frame) {
        Ok(Some(n)) if n <= MAX_DECOMPRESSED => n as usize,
        Ok(Some(n)) => return Err(DecodeError::Stored(format!("content of {n} bytes"))),
        Ok(None) | Err(_) => return Err(DecodeError::Stored("no content size".into())),
    };
    let mut out = DECOMPRESSOR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(
                zstd::bulk::Decompressor::with_dictionary(DICTIONARY)
                    .map_err(|e| DecodeError::Stored(e.to_string()))?,
            );
        }
        d.as_mut()
            .expect("just set")
            .decompress(&frame, size)
            .map_err(|e| DecodeError::Stored(e.to_string()))
    })?;
    if out.len() != size {
        return Err(DecodeError::Stored(
            "content shorter than its header says".into(),
        ));
    }
    // Put back what was cut, the last cut first.
    let (phash, skey) = key_parts(key);
    for (at, part) in [(s_at, skey), (p_at, phash)] {
        if at == 0 {
            continue;
        }
        if at - 1 > out.len() {
            return Err(DecodeError::Stored("cut past the end".into()));
        }
        out.splice(at - 1..at - 1, part.iter().copied());
    }
    Ok(out)
}

/// The canonical bytes of a value stored at tree key `key`: format 3
/// restored, any other format as it is.
pub fn canonical<'a>(key: &[u8], bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError> {
    match bytes.first() {
        Some(&FORMAT_STORED) => Ok(Cow::Owned(from_stored(key, bytes)?)),
        _ => Ok(Cow::Borrowed(bytes)),
    }
}

/// The hash of a value stored at `key` that Merkle trees and the GC
/// compare between nodes: of its canonical bytes, however it is stored.
pub fn value_hash(key: &[u8], bytes: &[u8]) -> Result<Hash, DecodeError> {
    Ok(blake2sum(&canonical(key, bytes)?))
}

/// Merges `new` into the encoded `old` (if any); returns the merged entry.
pub fn merge_into<E: Crdt + Clone + DeserializeOwned>(
    old: Option<&[u8]>,
    new: &E,
) -> Result<E, DecodeError> {
    Ok(match old {
        Some(bytes) => {
            let mut e: E = decode(bytes)?;
            e.merge(new);
            e
        }
        None => new.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_util::data::{gen_uuid, Uuid};

    #[test]
    fn keys_fit_the_database_and_keep_order() {
        let p = gen_uuid();
        // S3 keys of 1024 bytes are kept verbatim: exact order, even among
        // keys sharing a long prefix.
        let long_a = format!("{}a", "x".repeat(1023));
        let long_b = format!("{}b", "x".repeat(1023));
        let (ka, kb) = (tree_key(&p, &long_a), tree_key(&p, &long_b));
        assert_eq!(ka.len(), 32 + 1024);
        assert!(ka < kb);
        assert!(ka < tree_key(&p, &"y".to_string()));
        // Longer sort keys are cut and hashed to fit the database.
        let huge = "z".repeat(5000);
        let k = tree_key(&p, &huge);
        assert_eq!(k.len(), garage_db::MAX_KEY_LEN);
        assert_ne!(tree_key(&p, &format!("{huge}!")), k);
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Before {
        a: u64,
        b: Option<String>,
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct After {
        a: u64,
        b: Option<String>,
        #[serde(default)]
        c: Vec<u8>,
    }

    #[test]
    fn both_formats_decode_and_a_field_added_at_the_end_defaults() {
        let old = Before {
            a: 7,
            b: Some("x".into()),
        };
        let want = After {
            a: 7,
            b: Some("x".into()),
            c: vec![],
        };
        let (compact, named) = (encode(&old), encode_named(&old));
        assert!(is_current(&compact) && !is_current(&named));
        assert!(compact.len() < named.len());
        assert_eq!(decode::<After>(&compact).unwrap(), want);
        assert_eq!(decode::<After>(&named).unwrap(), want);
        // A field missing without a default is an error, not a guess.
        assert!(decode::<Before>(&encode(&3u64)).is_err());
    }

    #[test]
    fn the_dictionary_never_changes() {
        // Values stored in format 3 need these exact bytes to be read: a
        // new dictionary is a new format, never an edit of this one.
        assert_eq!(
            hex::encode(blake2sum(DICTIONARY)),
            "32fa30702c771896684e3b13ef567b4a2e6866431f4e790101225288826657d6"
        );
    }

    type Sample = (Uuid, String, Vec<(String, String)>, String, Uuid);

    const FIXTURE_V0_3_0: &str = "03050623036f090063450100a3810503b89fbfdff3bb9ee3b75dd3b31cc3dcef23f7d3874d04fcf8ef3cc379692fce841758a901";

    fn sample() -> (Vec<u8>, Sample) {
        let bucket = gen_uuid();
        let key = "photos/2026/a.jpg".to_string();
        let e = (
            bucket,
            key.clone(),
            vec![("content-type".to_string(), "image/jpeg".to_string())],
            "0123456789abcdef0123456789abcdef".to_string(),
            gen_uuid(),
        );
        (tree_key(&bucket, &key), e)
    }

    #[test]
    fn format_3_stores_the_same_value_smaller() {
        let (key, e) = sample();
        let canon = encode(&e);
        let stored = to_stored(&key, canon.clone());
        assert_eq!(stored[0], FORMAT_STORED);
        // The bucket id and the key are cut (in the tree key already).
        assert!(
            stored.len() + 40 < canon.len(),
            "{} vs {}",
            stored.len(),
            canon.len()
        );
        assert_eq!(decode_stored::<Sample>(&key, &stored).unwrap(), e);
        assert_eq!(canonical(&key, &stored).unwrap().as_ref(), &canon[..]);
        assert_eq!(value_hash(&key, &stored).unwrap(), blake2sum(&canon));
        assert_eq!(value_hash(&key, &canon).unwrap(), blake2sum(&canon));
        // Without its key it is refused, never guessed.
        assert!(matches!(
            decode::<Sample>(&stored),
            Err(DecodeError::NeedsKey)
        ));
        // Read at another key, it is not the entry.
        let (other, _) = sample();
        assert!(canonical(&other, &stored).unwrap().as_ref() != &canon[..]);
        // Bytes that do not compress are stored as they are.
        let tiny = encode(&1u8);
        assert_eq!(to_stored(&key, tiny.clone()), tiny);
        // A value that does not repeat its key is compressed all the same.
        let plain = encode(&(7u64, "x".repeat(100)));
        let st = to_stored(&key, plain.clone());
        assert_eq!(&st[..3], &[FORMAT_STORED, 0, 0]);
        assert_eq!(canonical(&key, &st).unwrap().as_ref(), &plain[..]);
        // Cut or corrupt values are errors or other bytes, never a panic.
        for cut in 1..stored.len() {
            assert!(decode_stored::<Sample>(&key, &stored[..cut]).is_err());
        }
        for i in 1..stored.len() {
            let mut bad = stored.clone();
            bad[i] ^= 0x5a;
            if let Ok(c) = canonical(&key, &bad) {
                assert_ne!(c.as_ref(), &canon[..]);
            }
        }
        assert!(matches!(
            canonical(&key, &[FORMAT_STORED]),
            Err(DecodeError::Stored(_))
        ));
        assert!(canonical(&key, &[FORMAT_STORED, 0xff, 0xff, 0xff]).is_err());
    }

    /// Bytes stored in format 3 by v0.3.0 (a fixed entry at a fixed key):
    /// every later release must read them back to the same entry.
    #[test]
    fn format_3_bytes_of_v0_3_0_still_read() {
        let bucket = Uuid::from([7u8; 32]);
        let key = tree_key(&bucket, &"photos/2026/a.jpg".to_string());
        let e: Sample = (
            bucket,
            "photos/2026/a.jpg".to_string(),
            vec![("content-type".to_string(), "image/jpeg".to_string())],
            "0123456789abcdef0123456789abcdef".to_string(),
            Uuid::from([9u8; 32]),
        );
        let stored = hex::decode(FIXTURE_V0_3_0).unwrap();
        assert_eq!(stored[0], FORMAT_STORED);
        assert_eq!(decode_stored::<Sample>(&key, &stored).unwrap(), e);
    }

    /// `cargo test --release -p garage_table --lib -- --ignored
    /// format_3_speed --nocapture`: the time to store and read back an
    /// entry of the size of a small object's.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn format_3_speed() {
        let (key, e) = sample();
        let canon = encode(&e);
        let n = 200_000;
        let t = std::time::Instant::now();
        let mut stored = Vec::new();
        for _ in 0..n {
            stored = to_stored(&key, canon.clone());
        }
        let store_ns = t.elapsed().as_nanos() / n;
        let t = std::time::Instant::now();
        for _ in 0..n {
            assert_eq!(canonical(&key, &stored).unwrap().len(), canon.len());
        }
        let read_ns = t.elapsed().as_nanos() / n;
        println!(
            "{} -> {} bytes; store {store_ns} ns, read back {read_ns} ns",
            canon.len(),
            stored.len()
        );
    }

    #[test]
    fn values_round_trip_and_bad_bytes_are_errors() {
        let v = encode(&("x".to_string(), 3u32));
        assert_eq!(decode::<(String, u32)>(&v).unwrap(), ("x".to_string(), 3));
        assert!(matches!(decode::<u32>(&[]), Err(DecodeError::Empty)));
        assert!(matches!(
            decode::<u32>(&[9, 1]),
            Err(DecodeError::UnknownFormat(9))
        ));
    }
}
