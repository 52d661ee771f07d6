//! Quorum calls: send a request to a set of nodes and return as soon as
//! enough of them answered, nearest nodes first, with a deadline.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::NodeId;

/// How the requests are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Send to every node at once (writes: every replica should get it).
    All,
    /// Send to the `quorum` nearest nodes, and to the next one each time a
    /// request fails (reads: spare the far nodes while the near ones answer).
    NearestFirst,
}

/// Not enough nodes answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quorum not reached: {ok} of {needed} needed answers ({}; {} failed: {})",
    if *.timed_out { "timed out" } else { "all requests done" },
    .errors.len(),
    .errors.iter().map(|(n, e)| format!("{n:?}: {e}")).collect::<Vec<_>>().join("; "))]
pub struct QuorumError {
    pub needed: usize,
    pub ok: usize,
    pub timed_out: bool,
    pub errors: Vec<(NodeId, String)>,
}

/// Calls `call(node)` for nodes of `nodes` (already ordered nearest first)
/// until `quorum` calls succeeded; returns their answers. Calls still in
/// flight when the quorum is reached are dropped (cancelled).
pub async fn call_quorum<R, E, F, Fut>(
    nodes: &[NodeId],
    quorum: usize,
    strategy: Strategy,
    timeout: Duration,
    call: F,
) -> Result<Vec<(NodeId, R)>, QuorumError>
where
    E: Display,
    F: Fn(NodeId) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    if quorum == 0 {
        return Ok(ok);
    }
    let first = match strategy {
        Strategy::All => nodes.len(),
        Strategy::NearestFirst => quorum.min(nodes.len()),
    };
    let mut pending = FuturesUnordered::new();
    let launch = |n: NodeId| {
        let f = call(n);
        async move { (n, f.await) }
    };
    for n in &nodes[..first] {
        pending.push(launch(*n));
    }
    let mut next = first;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let res = tokio::time::timeout_at(deadline, pending.next()).await;
        match res {
            Err(_) => {
                return Err(QuorumError {
                    needed: quorum,
                    ok: ok.len(),
                    timed_out: true,
                    errors,
                })
            }
            Ok(None) => {
                return Err(QuorumError {
                    needed: quorum,
                    ok: ok.len(),
                    timed_out: false,
                    errors,
                })
            }
            Ok(Some((n, Ok(r)))) => {
                ok.push((n, r));
                if ok.len() >= quorum {
                    return Ok(ok);
                }
            }
            Ok(Some((n, Err(e)))) => {
                errors.push((n, e.to_string()));
                if next < nodes.len() && strategy == Strategy::NearestFirst {
                    pending.push(launch(nodes[next]));
                    next += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn id(n: u8) -> NodeId {
        NodeId::from([n; 32])
    }

    #[tokio::test]
    async fn returns_after_quorum_without_waiting_for_slow_nodes() {
        let nodes = [id(1), id(2), id(3)];
        let r = call_quorum(
            &nodes,
            2,
            Strategy::All,
            Duration::from_secs(30),
            |n| async move {
                if n == id(3) {
                    // A node that never answers in time.
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok::<_, String>(n)
            },
        )
        .await
        .unwrap();
        let mut got: Vec<NodeId> = r.into_iter().map(|(n, _)| n).collect();
        got.sort();
        assert_eq!(got, vec![id(1), id(2)]);
    }

    #[tokio::test]
    async fn nearest_first_tries_further_nodes_only_on_failure() {
        let nodes = [id(1), id(2), id(3), id(4)];
        let calls = AtomicUsize::new(0);
        let r = call_quorum(
            &nodes,
            2,
            Strategy::NearestFirst,
            Duration::from_secs(30),
            |n| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == id(1) {
                        Err("disk on fire")
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(calls.load(Ordering::SeqCst), 3, "node 4 was never asked");
    }

    #[tokio::test]
    async fn error_says_who_failed_and_how() {
        let nodes = [id(1), id(2), id(3)];
        let e = call_quorum(
            &nodes,
            2,
            Strategy::All,
            Duration::from_secs(30),
            |n| async move {
                if n == id(1) {
                    Ok(())
                } else {
                    Err(format!("node {} unreachable", n.as_bytes()[0]))
                }
            },
        )
        .await
        .unwrap_err();
        assert_eq!(
            (e.needed, e.ok, e.timed_out, e.errors.len()),
            (2, 1, false, 2)
        );
        assert!(e.to_string().contains("node 2 unreachable"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn times_out() {
        let nodes = [id(1), id(2)];
        let e = call_quorum(
            &nodes,
            1,
            Strategy::All,
            Duration::from_secs(5),
            |_| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<(), String>(())
            },
        )
        .await
        .unwrap_err();
        assert!(e.timed_out);
    }
}
