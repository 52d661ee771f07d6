//! How format 3's dictionary (`garage_table::encoding::DICTIONARY`) was
//! made: zstd's trainer over entries of this crate's tables as users make
//! them (synthetic, from a seed), cut of their keys' parts as format 3
//! cuts them. The dictionary is frozen once released;
//! `write_entry_dictionary` (ignored) wrote it, and is kept to show what
//! it was made from and to build the dictionary of a new format (the
//! trainer does not give the same bytes twice: running it again makes a
//! new dictionary, never format 3's).

use garage_table::encoding::encode;
use garage_util::data::Uuid;

use crate::block_ref_table::BlockRef;
use crate::bucket_table::Versioning;
use crate::history_table::HistoryEntry;
use crate::mpu_table::{MpuPart, MpuPartEntry, MpuPartKey};
use crate::object_table::{
    Object, ObjectVersion, ObjectVersionData, ObjectVersionMeta, ObjectVersionState,
};
use crate::version_table::{Version, VersionBacklink, VersionBlock, VersionBlockKey};

fn meta(content_type: &str, size: u64, etag: &str) -> ObjectVersionMeta {
    ObjectVersionMeta {
        headers: vec![("content-type".to_string(), content_type.to_string())],
        size,
        etag: etag.to_string(),
        storage_class: None,
        first_ec: None,
        recoded: 0,
    }
}

/// Entries as users make them, from `seed`, with their tree keys: objects
/// (keys of several shapes, common content types, random ids, ETags and
/// small bodies, versioned or not, deleted, in blocks), their versions and
/// block references, parts of multipart uploads. The samples a dictionary
/// is trained on, and the entries it is judged by.
fn sample_entries(seed: u64, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    use garage_table::encoding::tree_key;
    use garage_table::Entry;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let types = [
        "application/octet-stream",
        "binary/octet-stream",
        "image/jpeg",
        "image/png",
        "text/plain",
        "text/html",
        "application/json",
        "video/mp4",
    ];
    let words = [
        "photos", "backup", "media", "users", "data", "logs", "img", "2026", "static",
    ];
    let mut out = Vec::new();
    fn push<E: Entry<P, S>, P: garage_table::PartitionKey, S: garage_table::SortKey>(
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
        e: &E,
    ) {
        out.push((tree_key(e.partition_key(), e.sort_key()), encode(e)));
    }
    for i in 0..n {
        let mut rid = || {
            let mut b = [0u8; 32];
            rng.fill(&mut b[..]);
            Uuid::from(b)
        };
        let (bucket, uuid, block) = (rid(), rid(), rid());
        let depth = rng.random_range(0..4);
        let mut key = String::new();
        for _ in 0..depth {
            key.push_str(words[rng.random_range(0..words.len())]);
            key.push('/');
        }
        key.push_str(&format!(
            "{:x}.{}",
            rng.random::<u64>(),
            ["jpg", "bin", "txt", "json"][i % 4]
        ));
        let mut md5 = [0u8; 16];
        rng.fill(&mut md5[..]);
        let etag = hex::encode(md5);
        let ct = types[rng.random_range(0..types.len())];
        let ts = 1_790_000_000_000 + rng.random_range(0..100_000_000_000u64);
        let size = rng.random_range(0..3000u64);
        let mut body = vec![0u8; size.min(64) as usize];
        rng.fill(&mut body[..]);
        let versioning = [Versioning::Off, Versioning::Enabled][i % 2];
        let data = match i % 8 {
            0 | 1 => {
                let backlink = VersionBacklink::Object {
                    bucket_id: bucket,
                    key: key.clone(),
                };
                let b = VersionBlockKey {
                    part_number: 1,
                    offset: 0,
                };
                let vb = VersionBlock {
                    hash: block,
                    size: 1 << 20,
                    ec: None,
                    recoded: 0,
                };
                push(&mut out, &Version::with_block(uuid, backlink, 0, b, vb));
                push(&mut out, &BlockRef::new(block, uuid, false));
                ObjectVersionData::FirstBlock(meta(ct, size << 12, &etag), block)
            }
            2 => ObjectVersionData::DeleteMarker,
            3 => {
                let part = MpuPart {
                    version: uuid,
                    etag: Some(etag.clone()),
                    size: Some(size << 12),
                    checksum: None,
                };
                let k = MpuPartKey {
                    part_number: 1 + size % 100,
                    timestamp: ts,
                };
                push(&mut out, &MpuPartEntry::new(block, k, part));
                ObjectVersionData::Inline(meta(ct, body.len() as u64, &etag), body)
            }
            _ => ObjectVersionData::Inline(meta(ct, body.len() as u64, &etag), body),
        };
        let v = ObjectVersion::new(uuid, ts, ObjectVersionState::Complete(data), versioning);
        if versioning == Versioning::Enabled {
            push(&mut out, &HistoryEntry::new(bucket, &key, v.clone()));
        }
        push(&mut out, &Object::new(bucket, key, vec![v]));
    }
    out
}

