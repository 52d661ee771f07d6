//! The bearer-token comparison of the admin API and of `/metrics`.

use garage_util::data::blake2sum;
use subtle::ConstantTimeEq;

/// What a request's `Authorization` header says about a bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheck {
    /// The header carries the expected token.
    Valid,
    /// No header, or one that is not `Bearer <token>`.
    Missing,
    /// A bearer token, but not the expected one.
    Wrong,
}

/// Compares the bearer token of `header` with `expected` in constant time,
/// on hashes so that the token's length does not leak either. The one
/// check of the admin API and of `/metrics`.
pub fn check_bearer(expected: &str, header: Option<&[u8]>) -> TokenCheck {
    let Some(given) = header
        .and_then(|h| h.strip_prefix(b"Bearer "))
        .map(|t| t.trim_ascii())
    else {
        return TokenCheck::Missing;
    };
    let ok: bool = blake2sum(given)
        .as_slice()
        .ct_eq(blake2sum(expected.as_bytes()).as_slice())
        .into();
    if ok {
        TokenCheck::Valid
    } else {
        TokenCheck::Wrong
    }
}
