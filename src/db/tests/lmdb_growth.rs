//! LMDB with `lmdb_write_map`: the map starts small and grows in
//! preallocated steps, under concurrent readers, up to `lmdb_map_size`,
//! where a write that does not fit is an error and nothing already
//! committed is lost.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_db::lmdb_adapter::GROW_STEP;
use garage_db::{open, Db, Engine, Error, OpenOptions};

/// A value in one overflow page of 4 KiB (with LMDB's page header).
const VALUE: usize = 4000;
const PAGE: u64 = 4096;

fn value_of(i: u32) -> Vec<u8> {
    let b = i.to_le_bytes();
    (0..VALUE).map(|j| b[j % 4] ^ (j as u8)).collect()
}

fn open_lmdb(path: &Path, write_map: bool, map: u64) -> Db {
    open(
        Engine::Lmdb,
        path,
        &OpenOptions {
            lmdb_write_map: write_map,
            lmdb_map_size: map,
            ..Default::default()
        },
    )
    .unwrap()
}

fn data_file(path: &Path) -> std::fs::Metadata {
    std::fs::metadata(path.join("data.mdb")).unwrap()
}

/// Writes keys `from..to` in transactions of 8 entries.
fn write(db: &Db, from: u32, to: u32) -> Result<(), Error> {
    let tree = db.open_tree("t").unwrap();
    let mut i = from;
    while i < to {
        let end = (i + 8).min(to);
        db.transaction::<_, (), _>(|tx| {
            for k in i..end {
                tx.insert(&tree, k.to_be_bytes(), value_of(k))?;
            }
            Ok(())
        })
        .map_err(|e| e.into_db_error())?;
        i = end;
    }
    Ok(())
}

fn check(db: &Db, to: u32) {
    let tree = db.open_tree("t").unwrap();
    assert_eq!(tree.len().unwrap(), to as usize);
    for k in (0..to).step_by(7) {
        assert_eq!(tree.get(k.to_be_bytes()).unwrap().unwrap(), value_of(k));
    }
}

#[test]
fn map_grows_in_preallocated_steps_under_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = Engine::Lmdb.db_path(dir.path());
    let db = open_lmdb(&path, true, 1 << 40);
    // A new database: one step, not the 1 TiB cap.
    assert_eq!(data_file(&path).len(), GROW_STEP);

    // 32 768 values of a page each (128 MiB) while two threads read.
    const N: u32 = 32_768;
    let written = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, written, stop) = (db.clone(), written.clone(), stop.clone());
            std::thread::spawn(move || {
                let tree = db.open_tree("t").unwrap();
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut reads = 0u64;
                let mut k: u32 = r;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let upto = written.load(Ordering::Acquire);
                    if upto > 0 {
                        k = (k.wrapping_mul(2_654_435_761).wrapping_add(1)) % upto;
                        let v = tree.get(k.to_be_bytes()).unwrap();
                        assert_eq!(v.as_deref(), Some(&value_of(k)[..]), "key {k}");
                        let n = tree
                            .range(k.to_be_bytes()..)
                            .take(3)
                            .collect::<Result<Vec<_>, _>>()
                            .unwrap()
                            .len();
                        assert!(n >= 1);
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    for chunk in 0..(N / 512) {
        write(&db, chunk * 512, (chunk + 1) * 512).unwrap();
        written.store((chunk + 1) * 512, Ordering::Release);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0, "a reader never read");
    }
    check(&db, N);

    let meta = data_file(&path);
    let data = N as u64 * PAGE;
    assert!(
        meta.len() > data,
        "file {} for {} of data",
        meta.len(),
        data
    );
    assert!(
        meta.len() < 2 * data,
        "file {} for {} of data",
        meta.len(),
        data
    );
    assert_eq!(meta.len() % GROW_STEP, 0);
    // Preallocated, not sparse: no write through the map meets a full disk.
    assert!(
        meta.blocks() * 512 >= meta.len(),
        "{} bytes allocated of {}",
        meta.blocks() * 512,
        meta.len()
    );

    // Reopened with the map as large as the file, and plain LMDB reads it.
    drop(db);
    let db = open_lmdb(&path, true, 1 << 40);
    assert_eq!(data_file(&path).len(), meta.len());
    check(&db, N);
    drop(db);
    let db = open_lmdb(&path, false, 1 << 40);
    check(&db, N);
    write(&db, N, N + 64).unwrap();
    drop(db);
    let db = open_lmdb(&path, true, 1 << 40);
    check(&db, N + 64);
}

#[test]
fn a_full_map_is_an_error_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = Engine::Lmdb.db_path(dir.path());
    let cap = 2 * GROW_STEP;
    let db = open_lmdb(&path, true, cap);
    // More than the cap can hold, in steps: the writes up to the cap land,
    // then each one fails.
    let mut done = 0;
    let mut failed = None;
    for chunk in 0..(3 * cap / (512 * PAGE)) as u32 {
        match write(&db, chunk * 512, (chunk + 1) * 512) {
            Ok(()) => done = (chunk + 1) * 512,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let e = failed.expect("writes past lmdb_map_size must fail");
    assert!(
        matches!(e, Error::Lmdb(heed::Error::Mdb(heed::MdbError::MapFull))),
        "{e}"
    );
    assert!(done as u64 * PAGE > GROW_STEP, "only {done} written");
    assert_eq!(data_file(&path).len(), cap);
    // Whole transactions only: every 8-entry transaction before the
    // failing one is there.
    let n = db.open_tree("t").unwrap().len().unwrap() as u32;
    assert!(n >= done && n % 8 == 0, "{n} entries, {done} acknowledged");
    check(&db, n);
    drop(db);
    let db = open_lmdb(&path, true, cap);
    check(&db, n);
}
