use std::ops::Bound;

use crate::{Direction, KeyValue, Result, ITER_BATCH};

type FetchFn<'a> =
    Box<dyn Fn(Bound<&[u8]>, Bound<&[u8]>, Direction, usize) -> Result<Vec<KeyValue>> + 'a>;

/// An iterator over a key range, fetching [`ITER_BATCH`] entries at a time
/// from the engine. It holds no engine transaction between batches, so a long
/// scan never pins old database pages.
pub struct RangeIter<'a> {
    low: Bound<Vec<u8>>,
    high: Bound<Vec<u8>>,
    dir: Direction,
    fetch: FetchFn<'a>,
    buf: std::vec::IntoIter<KeyValue>,
    done: bool,
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
        }
    }

    fn refill(&mut self) -> Result<()> {
        let batch = (self.fetch)(as_ref(&self.low), as_ref(&self.high), self.dir, ITER_BATCH)?;
        if batch.len() < ITER_BATCH {
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
