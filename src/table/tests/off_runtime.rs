//! Issue 14 review item: the GC's and the insert queue's DB work runs on the
//! blocking pool, not on the async runtime. On a single-threaded runtime a
//! round that did its DB iteration inline completed in one poll, without
//! ever letting another task run; now the other task runs while the round
//! waits for the blocking pool. This asserts ordering, never a duration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use garage_table::testing::cluster;

/// Spawns a task that sets a flag, runs `round`, and says whether the task
/// ran before `round` finished. The runtime's only blocking thread is held
/// until the flag is set (at most 10 s), so a round that hands its DB work
/// to the blocking pool must wait, and so yield to the task, however fast
/// that work is (on a loaded machine the pool could otherwise finish it
/// before the round is first polled); a round that did the work inline
/// would still finish without yielding.
async fn other_task_ran_during<F: std::future::Future>(round: F) -> (F::Output, bool) {
    let ran = Arc::new(AtomicBool::new(false));
    let held = ran.clone();
    let blocker = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        while !held.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let flag = ran.clone();
    let other = tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
    let out = round.await;
    let during = ran.load(Ordering::SeqCst);
    other.await.unwrap();
    blocker.await.unwrap();
    (out, during)
}

#[test]
fn gc_and_insert_queue_rounds_leave_the_runtime_to_other_tasks() {
    tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap()
        .block_on(rounds_leave_the_runtime())
}

async fn rounds_leave_the_runtime() {
    let nodes = cluster(1, 1).await;
    let table = &nodes[0].table;

    let (n, during) = other_task_ran_during(table.gc_round()).await;
    assert_eq!(n.unwrap(), 0, "nothing to collect");
    assert!(during, "another task ran while the GC read its queue");

    let (n, during) = other_task_ran_during(table.insert_queue_round()).await;
    assert_eq!(n.unwrap(), 0, "nothing queued");
    assert!(during, "another task ran while the insert queue was read");

    for n in nodes.iter() {
        n.stop();
    }
}
