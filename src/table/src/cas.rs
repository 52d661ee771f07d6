//! Compare-and-set registers: one single-decree Paxos round per change
//! (the CASPaxos construction), among the nodes of a partition.
//!
//! Tables never need this: their entries are CRDTs and merge in any order.
//! A register is for the rare request that must *decide* between
//! concurrent writers (S3's `If-None-Match: *` and `If-Match` writes): it
//! holds one opaque value per register id, and a change reads the current
//! value and replaces it atomically, so that of several concurrent changes
//! computed from the same value, exactly one succeeds.
//!
//! The acceptors of a register are the nodes of its partition in every
//! live layout version; a phase succeeds once a majority of *each* set
//! agreed (as table writes wait for a quorum of each set). An acceptor
//! keeps, durably in the metadata database before it answers, the highest
//! ballot it promised and the last (ballot, value) it accepted.
//!
//! A change is two phases, each one round trip:
//! 1. [`CasRegisters::prepare`]: a new ballot, promised by a majority; the
//!    answers carry their accepted values, and the one of the highest
//!    ballot is the register's current value.
//! 2. [`CasRegisters::accept`]: the new value (which may be the current one
//!    unchanged, to make a value seen in phase 1 chosen before acting on
//!    it), accepted by a majority under the same ballot.
//!
//! A phase that meets a higher ballot fails with [`Error::CasConflict`]
//! (or [`AcceptOutcome::Failed`]); the caller retries with a new ballot.
//! The argument of correctness is in `doc/conditional-writes.md`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use garage_db as db;
use garage_net::{Endpoint, EndpointHandler, Message, NetError, NodeId, Priority};
use garage_rpc::layout::LayoutVersion;
use garage_rpc::quorum::QuorumError;
use garage_rpc::system::System;
use garage_util::data::{blake2sum, gen_uuid, Hash};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use tracing::{debug, info, warn, Instrument};

use crate::error::{Error, Result};

/// How long one phase waits for its majorities.
pub const CAS_RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// A Paxos ballot: ordered by round, then by proposer (unique per process,
/// so two proposers never share a ballot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Ballot {
    pub round: u64,
    pub proposer: u64,
}

/// Names a register: the partition whose nodes are its acceptors, and a
/// key (hashed with a namespace, so that unrelated uses never collide).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterId {
    partition: usize,
    key: Hash,
}

impl RegisterId {
    /// The register `key` of namespace `ns`, kept by the nodes of the
    /// partition of `partition_hash` (for a table entry: the hash of its
    /// partition key, so that the register lives with the entry).
    pub fn new(ns: &str, partition_hash: &Hash, key: &[u8]) -> Self {
        let mut buf = Vec::with_capacity(ns.len() + 1 + 32 + key.len());
        buf.extend_from_slice(ns.as_bytes());
        buf.push(0);
        buf.extend_from_slice(partition_hash.as_slice());
        buf.extend_from_slice(key);
        Self {
            partition: LayoutVersion::partition_of(partition_hash.as_slice()),
            key: blake2sum(&buf),
        }
    }
}

/// What an acceptor keeps for one register.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct AcceptorState {
    promised: Ballot,
    accepted: Option<(Ballot, ByteBuf)>,
    /// The partition whose nodes are the register's acceptors, when the
    /// proposer said (absent in states written before): where the
    /// hand-off sends the state after a layout change.
    #[serde(default)]
    partition: Option<u16>,
}

/// First byte of a stored [`AcceptorState`]: its format.
const STATE_FORMAT: u8 = 1;

