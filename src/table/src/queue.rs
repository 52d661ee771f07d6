//! Entries to insert into a table later, recorded durably inside the
//! transaction of another change: how one table's change propagates to
//! another (a deleted version marks its block references deleted) without
//! network calls inside a database transaction. The table's queue worker
//! sends queued entries with quorum inserts and removes them once they are
//! acknowledged.

use std::marker::PhantomData;

use garage_db as db;

use crate::encoding::{self, tree_key};
use crate::schema::{Entry, TableSchema};

/// Name of the queue tree of table `table`.
pub fn queue_tree_name(table: &str) -> String {
    format!("{table}:insert_queue")
}

pub struct InsertQueue<F: TableSchema> {
    pub(crate) tree: db::Tree,
    _schema: PhantomData<fn() -> F>,
}

impl<F: TableSchema> Clone for InsertQueue<F> {
    fn clone(&self) -> Self {
        Self {
            tree: self.tree.clone(),
            _schema: PhantomData,
        }
    }
}

impl<F: TableSchema> InsertQueue<F> {
    pub fn open(db: &db::Db) -> db::Result<Self> {
        Ok(Self {
            tree: db.open_tree(&queue_tree_name(F::TABLE_NAME))?,
            _schema: PhantomData,
        })
    }

    /// Queues `entry` for insertion, merged with anything queued for the
    /// same keys, as part of transaction `tx`.
    pub fn push(&self, tx: &mut db::Transaction<'_>, entry: &F::E) -> db::Result<()> {
        let key = tree_key(entry.partition_key(), entry.sort_key());
        let old = tx.get(&self.tree, &key)?;
        let merged = encoding::merge_into(old.as_deref(), entry)
            .map_err(|e| db::Error::Aborted(format!("corrupt queued entry: {e}")))?;
        tx.insert(&self.tree, &key, encoding::encode(&merged))?;
        Ok(())
    }

    pub fn len(&self) -> db::Result<usize> {
        self.tree.len()
    }

    pub fn is_empty(&self) -> db::Result<bool> {
        self.tree.is_empty()
    }
}

pub(crate) use worker::InsertQueueWorker;

mod worker {
    use std::sync::Arc;
    use std::time::Duration;

    use garage_db as db;
    use garage_util::worker::runner::{Step, Worker};
    use garage_util::worker::{WorkerHandle, WorkerSpec};
    use tokio::sync::watch;

    use crate::encoding;
    use crate::error::{Error, Result};
    use crate::schema::TableSchema;
    use crate::table::Table;

    /// Entries inserted per round.
    const BATCH: usize = 256;
    /// How often an empty queue is looked at again.
    const IDLE: Duration = Duration::from_secs(1);
    const RETRY: Duration = Duration::from_secs(5);

    impl<F: TableSchema> Table<F> {
        /// Queues `entries` for this table's insert-queue worker: stored
        /// durably on this node now, then sent with quorum inserts until
        /// acknowledged (retried every few seconds). For cleanups that
        /// must not be lost when the cluster cannot take them now (the
        /// block references of a failed upload, its version's deletion).
        pub async fn insert_later(&self, entries: &[F::E]) -> Result<()> {
            let data = self.data.clone();
            let entries = entries.to_vec();
            crate::error::off_runtime(move || {
                let queue = crate::queue::InsertQueue::<F>::open(&data.db)?;
                data.db.transaction(|tx| -> db::TxResult<(), Error> {
                    for e in entries.iter() {
                        queue.push(tx, e)?;
                    }
                    Ok(())
                })?;
                Ok(())
            })
            .await
        }

        /// Inserts `entries` at quorum now, or, if that fails, queues them
        /// ([`Self::insert_later`]). An error only if neither worked.
        pub async fn insert_or_queue(&self, entries: &[F::E]) -> Result<()> {
            match self.insert_many(entries).await {
                Ok(()) => Ok(()),
                Err(_) => self.insert_later(entries).await,
            }
        }

        /// One round; returns how many queued entries were inserted.
        pub async fn insert_queue_round(&self) -> Result<usize> {
            let data = self.data.clone();
            let items = crate::error::off_runtime(move || {
                let mut items = Vec::new();
                for item in data.insert_queue.iter() {
                    items.push(item?);
                    if items.len() >= BATCH {
                        break;
                    }
                }
                Ok(items)
            })
            .await?;
            if items.is_empty() {
                return Ok(0);
            }
            let entries = items
                .iter()
                .map(|(_, v)| encoding::decode::<F::E>(v))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            self.insert_many(&entries).await?;
            let n = items.len();
            let data = self.data.clone();
            crate::error::off_runtime(move || {
                let tree = &data.insert_queue;
                data.db.transaction(|tx| -> db::TxResult<(), Error> {
                    for (k, v) in items.iter() {
                        if tx.get(tree, k)?.as_deref() == Some(v.as_slice()) {
                            tx.remove(tree, k)?;
                        }
                    }
                    Ok(())
                })?;
                Ok(())
            })
            .await?;
            Ok(n)
        }
    }

    /// A table's insert queue (`garage worker list`: "<table> insert
    /// queue"): sends queued entries with quorum inserts, and removes them
    /// from the queue once acknowledged (unless queued again meanwhile).
    /// A round fails while the cluster cannot take them (routine: logged
    /// at debug level, tried again after [`RETRY`]).
    pub(crate) struct InsertQueueWorker<F: TableSchema> {
        pub(crate) table: Arc<Table<F>>,
    }

    impl<F: TableSchema> Worker for InsertQueueWorker<F> {
        fn spec(&self) -> WorkerSpec {
            let d = self.table.data.clone();
            WorkerSpec::new(
                format!("{} insert queue", F::TABLE_NAME),
                "sends entries queued by other tables' hooks",
            )
            .queue(move || Ok(d.insert_queue.len().map_err(|e| e.to_string())? as u64))
        }

        async fn work(
            &mut self,
            _: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> std::result::Result<Step, String> {
            match self
                .table
                .insert_queue_round()
                .await
                .map_err(|e| e.to_string())?
            {
                0 => Ok(Step::Idle),
                _ => Ok(Step::Busy),
            }
        }

        async fn wait_for_work(&mut self) {
            tokio::time::sleep(IDLE).await
        }

        fn retry_delays(&self) -> (Duration, Duration) {
            (RETRY, RETRY)
        }

        fn routine_errors(&self) -> bool {
            true
        }
    }
}
