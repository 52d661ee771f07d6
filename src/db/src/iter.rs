//! Range scans over a tree, fetched in batches so that no engine
//! transaction stays open between them.

use std::ops::Bound;

use crate::{Direction, KeyValue, Result, ITER_BATCH, ITER_FIRST_BATCH};

type FetchFn<'a> =
    Box<dyn Fn(Bound<&[u8]>, Bound<&[u8]>, Direction, usize) -> Result<Vec<KeyValue>> + 'a>;

/// An iterator over a key range, fetching entries from the engine in
/// batches of [`ITER_FIRST_BATCH`], then twice as many each time up to
/// [`ITER_BATCH`]. It holds no engine transaction between batches, so a
/// long scan never pins old database pages.
pub struct RangeIter<'a> {
    low: Bound<Vec<u8>>,
    high: Bound<Vec<u8>>,
    dir: Direction,
    fetch: FetchFn<'a>,
    buf: std::vec::IntoIter<KeyValue>,
    done: bool,
    /// The size of the next batch.
    batch: usize,
}

impl<'a> RangeIter<'a> {
    pub(crate) fn new(
        low: Bound<Vec<u8>>,
        high: Bound<Vec<u8>>,
        dir: Direction,
        fetch: FetchFn<'a>,
    ) -> Self {
        // An empty or inverted range yields nothing (and must not reach
        // engines, some of which reject it).
        let empty = match (&low, &high) {
            (Bound::Included(l), Bound::Included(h)) => l > h,
            (Bound::Included(l), Bound::Excluded(h))
            | (Bound::Excluded(l), Bound::Included(h))
            | (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
            _ => false,
        };
        Self {
            low,
            high,
            dir,
            fetch,
            buf: Vec::new().into_iter(),
            done: empty,
            batch: ITER_FIRST_BATCH,
        }
    }

    fn refill(&mut self) -> Result<()> {
        let want = self.batch;
        self.batch = (want * 2).min(ITER_BATCH);
        let batch = (self.fetch)(as_ref(&self.low), as_ref(&self.high), self.dir, want)?;
        if batch.len() < want {
            self.done = true;
        }
        if let Some((last, _)) = batch.last() {
            // The next batch starts just past the last key seen.
            match self.dir {
                Direction::Forward => self.low = Bound::Excluded(last.clone()),
                Direction::Reverse => self.high = Bound::Excluded(last.clone()),
            }
        }
        self.buf = batch.into_iter();
        Ok(())
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for RangeIter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(kv) = self.buf.next() {
            return Some(Ok(kv));
        }
        if self.done {
            return None;
        }
        if let Err(e) = self.refill() {
            self.done = true;
            return Some(Err(e));
        }
        self.buf.next().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;

    use super::*;
    use crate::Error;

    /// Serves batches from a BTreeMap, as an engine would, counting calls.
    fn source<'a>(
        map: &'a BTreeMap<Vec<u8>, Vec<u8>>,
        calls: &'a Cell<usize>,
        fail_at: Option<usize>,
    ) -> FetchFn<'a> {
        Box::new(move |low, high, dir, limit| {
            calls.set(calls.get() + 1);
            if Some(calls.get()) == fail_at {
                return Err(Error::Aborted("injected".into()));
            }
            let range = map.range::<[u8], _>((low, high));
            let kvs: Vec<KeyValue> = match dir {
                Direction::Forward => range
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                Direction::Reverse => range
                    .rev()
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            };
            Ok(kvs)
        })
    }

    fn map_of(n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
        (0..n).map(|i| (i.to_be_bytes().to_vec(), vec![])).collect()
    }

    /// The batch sizes an iterator asks for, in order.
    fn batches() -> impl Iterator<Item = usize> {
        std::iter::successors(Some(ITER_FIRST_BATCH), |b| Some((b * 2).min(ITER_BATCH)))
    }

