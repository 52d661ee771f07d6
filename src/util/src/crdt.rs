//! Conflict-free replicated data types: values that any two nodes can merge
//! in any order, any number of times, and reach the same result.
//!
//! `merge` must be commutative, associative and idempotent; the property
//! tests below check it for every type here.

use serde::{Deserialize, Serialize};

use crate::time::increment_after;

/// A value that can be merged with another version of itself.
pub trait Crdt {
    fn merge(&mut self, other: &Self);
}

/// Last-writer-wins register: the value with the larger timestamp wins; on
/// equal timestamps the larger value wins, so that merging is deterministic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lww<T> {
    ts: u64,
    value: T,
}

impl<T: Clone + Ord> Lww<T> {
    /// A new register, stamped by this node's hybrid clock.
    pub fn new(value: T) -> Self {
        Self {
            ts: crate::time::stamp(),
            value,
        }
    }

    /// A register with an explicit timestamp (for tests and migrations).
    pub fn raw(ts: u64, value: T) -> Self {
        Self { ts, value }
    }

    /// Sets a new value, with a timestamp after the current one.
    pub fn update(&mut self, value: T) {
        self.ts = increment_after(self.ts);
        self.value = value;
    }

    pub fn get(&self) -> &T {
        &self.value
    }

    pub fn timestamp(&self) -> u64 {
        self.ts
    }
}

impl<T: Clone + Ord> Crdt for Lww<T> {
    fn merge(&mut self, other: &Self) {
        if (other.ts, &other.value) > (self.ts, &self.value) {
            *self = other.clone();
        }
    }
}

/// Last-writer-wins map: each key holds an independent [`Lww`] register.
/// Removing a key is done by storing a value that means "removed" (for
/// example `None`), so that removals merge like any other write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwMap<K, V> {
    /// Sorted by key, each key once.
    entries: Vec<(K, u64, V)>,
}

impl<K: Clone + Ord, V: Clone + Ord> Default for LwwMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Ord, V: Clone + Ord> LwwMap<K, V> {
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Sets `key` to `value`, with a timestamp after the key's current one.
    pub fn update(&mut self, key: K, value: V) {
        match self.entries.binary_search_by(|(k, _, _)| k.cmp(&key)) {
            Ok(i) => {
                let e = &mut self.entries[i];
                e.1 = increment_after(e.1);
                e.2 = value;
            }
            Err(i) => self.entries.insert(i, (key, crate::time::stamp(), value)),
        }
    }

    /// Inserts with an explicit timestamp, merging with what is there.
    pub fn merge_raw(&mut self, key: K, ts: u64, value: V) {
        match self.entries.binary_search_by(|(k, _, _)| k.cmp(&key)) {
            Ok(i) => {
                let e = &mut self.entries[i];
                if (ts, &value) > (e.1, &e.2) {
                    e.1 = ts;
                    e.2 = value;
                }
            }
            Err(i) => self.entries.insert(i, (key, ts, value)),
        }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries
            .binary_search_by(|(k, _, _)| k.cmp(key))
            .ok()
            .map(|i| &self.entries[i].2)
    }

    pub fn items(&self) -> impl Iterator<Item = (&K, u64, &V)> {
        self.entries.iter().map(|(k, ts, v)| (k, *ts, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keeps the keys `f` accepts. Only for keys that, once dropped, are
    /// dropped by every later merge too (as the tags of an object version
    /// that was pruned), else a merge brings them back.
    pub fn retain(&mut self, mut f: impl FnMut(&K) -> bool) {
        self.entries.retain(|(k, _, _)| f(k));
    }

    /// Empties the map. Only for state that is not merged with older
    /// copies afterwards (a cleared map merged with an old one gets the old
    /// entries back).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl<K: Clone + Ord, V: Clone + Ord> Crdt for LwwMap<K, V> {
    fn merge(&mut self, other: &Self) {
        for (k, ts, v) in other.entries.iter() {
            self.merge_raw(k.clone(), *ts, v.clone());
        }
    }
}

impl<T: Crdt + Clone> Crdt for Option<T> {
    fn merge(&mut self, other: &Self) {
        match (self.as_mut(), other) {
            (_, None) => (),
            (None, Some(o)) => *self = Some(o.clone()),
            (Some(s), Some(o)) => s.merge(o),
        }
    }
}

/// A flag that, once set, stays set (merge is "or").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bool(bool);

impl Bool {
    pub fn new(b: bool) -> Self {
        Self(b)
    }
    pub fn set(&mut self) {
        self.0 = true;
    }
    pub fn get(&self) -> bool {
        self.0
    }
}

impl Crdt for Bool {
    fn merge(&mut self, other: &Self) {
        self.0 |= other.0;
    }
}

/// A value that can be deleted for good: `Deleted` wins over any value,
/// and present values merge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Deletable<T> {
    Present(T),
    Deleted,
}

impl<T> Deletable<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Deletable::Present(v) => Some(v),
            Deletable::Deleted => None,
        }
    }
    pub fn get_mut(&mut self) -> Option<&mut T> {
        match self {
            Deletable::Present(v) => Some(v),
            Deletable::Deleted => None,
        }
    }
    pub fn is_deleted(&self) -> bool {
        matches!(self, Deletable::Deleted)
    }
}

