//! The contract every background loop of a node follows, and the runner
//! that holds it to it: a [`Worker`] does one step of work at a time and
//! says whether more is waiting; between steps it waits for work; the
//! runner registers it (so `garage worker list` shows it), keeps its state
//! and errors there, backs off after a failed step, and stops it when the
//! node exits: a step under way gets [`EXIT_DEADLINE`] to finish, then is
//! dropped. A worker whose job is over says so and leaves the list.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use super::{Registry, WorkerHandle, WorkerSpec, WorkerState};

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More may be waiting: the next step comes at once.
    Busy,
    /// Nothing to do: the runner waits for work
    /// ([`Worker::wait_for_work`]).
    Idle,
    /// Nothing to do until an operator resumes it (a paused scrub): shown
    /// as paused while the runner waits ([`Worker::wait_for_work`]).
    Paused,
    /// The worker's job is over: it leaves the list.
    Finished,
}

/// A background loop, one step at a time.
pub trait Worker: Send + 'static {
    /// Its name, what it does, and its probes, for `garage worker list`.
    fn spec(&self) -> WorkerSpec;

    /// One step of work; it may report its progress on `handle`, and a
    /// long step may end early once `must_exit` says true. An error is
    /// recorded on the worker (`garage worker info`) and logged, and the
    /// step is tried again after a back-off. A step that records an error
    /// on `handle` itself and returns `Ok` (one item of many failed, the
    /// worker goes on) counts in the worker's consecutive errors, without
    /// a back-off.
    fn work(
        &mut self,
        handle: &WorkerHandle,
        must_exit: &watch::Receiver<bool>,
    ) -> impl Future<Output = Result<Step, String>> + Send;

    /// Waits until there may be work again (a timer, a notification).
    fn wait_for_work(&mut self) -> impl Future<Output = ()> + Send;

    /// The back-off after a failed step, and its longest (it doubles after
    /// each failure in a row).
    fn retry_delays(&self) -> (Duration, Duration) {
        (RETRY_MIN, RETRY_MAX)
    }

    /// Whether a failed step is routine (a replica away for a while): it
    /// is logged at debug level rather than as a warning (still recorded
    /// on the worker).
    fn routine_errors(&self) -> bool {
        false
    }

    /// Whether a step that found nothing to do ends a run of consecutive
    /// errors (the worker works again). Not for a worker whose errors are
    /// its items' (a block in resync error stays so until it is retried):
    /// only a step that did some work ends them.
    fn idle_clears_errors(&self) -> bool {
        true
    }
}

/// How long a step under way may run on once the node is told to exit.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(5);
/// The back-off after a failed step, doubled after each failure in a row.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Registers `worker` in `registry` and runs it until its job is over or
/// `must_exit` turns true.
pub fn spawn<W: Worker>(
    registry: &Registry,
    mut worker: W,
    mut must_exit: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let handle = registry.register(worker.spec());
    tokio::spawn(async move {
        // What the steps see of the exit (the loop waits on the original).
        let exit_view = must_exit.clone();
        let (retry_min, retry_max) = worker.retry_delays();
        let mut retry = retry_min;
        loop {
            if *must_exit.borrow() {
                return;
            }
            handle.set_state(WorkerState::Busy);
            let errors_before = handle.errors();
            let step = {
                let work = worker.work(&handle, &exit_view);
                tokio::pin!(work);
                tokio::select! {
                    r = &mut work => r,
                    _ = exited(&mut must_exit) => {
                        match tokio::time::timeout(EXIT_DEADLINE, work).await {
                            Ok(r) => {
                                let _ = handle.outcome(r);
                            }
                            Err(_) => tracing::warn!(
                                worker = %handle.name(),
                                "step not finished {EXIT_DEADLINE:?} after the exit began: stopped"
                            ),
                        }
                        return;
                    }
                }
            };
            // A step that recorded an error itself (one item of many
            // failed) does not end the run of consecutive errors.
            let step = match step {
                Ok(s) if handle.errors() != errors_before => Ok(s),
                Ok(Step::Idle) if !worker.idle_clears_errors() => Ok(Step::Idle),
                step => handle.outcome(step),
            };
            let (pause, state) = match step {
                Ok(Step::Busy) => {
                    retry = retry_min;
                    // Other tasks run between steps, even when a step
                    // never waited.
                    tokio::task::yield_now().await;
                    continue;
                }
                Ok(Step::Finished) => return,
                Ok(Step::Idle) => {
                    retry = retry_min;
                    (None, WorkerState::Idle)
                }
                Ok(Step::Paused) => {
                    retry = retry_min;
                    (None, WorkerState::Paused)
                }
                Err(e) => {
                    let wait = retry;
                    retry = (retry * 2).min(retry_max);
                    if worker.routine_errors() {
                        tracing::debug!(worker = %handle.name(), "{e} (tried again in {wait:?})");
                    } else {
                        tracing::warn!(worker = %handle.name(), "{e} (tried again in {wait:?})");
                    }
                    (Some(wait), WorkerState::Idle)
                }
            };
            handle.set_state(state);
            tokio::select! {
                _ = async {
                    match pause {
                        Some(d) => tokio::time::sleep(d).await,
                        None => worker.wait_for_work().await,
                    }
                } => (),
                _ = exited(&mut must_exit) => return,
            }
        }
    })
}

