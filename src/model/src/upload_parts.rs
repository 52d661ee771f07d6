//! Recording and reading the parts of a multipart upload, wherever its
//! parts are listed: in its entry (uploads created before the cluster was
//! finalized at v0.3.0) or in the part table (see [`crate::mpu_table`]).

use garage_table::Error;

use crate::mpu_table::{MpuPart, MpuPartEntry, MpuPartKey, MultipartUpload, PartSlot};
use crate::object_write::ObjectWriter;

/// Part-table entries read per round (about 150 bytes each).
const PAGE: usize = 1000;
/// At most this many rounds for one upload: 10 000 parts (S3's maximum)
/// written up to 100 times each.
const MAX_PAGES: usize = 1000;

impl ObjectWriter {
    /// Records write `key` of a part of `mpu` (at quorum): in the part
    /// table when its parts are apart, in its entry otherwise.
    pub async fn record_part(
        &self,
        mpu: &MultipartUpload,
        key: MpuPartKey,
        part: MpuPart,
    ) -> Result<(), Error> {
        if mpu.parts_apart {
            return self
                .parts
                .insert(&MpuPartEntry::new(mpu.upload_id, key, part))
                .await;
        }
        let mut m =
            MultipartUpload::new(mpu.upload_id, mpu.timestamp, mpu.bucket_id, mpu.key.clone());
        m.parts.put(key, part);
        self.mpus.insert(&m).await
    }

    /// The part writes of `mpu` (read at quorum, as `mpu` was) with part
    /// number `from` or more, in order of part number then stamp.
    pub async fn upload_parts(
        &self,
        mpu: &MultipartUpload,
        from: u64,
    ) -> Result<Vec<(MpuPartKey, MpuPart)>, Error> {
        self.upload_parts_until(mpu, from, usize::MAX).await
    }

    /// [`Self::upload_parts`], reading no further once the writes read
    /// finish `finished` part numbers (a finished write has an etag): a
    /// page of ListParts. The part numbers before the last one read have
    /// all their writes (they are read in order).
    pub async fn upload_parts_until(
        &self,
        mpu: &MultipartUpload,
        from: u64,
        finished: usize,
    ) -> Result<Vec<(MpuPartKey, MpuPart)>, Error> {
        let mut out: Vec<(MpuPartKey, MpuPart)> = mpu
            .parts
            .items()
            .filter(|(k, _)| k.part_number >= from)
            .map(|(k, p)| (*k, p.clone()))
            .collect();
        if !mpu.parts_apart {
            return Ok(out);
        }
        let mut start = PartSlot::first_of(from);
        let mut last: Option<PartSlot> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .parts
                .get_range(&mpu.upload_id, Some(start), None, PAGE, false)
                .await?;
            let full = page.len() == PAGE;
            for e in page {
                if Some(e.slot) == last {
                    continue;
                }
                last = Some(e.slot);
                start = e.slot;
                out.push((e.slot.key(), e.part));
            }
            if !full || finished_numbers(&out) >= finished {
                return Ok(out);
            }
        }
        Err(Error::TooManyEntries {
            limit: PAGE * MAX_PAGES,
        })
    }
}

/// How many part numbers of `parts` (in order) have a finished write.
fn finished_numbers(parts: &[(MpuPartKey, MpuPart)]) -> usize {
    let mut n = 0;
    let mut last = None;
    for (k, p) in parts {
        if p.etag.is_some() && last != Some(k.part_number) {
            n += 1;
            last = Some(k.part_number);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use garage_util::data::Uuid;

    use super::*;

    fn w(n: u64, t: u64) -> (MpuPartKey, MpuPart) {
        (
            MpuPartKey {
                part_number: n,
                timestamp: t,
            },
            MpuPart {
                version: Uuid::from([n as u8; 32]),
                etag: None,
                size: None,
                checksum: None,
            },
        )
    }

    #[test]
    fn finished_part_numbers_are_counted_once() {
        let done = |n, t| {
            let (k, mut p) = w(n, t);
            p.etag = Some("e".into());
            (k, p)
        };
        assert_eq!(finished_numbers(&[]), 0);
        assert_eq!(finished_numbers(&[w(1, 1), w(2, 1)]), 0);
        assert_eq!(
            finished_numbers(&[done(1, 1), done(1, 2), w(2, 1), done(3, 1), w(3, 2)]),
            2
        );
    }

    #[test]
    fn slots_sort_by_part_number_then_stamp() {
        let a = PartSlot::new(w(2, 9).0);
        let b = PartSlot::new(w(10, 1).0);
        let c = PartSlot::new(w(10, 3).0);
        assert!(a < b && b < c);
        assert!(PartSlot::first_of(10) < b);
        assert_eq!(c.key(), w(10, 3).0);
        // The bytes are the order: the table sorts by them.
        use garage_table::SortKey;
        assert!(a.sort_key() < b.sort_key() && b.sort_key() < c.sort_key());
    }
}
