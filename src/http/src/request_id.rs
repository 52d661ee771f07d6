//! Request ids: the id of one HTTP request in the logs, the spans and the
//! error documents of every endpoint.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// A new request id: 16 hex digits, unique within this process and
/// unlikely to repeat across nodes and restarts (the start time is mixed
/// in).
pub fn new_request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static BASE: OnceLock<u64> = OnceLock::new();
    let base = *BASE.get_or_init(|| {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        (t.as_nanos() as u64).rotate_left(32) ^ u64::from(std::process::id())
    });
    format!(
        "{:016X}",
        base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_distinct_hex() {
        let a = new_request_id();
        let b = new_request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