impl AcceptorState {
    fn decode(b: &[u8]) -> std::result::Result<Self, String> {
        match b.split_first() {
            Some((&STATE_FORMAT, rest)) => {
                rmp_serde::from_slice(rest).map_err(|e| format!("register state: {e}"))
            }
            _ => Err("register state: unknown format".into()),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![STATE_FORMAT];
        out.extend(rmp_serde::to_vec_named(self).expect("register state encodes"));
        out
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum CasRpc {
    Prepare {
        key: Hash,
        ballot: Ballot,
    },
    Accept {
        key: Hash,
        ballot: Ballot,
        value: ByteBuf,
        /// The register's partition (absent from older senders).
        #[serde(default)]
        partition: Option<u16>,
        /// A hand-off of an accepted value after a layout change (see
        /// [`CasRegisters::hand_off`]): a copy of the accept that the
        /// value's proposer sent, handled as that accept (refused under a
        /// higher promise), except that it is acknowledged without a
        /// write when the acceptor holds a value of a ballot as high. An
        /// older node ignores the flag: the same, with a write.
        #[serde(default)]
        handoff: bool,
    },
    /// Answer to Prepare: promised; the last value accepted, if any.
    Promise {
        accepted: Option<(Ballot, ByteBuf)>,
    },
    /// Answer to Accept.
    Accepted,
    /// A higher ballot was promised: the request is refused.
    Nack {
        promised: Ballot,
    },
    Error(String),
}

impl Message for CasRpc {
    type Response = CasRpc;
}

/// The outcome of phase 1. It holds the layout its node sets come from
/// (a write guard, as table writes do) until dropped: this node does not
/// acknowledge a newer layout version while a round built on an older
/// one may still run its accept phase.
pub struct Prepared {
    id: RegisterId,
    ballot: Ballot,
    sets: Vec<Vec<NodeId>>,
    _guard: garage_rpc::system::trackers::WriteGuard,
    /// The register's current value: the value of the highest ballot among
    /// the promises (`None`: never written).
    pub value: Option<Vec<u8>>,
    /// The round of the ballot `value` was accepted under: when it was
    /// last proposed, in milliseconds of the proposer's clock.
    pub value_round: Option<u64>,
    /// Whether `value` is already chosen: a majority of each set reported
    /// it under the same ballot, so accepting it again is not needed.
    pub chosen: bool,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("ballot", &self.ballot)
            .field("sets", &self.sets)
            .field("value", &self.value)
            .field("chosen", &self.chosen)
            .finish()
    }
}

/// The outcome of phase 2.
#[derive(Debug, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// A majority of each set accepted: the value is chosen.
    Chosen,
    /// Not chosen by this round. `maybe_accepted`: some acceptor accepted
    /// it, or did not answer, so a later round may still find it (and may
    /// choose it); `false` only when every acceptor refused it.
    Failed { maybe_accepted: bool, why: String },
}

/// The registers of this node: its acceptor (an endpoint over a tree of
/// the metadata database) and the proposer side.
pub struct CasRegisters {
    system: Arc<System>,
    db: db::Db,
    tree: db::Tree,
    /// The hand-off's progress ([`HANDOFF_TREE`]).
    handoff: db::Tree,
    endpoint: Arc<Endpoint<CasRpc, CasRegisters>>,
    proposer: u64,
    /// The next round this proposer uses; raised past every ballot it sees.
    next_round: AtomicU64,
}

impl CasRegisters {
    pub fn new(db: db::Db, system: Arc<System>) -> Result<Arc<Self>> {
        let tree = db.open_tree("cas_registers")?;
        let handoff = db.open_tree(HANDOFF_TREE)?;
        let endpoint = system
            .netapp
            .endpoint::<CasRpc, CasRegisters>("garage_table/cas");
        let mut p = [0u8; 8];
        p.copy_from_slice(&gen_uuid().as_slice()[..8]);
        let regs = Arc::new(Self {
            system,
            db,
            tree,
            handoff,
            endpoint,
            proposer: u64::from_le_bytes(p),
            next_round: AtomicU64::new(1),
        });
        regs.endpoint.set_handler(regs.clone());
        Ok(regs)
    }

    /// Registers kept on this node (for statistics).
    pub fn len(&self) -> Result<usize> {
        Ok(self.tree.len()?)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// A ballot above every one this proposer used or saw. Rounds start
    /// from the clock (milliseconds) so that proposers on different nodes
    /// rarely propose far below each other and get refused for it.
    fn new_ballot(&self) -> Ballot {
        let now = garage_util::time::now_msec();
        let prev = self
            .next_round
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                Some(r.max(now) + 1)
            })
            .expect("fetch_update with Some");
        Ballot {
            round: prev.max(now),
            proposer: self.proposer,
        }
    }

    /// Raises the next round past `b` (a ballot seen in a refusal).
    fn saw(&self, b: Ballot) {
        self.next_round.fetch_max(b.round + 1, Ordering::Relaxed);
    }

    /// Phase 1: a new ballot promised by a majority of each acceptor set;
    /// returns the register's current value.
    pub async fn prepare(&self, id: RegisterId) -> Result<Prepared> {
        let guard = self.system.start_write("conditional write round");
        let sets = guard.layout.write_sets(id.partition);
        if sets.is_empty() {
            return Err(Error::NoNodes);
        }
        let ballot = self.new_ballot();
        let r = self
            .phase(
                &sets,
                CasRpc::Prepare {
                    key: id.key,
                    ballot,
                },
                |a| matches!(a, CasRpc::Promise { .. }),
            )
            .await;
        if !r.reached {
            return Err(r.into_error(self));
        }
        // The highest accepted (ballot, value) among the promises.
        let mut best: Option<(Ballot, ByteBuf)> = None;
        let mut accepted_by: Vec<(NodeId, Ballot)> = Vec::new();
        for (node, a) in r.ok {
            if let CasRpc::Promise {
                accepted: Some((b, v)),
            } = a
            {
                accepted_by.push((node, b));
                if best.as_ref().is_none_or(|(bb, _)| b > *bb) {
                    best = Some((b, v));
                }
            }
        }
        let chosen = match &best {
            None => false,
            Some((b, _)) => sets.iter().all(|set| {
                let n = accepted_by
                    .iter()
                    .filter(|(node, nb)| nb == b && set.contains(node))
                    .count();
                n >= majority(set.len())
            }),
        };
        Ok(Prepared {
            id,
            ballot,
            sets,
            _guard: guard,
            value_round: best.as_ref().map(|(b, _)| b.round),
            value: best.map(|(_, v)| v.into_vec()),
            chosen,
        })
    }

    /// Phase 2: `value` accepted under the ballot of `prepared`.
    pub async fn accept(&self, prepared: &Prepared, value: Vec<u8>) -> AcceptOutcome {
        let msg = CasRpc::Accept {
            key: prepared.id.key,
            ballot: prepared.ballot,
            value: ByteBuf::from(value),
            partition: Some(prepared.id.partition as u16),
            handoff: false,
        };
        let r = self
            .phase(&prepared.sets, msg, |a| matches!(a, CasRpc::Accepted))
            .await;
        if r.reached {
            return AcceptOutcome::Chosen;
        }
        let maybe_accepted = !r.ok.is_empty() || r.nacks.len() < r.asked;
        AcceptOutcome::Failed {
            maybe_accepted,
            why: r.into_error(self).to_string(),
        }
    }