    /// How many fetches a scan of `n` entries makes: full batches, then
    /// one short (maybe empty) batch.
    fn fetches_for(n: usize) -> usize {
        let mut left = n;
        let mut calls = 0;
        for b in batches() {
            calls += 1;
            if left < b {
                return calls;
            }
            left -= b;
        }
        unreachable!()
    }

    #[test]
    fn batches_grow_to_the_largest() {
        let map = map_of(2000);
        let sizes = std::cell::RefCell::new(Vec::new());
        let calls = Cell::new(0);
        let inner = source(&map, &calls, None);
        let it = RangeIter::new(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
            Box::new(|l, h, d, n| {
                sizes.borrow_mut().push(n);
                inner(l, h, d, n)
            }),
        );
        assert_eq!(it.count(), 2000);
        let sizes = sizes.into_inner();
        assert_eq!(sizes[0], ITER_FIRST_BATCH);
        assert!(sizes.windows(2).all(|w| w[1] == (w[0] * 2).min(ITER_BATCH)));
        assert_eq!(*sizes.last().unwrap(), ITER_BATCH);
        assert_eq!(sizes.len(), fetches_for(2000));
    }

    /// A read of a few entries copies a few entries out of the engine,
    /// not a whole batch of the largest size.
    #[test]
    fn a_short_read_fetches_a_short_batch() {
        let map = map_of(1000);
        let calls = Cell::new(0);
        let mut it = RangeIter::new(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
            source(&map, &calls, None),
        );
        assert!(it.next().is_some() && it.next().is_some());
        assert_eq!(it.buf.len(), ITER_FIRST_BATCH - 2);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_range_of_whole_batches_ends_with_one_empty_fetch() {
        let n: usize = batches().take(7).sum();
        let map = map_of(n as u32);
        let calls = Cell::new(0);
        let it = RangeIter::new(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
            source(&map, &calls, None),
        );
        let keys: Vec<_> = it.map(|kv| kv.unwrap().0).collect();
        assert_eq!(keys, map.keys().cloned().collect::<Vec<_>>());
        assert_eq!(calls.get(), 8);
        assert_eq!(calls.get(), fetches_for(keys.len()));
    }

    #[test]
    fn reverse_batches_continue_below_the_last_key() {
        let map = map_of(ITER_BATCH as u32 + 10);
        let calls = Cell::new(0);
        let high = 300u32.to_be_bytes().to_vec();
        let it = RangeIter::new(
            Bound::Excluded(5u32.to_be_bytes().to_vec()),
            Bound::Included(high),
            Direction::Reverse,
            source(&map, &calls, None),
        );
        let keys: Vec<u32> = it
            .map(|kv| u32::from_be_bytes(kv.unwrap().0.try_into().unwrap()))
            .collect();
        let expected: Vec<u32> = (6..ITER_BATCH as u32 + 10).rev().collect();
        assert_eq!(keys, expected);
        assert_eq!(calls.get(), fetches_for(keys.len()));
    }

    #[test]
    fn empty_and_inverted_ranges_never_reach_the_engine() {
        let map = map_of(10);
        let calls = Cell::new(0);
        for (low, high) in [
            (Bound::Included(vec![5]), Bound::Excluded(vec![5])),
            (Bound::Excluded(vec![5]), Bound::Included(vec![5])),
            (Bound::Included(vec![6]), Bound::Included(vec![5])),
        ] {
            let mut it = RangeIter::new(low, high, Direction::Forward, source(&map, &calls, None));
            assert!(it.next().is_none());
        }
        assert_eq!(calls.get(), 0);
    }

    #[test]
    fn an_error_is_returned_once_then_iteration_stops() {
        let map = map_of(ITER_BATCH as u32 * 3);
        let calls = Cell::new(0);
        let it = RangeIter::new(
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
            source(&map, &calls, Some(2)),
        );
        let items: Vec<_> = it.collect();
        assert_eq!(items.len(), ITER_FIRST_BATCH + 1);
        assert!(items[..ITER_FIRST_BATCH].iter().all(|r| r.is_ok()));
        assert!(items[ITER_FIRST_BATCH].is_err());
    }
}
