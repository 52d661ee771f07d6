//! Erasure-coded blocks: a block's stored bytes (plain or zstd, as for a
//! replicated block) cut into `data` shards, plus `parity` shards computed
//! with Reed–Solomon (`reed-solomon-simd`); any `data` shards rebuild the
//! block.
//!
//! A block stored this way has its own address, derived from its content
//! hash and its code ([`ec_address`]): its references, reference counts
//! and placement are those of that address, separate from a replicated
//! copy of the same content.
//!
//! A shard travels and is stored with a header that says which block and
//! which shard it is, and a checksum of both, so that a node checks each
//! shard it stores or sends on its own (scrub, reads), and a reader checks
//! the rebuilt block against its content hash.

use bytes::{BufMut, Bytes, BytesMut};
use garage_rpc::layout::Placement;
use garage_util::data::{blake2sum, Hash};

use crate::block::DataBlock;

/// A shard of a placement of scope 0 (a class of every zone).
const MAGIC: &[u8; 4] = b"GSH1";
/// A shard of a placed class: the fields end with its scope.
const MAGIC_SCOPED: &[u8; 4] = b"GSH2";
/// Magic, data, parity, index, flags, stored length, content hash.
const FIELDS_LEN: usize = 4 + 4 + 4 + 32;
/// The fields and a checksum of the fields and the payload.
pub const HEADER_LEN: usize = FIELDS_LEN + 32;
/// The same with the scope (4 bytes, big-endian) after the content hash.
const SCOPED_FIELDS_LEN: usize = FIELDS_LEN + 4;
const COMPRESSED: u8 = 1;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EcError {
    #[error("shard is corrupted: {0}")]
    Corrupted(String),
    #[error("shard belongs to another block or code: {0}")]
    Mismatch(String),
    #[error("only {got} good shards of the {needed} needed to rebuild block {addr:?}")]
    TooFew {
        addr: Hash,
        got: usize,
        needed: usize,
    },
    #[error("erasure coding: {0}")]
    Codec(String),
}

/// The address of the block whose content hashes to `content`, stored
/// with placement `code` (the same as before placed classes for scope 0).
pub fn ec_address(content: &Hash, code: impl Into<Placement>) -> Hash {
    let code = code.into();
    let mut b = Vec::with_capacity(52);
    b.extend_from_slice(b"garage ec block ");
    b.push(code.data);
    b.push(code.parity);
    b.extend_from_slice(content.as_slice());
    if code.scope != 0 {
        b.extend_from_slice(&code.scope.to_be_bytes());
    }
    blake2sum(&b)
}

/// What a shard is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardInfo {
    pub code: Placement,
    pub index: u8,
    pub compressed: bool,
    /// Length of the block's stored bytes (the shards are padded).
    pub stored_len: u32,
    /// Hash of the block's content (plain, uncompressed).
    pub content: Hash,
}

impl ShardInfo {
    pub fn address(&self) -> Hash {
        ec_address(&self.content, self.code)
    }
}

/// One shard with its header: what is sent and stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub info: ShardInfo,
    pub payload: Bytes,
}

/// The header's fields: `GSH1` and [`FIELDS_LEN`] bytes for scope 0 (as
/// before placed classes), `GSH2` and the scope after them otherwise.
fn fields(info: &ShardInfo) -> Vec<u8> {
    let scoped = info.code.scope != 0;
    let mut f = vec![
        0u8;
        if scoped {
            SCOPED_FIELDS_LEN
        } else {
            FIELDS_LEN
        }
    ];
    f[0..4].copy_from_slice(if scoped { MAGIC_SCOPED } else { MAGIC });
    f[4] = info.code.data;
    f[5] = info.code.parity;
    f[6] = info.index;
    f[7] = if info.compressed { COMPRESSED } else { 0 };
    f[8..12].copy_from_slice(&info.stored_len.to_be_bytes());
    f[12..44].copy_from_slice(info.content.as_slice());
    if scoped {
        f[44..48].copy_from_slice(&info.code.scope.to_be_bytes());
    }
    f
}

/// The length of the fields of a header that starts with `bytes`, if it is
/// a shard header.
fn fields_len(bytes: &[u8]) -> Option<usize> {
    match bytes.get(0..4)? {
        m if m == MAGIC => Some(FIELDS_LEN),
        m if m == MAGIC_SCOPED => Some(SCOPED_FIELDS_LEN),
        _ => None,
    }
}

/// Header bytes enough for [`peek_placement`].
pub const PEEK_LEN: usize = SCOPED_FIELDS_LEN;

