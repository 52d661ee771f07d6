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
//! Merkle nodes keep format 1, since their hashes are compared between
//! nodes: changing their bytes would make every tree differ.

use garage_util::crdt::Crdt;
use garage_util::data::blake2sum;
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

pub fn decode<E: DeserializeOwned>(bytes: &[u8]) -> Result<E, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&(FORMAT_NAMED | FORMAT_COMPACT), rest)) => Ok(rmp_serde::from_slice(rest)?),
        Some((&f, _)) => Err(DecodeError::UnknownFormat(f)),
    }
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
    use garage_util::data::gen_uuid;

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
