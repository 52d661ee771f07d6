//! The worker registry: every background loop of a node (table Merkle
//! updaters, anti-entropy, GC, insert queues, block resync and scrub, the
//! lifecycle worker) registers here and reports what it is doing, and every
//! tunable setting of those loops is a named variable here. `garage worker
//! list/info/get/set` and the admin API's worker endpoints read this and
//! nothing else.
//!
//! A loop holds a [`WorkerHandle`] for as long as it runs: it sets its state
//! (busy, throttled, idle, paused) and reports each step's outcome. What a
//! loop cannot cheaply count as it goes (a queue kept in the database) is
//! read when asked, through the probes given at registration. Dropping the
//! handle removes the worker from the list. Worker ids (TIDs) count from 1
//! in registration order and are never reused.
//!
//! One registry per node: it is held by the node's `System`, so that
//! several nodes in one test process keep separate lists.
//!
//! A loop is written as a [`Worker`] (one step at a time, waiting for work
//! between steps) and started with [`runner::spawn`], which registers it
//! and holds it to the contract: state, errors and back-off kept here,
//! and an exit within [`EXIT_DEADLINE`].

pub mod backoff;
pub mod runner;

pub use runner::{Step, Worker, EXIT_DEADLINE};

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use tokio::sync::watch;

use crate::time::now_msec;

/// What a worker is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerState {
    /// Working through its queue.
    Busy,
    /// Between two steps, waiting out its tranquility.
    Throttled,
    /// Nothing to do; waiting for work or for its next round.
    #[default]
    Idle,
    /// Stopped by an operator until resumed.
    Paused,
}

impl WorkerState {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Busy => "busy",
            WorkerState::Throttled => "throttled",
            WorkerState::Idle => "idle",
            WorkerState::Paused => "paused",
        }
    }
}

/// A value read on demand: a queue length or extra lines of detail. Probes
/// may read the database, so [`Registry::list`] is called off the async
/// runtime.
pub type QueueProbe = Box<dyn Fn() -> Result<u64, String> + Send + Sync>;
pub type DetailsProbe = Box<dyn Fn() -> Vec<(String, String)> + Send + Sync>;
/// Reads a variable, as text.
type Getter = Box<dyn Fn() -> Result<String, String> + Send + Sync>;
/// Checks and stores a variable's new value; returns it as stored.
type Setter = Box<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// What a loop says about itself when it registers.
pub struct WorkerSpec {
    /// As `worker list` shows it, e.g. "object Merkle updater".
    pub name: String,
    /// What it does, in one line.
    pub does: &'static str,
    pub queue: Option<QueueProbe>,
    pub details: Option<DetailsProbe>,
}

impl WorkerSpec {
    pub fn new(name: impl Into<String>, does: &'static str) -> Self {
        WorkerSpec {
            name: name.into(),
            does,
            queue: None,
            details: None,
        }
    }

    pub fn queue(
        mut self,
        probe: impl Fn() -> Result<u64, String> + Send + Sync + 'static,
    ) -> Self {
        self.queue = Some(Box::new(probe));
        self
    }

    pub fn details(
        mut self,
        probe: impl Fn() -> Vec<(String, String)> + Send + Sync + 'static,
    ) -> Self {
        self.details = Some(Box::new(probe));
        self
    }
}

/// What the loop has reported.
#[derive(Debug, Clone, Default)]
struct Reported {
    state: WorkerState,
    errors: u64,
    consecutive_errors: u64,
    last_error: Option<(String, u64)>,
    progress: Option<String>,
}

struct Slot {
    tid: u64,
    spec: WorkerSpec,
    reported: Mutex<Reported>,
}

/// One worker as `worker list` and `worker info` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    pub tid: u64,
    pub name: String,
    pub does: &'static str,
    pub state: WorkerState,
    /// Steps that failed since the node started.
    pub errors: u64,
    /// Steps that failed since the last one that worked.
    pub consecutive_errors: u64,
    /// The last failure and when (ms since the epoch).
    pub last_error: Option<(String, u64)>,
    /// Where it is in its work, in words.
    pub progress: Option<String>,
    pub queue_length: Option<u64>,
    /// Its counters and settings, from its details probe.
    pub details: Vec<(String, String)>,
}

/// A tunable setting of some workers, read and written as text.
struct Variable {
    help: &'static str,
    get: Getter,
    set: Setter,
}

#[derive(Default)]
struct Inner {
    next_tid: u64,
    workers: Vec<Arc<Slot>>,
    variables: BTreeMap<&'static str, Variable>,
}

/// The workers and variables of one node.
#[derive(Default)]
pub struct Registry {
    inner: Arc<Mutex<Inner>>,
    /// The node's exit signal, for workers started on demand (a repair).
    exit: OnceLock<watch::Receiver<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the node's exit signal (once, when the server starts): workers
    /// started on demand stop with the node.
    pub fn set_exit(&self, must_exit: watch::Receiver<bool>) {
        let _ = self.exit.set(must_exit);
    }