/// The placement a stored shard names, from the first [`PEEK_LEN`] bytes
/// of its file (unchecked: for counting, not for reading).
pub fn peek_placement(prefix: &[u8]) -> Option<Placement> {
    let fl = fields_len(prefix)?;
    placement_of(prefix.get(0..fl)?).ok()
}

/// The placement named by header fields `f` (of [`fields_len`] bytes).
fn placement_of(f: &[u8]) -> Result<Placement, String> {
    let (data, parity) = (f[4] as usize, f[5] as usize);
    let scope = match f.get(44..48) {
        Some(s) => u32::from_be_bytes(s.try_into().expect("4 bytes")),
        None => 0,
    };
    let code = if scope == 0 {
        garage_rpc::layout::EcCode::new(data, parity)?
    } else if data == 1 {
        garage_rpc::layout::EcCode::copies(parity + 1)?
    } else {
        garage_rpc::layout::EcCode::new(data, parity)?
    };
    Ok(Placement::new(code, scope))
}

fn checksum(fields: &[u8], payload: &[u8]) -> Hash {
    let mut h = garage_util::data::Blake2Hasher::new();
    h.update(fields);
    h.update(payload);
    h.finalize()
}

impl Shard {
    /// Header and payload, as sent and stored. CPU-bound (hashes).
    pub fn to_bytes(&self) -> Bytes {
        let f = fields(&self.info);
        let mut out = BytesMut::with_capacity(f.len() + 32 + self.payload.len());
        out.put_slice(&f);
        out.put_slice(checksum(&f, &self.payload).as_slice());
        out.put_slice(&self.payload);
        out.freeze()
    }

    /// Parses and checks a shard (its checksum, and that it is shard
    /// `index` of block `addr` when given). CPU-bound.
    pub fn parse(bytes: Bytes, addr: Option<(&Hash, u8)>) -> Result<Shard, EcError> {
        Self::parse_with(bytes, addr, true)
    }

    /// [`Shard::parse`] without the checksum: for a shard its holder has
    /// just checked before sending it over an authenticated connection
    /// (the rebuilt block is still checked against its content hash).
    pub fn parse_header(bytes: Bytes, addr: Option<(&Hash, u8)>) -> Result<Shard, EcError> {
        Self::parse_with(bytes, addr, false)
    }

    fn parse_with(bytes: Bytes, addr: Option<(&Hash, u8)>, check: bool) -> Result<Shard, EcError> {
        let Some(fl) = fields_len(&bytes).filter(|l| bytes.len() >= l + 32) else {
            return Err(EcError::Corrupted("no shard header".into()));
        };
        let f = &bytes[0..fl];
        let sum = &bytes[fl..fl + 32];
        let payload = bytes.slice(fl + 32..);
        if check && checksum(f, &payload).as_slice() != sum {
            return Err(EcError::Corrupted("checksum mismatch".into()));
        }
        let code = placement_of(f).map_err(EcError::Corrupted)?;
        let info = ShardInfo {
            code,
            index: f[6],
            compressed: f[7] & COMPRESSED != 0,
            stored_len: u32::from_be_bytes(f[8..12].try_into().expect("4 bytes")),
            content: Hash::try_from_slice(&f[12..44]).expect("32 bytes"),
        };
        if info.index as usize >= code.shards() {
            return Err(EcError::Corrupted(format!(
                "shard index {} out of a {code} code",
                info.index
            )));
        }
        if let Some((a, i)) = addr {
            if info.address() != *a || info.index != i {
                return Err(EcError::Mismatch(format!(
                    "shard {} of {:?}, not shard {i} of {a:?}",
                    info.index,
                    info.address()
                )));
            }
        }
        Ok(Shard { info, payload })
    }
}

/// The code a damaged shard file of `addr` says it has, if its header
/// still names a code and a content hash that give `addr`.
pub fn code_of_damaged(bytes: &[u8], addr: &Hash) -> Option<Placement> {
    let fl = fields_len(bytes).filter(|l| bytes.len() >= *l)?;
    let code = placement_of(&bytes[..fl]).ok()?;
    let content = Hash::try_from_slice(&bytes[12..44])?;
    (ec_address(&content, code) == *addr).then_some(code)
}

/// Whether the shards of `code` are plain copies of the block: a placed
/// class's replication (one data shard). Codes of scope 0 with one data
/// shard (`1+1` set with `--storage-class`) stay Reed–Solomon shards, as
/// they were stored before placed classes.
fn copies(code: Placement) -> bool {
    code.is_replication() && code.scope != 0
}

/// Bytes per shard for a block of `len` stored bytes: even (the codec
/// works on 16-bit words), and at least 2.
fn shard_len(len: usize, code: Placement) -> usize {
    let l = len.div_ceil(code.data()).max(2);
    l + (l % 2)
}

