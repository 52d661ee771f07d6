//! Group commit: write transactions queued while another one is being
//! written share the next one.
//!
//! Both engines admit one writer at a time, and each commit writes the
//! pages it touched (the B-tree path from the root) and, with `fsync`,
//! syncs the file. Many small concurrent writers (each replica write of a
//! table entry) would each pay that, queued on the engine's write lock.
//! Here one thread per database takes every job queued, runs them one
//! after the other in a single transaction and commits once; each job's
//! outcome is delivered only after that commit, so a caller never learns
//! of a write before it is as durable as its own transaction would have
//! made it.
//!
//! A job that aborts (its closure returned [`TxError::Abort`]) must not
//! take the others' writes with it: the shared transaction is then
//! abandoned and every job of the group is run again alone, in its own
//! transaction. So a job's closure may run twice, and must have no effect
//! outside the transaction handle.

use std::sync::mpsc;

use crate::{Db, Error, Result, Transaction, TxError, TxResult};

/// At most this many jobs share one transaction.
pub const MAX_GROUP: usize = 256;

/// A queued transaction, its result type erased.
pub(crate) trait Job: Send {
    /// Runs the job's writes in `tx`. `Ok(false)` if the job aborted
    /// (its outcome is kept for [`Job::finish`]); `Err` on a database
    /// error, which fails the whole transaction.
    fn run(&mut self, tx: &mut Transaction<'_>) -> Result<bool>;
    /// Delivers the job's outcome, given the result of the commit that
    /// held its writes.
    fn finish(self: Box<Self>, commit: Result<()>);
}

pub(crate) struct TypedJob<R, E, F, D> {
    pub f: F,
    pub done: D,
    pub outcome: Option<std::result::Result<R, E>>,
}

impl<R, E, F, D> Job for TypedJob<R, E, F, D>
where
    R: Send,
    E: Send,
    F: FnMut(&mut Transaction<'_>) -> TxResult<R, E> + Send,
    D: FnOnce(TxResult<R, E>) + Send,
{
    fn run(&mut self, tx: &mut Transaction<'_>) -> Result<bool> {
        match (self.f)(tx) {
            Ok(r) => {
                self.outcome = Some(Ok(r));
                Ok(true)
            }
            Err(TxError::Abort(e)) => {
                self.outcome = Some(Err(e));
                Ok(false)
            }
            Err(TxError::Db(e)) => {
                self.outcome = None;
                Err(e)
            }
        }
    }

    fn finish(self: Box<Self>, commit: Result<()>) {
        let r = match (commit, self.outcome) {
            (Err(e), _) => Err(TxError::Db(e)),
            (Ok(()), Some(Ok(r))) => Ok(r),
            (Ok(()), Some(Err(e))) => Err(TxError::Abort(e)),
            (Ok(()), None) => Err(TxError::Db(Error::TransactionRetried)),
        };
        (self.done)(r)
    }
}

pub(crate) type Sender = mpsc::Sender<Box<dyn Job>>;

/// Starts the committer thread of `db` (a handle without a committer of
/// its own, so that the thread ends when the last [`Db`] handle with the
/// returned sender is dropped).
pub(crate) fn start(db: Db) -> std::io::Result<Sender> {
    let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
    std::thread::Builder::new()
        .name("db-group-commit".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match rx.try_recv() {
                        Ok(j) => group.push(j),
                        Err(_) => break,
                    }
                }
                // A job that panics loses its group's answers (their
                // callers see the channel closed), not the thread.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_group(&db, group)
                }));
                if ran.is_err() {
                    tracing::error!("a grouped transaction panicked; its group was not committed");
                }
            }
        })?;
    Ok(tx)
}

/// Marker of a shared transaction abandoned because one job aborted.
struct OneAborted;

fn run_group(db: &Db, mut group: Vec<Box<dyn Job>>) {
    if group.len() == 1 {
        return run_alone(db, group.pop().expect("one job"));
    }
    let res = db.transaction(|tx| -> TxResult<(), OneAborted> {
        for j in group.iter_mut() {
            if !j.run(tx)? {
                return Err(TxError::Abort(OneAborted));
            }
        }
        Ok(())
    });
    match res {
        Ok(()) => {
            for j in group {
                j.finish(Ok(()));
            }
        }
        // One job aborted, or the database failed: each alone, so that
        // one job's failure is its own.
        Err(_) => {
            for j in group {
                run_alone(db, j);
            }
        }
    }
}

fn run_alone(db: &Db, mut j: Box<dyn Job>) {
    let res = db.transaction(|tx| -> TxResult<(), OneAborted> {
        match j.run(tx)? {
            true => Ok(()),
            false => Err(TxError::Abort(OneAborted)),
        }
    });
    j.finish(match res {
        Ok(()) | Err(TxError::Abort(OneAborted)) => Ok(()),
        Err(TxError::Db(e)) => Err(e),
    });
}

/// Runs a job on the calling thread in its own transaction (when the
/// committer thread could not be started).
pub(crate) fn run_here(db: &Db, job: Box<dyn Job>) {
    run_alone(db, job)
}