/// Waits until `rx` says true (or its sender is gone).
async fn exited(rx: &mut watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Waits for every task in `tasks`, all within one `deadline`; returns how
/// many had not ended by then.
pub async fn join_within(tasks: Vec<tokio::task::JoinHandle<()>>, deadline: Duration) -> usize {
    let until = tokio::time::Instant::now() + deadline;
    let mut left = 0;
    for t in tasks {
        if tokio::time::timeout_at(until, t).await.is_err() {
            left += 1;
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Fails its first step, then works through `todo` items one per
    /// step, then waits for a notification; counts its steps.
    struct Counter {
        todo: u64,
        steps: Arc<AtomicU64>,
        failed: bool,
        wake: Arc<tokio::sync::Notify>,
    }

    impl Worker for Counter {
        fn spec(&self) -> WorkerSpec {
            WorkerSpec::new("counter", "counts")
        }
        async fn work(
            &mut self,
            _: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> Result<Step, String> {
            self.steps.fetch_add(1, Ordering::SeqCst);
            if !self.failed {
                self.failed = true;
                return Err("first step fails".into());
            }
            if self.todo == 0 {
                return Ok(Step::Idle);
            }
            self.todo -= 1;
            Ok(Step::Busy)
        }
        async fn wait_for_work(&mut self) {
            self.wake.notified().await;
            self.todo += 1;
        }
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..500 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what}");
    }

    /// The runner lists the worker, records its failed step and retries
    /// after the back-off, runs busy steps at once, waits when idle until
    /// woken, and stops at the exit, leaving the list.
    #[tokio::test]
    async fn the_runner_steps_waits_records_errors_and_stops_at_exit() {
        let r = Registry::new();
        let steps = Arc::new(AtomicU64::new(0));
        let wake = Arc::new(tokio::sync::Notify::new());
        let (tx, rx) = watch::channel(false);
        let task = spawn(
            &r,
            Counter {
                todo: 3,
                steps: steps.clone(),
                failed: false,
                wake: wake.clone(),
            },
            rx,
        );
        assert_eq!(r.list_names(), vec!["counter".to_string()]);
        // 1 failed step, 3 busy ones, 1 idle one.
        until("five steps", || steps.load(Ordering::SeqCst) == 5).await;
        let w = r.list().pop().unwrap();
        assert_eq!((w.errors, w.consecutive_errors), (1, 0));
        assert_eq!(w.last_error.unwrap().0, "first step fails");
        until("idle", || r.list()[0].state == WorkerState::Idle).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(steps.load(Ordering::SeqCst), 5, "idle until woken");
        wake.notify_one();
        // The woken worker does its one item, then finds nothing.
        until("seven steps", || steps.load(Ordering::SeqCst) == 7).await;
        tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the worker stops at the exit")
            .unwrap();
        assert!(r.list().is_empty(), "a stopped worker leaves the list");
    }

    /// Paused until resumed; fails its first step (a retry delay of its
    /// own, shorter than the runner's).
    struct Pausable {
        paused: Arc<std::sync::atomic::AtomicBool>,
        steps: Arc<AtomicU64>,
    }

    impl Worker for Pausable {
        fn spec(&self) -> WorkerSpec {
            WorkerSpec::new("pausable", "pauses")
        }
        async fn work(
            &mut self,
            _: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> Result<Step, String> {
            if self.steps.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("first step fails".into());
            }
            match self.paused.load(Ordering::SeqCst) {
                true => Ok(Step::Paused),
                false => Ok(Step::Finished),
            }
        }
        async fn wait_for_work(&mut self) {
            tokio::time::sleep(Duration::from_millis(10)).await
        }
        fn retry_delays(&self) -> (Duration, Duration) {
            (Duration::from_millis(20), Duration::from_millis(40))
        }
    }

    /// A worker's own retry delay is used, and a paused worker is shown
    /// paused until it is resumed.
    #[tokio::test(start_paused = true)]
    async fn a_paused_worker_is_shown_paused_and_retries_use_its_own_delay() {
        let t0 = tokio::time::Instant::now();
        let r = Registry::new();
        let paused = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let steps = Arc::new(AtomicU64::new(0));
        let (_tx, rx) = watch::channel(false);
        let task = spawn(
            &r,
            Pausable {
                paused: paused.clone(),
                steps: steps.clone(),
            },
            rx,
        );
        // Retried after 20 ms of the paused clock (the runner's own delay
        // is 1 s).
        until("retried", || steps.load(Ordering::SeqCst) >= 2).await;
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "retried after {:?}: not the worker's delay",
            t0.elapsed()
        );
        until("paused", || {
            r.list().first().map(|w| w.state) == Some(WorkerState::Paused)
        })
        .await;
        paused.store(false, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("resumed, the worker finishes")
            .unwrap();
        assert!(r.list().is_empty());
    }

    /// Fails one item at its first step, then finds nothing to do.
    struct OneItemFails {
        steps: u64,
    }

    impl Worker for OneItemFails {
        fn spec(&self) -> WorkerSpec {
            WorkerSpec::new("one-item", "one item fails, then idle")
        }
        async fn work(
            &mut self,
            handle: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> Result<Step, String> {
            self.steps += 1;
            if self.steps == 1 {
                handle.error("item 3 failed");
                return Ok(Step::Busy);
            }
            Ok(Step::Idle)
        }
        async fn wait_for_work(&mut self) {
            tokio::time::sleep(Duration::from_millis(10)).await
        }
        fn idle_clears_errors(&self) -> bool {
            false
        }
    }

    /// A worker whose errors are its items' stays in error through idle
    /// steps (the resync worker with a block in error).
    #[tokio::test(start_paused = true)]
    async fn idle_steps_keep_item_errors_when_the_worker_says_so() {
        let r = Registry::new();
        let (tx, rx) = watch::channel(false);
        let task = spawn(&r, OneItemFails { steps: 0 }, rx);
        until("the failed item", || {
            r.list().first().is_some_and(|w| w.errors == 1)
        })
        .await;
        // Many idle steps later.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let w = r.list().pop().unwrap();
        assert_eq!((w.errors, w.consecutive_errors), (1, 1));
        tx.send(true).unwrap();
        task.await.unwrap();
    }

    /// Each step fails on one item of many and goes on.
    struct ItemFails;

    impl Worker for ItemFails {
        fn spec(&self) -> WorkerSpec {
            WorkerSpec::new("items", "one item fails")
        }
        async fn work(
            &mut self,
            handle: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> Result<Step, String> {
            handle.error("item 7 failed");
            Ok(Step::Idle)
        }
        async fn wait_for_work(&mut self) {
            tokio::time::sleep(Duration::from_millis(10)).await
        }
    }

    /// A step that records an item's failure itself counts in the
    /// consecutive errors (an operator sees the worker in error), and the
    /// worker goes on without a back-off.
    #[tokio::test(start_paused = true)]
    async fn an_item_failure_recorded_by_the_step_counts_as_consecutive() {
        let t0 = tokio::time::Instant::now();
        let r = Registry::new();
        let (tx, rx) = watch::channel(false);
        let task = spawn(&r, ItemFails, rx);
        until("three failed items", || {
            r.list().first().is_some_and(|w| w.consecutive_errors >= 3)
        })
        .await;
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "a back-off: {:?}",
            t0.elapsed()
        );
        tx.send(true).unwrap();
        task.await.unwrap();
    }

    struct Stuck;

    impl Worker for Stuck {
        fn spec(&self) -> WorkerSpec {
            WorkerSpec::new("stuck", "never ends a step")
        }
        async fn work(
            &mut self,
            _: &WorkerHandle,
            _: &watch::Receiver<bool>,
        ) -> Result<Step, String> {
            std::future::pending::<()>().await;
            Ok(Step::Finished)
        }
        async fn wait_for_work(&mut self) {}
    }

    /// A step that does not end is dropped once the exit deadline passed.
    #[tokio::test(start_paused = true)]
    async fn a_step_that_does_not_end_is_dropped_after_the_exit_deadline() {
        let r = Registry::new();
        let (tx, rx) = watch::channel(false);
        let task = spawn(&r, Stuck, rx);
        tokio::task::yield_now().await;
        tx.send(true).unwrap();
        let left = join_within(vec![task], EXIT_DEADLINE + Duration::from_secs(1)).await;
        assert_eq!(left, 0, "the runner gave up on the step at the deadline");
        assert!(r.list().is_empty());
    }
}