/// Cuts `block` (whose content hashes to `content`) into its shards.
/// CPU-bound: callers run it on the blocking pool.
pub fn encode(
    block: &DataBlock,
    content: Hash,
    code: impl Into<Placement>,
) -> Result<Vec<Shard>, EcError> {
    let code = code.into();
    let stored = block.bytes();
    let len = shard_len(stored.len(), code);
    let mut padded = BytesMut::with_capacity(len * code.data());
    padded.put_slice(stored);
    padded.resize(len * code.data(), 0);
    let padded = padded.freeze();
    let originals: Vec<Bytes> = (0..code.data())
        .map(|i| padded.slice(i * len..(i + 1) * len))
        .collect();
    let recovery = if code.parity == 0 {
        // One copy: nothing to compute.
        Vec::new()
    } else if copies(code) {
        // Copies: every parity shard is the block.
        vec![originals[0].to_vec(); code.parity()]
    } else {
        reed_solomon_simd::encode(code.data(), code.parity(), originals.iter())
            .map_err(|e| EcError::Codec(e.to_string()))?
    };
    let stored_len = u32::try_from(stored.len())
        .map_err(|_| EcError::Codec("block larger than 4 GiB".into()))?;
    let info = |index: usize| ShardInfo {
        code,
        index: index as u8,
        compressed: block.is_compressed(),
        stored_len,
        content,
    };
    Ok(originals
        .into_iter()
        .chain(recovery.into_iter().map(Bytes::from))
        .enumerate()
        .map(|(i, payload)| Shard {
            info: info(i),
            payload,
        })
        .collect())
}

/// Rebuilds block `addr` from at least `data` of its shards (checked by
/// [`Shard::parse`]), and checks it against its content hash. Returns its
/// plain content. CPU-bound.
pub fn decode(addr: &Hash, shards: &[Shard]) -> Result<Bytes, EcError> {
    decode_stored(addr, shards).map(|(_, _, plain)| plain)
}

