//! Blocks as files: `<dir>/<hh>/<hh>/<hash hex>` for a plain block, with a
//! `.zst` suffix for a compressed one. All calls are blocking (file I/O):
//! the async layers run them with `spawn_blocking`.
//!
//! A write goes to a temporary file in the final directory, is synced if
//! `data_fsync` is set, then renamed into place, and the directory is
//! synced too: a block file is either absent or whole, and with
//! `data_fsync` it survives a power loss once the write returns.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use garage_util::data::Hash;

use crate::block::{BlockError, DataBlock};
use crate::dirs::DataDirs;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Block(#[from] BlockError),
    #[error("metadata database: {0}")]
    Meta(String),
}

/// Per-hash locks (striped): a block's writes and deletions never
/// interleave, so two writes of one block in different forms, or a write
/// and a deletion, cannot remove each other's file.
const LOCK_STRIPES: usize = 64;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Syncs of newly created block directories (with `data_fsync`), for tests.
#[cfg(any(test, feature = "testing"))]
pub static DIR_SYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub struct BlockStore {
    pub dirs: DataDirs,
    pub fsync: bool,
    locks: Vec<std::sync::Mutex<()>>,
}

impl BlockStore {
    pub fn new(dirs: DataDirs, fsync: bool) -> Self {
        Self {
            dirs,
            fsync,
            locks: (0..LOCK_STRIPES)
                .map(|_| std::sync::Mutex::new(()))
                .collect(),
        }
    }