    /// The node's exit signal (see [`Registry::set_exit`]); without a
    /// server, one that never fires.
    pub fn exit_signal(&self) -> watch::Receiver<bool> {
        self.exit
            .get_or_init(|| {
                let (tx, rx) = watch::channel(false);
                // Kept for the process's life: a dropped sender would read
                // as an exit.
                std::mem::forget(tx);
                rx
            })
            .clone()
    }

    /// Registers a worker; it is listed until the handle is dropped.
    pub fn register(&self, spec: WorkerSpec) -> WorkerHandle {
        let mut inner = lock(&self.inner);
        inner.next_tid += 1;
        let slot = Arc::new(Slot {
            tid: inner.next_tid,
            spec,
            reported: Mutex::new(Reported::default()),
        });
        inner.workers.push(slot.clone());
        WorkerHandle {
            slot,
            registry: Arc::downgrade(&self.inner),
        }
    }

    /// Every registered worker, by TID. Runs the probes, which may read the
    /// database: call it off the async runtime.
    pub fn list(&self) -> Vec<WorkerInfo> {
        let slots = lock(&self.inner).workers.clone();
        slots.iter().map(|s| s.info()).collect()
    }

    /// The registered workers' names (no probe is run).
    pub fn list_names(&self) -> Vec<String> {
        lock(&self.inner)
            .workers
            .iter()
            .map(|s| s.spec.name.clone())
            .collect()
    }

    /// One worker, by TID (see [`Registry::list`]).
    pub fn get(&self, tid: u64) -> Option<WorkerInfo> {
        let slot = lock(&self.inner)
            .workers
            .iter()
            .find(|s| s.tid == tid)
            .cloned();
        slot.map(|s| s.info())
    }

    /// Adds a tunable variable. `set` checks and stores the value and
    /// returns it as stored; a second registration of a name replaces the
    /// first (a component that is opened again).
    pub fn register_variable(
        &self,
        name: &'static str,
        help: &'static str,
        get: impl Fn() -> Result<String, String> + Send + Sync + 'static,
        set: impl Fn(&str) -> Result<String, String> + Send + Sync + 'static,
    ) {
        lock(&self.inner).variables.insert(
            name,
            Variable {
                help,
                get: Box::new(get),
                set: Box::new(set),
            },
        );
    }

    /// Every variable's value, or only `only`'s.
    pub fn variables(&self, only: Option<&str>) -> Result<Vec<(String, String)>, VariableError> {
        let inner = lock(&self.inner);
        if let Some(name) = only {
            let v = inner
                .variables
                .get(name)
                .ok_or_else(|| self.unknown(&inner, name))?;
            let value = (v.get)().map_err(|e| VariableError::Failed(name.into(), e))?;
            return Ok(vec![(name.to_string(), value)]);
        }
        inner
            .variables
            .iter()
            .map(|(k, v)| {
                let value = (v.get)().map_err(|e| VariableError::Failed(k.to_string(), e))?;
                Ok((k.to_string(), value))
            })
            .collect()
    }

    /// Sets `name` to `value`; returns the value as stored.
    pub fn set_variable(&self, name: &str, value: &str) -> Result<String, VariableError> {
        let inner = lock(&self.inner);
        let v = inner
            .variables
            .get(name)
            .ok_or_else(|| self.unknown(&inner, name))?;
        // A refused value is explained with what the variable is.
        (v.set)(value).map_err(|e| match v.help {
            "" => VariableError::Invalid(name.into(), e),
            help => VariableError::Invalid(name.into(), format!("{e} ({name}: {help})")),
        })
    }