    /// Whether this node's acceptor holds a value for `id` (not empty):
    /// then a tombstone of the entry the register belongs to may only be
    /// collected once the register is emptied ([`Self::empty_if`]).
    /// A local read; an unreadable state counts as a value.
    pub fn holds_value(&self, id: RegisterId) -> Result<bool> {
        Ok(match self.tree.get(id.key.as_slice())? {
            None => false,
            Some(b) => match AcceptorState::decode(&b) {
                Ok(st) => st.accepted.is_some_and(|(_, v)| !v.is_empty()),
                Err(_) => true,
            },
        })
    }

    /// Empties register `id` if its current value (empty for none) is one
    /// that `superseded` allows to drop: a round of both phases, the
    /// second proposing the empty value. Returns whether the register is
    /// empty now (`false`: it holds a value `superseded` refused, or the
    /// round met a concurrent one; the caller tries again later).
    pub async fn empty_if(
        &self,
        id: RegisterId,
        superseded: impl Fn(&[u8]) -> bool,
    ) -> Result<bool> {
        let p = match self.prepare(id).await {
            Ok(p) => p,
            Err(Error::CasConflict { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let current = p.value.as_deref().unwrap_or_default();
        if !superseded(current) {
            return Ok(false);
        }
        if current.is_empty() && p.chosen {
            return Ok(true);
        }
        Ok(self.accept(&p, Vec::new()).await == AcceptOutcome::Chosen)
    }

    /// Sends `msg` to every node of `sets`; returns once a majority of
    /// each set answered as `good` says, or once that cannot happen any
    /// more (refusals and errors), or after [`CAS_RPC_TIMEOUT`]. Calls
    /// still running then go on in the background, so every acceptor gets
    /// the request.
    async fn phase(
        &self,
        sets: &[Vec<NodeId>],
        msg: CasRpc,
        good: fn(&CasRpc) -> bool,
    ) -> PhaseResult {
        let nodes: BTreeSet<NodeId> = sets.iter().flatten().copied().collect();
        let msg = Arc::new(rmp_serde::to_vec_named(&msg).expect("cas message encodes"));
        let mut pending = FuturesUnordered::new();
        for node in nodes.iter().copied() {
            let endpoint = self.endpoint.clone();
            let system = self.system.clone();
            let msg = msg.clone();
            pending.push(tokio::spawn(
                async move {
                    let decode =
                        || rmp_serde::from_slice::<CasRpc>(&msg).expect("cas message decodes");
                    system.ensure_connected(&node).await;
                    let mut r = endpoint.call(&node, decode(), Priority::High).await;
                    if matches!(
                        r,
                        Err(NetError::ConnectionClosed | NetError::NotConnected(_))
                    ) {
                        system.ensure_connected(&node).await;
                        r = endpoint.call(&node, decode(), Priority::High).await;
                    }
                    (node, r)
                }
                .in_current_span(),
            ));
        }
        let mut res = PhaseResult {
            asked: nodes.len(),
            reached: false,
            ok: Vec::new(),
            nacks: Vec::new(),
            errors: Vec::new(),
            timed_out: false,
            needed: sets.iter().map(|s| majority(s.len())).max().unwrap_or(0),
        };
        let count_in =
            |set: &Vec<NodeId>, of: &[NodeId]| set.iter().filter(|n| of.contains(n)).count();
        let deadline = tokio::time::Instant::now() + CAS_RPC_TIMEOUT;
        loop {
            let ok_nodes: Vec<NodeId> = res.ok.iter().map(|(n, _)| *n).collect();
            if sets
                .iter()
                .all(|s| count_in(s, &ok_nodes) >= majority(s.len()))
            {
                res.reached = true;
                return res;
            }
            let mut failed: Vec<NodeId> = res.nacks.iter().map(|(n, _)| *n).collect();
            failed.extend(res.errors.iter().map(|(n, _)| *n));
            if sets
                .iter()
                .any(|s| s.len() - count_in(s, &failed) < majority(s.len()))
            {
                return res;
            }
            match tokio::time::timeout_at(deadline, pending.next()).await {
                Err(_) => {
                    res.timed_out = true;
                    return res;
                }
                Ok(None) => return res,
                Ok(Some(Err(e))) => debug!("cas call task failed: {e}"),
                Ok(Some(Ok((node, Ok(a))))) if good(&a) => res.ok.push((node, a)),
                Ok(Some(Ok((node, Ok(CasRpc::Nack { promised }))))) => {
                    self.saw(promised);
                    res.nacks.push((node, promised));
                }
                Ok(Some(Ok((node, Ok(CasRpc::Error(e)))))) => res.errors.push((node, e)),
                Ok(Some(Ok((node, Ok(other))))) => res
                    .errors
                    .push((node, format!("unexpected answer {other:?}"))),
                Ok(Some(Ok((node, Err(e))))) => res.errors.push((node, e.to_string())),
            }
        }
    }
}

/// Tree of the hand-off's progress: [`HANDOFF_DONE`] -> the newest layout
/// version (u64, big-endian) whose nodes got every register of this node.
const HANDOFF_TREE: &str = "cas_handoff";
const HANDOFF_DONE: &[u8] = b"done";
/// The hand-off counts as a table for the layout trackers: this node
/// reports a layout version synced only once its registers were handed
/// to that version's nodes.
pub const HANDOFF_TABLE: &str = "cas_registers";
/// Registers handed off per batch.
const HANDOFF_BATCH: usize = 64;

/// What a hand-off pass did.
#[derive(Debug, Default)]
pub struct HandoffReport {
    /// The layout version it was for.
    pub version: u64,
    /// Registers with an accepted value.
    pub registers: u64,
    /// Accepts sent and acknowledged.
    pub sent: u64,
    /// Accepts refused under a higher promise.
    pub refused: u64,
    pub errors: Vec<String>,
}

impl CasRegisters {
    /// Hands this node's accepted values to the acceptors of the current
    /// layout version (the nodes of each register's partition; every
    /// storage node for a register whose partition is not recorded), as
    /// accepts flagged `handoff` at their own ballots.
    ///
    /// Why: a layout change gives a partition new acceptors with no state.
    /// While the old version is live, every phase needs a majority of the
    /// old set too, which meets any value chosen before. Once it retires,
    /// a majority of the new set alone may not: a value accepted by a
    /// minority and later overtaken (a round whose client got no answer)
    /// would be found as the register's current value by a majority made
    /// of that minority and new nodes, and could be chosen after the value
    /// that overtook it. Handing every accepted value over before this
    /// node reports the version synced (which the retirement waits for,
    /// as for tables) gives the new nodes what the old ones had.
    ///
    /// A hand-off is a copy of the accept the value's proposer sent
    /// (Paxos tolerates delayed and repeated messages), handled by the
    /// same rule: refused under a higher promise. Adopting it regardless
    /// would not be safe: an acceptor that promised a higher ballot to a
    /// proposer, reporting no value, and then adopted a lower-ballot value
    /// could complete a majority for that value behind the proposer's
    /// back (two winners; the checker's seed 143 found it). A refusal
    /// means a round under the joint layout prepared there; it builds on
    /// what a majority of the old set holds (`doc/conditional-writes.md`,
    /// "Limits", for the case that remains).
    pub async fn hand_off(&self) -> Result<HandoffReport> {
        let layout = self.system.layout();
        let me = self.system.id();
        let mut report = HandoffReport {
            version: layout.current().version,
            ..Default::default()
        };
        // The current version's nodes: those of older versions are not
        // asked (a node leaving may be dead; its state matters only while
        // its version is live, when phases ask it anyway).
        let current = layout.current();
        let every_node: BTreeSet<NodeId> = current
            .storage_nodes
            .iter()
            .copied()
            .filter(|n| *n != me)
            .collect();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let tree = self.tree.clone();
            let after = cursor.clone();
            let page = crate::error::off_runtime(move || {
                let iter = match &after {
                    Some(a) => tree.range::<&[u8], _>((
                        std::ops::Bound::Excluded(a.as_slice()),
                        std::ops::Bound::Unbounded,
                    )),
                    None => tree.iter(),
                };
                let page: db::Result<Vec<(Vec<u8>, Vec<u8>)>> = iter
                    .take(HANDOFF_BATCH)
                    .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect();
                Ok(page?)
            })
            .await?;
            let Some((last, _)) = page.last() else {
                break;
            };
            cursor = Some(last.clone());
            let mut calls = FuturesUnordered::new();
            for (k, v) in page {
                let (Some(key), Ok(st)) = (Hash::try_from_slice(&k), AcceptorState::decode(&v))
                else {
                    continue;
                };
                let Some((ballot, value)) = st.accepted else {
                    continue;
                };
                report.registers += 1;
                let targets: BTreeSet<NodeId> = match st.partition {
                    Some(p) => current
                        .nodes_of(p as usize)
                        .into_iter()
                        .filter(|n| *n != me)
                        .collect(),
                    None => every_node.clone(),
                };
                for node in targets {
                    let msg = CasRpc::Accept {
                        key,
                        ballot,
                        value: value.clone(),
                        partition: st.partition,
                        handoff: true,
                    };
                    let (endpoint, system) = (self.endpoint.clone(), self.system.clone());
                    calls.push(async move {
                        let call = async {
                            system.ensure_connected(&node).await;
                            endpoint.call(&node, msg, Priority::Background).await
                        };
                        let r = tokio::time::timeout(CAS_RPC_TIMEOUT, call).await;
                        (node, r)
                    });
                }
            }
            while let Some((node, r)) = calls.next().await {
                match r {
                    Ok(Ok(CasRpc::Accepted)) => report.sent += 1,
                    // A higher ballot was promised there: a round under the
                    // joint layout (old and new sets) runs on it, and builds
                    // on what a majority of the old set holds.
                    Ok(Ok(CasRpc::Nack { .. })) => report.refused += 1,
                    Ok(Ok(other)) => report.errors.push(format!("{node:?}: {other:?}")),
                    Ok(Err(e)) => report.errors.push(format!("{node:?}: {e}")),
                    Err(_) => report.errors.push(format!("{node:?}: timeout")),
                }
            }
        }
        Ok(report)
    }

    fn handoff_done(&self) -> u64 {
        self.handoff
            .get(HANDOFF_DONE)
            .ok()
            .flatten()
            .and_then(|b| <[u8; 8]>::try_from(b.as_ref()).ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0)
    }

    fn set_handoff_done(&self, version: u64) -> Result<()> {
        self.handoff.insert(HANDOFF_DONE, version.to_be_bytes())?;
        Ok(())
    }

    /// Registers the hand-off with the layout trackers and starts the loop
    /// that runs it for each new layout version (retried after 5 s, then
    /// after a delay that doubles up to a minute, while a node cannot be
    /// reached).
    pub fn spawn_handoff(
        self: &Arc<Self>,
        must_exit: &tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        self.system.register_table(HANDOFF_TABLE);
        tokio::spawn(self.clone().handoff_loop(must_exit.clone()))
    }

    async fn handoff_loop(self: Arc<Self>, mut must_exit: tokio::sync::watch::Receiver<bool>) {
        const RETRY_MIN: Duration = Duration::from_secs(5);
        const RETRY_MAX: Duration = Duration::from_secs(60);
        let mut layouts = self.system.subscribe_layout();
        let mut retry = RETRY_MIN;
        while !*must_exit.borrow() {
            let current = self.system.layout().current().version;
            let wait = if self.handoff_done() >= current {
                self.system.table_synced(HANDOFF_TABLE, current);
                None
            } else {
                match self.hand_off().await {
                    Ok(r) if r.errors.is_empty() => {
                        if let Err(e) = self.set_handoff_done(r.version) {
                            warn!("register hand-off: cannot record its progress: {e}");
                        }
                        self.system.table_synced(HANDOFF_TABLE, r.version);
                        if r.registers > 0 {
                            info!(
                                "conditional-write registers handed to the nodes of layout version {}: {} registers, {} accepts, {} refused under a higher promise",
                                r.version, r.registers, r.sent, r.refused
                            );
                        }
                        retry = RETRY_MIN;
                        None
                    }
                    Ok(r) => {
                        warn!(
                            "register hand-off for layout version {}: {} accepts failed, retrying in {}s: {}",
                            r.version,
                            r.errors.len(),
                            retry.as_secs(),
                            r.errors[0]
                        );
                        let w = retry;
                        retry = (retry * 2).min(RETRY_MAX);
                        Some(w)
                    }
                    Err(e) => {
                        warn!("register hand-off: {e}");
                        let w = retry;
                        retry = (retry * 2).min(RETRY_MAX);
                        Some(w)
                    }
                }
            };
            tokio::select! {
                _ = layouts.changed() => (),
                _ = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600))) => (),
                _ = must_exit.changed() => (),
            }
        }
    }
}

