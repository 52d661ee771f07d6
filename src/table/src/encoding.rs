//! How entries are laid out in the metadata database.
//!
//! Tree key: the 32-byte partition hash, then the sort key. The database
//! takes keys of at most 511 bytes, so a sort key longer than
//! [`MAX_INLINE_SORT_KEY`] is stored as its first `MAX_INLINE_SORT_KEY`
//! bytes followed by the blake2 hash of the whole sort key: entries stay
//! in sort-key order except among long keys that share those first bytes,
//! which are ordered by hash (and `start` positions use the same encoding,
//! so a listing that resumes after a long key resumes at the right place).
//!
//! Value: one format byte, then the entry in MessagePack with field names,
//! so fields can be added later.

use garage_util::crdt::Crdt;
use garage_util::data::blake2sum;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::schema::{PartitionKey, SortKey};

/// Sort-key bytes kept verbatim in a tree key (32 + 446 + 32 = 510 bytes).
pub const MAX_INLINE_SORT_KEY: usize = 446;

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
        let long_a = "a".repeat(1024);
        let k = tree_key(&p, &long_a);
        assert_eq!(k.len(), 510);
        assert!(k.len() <= 511);
        let short = tree_key(&p, &"b".to_string());
        assert!(k < short, "order by sort key is kept across lengths");
        let long_b = format!("{}b", "a".repeat(1023));
        assert_ne!(tree_key(&p, &long_b), k, "long keys stay distinct");
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