/// The dictionary of format 3: zstd's trainer on [`sample_entries`] cut
/// as format 3 cuts them.
fn dictionary() -> Vec<u8> {
    let samples: Vec<Vec<u8>> = sample_entries(1, 5000)
        .iter()
        .map(|(k, v)| garage_table::encoding::cut_key_parts(k, v).1)
        .collect();
    zstd::dict::from_samples(&samples, 4096).expect("training a dictionary")
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_table::encoding::{decode_stored, to_stored, tree_key, DICTIONARY};

    #[test]
    #[ignore = "compares dictionary sizes"]
    fn compare_dictionaries() {
        let held_out = sample_entries(99, 2000);
        let canon: usize = held_out.iter().map(|(_, v)| v.len()).sum();
        let stored: usize = held_out
            .iter()
            .map(|(k, v)| to_stored(k, v.clone()).len())
            .sum();
        println!("canonical {} B/entry", canon / held_out.len());
        println!("stored with DICTIONARY {} B/entry", stored / held_out.len());
        let samples: Vec<Vec<u8>> = sample_entries(1, 5000)
            .iter()
            .map(|(k, v)| garage_table::encoding::cut_key_parts(k, v).1)
            .collect();
        for size in [2048, 4096, 8192] {
            let trained = zstd::dict::from_samples(&samples, size).unwrap();
            let mut c = zstd::bulk::Compressor::with_dictionary(3, &trained).unwrap();
            let n: usize = held_out
                .iter()
                .map(|(k, v)| {
                    c.compress(&garage_table::encoding::cut_key_parts(k, v).1)
                        .unwrap()
                        .len()
                })
                .sum();
            println!("trained {size}: {} B/entry (+ header)", n / held_out.len());
        }
    }

    #[test]
    #[ignore = "writes the frozen dictionary of format 3: only for a new format"]
    fn write_entry_dictionary() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../table/src/entries.dict");
        std::fs::write(path, dictionary()).unwrap();
    }

    #[test]
    fn object_entries_are_stored_small() {
        // A 16-byte PUT's entry, with ids and a key the dictionary has
        // never seen: the dictionary keeps it near its incompressible
        // content (two 32-byte ids, the 16-byte ETag in hex, the data).
        use garage_util::data::blake2sum;
        let v = ObjectVersion::new(
            blake2sum(b"some version"),
            1_801_234_567_891,
            ObjectVersionState::Complete(ObjectVersionData::Inline(
                meta(
                    "application/octet-stream",
                    16,
                    "45ed9cc2f92b77cd8b2f5bd59ff635f8",
                ),
                b"xxxxxxxxxxxxxxxx".to_vec(),
            )),
            Versioning::Off,
        );
        let o = Object::new(
            blake2sum(b"some bucket"),
            "00/00/000003f282e3aa34d".into(),
            vec![v],
        );
        let canon = encode(&o);
        let key = tree_key(&o.bucket_id, &o.key);
        let stored = to_stored(&key, canon.clone());
        assert!(canon.len() > 300, "{}", canon.len());
        assert!(stored.len() <= 130, "{} bytes stored", stored.len());
        assert_eq!(decode_stored::<Object>(&key, &stored).unwrap(), o);
        assert!(!DICTIONARY.is_empty());
    }
}