/// The acceptor: applies a request to the stored state, durably (blocking:
/// a database transaction, committed before the answer is sent).
fn handle_local(db: &db::Db, tree: &db::Tree, msg: CasRpc) -> Result<CasRpc> {
    {
        let r = db.transaction(|tx| {
            let (key, ballot, value, partition, handoff) = match &msg {
                CasRpc::Prepare { key, ballot } => (key, *ballot, None, None, false),
                CasRpc::Accept {
                    key,
                    ballot,
                    value,
                    partition,
                    handoff,
                } => (key, *ballot, Some(value), *partition, *handoff),
                other => {
                    return Ok((CasRpc::Error(format!("not a request: {other:?}")), false));
                }
            };
            let mut st = match tx.get(tree, key.as_slice())? {
                Some(b) => match AcceptorState::decode(&b) {
                    Ok(s) => s,
                    Err(e) => return Ok((CasRpc::Error(e), false)),
                },
                None => AcceptorState::default(),
            };
            if partition.is_some() {
                st.partition = partition;
            }
            let answer = match value {
                None if ballot > st.promised => {
                    st.promised = ballot;
                    CasRpc::Promise {
                        accepted: st.accepted.clone(),
                    }
                }
                // A hand-off that brings nothing newer: nothing changes,
                // nothing to sync. Otherwise it is the accept it copies,
                // under the same rule (see `CasRegisters::hand_off`).
                Some(_) if handoff && st.accepted.as_ref().is_some_and(|(b, _)| *b >= ballot) => {
                    return Ok((CasRpc::Accepted, false));
                }
                Some(v) if ballot >= st.promised => {
                    st.promised = ballot;
                    st.accepted = Some((ballot, v.clone()));
                    CasRpc::Accepted
                }
                _ => {
                    return Ok((
                        CasRpc::Nack {
                            promised: st.promised,
                        },
                        false,
                    ))
                }
            };
            tx.insert(tree, key.as_slice(), st.encode())?;
            Ok::<_, db::TxError<()>>((answer, true))
        });
        let (answer, changed) = r?;
        // A promise or an acceptance that a power loss could roll back
        // would let two values be chosen: it is synced before the answer,
        // even when `metadata_fsync` is off (only conditional writes pay).
        if changed {
            db.sync()?;
            SYNCS.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer)
    }
}