impl<T: Crdt + Clone> Crdt for Deletable<T> {
    fn merge(&mut self, other: &Self) {
        match (self.get_mut(), other) {
            (_, Deletable::Deleted) => *self = Deletable::Deleted,
            (None, _) => (),
            (Some(a), Deletable::Present(b)) => a.merge(b),
        }
    }
}

/// A grow-only map whose values are CRDTs merged key by key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Map<K, V> {
    /// Sorted by key, each key once.
    entries: Vec<(K, V)>,
}

impl<K: Clone + Ord, V: Crdt + Clone> Default for Map<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Ord, V: Crdt + Clone> Map<K, V> {
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// A map with one item.
    pub fn put_mutator(key: K, value: V) -> Self {
        Self {
            entries: vec![(key, value)],
        }
    }

    /// Merges `value` into the value at `key`.
    pub fn put(&mut self, key: K, value: V) {
        match self.entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => self.entries[i].1.merge(&value),
            Err(i) => self.entries.insert(i, (key, value)),
        }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    pub fn items(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Empties the map. Only for state that merging can no longer bring
    /// back (for example the blocks of a deleted version, whose deletion
    /// wins over everything).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl<K: Clone + Ord, V: Crdt + Clone> Crdt for Map<K, V> {
    fn merge(&mut self, other: &Self) {
        for (k, v) in other.entries.iter() {
            self.put(k.clone(), v.clone());
        }
    }
}

/// A value that only grows: merge keeps the larger.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Max<T>(pub T);

impl<T: Ord + Clone> Crdt for Max<T> {
    fn merge(&mut self, other: &Self) {
        if other.0 > self.0 {
            self.0 = other.0.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn merged<T: Crdt + Clone>(a: &T, b: &T) -> T {
        let mut x = a.clone();
        x.merge(b);
        x
    }

    fn check_laws<T: Crdt + Clone + PartialEq + std::fmt::Debug>(a: &T, b: &T, c: &T) {
        assert_eq!(merged(a, b), merged(b, a), "commutative");
        assert_eq!(
            merged(&merged(a, b), c),
            merged(a, &merged(b, c)),
            "associative"
        );
        assert_eq!(merged(a, a), *a, "idempotent");
        assert_eq!(
            merged(&merged(a, b), b),
            merged(a, b),
            "idempotent after merge"
        );
    }

    fn lww() -> impl Strategy<Value = Lww<u8>> {
        (0u64..5, 0u8..4).prop_map(|(ts, v)| Lww::raw(ts, v))
    }

    fn lww_map() -> impl Strategy<Value = LwwMap<u8, Option<u8>>> {
        proptest::collection::vec((0u8..6, 0u64..5, proptest::option::of(0u8..4)), 0..8).prop_map(
            |items| {
                let mut m = LwwMap::new();
                for (k, ts, v) in items {
                    m.merge_raw(k, ts, v);
                }
                m
            },
        )
    }

    fn deletable() -> impl Strategy<Value = Deletable<Lww<u8>>> {
        prop_oneof![Just(Deletable::Deleted), lww().prop_map(Deletable::Present),]
    }

    fn map() -> impl Strategy<Value = Map<u8, Lww<u8>>> {
        proptest::collection::vec((0u8..5, lww()), 0..6).prop_map(|items| {
            let mut m = Map::new();
            for (k, v) in items {
                m.put(k, v);
            }
            m
        })
    }

    proptest! {
        #[test]
        fn bool_laws(a in any::<bool>(), b in any::<bool>(), c in any::<bool>()) {
            check_laws(&Bool::new(a), &Bool::new(b), &Bool::new(c));
        }

        #[test]
        fn deletable_laws(a in deletable(), b in deletable(), c in deletable()) {
            check_laws(&a, &b, &c);
        }

        #[test]
        fn map_laws(a in map(), b in map(), c in map()) {
            check_laws(&a, &b, &c);
        }

        #[test]
        fn max_laws(a in 0u8..5, b in 0u8..5, c in 0u8..5) {
            check_laws(&Max(a), &Max(b), &Max(c));
        }

        #[test]
        fn lww_laws(a in lww(), b in lww(), c in lww()) {
            check_laws(&a, &b, &c);
        }

        #[test]
        fn lww_map_laws(a in lww_map(), b in lww_map(), c in lww_map()) {
            check_laws(&a, &b, &c);
        }

        #[test]
        fn option_laws(a in proptest::option::of(lww()), b in proptest::option::of(lww()), c in proptest::option::of(lww())) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn updates_win_over_the_value_they_replace() {
        let mut a = Lww::raw(u64::MAX - 10, 3u8);
        let old = a.clone();
        a.update(1);
        assert_eq!(*merged(&old, &a).get(), 1);
        let mut m: LwwMap<&str, Option<u32>> = LwwMap::new();
        m.update("x", Some(1));
        let before = m.clone();
        m.update("x", None);
        assert_eq!(merged(&before, &m).get(&"x"), Some(&None));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn encoding_round_trips() {
        let mut m: LwwMap<String, Option<u32>> = LwwMap::new();
        m.update("a".into(), Some(7));
        let bytes = rmp_serde::to_vec_named(&m).unwrap();
        let back: LwwMap<String, Option<u32>> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, m);
    }
}
