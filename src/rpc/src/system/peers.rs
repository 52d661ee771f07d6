//! What a node knows of its peers: where to reach them, whether they
//! answer, how far they are. Pure bookkeeping, driven by the system loops.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::status::NodeStatus;
use crate::NodeId;

/// Pings missed in a row after which a connected peer is reported down.
pub const MAX_FAILED_PINGS: u32 = 3;
/// Pings missed in a row after which the connection itself is dropped and
/// dialled again: a connection through a long partition may be dead without
/// either side being told. Until then a peer that answers again is up at
/// once, without waiting for a reconnection.
pub const DROP_AFTER_FAILED_PINGS: u32 = 10;

/// What a missed ping means for a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingFailure {
    /// Not enough missed pings yet to change anything.
    Counted,
    /// The peer is now reported down.
    NowDown,
    /// The peer has been silent so long that its connection should be
    /// dropped and dialled again.
    DropConnection,
}
/// Delay before the first reconnection attempt; doubles on each failure.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_secs(1);
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: Option<SocketAddr>,
    pub connected: bool,
    pub failed_pings: u32,
    /// Smoothed round-trip time of pings.
    pub rtt: Option<Duration>,
    pub last_seen: Option<Instant>,
    pub status: Option<NodeStatus>,
    /// How far the peer's wall clock is ahead of this node's (ms), from
    /// the last ping's answer: its clock minus the middle of the round
    /// trip. Off by at most half the round trip.
    pub clock_offset_ms: Option<i64>,
    /// When the peer last became up (connected and answering) after being
    /// down or unknown: what happened on it before may have missed writes
    /// made while it was away (table sync forgets its progress to it).
    pub up_since: Option<Instant>,
    connect_failures: u32,
    next_attempt: Instant,
}

impl Peer {
    fn new(addr: Option<SocketAddr>, now: Instant) -> Self {
        Self {
            addr,
            connected: false,
            failed_pings: 0,
            rtt: None,
            last_seen: None,
            status: None,
            clock_offset_ms: None,
            up_since: None,
            connect_failures: 0,
            next_attempt: now,
        }
    }

    /// Up: connected and answering pings.
    pub fn is_up(&self) -> bool {
        self.connected && self.failed_pings < MAX_FAILED_PINGS
    }
}

#[derive(Debug, Default)]
pub struct Peers {
    map: HashMap<NodeId, Peer>,
}

impl Peers {
    pub fn get(&self, id: &NodeId) -> Option<&Peer> {
        self.map.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&NodeId, &Peer)> {
        self.map.iter()
    }

    /// Learns of a peer (from bootstrap, gossip or a connection); a known
    /// address is replaced only by a newer one.
    pub fn learn(&mut self, id: NodeId, addr: Option<SocketAddr>, now: Instant) {
        let p = self.map.entry(id).or_insert_with(|| Peer::new(addr, now));
        if addr.is_some() {
            p.addr = addr;
        }
    }

    pub fn connected(&mut self, id: NodeId, addr: Option<SocketAddr>, now: Instant) {
        self.learn(id, addr, now);
        let p = self.map.get_mut(&id).expect("just learnt");
        if !p.is_up() {
            p.up_since = Some(now);
        }
        p.connected = true;
        p.failed_pings = 0;
        p.connect_failures = 0;
        p.last_seen = Some(now);
    }

    /// An incoming connection from `id`: it counts only if `id` is a known
    /// node (admin clients connect too, and are not peers).
    pub fn mark_connected_if_known(&mut self, id: &NodeId, now: Instant) {
        if let Some(p) = self.map.get_mut(id) {
            if !p.is_up() {
                p.up_since = Some(now);
            }
            p.connected = true;
            p.last_seen = Some(now);
        }
    }

