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
//! Value: one format byte, then the entry in MessagePack with field names,
//! so fields can be added later.

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

const FORMAT_V1: u8 = 1;

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

pub fn encode<E: Serialize>(entry: &E) -> Vec<u8> {
    let mut v = vec![FORMAT_V1];
    rmp_serde::encode::write_named(&mut v, entry).expect("entries always serialize");
    v
}

pub fn decode<E: DeserializeOwned>(bytes: &[u8]) -> Result<E, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&FORMAT_V1, rest)) => Ok(rmp_serde::from_slice(rest)?),
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
