//! Fixtures of a release's encodings, for the tests that check later builds
//! still decode them (`tests/fixtures/v<release>/` in the crates; see
//! doc/upgrading.md). Test-only: under `cfg(test)` or the `testing`
//! feature, like [`crate::fuzzing`].

use std::path::Path;

/// The bytes of fixture `name` in `dir` (`<dir>/<name>.bin`). With
/// `GARAGE_WRITE_FIXTURES=1`, a missing one is first written from
/// `encode()`: run so only in the tree of the release the fixtures are of
/// (an existing file is never overwritten).
pub fn fixture(dir: &str, name: &str, encode: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    let path = format!("{dir}/{name}.bin");
    if std::env::var("GARAGE_WRITE_FIXTURES").as_deref() == Ok("1") && !Path::new(&path).exists() {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&path, encode()).unwrap();
    }
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}