    fn unknown(&self, inner: &Inner, name: &str) -> VariableError {
        let known: Vec<&str> = inner.variables.keys().copied().collect();
        VariableError::Unknown(name.into(), known.join(", "))
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VariableError {
    #[error("unknown worker variable {0:?}: this node has {1}")]
    Unknown(String, String),
    #[error("{0}: {1}")]
    Invalid(String, String),
    #[error("cannot read {0}: {1}")]
    Failed(String, String),
}

impl Slot {
    fn info(&self) -> WorkerInfo {
        let r = lock(&self.reported).clone();
        let queue_length = self.spec.queue.as_ref().and_then(|p| p().ok());
        let details = self.spec.details.as_ref().map(|p| p()).unwrap_or_default();
        WorkerInfo {
            tid: self.tid,
            name: self.spec.name.clone(),
            does: self.spec.does,
            state: r.state,
            errors: r.errors,
            consecutive_errors: r.consecutive_errors,
            last_error: r.last_error,
            progress: r.progress,
            queue_length,
            details,
        }
    }
}

/// Held by a running loop; dropping it takes the worker off the list.
pub struct WorkerHandle {
    slot: Arc<Slot>,
    registry: Weak<Mutex<Inner>>,
}

impl WorkerHandle {
    pub fn tid(&self) -> u64 {
        self.slot.tid
    }

    /// The worker's name, as `worker list` shows it.
    pub fn name(&self) -> &str {
        &self.slot.spec.name
    }

    pub fn set_state(&self, state: WorkerState) {
        lock(&self.slot.reported).state = state;
    }

    pub fn set_progress(&self, progress: Option<String>) {
        lock(&self.slot.reported).progress = progress;
    }

    /// A step worked: the run of consecutive errors ends.
    pub fn ok(&self) {
        lock(&self.slot.reported).consecutive_errors = 0;
    }

    /// A step failed with `e`.
    pub fn error(&self, e: impl Display) {
        let mut r = lock(&self.slot.reported);
        r.errors += 1;
        r.consecutive_errors += 1;
        r.last_error = Some((e.to_string(), now_msec()));
    }

    /// How many errors were recorded so far.
    pub fn errors(&self) -> u64 {
        lock(&self.slot.reported).errors
    }

    /// Records a step's outcome ([`WorkerHandle::ok`] or
    /// [`WorkerHandle::error`]) and hands it back.
    pub fn outcome<T, E: Display>(&self, res: Result<T, E>) -> Result<T, E> {
        match &res {
            Ok(_) => self.ok(),
            Err(e) => self.error(e),
        }
        res
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Some(inner) = self.registry.upgrade() {
            lock(&inner).workers.retain(|s| !Arc::ptr_eq(s, &self.slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn workers_are_listed_while_their_handle_lives_with_stable_ids() {
        let r = Registry::new();
        let a = r.register(WorkerSpec::new("a", "does a"));
        let b = r.register(WorkerSpec::new("b", "does b").queue(|| Ok(7)));
        assert_eq!(
            r.list()
                .iter()
                .map(|w| (w.tid, w.name.as_str()))
                .collect::<Vec<_>>(),
            vec![(1, "a"), (2, "b")]
        );
        assert_eq!(r.get(2).unwrap().queue_length, Some(7));
        assert_eq!(r.get(1).unwrap().queue_length, None);
        drop(a);
        let c = r.register(WorkerSpec::new("c", "does c"));
        assert_eq!(
            r.list().iter().map(|w| w.tid).collect::<Vec<_>>(),
            vec![2, 3],
            "a dropped worker leaves the list and its id is not reused"
        );
        assert!(r.get(1).is_none());
        drop((b, c));
        assert!(r.list().is_empty());
    }

    #[test]
    fn errors_are_counted_and_a_success_ends_the_run() {
        let r = Registry::new();
        let h = r.register(WorkerSpec::new("w", "works"));
        h.set_state(WorkerState::Busy);
        let _ = h.outcome::<(), _>(Err("disk on fire"));
        let _ = h.outcome::<(), _>(Err("still on fire"));
        let w = r.get(h.tid()).unwrap();
        assert_eq!((w.errors, w.consecutive_errors), (2, 2));
        assert_eq!(w.last_error.as_ref().unwrap().0, "still on fire");
        assert_eq!(w.state, WorkerState::Busy);
        let _ = h.outcome::<(), &str>(Ok(()));
        let w = r.get(h.tid()).unwrap();
        assert_eq!((w.errors, w.consecutive_errors), (2, 0));
        assert!(w.last_error.is_some(), "the last error is kept");
    }

    #[test]
    fn variables_are_read_and_set_through_their_owner() {
        let r = Registry::new();
        let v = Arc::new(AtomicU64::new(2));
        let (g, s) = (v.clone(), v.clone());
        r.register_variable(
            "speed",
            "how fast",
            move || Ok(g.load(Ordering::Relaxed).to_string()),
            move |x| {
                let n: u64 = x.parse().map_err(|_| format!("{x:?} is not a number"))?;
                s.store(n, Ordering::Relaxed);
                Ok(n.to_string())
            },
        );
        r.register_variable("other", "", || Ok("x".into()), |_| Err("fixed".into()));
        assert_eq!(r.set_variable("speed", "5").unwrap(), "5");
        assert_eq!(v.load(Ordering::Relaxed), 5);
        assert_eq!(
            r.variables(Some("speed")).unwrap(),
            vec![("speed".to_string(), "5".to_string())]
        );
        assert_eq!(r.variables(None).unwrap().len(), 2);
        assert_eq!(
            r.set_variable("speed", "fast"),
            Err(VariableError::Invalid(
                "speed".into(),
                "\"fast\" is not a number (speed: how fast)".into()
            )),
            "a refused value is explained with the variable's description"
        );
        assert_eq!(
            v.load(Ordering::Relaxed),
            5,
            "a refused value is not stored"
        );
        let e = r.variables(Some("nope")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown worker variable \"nope\": this node has other, speed"
        );
    }
}
