//! Where a block lives among several data directories.
//!
//! Each writable directory gets blocks in proportion to its capacity, by
//! weighted rendezvous hashing: for a block, every directory draws a score
//! from the hash of (block hash, directory path) scaled by its capacity,
//! and the highest score wins. The choice depends only on the block and the
//! set of directories, so it is stable across restarts, and adding or
//! removing a directory moves only the blocks that go to or came from it.
//! Read-only directories are searched but never written.

use std::path::{Path, PathBuf};

use garage_util::data::{blake2sum, Hash};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDir {
    pub path: PathBuf,
    /// `None`: read-only.
    pub capacity: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct DataDirs {
    dirs: Vec<DataDir>,
}

/// Why a set of data directories cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DirsError {
    #[error("no data directory: give data_dir at least one path")]
    Empty,
    #[error("every data directory is read_only: at least one must take new blocks")]
    AllReadOnly,
    #[error("data directory {0} has capacity 0: give it a capacity, or mark it read_only")]
    ZeroCapacity(PathBuf),
}

impl DataDirs {
    pub fn new(dirs: Vec<DataDir>) -> Result<Self, DirsError> {
        if dirs.is_empty() {
            return Err(DirsError::Empty);
        }
        if let Some(d) = dirs.iter().find(|d| d.capacity == Some(0)) {
            return Err(DirsError::ZeroCapacity(d.path.clone()));
        }
        if dirs.iter().all(|d| d.capacity.is_none()) {
            return Err(DirsError::AllReadOnly);
        }
        Ok(Self { dirs })
    }

    /// One writable directory of unknown capacity.
    pub fn single(path: &Path) -> Self {
        Self {
            dirs: vec![DataDir {
                path: path.to_path_buf(),
                capacity: Some(1),
            }],
        }
    }

    pub fn dirs(&self) -> &[DataDir] {
        &self.dirs
    }

    /// The directory a new copy of `hash` goes to.
    pub fn primary(&self, hash: &Hash) -> &DataDir {
        self.dirs
            .iter()
            .filter_map(|d| d.capacity.map(|c| (d, score(hash, &d.path, c))))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(d, _)| d)
            .expect("at least one writable directory")
    }

    /// Every directory, the primary first: where to look for `hash`.
    pub fn search_order(&self, hash: &Hash) -> Vec<&DataDir> {
        let p = self.primary(hash);
        let mut v = vec![p];
        v.extend(self.dirs.iter().filter(|d| *d != p));
        v
    }
}

/// Weighted rendezvous score: `capacity / -ln(u)` with `u` in (0, 1)
/// drawn from the hash of the block and the directory.
fn score(hash: &Hash, dir: &Path, capacity: u64) -> f64 {
    let mut input = hash.as_slice().to_vec();
    input.extend_from_slice(dir.as_os_str().as_encoded_bytes());
    let h = blake2sum(&input);
    let x = u64::from_be_bytes(h.as_slice()[..8].try_into().expect("8 bytes"));
    // (x + 1) / (2^64 + 1): strictly between 0 and 1.
    let u = (x as f64 + 1.0) / (u64::MAX as f64 + 2.0);
    capacity as f64 / -u.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(p: &str, c: Option<u64>) -> DataDir {
        DataDir {
            path: PathBuf::from(p),
            capacity: c,
        }
    }

    fn hashes(n: usize) -> Vec<Hash> {
        (0..n as u64).map(|i| blake2sum(&i.to_be_bytes())).collect()
    }

    #[test]
    fn placement_follows_capacity_and_skips_read_only_dirs() {
        let d = DataDirs::new(vec![
            dir("/a", Some(1000)),
            dir("/b", Some(3000)),
            dir("/old", None),
        ])
        .unwrap();
        let hs = hashes(20_000);
        let on_b = hs
            .iter()
            .filter(|h| d.primary(h).path == Path::new("/b"))
            .count();
        let share = on_b as f64 / hs.len() as f64;
        assert!((0.72..0.78).contains(&share), "share of /b: {share}");
        assert!(hs.iter().all(|h| d.primary(h).path != Path::new("/old")));
        assert_eq!(d.search_order(&hs[0]).len(), 3);
    }

    #[test]
    fn adding_a_dir_moves_only_blocks_that_go_to_it() {
        let before = DataDirs::new(vec![dir("/a", Some(1)), dir("/b", Some(1))]).unwrap();
        let after = DataDirs::new(vec![
            dir("/a", Some(1)),
            dir("/b", Some(1)),
            dir("/c", Some(1)),
        ])
        .unwrap();
        let hs = hashes(9000);
        let mut moved = 0;
        for h in hs.iter() {
            let (x, y) = (&before.primary(h).path, &after.primary(h).path);
            if x != y {
                assert_eq!(y, Path::new("/c"), "a block moved between old dirs");
                moved += 1;
            }
        }
        let share = moved as f64 / hs.len() as f64;
        assert!((0.30..0.37).contains(&share), "moved {share}");
    }

    #[test]
    fn bad_sets_are_refused() {
        assert_eq!(DataDirs::new(vec![]).unwrap_err(), DirsError::Empty);
        assert_eq!(
            DataDirs::new(vec![dir("/a", None)]).unwrap_err(),
            DirsError::AllReadOnly
        );
        assert!(matches!(
            DataDirs::new(vec![dir("/a", Some(0))]).unwrap_err(),
            DirsError::ZeroCapacity(_)
        ));
    }
}
