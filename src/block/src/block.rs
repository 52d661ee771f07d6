//! A block as stored and sent: its bytes, plain or zstd-compressed.

use bytes::Bytes;
use garage_util::data::{blake2sum, Hash};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataBlock {
    Plain(Bytes),
    Compressed(Bytes),
}

/// Why a block's bytes are not the block they should be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BlockError {
    #[error("block {expected:?} is corrupted: its content hashes to {got:?}")]
    Corrupted { expected: Hash, got: Hash },
    #[error("block {0:?} cannot be decompressed: {1}")]
    Decompress(Hash, String),
}

impl DataBlock {
    /// Compresses `data` at `level` if that makes it smaller; CPU-bound, so
    /// callers run it off the async reactor (`spawn_blocking`).
    pub fn from_plain(data: Bytes, level: Option<i32>) -> Self {
        if let Some(level) = level {
            if let Ok(c) = zstd::bulk::compress(&data, level) {
                if c.len() < data.len() {
                    return DataBlock::Compressed(Bytes::from(c));
                }
            }
        }
        DataBlock::Plain(data)
    }

    pub fn is_compressed(&self) -> bool {
        matches!(self, DataBlock::Compressed(_))
    }

    /// The stored bytes.
    pub fn bytes(&self) -> &Bytes {
        match self {
            DataBlock::Plain(b) | DataBlock::Compressed(b) => b,
        }
    }

    /// The block's content, checked against `hash`. CPU-bound.
    pub fn verify_and_decode(&self, hash: &Hash) -> Result<Bytes, BlockError> {
        let plain = match self {
            DataBlock::Plain(b) => b.clone(),
            DataBlock::Compressed(b) => {
                let mut out = Vec::new();
                zstd::stream::copy_decode(&b[..], &mut out)
                    .map_err(|e| BlockError::Decompress(*hash, e.to_string()))?;
                Bytes::from(out)
            }
        };
        let got = blake2sum(&plain);
        if got != *hash {
            return Err(BlockError::Corrupted {
                expected: *hash,
                got,
            });
        }
        Ok(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_is_kept_only_when_it_saves_space() {
        let text = Bytes::from(vec![b'a'; 1 << 20]);
        let c = DataBlock::from_plain(text.clone(), Some(1));
        assert!(c.is_compressed());
        assert!(c.bytes().len() < 1000);
        assert_eq!(c.verify_and_decode(&blake2sum(&text)).unwrap(), text);

        let random: Vec<u8> = (0..65536).map(|_| rand::random::<u8>()).collect();
        let random = Bytes::from(random);
        let r = DataBlock::from_plain(random.clone(), Some(3));
        assert!(!r.is_compressed(), "random data does not compress");
        assert!(!DataBlock::from_plain(text.clone(), None).is_compressed());
    }

    #[test]
    fn a_flipped_byte_is_detected() {
        let data = Bytes::from(vec![7u8; 4096]);
        let h = blake2sum(&data);
        let mut bad = data.to_vec();
        bad[100] ^= 1;
        let err = DataBlock::Plain(Bytes::from(bad))
            .verify_and_decode(&h)
            .unwrap_err();
        assert!(matches!(err, BlockError::Corrupted { .. }));
    }
}