/// [`decode`], also returning the block as stored (compressed or not) and
/// its content hash: what re-encoding the same shards needs.
pub fn decode_stored(addr: &Hash, shards: &[Shard]) -> Result<(DataBlock, Hash, Bytes), EcError> {
    let first = shards.first().ok_or(EcError::TooFew {
        addr: *addr,
        got: 0,
        needed: 1,
    })?;
    let info = first.info;
    let code = info.code;
    if info.address() != *addr {
        return Err(EcError::Mismatch(format!(
            "shards of {:?}, not of {addr:?}",
            info.address()
        )));
    }
    let len = shard_len(info.stored_len as usize, code);
    let mut by_index: Vec<Option<&Bytes>> = vec![None; code.shards()];
    for s in shards {
        let i = s.info;
        if (i.code, i.compressed, i.stored_len, i.content)
            != (code, info.compressed, info.stored_len, info.content)
            || s.payload.len() != len
        {
            return Err(EcError::Mismatch(format!(
                "shard {} does not agree with shard {}",
                i.index, info.index
            )));
        }
        by_index[i.index as usize] = Some(&s.payload);
    }
    let got = by_index.iter().flatten().count();
    if got < code.data() {
        return Err(EcError::TooFew {
            addr: *addr,
            got,
            needed: code.data(),
        });
    }
    let missing: Vec<usize> = (0..code.data())
        .filter(|i| by_index[*i].is_none())
        .collect();
    let restored = if missing.is_empty() {
        Default::default()
    } else if copies(code) {
        let any = by_index
            .iter()
            .flatten()
            .next()
            .expect("at least one shard");
        [(0, any.to_vec())].into()
    } else {
        reed_solomon_simd::decode(
            code.data(),
            code.parity(),
            (0..code.data()).filter_map(|i| by_index[i].map(|b| (i, b))),
            (code.data()..code.shards()).filter_map(|i| by_index[i].map(|b| (i - code.data(), b))),
        )
        .map_err(|e| EcError::Codec(e.to_string()))?
    };
    let mut stored = BytesMut::with_capacity(len * code.data());
    for (i, shard) in by_index.iter().enumerate().take(code.data()) {
        match shard {
            Some(b) => stored.put_slice(b),
            None => stored.put_slice(
                restored
                    .get(&i)
                    .ok_or_else(|| EcError::Codec(format!("shard {i} was not restored")))?,
            ),
        }
    }
    stored.truncate(info.stored_len as usize);
    let block = if info.compressed {
        DataBlock::Compressed(stored.freeze())
    } else {
        DataBlock::Plain(stored.freeze())
    };
    let plain = block
        .verify_and_decode(&info.content)
        .map_err(|e| EcError::Corrupted(e.to_string()))?;
    Ok((block, info.content, plain))
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_rpc::layout::EcCode;

    fn sample(len: usize) -> (Bytes, Hash) {
        let data: Bytes = (0..len)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let h = blake2sum(&data);
        (data, h)
    }

    #[test]
    fn copies_of_a_placed_class_are_whole_blocks_with_their_scope() {
        for copies in [1, 2, 3] {
            let code = Placement::new(EcCode::copies(copies).unwrap(), 0xdead_beef);
            let (data, h) = sample(300_001);
            let block = DataBlock::from_plain(data.clone(), Some(1));
            let shards = encode(&block, h, code).unwrap();
            assert_eq!(shards.len(), copies);
            let addr = ec_address(&h, code);
            assert_ne!(
                addr,
                ec_address(&h, code.code()),
                "the scope is in the address"
            );
            for s in shards.iter() {
                // Each copy alone rebuilds the block.
                assert_eq!(s.payload.len(), shards[0].payload.len());
                assert_eq!(decode(&addr, std::slice::from_ref(s)).unwrap(), data);
                // The header says the scope: parsed back, and named by a
                // damaged file.
                let bytes = s.to_bytes();
                assert_eq!(&bytes[0..4], b"GSH2");
                let back = Shard::parse(bytes.clone(), Some((&addr, s.info.index))).unwrap();
                assert_eq!(back.info.code, code);
                let mut damaged = bytes.to_vec();
                let last = damaged.len() - 1;
                damaged[last] ^= 1;
                assert!(Shard::parse(Bytes::from(damaged.clone()), None).is_err());
                assert_eq!(code_of_damaged(&damaged, &addr), Some(code));
            }
        }
        // Scope 0 keeps the header of every earlier release.
        let (data, h) = sample(1000);
        let code: Placement = EcCode::new(2, 1).unwrap().into();
        let shards = encode(&DataBlock::Plain(data), h, code).unwrap();
        assert_eq!(&shards[0].to_bytes()[0..4], b"GSH1");
    }

    #[test]
    fn any_data_shards_rebuild_the_block() {
        let code: Placement = "4+2".parse::<EcCode>().unwrap().into();
        for (len, level) in [(1 << 20, None), (1000, Some(3)), (1, None), (7, None)] {
            let (data, h) = sample(len);
            let block = DataBlock::from_plain(data.clone(), level);
            let shards = encode(&block, h, code).unwrap();
            assert_eq!(shards.len(), 6);
            let addr = ec_address(&h, code);
            // Every choice of 4 of the 6 shards.
            for drop_a in 0..6 {
                for drop_b in drop_a + 1..6 {
                    let kept: Vec<Shard> = shards
                        .iter()
                        .filter(|s| ![drop_a, drop_b].contains(&(s.info.index as usize)))
                        .cloned()
                        .collect();
                    assert_eq!(decode(&addr, &kept).unwrap(), data, "len {len}");
                }
            }
            let three: Vec<Shard> = shards[..3].to_vec();
            assert!(matches!(
                decode(&addr, &three),
                Err(EcError::TooFew { got: 3, .. })
            ));
        }
    }

    #[test]
    fn shards_on_the_wire_are_checked() {
        let code: Placement = "2+1".parse::<EcCode>().unwrap().into();
        let (data, h) = sample(5000);
        let shards = encode(&DataBlock::Plain(data.clone()), h, code).unwrap();
        let addr = ec_address(&h, code);
        let bytes = shards[2].to_bytes();
        let back = Shard::parse(bytes.clone(), Some((&addr, 2))).unwrap();
        assert_eq!(back, shards[2]);
        // Another index or block is refused.
        assert!(matches!(
            Shard::parse(bytes.clone(), Some((&addr, 1))),
            Err(EcError::Mismatch(_))
        ));
        // A flipped bit, in the payload or the header, is detected.
        for at in [3, 20, HEADER_LEN + 100] {
            let mut bad = bytes.to_vec();
            bad[at] ^= 0x10;
            assert!(
                matches!(Shard::parse(bad.into(), None), Err(EcError::Corrupted(_))),
                "byte {at}"
            );
        }
        // A shard whose payload was altered before its checksum was
        // computed (a bug elsewhere) is caught by the content hash.
        let mut forged = shards.clone();
        let mut p = forged[0].payload.to_vec();
        p[0] ^= 1;
        forged[0].payload = p.into();
        assert!(decode(&addr, &forged[..2]).is_err());
        assert_eq!(decode(&addr, &shards[1..]).unwrap(), data);
    }
}