    /// Known peers with a live connection.
    pub fn connected_ids(&self) -> Vec<NodeId> {
        self.map
            .iter()
            .filter(|(_, p)| p.connected)
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn disconnected(&mut self, id: &NodeId, now: Instant) {
        if let Some(p) = self.map.get_mut(id) {
            p.connected = false;
            p.next_attempt = now + RECONNECT_BACKOFF_MIN;
        }
    }

    /// The peer answered a ping (`rtt` is then its round-trip time) or sent
    /// one: it is alive, and this is its status.
    pub fn heard_from(
        &mut self,
        id: &NodeId,
        status: NodeStatus,
        rtt: Option<Duration>,
        clock_offset_ms: Option<i64>,
        now: Instant,
    ) {
        if let Some(p) = self.map.get_mut(id) {
            if clock_offset_ms.is_some() {
                p.clock_offset_ms = clock_offset_ms;
            }
            if !p.is_up() && p.connected {
                p.up_since = Some(now);
            }
            p.failed_pings = 0;
            p.last_seen = Some(now);
            if let Some(rtt) = rtt {
                // Exponential smoothing, weight 1/4 to the new sample.
                p.rtt = Some(match p.rtt {
                    None => rtt,
                    Some(old) => (old * 3 + rtt) / 4,
                });
            }
            if let Some(a) = status.rpc_public_addr {
                p.addr = Some(a);
            }
            p.status = Some(status);
        }
    }

    /// Counts a missed ping of `id` and says what it changes.
    pub fn ping_failed(&mut self, id: &NodeId) -> PingFailure {
        let Some(p) = self.map.get_mut(id) else {
            return PingFailure::Counted;
        };
        p.failed_pings += 1;
        match p.failed_pings {
            MAX_FAILED_PINGS => PingFailure::NowDown,
            n if n >= DROP_AFTER_FAILED_PINGS => PingFailure::DropConnection,
            _ => PingFailure::Counted,
        }
    }

    pub fn connect_failed(&mut self, id: &NodeId, now: Instant) {
        if let Some(p) = self.map.get_mut(id) {
            p.connect_failures += 1;
            let factor = 1u32 << p.connect_failures.min(5);
            p.next_attempt = now + (RECONNECT_BACKOFF_MIN * factor).min(RECONNECT_BACKOFF_MAX);
        }
    }

    /// Peers to (re)connect to now: known address, not connected, backoff
    /// elapsed.
    pub fn to_connect(&self, me: &NodeId, now: Instant) -> Vec<(NodeId, SocketAddr)> {
        self.map
            .iter()
            .filter(|(id, p)| *id != me && !p.connected && p.next_attempt <= now)
            .filter_map(|(id, p)| p.addr.map(|a| (*id, a)))
            .collect()
    }

    /// Ids ordered nearest first (measured RTT; unknown RTT last).
    pub fn by_distance(&self, ids: &[NodeId]) -> Vec<NodeId> {
        let mut v = ids.to_vec();
        v.sort_by_key(|id| {
            self.map
                .get(id)
                .and_then(|p| if p.is_up() { p.rtt } else { None })
                .unwrap_or(Duration::MAX)
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> NodeStatus {
        super::super::status::test_status(0)
    }

    fn id(n: u8) -> NodeId {
        NodeId::from([n; 32])
    }

    #[test]
    fn down_after_missed_pings_up_after_an_answer() {
        let now = Instant::now();
        let mut peers = Peers::default();
        peers.connected(id(1), Some("127.0.0.1:1".parse().unwrap()), now);
        assert!(peers.get(&id(1)).unwrap().is_up());
        assert_eq!(peers.ping_failed(&id(1)), PingFailure::Counted);
        assert_eq!(peers.ping_failed(&id(1)), PingFailure::Counted);
        assert_eq!(
            peers.ping_failed(&id(1)),
            PingFailure::NowDown,
            "third miss reports it down"
        );
        assert!(!peers.get(&id(1)).unwrap().is_up());
        for _ in MAX_FAILED_PINGS + 1..DROP_AFTER_FAILED_PINGS {
            assert_eq!(peers.ping_failed(&id(1)), PingFailure::Counted);
        }
        assert_eq!(peers.ping_failed(&id(1)), PingFailure::DropConnection);
        peers.heard_from(&id(1), status(), Some(Duration::from_millis(10)), None, now);
        assert!(
            peers.get(&id(1)).unwrap().is_up(),
            "up again as soon as it answers"
        );
        peers.disconnected(&id(1), now);
        assert!(!peers.get(&id(1)).unwrap().is_up());
    }

    #[test]
    fn up_since_moves_only_when_a_down_peer_comes_back() {
        let t0 = Instant::now();
        let t = |s| t0 + Duration::from_secs(s);
        let mut peers = Peers::default();
        peers.connected(id(1), Some("127.0.0.1:1".parse().unwrap()), t(0));
        assert_eq!(peers.get(&id(1)).unwrap().up_since, Some(t(0)));
        // Answers while up leave it alone.
        peers.heard_from(&id(1), status(), None, None, t(1));
        peers.mark_connected_if_known(&id(1), t(2));
        assert_eq!(peers.get(&id(1)).unwrap().up_since, Some(t(0)));
        // Down by missed pings, then an answer: up since the answer.
        for _ in 0..MAX_FAILED_PINGS {
            peers.ping_failed(&id(1));
        }
        peers.heard_from(&id(1), status(), None, None, t(3));
        assert_eq!(peers.get(&id(1)).unwrap().up_since, Some(t(3)));
        // Disconnected, then a new connection (either way).
        peers.disconnected(&id(1), t(4));
        peers.mark_connected_if_known(&id(1), t(5));
        assert_eq!(peers.get(&id(1)).unwrap().up_since, Some(t(5)));
        peers.disconnected(&id(1), t(6));
        peers.connected(id(1), None, t(7));
        assert_eq!(peers.get(&id(1)).unwrap().up_since, Some(t(7)));
    }

    #[test]
    fn reconnection_backs_off() {
        let now = Instant::now();
        let mut peers = Peers::default();
        let addr = "127.0.0.1:2".parse().unwrap();
        peers.learn(id(2), Some(addr), now);
        assert_eq!(peers.to_connect(&id(0), now), vec![(id(2), addr)]);
        peers.connect_failed(&id(2), now);
        assert!(peers.to_connect(&id(0), now).is_empty());
        assert!(peers.to_connect(&id(0), now + Duration::from_secs(2)).len() == 1);
        for _ in 0..10 {
            peers.connect_failed(&id(2), now);
        }
        assert!(peers
            .to_connect(&id(0), now + Duration::from_secs(29))
            .is_empty());
        assert_eq!(
            peers.to_connect(&id(0), now + RECONNECT_BACKOFF_MAX).len(),
            1
        );
        // Never ourselves.
        peers.learn(id(0), Some(addr), now);
        assert!(peers
            .to_connect(&id(0), now + RECONNECT_BACKOFF_MAX)
            .iter()
            .all(|(i, _)| *i != id(0)));
    }

    #[test]
    fn nearest_first() {
        let now = Instant::now();
        let mut peers = Peers::default();
        for (n, ms) in [(1u8, 50u64), (2, 5), (3, 20)] {
            peers.connected(id(n), None, now);
            peers.heard_from(&id(n), status(), Some(Duration::from_millis(ms)), None, now);
        }
        assert_eq!(
            peers.by_distance(&[id(1), id(2), id(3), id(9)]),
            vec![id(2), id(3), id(1), id(9)]
        );
    }
}
