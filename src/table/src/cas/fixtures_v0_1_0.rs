//! Fixture of release v0.1.0 (commit cae52f3): the bytes that build stored
//! for a compare-and-set acceptor's state (private to this module, hence a
//! unit test). Later builds must decode it. The file was written by v0.1.0
//! itself (this test in `git archive cae52f3`, run with
//! `GARAGE_WRITE_FIXTURES=1`, which writes it when missing, never over it);
//! never regenerate it from a later build: add a new directory for a new
//! release. The other fixtures of this crate are in
//! `tests/fixtures_v0_1_0.rs`.

use serde_bytes::ByteBuf;

use super::{AcceptorState, Ballot};

#[test]
fn acceptor_state() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/v0.1.0/cas_acceptor_state.bin"
    );
    let state = AcceptorState {
        promised: Ballot {
            round: 1_700_000_000_007,
            proposer: 0x1234_5678,
        },
        accepted: Some((
            Ballot {
                round: 1_700_000_000_005,
                proposer: 0x0abc,
            },
            ByteBuf::from(b"the accepted value".to_vec()),
        )),
        partition: None,
    };
    if std::env::var("GARAGE_WRITE_FIXTURES").as_deref() == Ok("1")
        && !std::path::Path::new(path).exists()
    {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, state.encode()).unwrap();
    }
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("fixture {path}: {e}"));
    assert_eq!(AcceptorState::decode(&bytes).unwrap(), state);
}