/// Acceptor state syncs done by this process (for tests and statistics).
static SYNCS: AtomicU64 = AtomicU64::new(0);

/// How many times acceptors of this process synced their state to disk.
pub fn acceptor_syncs() -> u64 {
    SYNCS.load(Ordering::Relaxed)
}

/// The smallest majority of `n` acceptors.
fn majority(n: usize) -> usize {
    n / 2 + 1
}

struct PhaseResult {
    asked: usize,
    reached: bool,
    ok: Vec<(NodeId, CasRpc)>,
    nacks: Vec<(NodeId, Ballot)>,
    errors: Vec<(NodeId, String)>,
    timed_out: bool,
    needed: usize,
}

impl PhaseResult {
    fn into_error(self, regs: &CasRegisters) -> Error {
        if let Some(b) = self.nacks.iter().map(|(_, b)| *b).max() {
            regs.saw(b);
            return Error::CasConflict {
                refused: self.nacks.len(),
            };
        }
        Error::Quorum(QuorumError {
            needed: self.needed,
            ok: self.ok.len(),
            timed_out: self.timed_out,
            errors: self.errors,
        })
    }
}

#[async_trait::async_trait]
impl EndpointHandler<CasRpc> for CasRegisters {
    async fn handle(&self, msg: CasRpc, _from: NodeId) -> CasRpc {
        let (db, tree) = (self.db.clone(), self.tree.clone());
        match tokio::task::spawn_blocking(move || handle_local(&db, &tree, msg)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => CasRpc::Error(e.to_string()),
            Err(e) => CasRpc::Error(format!("cas handler failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::{cluster, stop_until_down, wait_for};

    /// Sets the register to `me` if it is empty; returns whether this call
    /// did (bounded retries with jittered backoff).
    async fn set_if_empty(regs: &CasRegisters, id: RegisterId, me: &[u8]) -> Result<bool> {
        for attempt in 0..50u64 {
            if attempt > 0 {
                let jitter = u64::from(gen_uuid().as_slice()[0]) % 20;
                tokio::time::sleep(Duration::from_millis(5 + jitter + 5 * attempt.min(10))).await;
            }
            let p = match regs.prepare(id).await {
                Ok(p) => p,
                Err(Error::CasConflict { .. }) => continue,
                Err(e) => return Err(e),
            };
            let (value, mine) = match &p.value {
                Some(v) => (v.clone(), v == me),
                None => (me.to_vec(), true),
            };
            if p.chosen || regs.accept(&p, value).await == AcceptOutcome::Chosen {
                return Ok(mine);
            }
        }
        panic!("no decision in 50 rounds");
    }

    /// Replaces the register's value by `me` if it is `expect` (an
    /// If-Match write), deciding as `commit_conditional` does: a value of
    /// our own seen at the highest ballot is made chosen and wins; a value
    /// other than `expect` is made chosen and loses; else `me` is
    /// proposed. Returns whether this call replaced the value.
    async fn replace_if(
        regs: &CasRegisters,
        id: RegisterId,
        expect: &[u8],
        me: &[u8],
    ) -> Result<bool> {
        for attempt in 0..200u64 {
            if attempt > 0 {
                let jitter = u64::from(gen_uuid().as_slice()[0]) % 20;
                tokio::time::sleep(Duration::from_millis(1 + jitter + 2 * attempt.min(10))).await;
            }
            let p = match regs.prepare(id).await {
                Ok(p) => p,
                Err(Error::CasConflict { .. }) => continue,
                Err(e) => return Err(e),
            };
            let current = p.value.clone().unwrap_or_default();
            if current == me || current != expect {
                let settled =
                    p.chosen || regs.accept(&p, current.clone()).await == AcceptOutcome::Chosen;
                if settled {
                    return Ok(current == me);
                }
                continue;
            }
            if regs.accept(&p, me.to_vec()).await == AcceptOutcome::Chosen {
                return Ok(true);
            }
        }
        panic!("no decision in 200 rounds");
    }

    /// 32 If-Match-style writers race to replace a known value, through
    /// the three nodes, for several registers: exactly one wins each race.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exactly_one_of_concurrent_if_match_writers_wins() {
        let nodes = cluster(3, 3).await;
        let regs = regs_of(&nodes);
        for round in 0..20 {
            let id = RegisterId::new(
                "test",
                &blake2sum(b"bucket"),
                format!("m{round}").as_bytes(),
            );
            let first = b"first".to_vec();
            assert!(set_if_empty(&regs[0], id, &first).await.unwrap());
            let mut tasks = Vec::new();
            for i in 0..32usize {
                let r = regs[i % 3].clone();
                let first = first.clone();
                tasks.push(tokio::spawn(async move {
                    let me = format!("writer {i}").into_bytes();
                    (me.clone(), replace_if(&r, id, &first, &me).await.unwrap())
                }));
            }
            let mut winners = Vec::new();
            for t in tasks {
                let (me, won) = t.await.unwrap();
                if won {
                    winners.push(String::from_utf8(me).unwrap());
                }
            }
            assert_eq!(winners.len(), 1, "race {round}: winners {winners:?}");
            // The winner's value is the register's (a winner that had not
            // made its value chosen would show here).
            let mut p = regs[1].prepare(id).await;
            for _ in 0..10 {
                if !matches!(p, Err(Error::CasConflict { .. })) {
                    break;
                }
                p = regs[1].prepare(id).await;
            }
            assert_eq!(p.unwrap().value, Some(winners[0].clone().into_bytes()));
        }
    }

    /// A round holds the layout it started under: while a prepared round
    /// is alive, its node does not acknowledge a newer layout version
    /// (other nodes do), so that a transition cannot finish under it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_holds_its_layout_version() {
        use garage_rpc::layout::{NodeRole, Tracker};
        use garage_rpc::system::LayoutUpdate;
        let nodes = cluster(3, 3).await;
        let regs = regs_of(&nodes);
        let id = RegisterId::new("test", &blake2sum(b"bucket"), b"held");
        let p = regs[0].prepare(id).await.unwrap();
        // Layout version 2: node 2's capacity changes.
        let role = NodeRole {
            zone: "z2".into(),
            capacity: Some(2_000_000_000),
            tags: vec![],
        };
        nodes[1]
            .system
            .update_layout(LayoutUpdate::StageRoles(vec![(
                nodes[2].system.id(),
                Some(role),
            )]))
            .unwrap();
        nodes[1]
            .system
            .update_layout(LayoutUpdate::Apply { version: 2 })
            .unwrap();
        let acked = |i: usize, by: usize| {
            nodes[by]
                .system
                .layout()
                .trackers
                .get(Tracker::Ack, &nodes[i].system.id())
        };
        wait_for(
            "nodes 1 and 2 ack version 2",
            Duration::from_secs(30),
            || acked(1, 0) == 2 && acked(2, 0) == 2,
        )
        .await;
        assert_eq!(
            acked(0, 0),
            1,
            "node 0 acked version 2 under a running round"
        );
        assert_eq!(
            regs[0].accept(&p, b"v".to_vec()).await,
            AcceptOutcome::Chosen
        );
        drop(p);
        wait_for(
            "node 0 acks version 2 once the round is done",
            Duration::from_secs(30),
            || acked(0, 0) == 2,
        )
        .await;
    }

    fn regs_of(nodes: &[crate::testing::Node]) -> Vec<Arc<CasRegisters>> {
        nodes
            .iter()
            .map(|n| CasRegisters::new(n.table.data.db.clone(), n.system.clone()).unwrap())
            .collect()
    }

    /// The tombstone GC of a table with registers: a tombstone whose
    /// register holds a value it does not supersede (a conditional write
    /// newer than the delete) stays, and so does the value; once the value
    /// is one the tombstone supersedes, the GC empties the register, then
    /// collects the tombstone on every replica.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_gc_empties_a_register_before_collecting_its_tombstone() {
        use crate::schema::TableSchema;
        use crate::testing::{TestEntry, TestTable};
        let nodes = cluster(3, 3).await;
        let regs = regs_of(&nodes);
        for (n, r) in nodes.iter().zip(&regs) {
            n.table.use_registers(r.clone());
        }
        let e = TestEntry::raw("g", "k", 5, Some("v"));
        let id = TestTable::register_of(&e).unwrap();
        nodes[0].table.insert(&e).await.unwrap();
        assert!(set_if_empty(&regs[0], id, b"9").await.unwrap());
        let t = TestEntry::raw("g", "k", 7, None);
        nodes[0].table.insert(&t).await.unwrap();
        wait_for(
            "every replica holds the value",
            Duration::from_secs(10),
            || regs.iter().all(|r| r.holds_value(id).unwrap()),
        )
        .await;
        let stored = |n: &crate::testing::Node| n.table.data.read_entry(&t.p, &t.s).unwrap();
        assert_eq!(nodes[0].table.gc_round().await.unwrap(), 0);
        assert!(
            nodes.iter().all(|n| stored(n).is_some()),
            "the tombstone stays"
        );
        assert_eq!(
            regs[1].prepare(id).await.unwrap().value.as_deref(),
            Some(&b"9"[..])
        );
        // The register's value is now older than the delete.
        assert!(replace_if(&regs[1], id, b"9", b"6").await.unwrap());
        assert_eq!(nodes[0].table.gc_round().await.unwrap(), 1);
        assert!(nodes.iter().all(|n| stored(n).is_none()), "collected");
        let p = regs[2].prepare(id).await.unwrap();
        assert!(p.value.as_deref().unwrap_or_default().is_empty());
        wait_for("no acceptor holds a value", Duration::from_secs(10), || {
            regs.iter().all(|r| !r.holds_value(id).unwrap())
        })
        .await;
        for n in &nodes {
            n.stop();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exactly_one_of_concurrent_writers_wins_even_with_a_node_down() {
        let nodes = cluster(3, 3).await;
        let regs = regs_of(&nodes);
        for (round, down) in [(0, false), (1, true)] {
            if down {
                stop_until_down(&nodes, 2).await;
            }
            let live = if down { 2 } else { 3 };
            let id = RegisterId::new(
                "test",
                &blake2sum(b"bucket"),
                format!("k{round}").as_bytes(),
            );
            let mut tasks = Vec::new();
            for i in 0..32usize {
                let r = regs[i % live].clone();
                tasks.push(tokio::spawn(async move {
                    let me = format!("writer {i}").into_bytes();
                    (me.clone(), set_if_empty(&r, id, &me).await.unwrap())
                }));
            }
            let mut winners = Vec::new();
            for t in tasks {
                let (me, won) = t.await.unwrap();
                if won {
                    winners.push(me);
                }
            }
            assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
            // Every live node now reads the winner as the register's value.
            for r in regs.iter().take(live) {
                let mut p = r.prepare(id).await;
                for _ in 0..10 {
                    if !matches!(p, Err(Error::CasConflict { .. })) {
                        break;
                    }
                    p = r.prepare(id).await;
                }
                assert_eq!(p.unwrap().value.as_ref(), Some(&winners[0]));
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_acceptor_refuses_older_ballots_and_keeps_its_state() {
        let (_dir, db) = crate::testing::temp_db();
        let tree = db.open_tree("cas_registers").unwrap();
        let key = blake2sum(b"k");
        let b = |round| Ballot { round, proposer: 1 };
        let ask = |m| handle_local(&db, &tree, m).unwrap();
        // The database runs without fsync (the default `metadata_fsync`):
        // every promise and acceptance is synced before it is answered.
        let syncs_before = acceptor_syncs();
        assert!(matches!(
            ask(CasRpc::Prepare { key, ballot: b(5) }),
            CasRpc::Promise { accepted: None }
        ));
        // An older or equal ballot is refused in phase 1; older in phase 2.
        assert!(matches!(
            ask(CasRpc::Prepare { key, ballot: b(5) }),
            CasRpc::Nack { promised } if promised == b(5)
        ));
        assert!(matches!(
            ask(CasRpc::Accept {
                key,
                ballot: b(4),
                value: ByteBuf::from(b"x".to_vec()),
                partition: None,
                handoff: false,
            }),
            CasRpc::Nack { .. }
        ));
        assert!(matches!(
            ask(CasRpc::Accept {
                key,
                ballot: b(5),
                value: ByteBuf::from(b"v".to_vec()),
                partition: Some(3),
                handoff: false,
            }),
            CasRpc::Accepted
        ));
        match ask(CasRpc::Prepare { key, ballot: b(7) }) {
            CasRpc::Promise {
                accepted: Some((ballot, v)),
            } => {
                assert_eq!(ballot, b(5));
                assert_eq!(v.as_slice(), b"v");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            acceptor_syncs() - syncs_before >= 3,
            "two promises and one acceptance, each synced"
        );
        // The state is in the database, in the documented format.
        let stored = tree.get(key.as_slice()).unwrap().unwrap();
        assert_eq!(stored[0], STATE_FORMAT);
        let st = AcceptorState::decode(&stored).unwrap();
        assert_eq!(st.promised, b(7));
        assert_eq!(st.accepted.unwrap().0, b(5));
        assert_eq!(st.partition, Some(3));

        // A hand-off is the accept it copies: refused under a higher
        // promise (adopting it there could complete a majority behind the
        // back of the proposer that was promised); acknowledged without a
        // write when a value of a ballot as high is held.
        let handoff = |key: Hash, n: u64, v: &[u8]| CasRpc::Accept {
            key,
            ballot: b(n),
            value: ByteBuf::from(v.to_vec()),
            partition: None,
            handoff: true,
        };
        let other = blake2sum(b"another register");
        assert!(matches!(
            ask(CasRpc::Prepare {
                key: other,
                ballot: b(9)
            }),
            CasRpc::Promise { accepted: None }
        ));
        assert!(matches!(ask(handoff(other, 3, b"h")), CasRpc::Nack { .. }));
        let st = AcceptorState::decode(&tree.get(other.as_slice()).unwrap().unwrap()).unwrap();
        assert_eq!((st.promised, st.accepted), (b(9), None));
        assert!(matches!(ask(handoff(other, 10, b"h")), CasRpc::Accepted));
        assert!(matches!(ask(handoff(key, 4, b"lower")), CasRpc::Accepted));
        let st = AcceptorState::decode(&tree.get(key.as_slice()).unwrap().unwrap()).unwrap();
        assert_eq!(
            st.accepted.unwrap().0,
            b(5),
            "a lower ballot never replaces"
        );
    }

    /// A layout change: acceptors {0, 1, 2} become {3, 1, 2}. Value "new"
    /// was chosen by nodes 0 and 1 at ballot 20, after "old" was accepted
    /// by node 2 alone at ballot 10 (a round that failed). Once the old
    /// version retires, nodes 2 and 3 are a majority: without the
    /// hand-off they would report "old" (node 3 has nothing) and a
    /// proposer would build on it, losing "new". After the hand-off from
    /// nodes 0, 1 and 2, both hold "new".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_layout_change_hands_accepted_values_to_the_new_acceptors() {
        use crate::testing::{cluster_with_roles, role};
        use garage_rpc::system::LayoutUpdate;
        let nodes = cluster_with_roles(4, 3, 3).await;
        let regs = regs_of(&nodes);
        let id = RegisterId::new("test", &blake2sum(b"bucket"), b"moved");
        let b = |round| Ballot { round, proposer: 1 };
        let accept = |n: u64, v: &[u8]| CasRpc::Accept {
            key: id.key,
            ballot: b(n),
            value: ByteBuf::from(v.to_vec()),
            partition: Some(id.partition as u16),
            handoff: false,
        };
        let at = |i: usize, msg: CasRpc| handle_local(&regs[i].db, &regs[i].tree, msg).unwrap();
        let layout = nodes[0].system.layout();
        let set = layout.current().nodes_of(id.partition);
        let index = |n: NodeId| nodes.iter().position(|x| x.system.id() == n).unwrap();
        let (a, bb, c) = (index(set[0]), index(set[1]), index(set[2]));
        assert!(matches!(at(c, accept(10, b"old")), CasRpc::Accepted));
        assert!(matches!(at(a, accept(20, b"new")), CasRpc::Accepted));
        assert!(matches!(at(bb, accept(20, b"new")), CasRpc::Accepted));
        // Node `a` leaves, node 3 takes its place.
        nodes[bb]
            .system
            .update_layout(LayoutUpdate::StageRoles(vec![
                (nodes[a].system.id(), None),
                (nodes[3].system.id(), Some(role(3))),
            ]))
            .unwrap();
        nodes[bb]
            .system
            .update_layout(LayoutUpdate::Apply { version: 2 })
            .unwrap();
        wait_for("every node has version 2", Duration::from_secs(30), || {
            nodes
                .iter()
                .all(|n| n.system.layout().current().version == 2)
        })
        .await;
        let new_set = nodes[0].system.layout().current().nodes_of(id.partition);
        assert!(new_set.contains(&nodes[3].system.id()), "{new_set:?}");
        let next = std::sync::atomic::AtomicU64::new(100);
        let read = |i: usize| match at(
            i,
            CasRpc::Prepare {
                key: id.key,
                ballot: b(next.fetch_add(1, Ordering::Relaxed)),
            },
        ) {
            CasRpc::Promise { accepted } => accepted.map(|(b, v)| (b.round, v.to_vec())),
            other => panic!("unexpected {other:?}"),
        };
        let state = |i: usize| {
            regs[i]
                .tree
                .get(id.key.as_slice())
                .unwrap()
                .map(|b| AcceptorState::decode(&b).unwrap())
        };
        assert_eq!(state(3), None, "node 3 is new");
        for i in [a, bb, c] {
            let r = regs[i].hand_off().await.unwrap();
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            assert_eq!(r.version, 2);
        }
        for i in new_set.iter().map(|n| index(*n)) {
            assert_eq!(read(i), Some((20, b"new".to_vec())), "node {i}");
        }
    }
}

#[cfg(test)]
mod fixtures_v0_1_0;