    fn lock(&self, hash: &Hash) -> std::sync::MutexGuard<'_, ()> {
        let i = hash.as_slice()[31] as usize % LOCK_STRIPES;
        self.locks[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn block_dir(dir: &Path, hash: &Hash) -> PathBuf {
        let h = hash.hex();
        dir.join(&h[0..2]).join(&h[2..4])
    }

    fn file_name(hash: &Hash, compressed: bool) -> String {
        if compressed {
            format!("{}.zst", hash.hex())
        } else {
            hash.hex()
        }
    }

    /// Where the block is stored, if it is, and whether compressed.
    pub fn find(&self, hash: &Hash) -> Option<(PathBuf, bool)> {
        for d in self.dirs.search_order(hash) {
            let dir = Self::block_dir(&d.path, hash);
            for compressed in [true, false] {
                let p = dir.join(Self::file_name(hash, compressed));
                if p.exists() {
                    return Some((p, compressed));
                }
            }
        }
        None
    }

    /// Reads the stored bytes, unchecked (the caller verifies them where it
    /// needs the content; a replica serving a read sends them as they are).
    pub fn read(&self, hash: &Hash) -> Result<Option<DataBlock>, StoreError> {
        let Some((path, compressed)) = self.find(hash) else {
            return Ok(None);
        };
        match fs::read(&path) {
            Ok(b) => Ok(Some({
                metrics::counter!("block_bytes_read_total").increment(b.len() as u64);
                if compressed {
                    DataBlock::Compressed(Bytes::from(b))
                } else {
                    DataBlock::Plain(Bytes::from(b))
                }
            })),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Writes a block in its primary directory (if it is not stored in
    /// this form already) and removes copies elsewhere.
    pub fn write(&self, hash: &Hash, block: &DataBlock) -> Result<(), StoreError> {
        self.write_then(hash, block, || Ok(()))
    }

    /// [`BlockStore::write`], then `then` while no other write or deletion
    /// of the block can run (to record that the block was just written).
    pub fn write_then(
        &self,
        hash: &Hash,
        block: &DataBlock,
        then: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let _lock = self.lock(hash);
        self.write_locked(hash, block)?;
        then()
    }

    /// Deletes every copy of the block if `cond` (checked while no write
    /// of the block can run) holds; returns whether it did.
    pub fn delete_if(&self, hash: &Hash, cond: impl FnOnce() -> bool) -> Result<bool, StoreError> {
        let _lock = self.lock(hash);
        if !cond() {
            return Ok(false);
        }
        self.delete_locked(hash)?;
        Ok(true)
    }

    fn write_locked(&self, hash: &Hash, block: &DataBlock) -> Result<(), StoreError> {
        let name = Self::file_name(hash, block.is_compressed());
        let Some(path) = self.write_file_locked(hash, &name, block.bytes())? else {
            return Ok(());
        };
        metrics::counter!("block_bytes_written_total").increment(block.bytes().len() as u64);
        // The other form, or a copy in another directory, is now redundant.
        for d in self.dirs.dirs() {
            for compressed in [true, false] {
                let p = Self::block_dir(&d.path, hash).join(Self::file_name(hash, compressed));
                if p != path && d.capacity.is_some() {
                    let _ = fs::remove_file(&p);
                }
            }
        }
        Ok(())
    }

    /// Writes `bytes` as file `name` of `hash`'s directory in its primary
    /// data dir, durably (see the module documentation); returns its path,
    /// or `None` if the file was there already. The caller holds the lock.
    fn write_file_locked(
        &self,
        hash: &Hash,
        name: &str,
        bytes: &[u8],
    ) -> Result<Option<PathBuf>, StoreError> {
        let primary = &self.dirs.primary(hash).path;
        let dir = Self::block_dir(primary, hash);
        let path = dir.join(name);
        if path.exists() {
            return Ok(None);
        }
        let new_dirs = !dir.exists();
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        if self.fsync && new_dirs {
            // The new directories' entries in their parents, so that the
            // block file's path survives a power loss too.
            for d in [dir.parent(), dir.parent().and_then(Path::parent)]
                .into_iter()
                .flatten()
            {
                fs::File::open(d)
                    .and_then(|f| f.sync_all())
                    .map_err(io(d))?;
            }
            #[cfg(any(test, feature = "testing"))]
            DIR_SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let tmp = dir.join(format!("{name}.tmp{}", rand::random::<u32>()));
        let res: Result<(), StoreError> = (|| {
            let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(bytes).map_err(io(&tmp))?;
            if self.fsync {
                f.sync_all().map_err(io(&tmp))?;
            }
            fs::rename(&tmp, &path).map_err(io(&path))?;
            if self.fsync {
                fs::File::open(&dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io(&dir))?;
            }
            Ok(())
        })();
        if res.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        res?;
        Ok(Some(path))
    }

    fn shard_name(addr: &Hash, index: u8) -> String {
        format!("{}.s{index}", addr.hex())
    }

    /// Where shard `index` of erasure-coded block `addr` is stored, if it is.
    pub fn find_shard(&self, addr: &Hash, index: u8) -> Option<PathBuf> {
        self.dirs
            .search_order(addr)
            .into_iter()
            .map(|d| Self::block_dir(&d.path, addr).join(Self::shard_name(addr, index)))
            .find(|p| p.exists())
    }

    /// Stores shard `index` of block `addr` (header and payload, see
    /// [`crate::ec`]), durably, unless it is stored already; then its
    /// modification time is set to now, which keeps it from a deletion
    /// decided before this write ([`BlockStore::delete_shards_older`]).
    pub fn write_shard(&self, addr: &Hash, index: u8, bytes: &[u8]) -> Result<(), StoreError> {
        let _lock = self.lock(addr);
        if let Some(p) = self.find_shard(addr, index) {
            fs::File::options()
                .append(true)
                .open(&p)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()))
                .map_err(io(&p))?;
            return Ok(());
        }
        if self
            .write_file_locked(addr, &Self::shard_name(addr, index), bytes)?
            .is_some()
        {
            metrics::counter!("block_bytes_written_total").increment(bytes.len() as u64);
        }
        Ok(())
    }

    /// The stored bytes of shard `index` of block `addr`, unchecked.
    pub fn read_shard(&self, addr: &Hash, index: u8) -> Result<Option<Bytes>, StoreError> {
        let Some(path) = self.find_shard(addr, index) else {
            return Ok(None);
        };
        match fs::read(&path) {
            Ok(b) => {
                metrics::counter!("block_bytes_read_total").increment(b.len() as u64);
                Ok(Some(Bytes::from(b)))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Deletes the shards of `addr` stored here whose file was last
    /// written more than `age` ago; returns how many remain.
    pub fn delete_shards_older(
        &self,
        addr: &Hash,
        age: std::time::Duration,
    ) -> Result<usize, StoreError> {
        let _lock = self.lock(addr);
        let prefix = format!("{}.s", addr.hex());
        let mut kept = 0;
        for d in self.dirs.dirs() {
            let dir = Self::block_dir(&d.path, addr);
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(index) = name.strip_prefix(&prefix) else {
                    continue;
                };
                if index.parse::<u8>().is_err() {
                    continue; // temporary or moved-aside file
                }
                let young = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|a| a < age);
                if young || d.capacity.is_none() {
                    kept += 1;
                    continue;
                }
                match fs::remove_file(e.path()) {
                    Ok(()) => (),
                    Err(err) if err.kind() == ErrorKind::NotFound => (),
                    Err(err) => return Err(io(&e.path())(err)),
                }
            }
        }
        Ok(kept)
    }

    /// The indices of the shards of `addr` stored here.
    pub fn shard_indices(&self, addr: &Hash) -> Vec<u8> {
        let prefix = format!("{}.s", addr.hex());
        let mut out: Vec<u8> = self
            .dirs
            .dirs()
            .iter()
            .flat_map(|d| {
                fs::read_dir(Self::block_dir(&d.path, addr))
                    .into_iter()
                    .flatten()
            })
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix(&prefix)?.parse::<u8>().ok()
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Deletes shard `index` of `addr` (after it was handed over).
    pub fn delete_shard(&self, addr: &Hash, index: u8) -> Result<(), StoreError> {
        let _lock = self.lock(addr);
        while let Some(p) = self.find_shard(addr, index) {
            match fs::remove_file(&p) {
                Ok(()) => (),
                Err(e) if e.kind() == ErrorKind::NotFound => (),
                Err(e) => return Err(io(&p)(e)),
            }
        }
        Ok(())
    }

    /// Moves a corrupted shard file aside (`.corrupted` suffix).
    pub fn move_shard_aside(&self, addr: &Hash, index: u8) -> Result<Option<PathBuf>, StoreError> {
        let _lock = self.lock(addr);
        self.find_shard(addr, index).map(set_aside).transpose()
    }

    /// Deletes every stored copy of the block.
    pub fn delete(&self, hash: &Hash) -> Result<(), StoreError> {
        let _lock = self.lock(hash);
        self.delete_locked(hash)
    }

    fn delete_locked(&self, hash: &Hash) -> Result<(), StoreError> {
        for d in self.dirs.dirs() {
            if d.capacity.is_none() {
                continue;
            }
            for compressed in [true, false] {
                let p = Self::block_dir(&d.path, hash).join(Self::file_name(hash, compressed));
                match fs::remove_file(&p) {
                    Ok(()) => (),
                    Err(e) if e.kind() == ErrorKind::NotFound => (),
                    Err(e) => return Err(io(&p)(e)),
                }
            }
        }
        Ok(())
    }

    /// The next block stored after `cursor`, in hash order, across all
    /// data directories (for scrub and rebalance, which walk every block).
    pub fn next_block_after(&self, cursor: Option<Hash>) -> Option<Hash> {
        self.next_after(cursor, Files::Any)
    }

    /// The next address after `cursor` of which shards are stored here.
    pub fn next_shard_addr_after(&self, cursor: Option<Hash>) -> Option<Hash> {
        self.next_after(cursor, Files::Shards)
    }

    /// Calls `f` for every block and shard file of every data directory,
    /// with its path and length (temporary and moved-aside files are
    /// skipped). One pass over the directories, in no particular order;
    /// files written or deleted meanwhile may or may not be seen.
    pub fn walk_files(&self, mut f: impl FnMut(StoredFile, &Path, u64)) {
        let entries = |p: &Path| -> Vec<fs::DirEntry> {
            fs::read_dir(p)
                .map(|it| it.filter_map(|e| e.ok()).collect())
                .unwrap_or_default()
        };
        let two_hex = |e: &fs::DirEntry| e.file_name().len() == 2;
        for d in self.dirs.dirs() {
            for a in entries(&d.path).into_iter().filter(two_hex) {
                for b in entries(&a.path()).into_iter().filter(two_hex) {
                    for e in entries(&b.path()) {
                        let Ok(name) = e.file_name().into_string() else {
                            continue;
                        };
                        let Some(file) = StoredFile::of_name(&name) else {
                            continue;
                        };
                        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                        f(file, &e.path(), len);
                    }
                }
            }
        }
    }

    fn next_after(&self, cursor: Option<Hash>, files: Files) -> Option<Hash> {
        let mut best: Option<Hash> = None;
        for d in self.dirs.dirs() {
            if let Some(h) = next_in_dir(&d.path, cursor, files) {
                if best.is_none_or(|b| h < b) {
                    best = Some(h);
                }
            }
        }
        best
    }

    /// Moves the block to its primary directory if it is elsewhere (after a
    /// change of directories); returns whether it moved. The block is
    /// checked against its hash first: a corrupted one stays (scrub and
    /// resync handle it).
    pub fn relocate(&self, hash: &Hash) -> Result<bool, StoreError> {
        let Some((path, _)) = self.find(hash) else {
            return Ok(false);
        };
        if path.starts_with(&self.dirs.primary(hash).path) {
            return Ok(false);
        }
        let Some(block) = self.read(hash)? else {
            return Ok(false);
        };
        block.verify_and_decode(hash)?;
        // `write` places it in its primary dir and removes the copies in
        // the other writable dirs.
        self.write(hash, &block)?;
        Ok(true)
    }

    /// Moves a corrupted block file aside (`.corrupted` suffix) so that it
    /// is fetched again and can still be inspected.
    pub fn move_aside(&self, hash: &Hash) -> Result<Option<PathBuf>, StoreError> {
        self.find(hash).map(|(path, _)| set_aside(path)).transpose()
    }
}

/// A file of the data directories, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredFile {
    /// A whole block (`<hash>` or `<hash>.zst`).
    Block(Hash),
    /// Shard `index` of the erasure-coded (or placed) block `addr`
    /// (`<addr>.s<index>`).
    Shard(Hash, u8),
}

impl StoredFile {
    fn of_name(name: &str) -> Option<Self> {
        if let Some((addr, i)) = name.split_once(".s") {
            return Some(StoredFile::Shard(addr.parse().ok()?, i.parse().ok()?));
        }
        Some(StoredFile::Block(
            name.strip_suffix(".zst").unwrap_or(name).parse().ok()?,
        ))
    }
}

/// Which files a walk looks at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Files {
    /// Whole blocks and shards.
    Any,
    Shards,
}

/// Renames `path` to `<path>.corrupted`; returns the new path.
fn set_aside(path: PathBuf) -> Result<PathBuf, StoreError> {
    let mut aside = path.clone().into_os_string();
    aside.push(".corrupted");
    let aside = PathBuf::from(aside);
    fs::rename(&path, &aside).map_err(io(&path))?;
    Ok(aside)
}

/// The smallest address of a block or shard stored under `dir` that is
/// greater than `cursor`, walking the two levels of subdirectories in
/// order and skipping those entirely before the cursor.
fn next_in_dir(dir: &Path, cursor: Option<Hash>, files: Files) -> Option<Hash> {
    let cur = cursor.map(|c| c.hex());
    let sorted = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .map(|it| {
                it.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for a in sorted(dir).into_iter().filter(|a| a.len() == 2) {
        if cur.as_ref().is_some_and(|c| a.as_str() < &c[0..2]) {
            continue;
        }
        for b in sorted(&dir.join(&a)).into_iter().filter(|b| b.len() == 2) {
            if cur
                .as_ref()
                .is_some_and(|c| format!("{a}{b}").as_str() < &c[0..4])
            {
                continue;
            }
            for f in sorted(&dir.join(&a).join(&b)) {
                let name = match f.split_once(".s") {
                    // A shard: `<addr>.s<index>`.
                    Some((addr, i)) if i.parse::<u8>().is_ok() => addr,
                    _ if files == Files::Shards => continue,
                    _ => f.strip_suffix(".zst").unwrap_or(&f),
                };
                let Ok(h) = name.parse::<Hash>() else {
                    continue; // temporary or moved-aside file
                };
                if cursor.is_none_or(|c| h > c) {
                    return Some(h);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirs::DataDir;
    use garage_util::data::blake2sum;

    fn store(dirs: &[(&Path, Option<u64>)], fsync: bool) -> BlockStore {
        BlockStore::new(
            DataDirs::new(
                dirs.iter()
                    .map(|(p, c)| DataDir {
                        path: p.to_path_buf(),
                        capacity: *c,
                    })
                    .collect(),
            )
            .unwrap(),
            fsync,
        )
    }

    #[test]
    fn write_read_delete_with_and_without_compression() {
        let t = tempfile::tempdir().unwrap();
        for (fsync, level) in [(false, None), (true, Some(3))] {
            let s = store(&[(t.path(), Some(1))], fsync);
            let data = Bytes::from(vec![b'x'; 100_000]);
            let h = blake2sum(&data);
            let block = DataBlock::from_plain(data.clone(), level);
            s.write(&h, &block).unwrap();
            let (path, compressed) = s.find(&h).unwrap();
            assert_eq!(compressed, level.is_some());
            assert!(path.starts_with(t.path()));
            let back = s.read(&h).unwrap().unwrap();
            assert_eq!(back.verify_and_decode(&h).unwrap(), data);
            // No temporary file is left behind.
            let n = fs::read_dir(path.parent().unwrap()).unwrap().count();
            assert_eq!(n, 1);
            s.delete(&h).unwrap();
            assert!(s.read(&h).unwrap().is_none());
        }
    }

    #[test]
    fn relocation_moves_blocks_to_their_new_primary_dir() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let one = store(&[(a.path(), Some(1))], false);
        let mut hashes = Vec::new();
        for i in 0..60u32 {
            let data = Bytes::from(i.to_be_bytes().repeat(100));
            let h = blake2sum(&data);
            one.write(&h, &DataBlock::Plain(data)).unwrap();
            hashes.push(h);
        }
        let two = store(&[(a.path(), Some(1)), (b.path(), Some(1))], false);
        let mut cursor = None;
        let mut moved = 0;
        while let Some(h) = two.next_block_after(cursor) {
            moved += two.relocate(&h).unwrap() as usize;
            cursor = Some(h);
        }
        assert!(moved > 15 && moved < 45, "about half move: {moved}");
        for h in hashes.iter() {
            let (path, _) = two.find(h).unwrap();
            assert!(path.starts_with(&two.dirs.primary(h).path));
            let copies = [a.path(), b.path()]
                .iter()
                .filter(|d| BlockStore::block_dir(d, h).join(h.hex()).exists())
                .count();
            assert_eq!(copies, 1, "exactly one copy of {h:?}");
        }
        assert!(two.next_block_after(None).is_some());
    }

    #[test]
    fn blocks_are_found_in_any_dir_and_corrupted_ones_moved_aside() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let one = store(&[(a.path(), Some(1))], false);
        let data = Bytes::from_static(b"hello block");
        let h = blake2sum(&data);
        one.write(&h, &DataBlock::Plain(data.clone())).unwrap();
        // The dir becomes read-only next to a new one: still found.
        let two = store(&[(a.path(), None), (b.path(), Some(1))], false);
        assert!(two.read(&h).unwrap().is_some());
        // A flipped byte is detected, and the file moved aside.
        let (path, _) = two.find(&h).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        bytes[0] ^= 0xff;
        fs::write(&path, bytes).unwrap();
        let err = two.read(&h).unwrap().unwrap().verify_and_decode(&h);
        assert!(err.is_err());
        let aside = two.move_aside(&h).unwrap().unwrap();
        assert!(aside.exists());
        assert!(two.read(&h).unwrap().is_none());
    }
}
