//! Shared checks for this crate's tests.

use garage_util::crdt::Crdt;

fn merged<T: Crdt + Clone>(a: &T, b: &T) -> T {
    let mut x = a.clone();
    x.merge(b);
    x
}

/// Merge must be commutative, associative and idempotent.
pub fn check_laws<T: Crdt + Clone + PartialEq + std::fmt::Debug>(a: &T, b: &T, c: &T) {
    assert_eq!(merged(a, b), merged(b, a), "commutative");
    assert_eq!(
        merged(&merged(a, b), c),
        merged(a, &merged(b, c)),
        "associative"
    );
    assert_eq!(merged(a, a), *a, "idempotent");
}
