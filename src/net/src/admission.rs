//! Admission of incoming connections before their handshake: anyone who
//! can reach the RPC port can open connections, and until a connection
//! proves it holds the network key it costs a task, buffers and a file
//! descriptor. So at most [`Limits::total`] handshakes run at once, at most
//! [`Limits::per_ip`] of them from one address; a connection over either
//! limit is closed as soon as it is accepted. Established (authenticated)
//! connections are not counted.
//!
//! Refusals and failed handshakes are logged at most once per
//! [`LOG_EVERY`], with the number left out since the last line, so that a
//! flood cannot flood the log too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest interval between two log lines of one kind.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// How many unauthenticated handshakes may run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub total: usize,
    pub per_ip: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // A handshake in progress costs a few KiB and one descriptor; a
        // cluster has at most a few hundred nodes, which dial each other
        // once and then keep their connections.
        Limits {
            total: 256,
            per_ip: 16,
        }
    }
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// [`Limits::total`] handshakes are already running.
    Total,
    /// [`Limits::per_ip`] handshakes from this address are already running.
    PerIp,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Total => "total",
            Refused::PerIp => "per_ip",
        }
    }
}

/// The handshakes running now, by source address.
#[derive(Debug)]
pub struct Admission {
    limits: Limits,
    running: Mutex<Running>,
}

#[derive(Debug, Default)]
struct Running {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// One admitted handshake; dropping it frees its place.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            running: Mutex::new(Running::default()),
        })
    }

    /// A place for a handshake from `ip`, if there is one.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refused> {
        let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if r.total >= self.limits.total {
            return Err(Refused::Total);
        }
        let n = r.by_ip.entry(ip).or_insert(0);
        if *n >= self.limits.per_ip {
            return Err(Refused::PerIp);
        }
        *n += 1;
        r.total += 1;
        Ok(Ticket {
            admission: self.clone(),
            ip,
        })
    }

    /// Handshakes running now.
    pub fn total(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// Handshakes running now (total, from `ip`).
    pub fn running(&self, ip: IpAddr) -> (usize, usize) {
        let r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        (r.total, r.by_ip.get(&ip).copied().unwrap_or(0))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut r = self
            .admission
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        r.total -= 1;
        if let Some(n) = r.by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                r.by_ip.remove(&self.ip);
            }
        }
    }
}

/// Lets one log line of a kind through per [`LOG_EVERY`] and counts the
/// others.
#[derive(Debug, Default)]
pub struct LogLimiter {
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    last: Option<Instant>,
    held_back: u64,
}

impl LogLimiter {
    /// `Some(n)` if a line may be written now, `n` being how many were
    /// held back since the last one; `None` if this one is held back.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match s.last {
            Some(t) if now.duration_since(t) < LOG_EVERY => {
                s.held_back += 1;
                None
            }
            _ => {
                s.last = Some(now);
                Some(std::mem::take(&mut s.held_back))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn handshakes_are_capped_per_address_and_in_total() {
        let a = Admission::new(Limits {
            total: 5,
            per_ip: 2,
        });
        let t1 = a.admit(ip(1)).unwrap();
        let _t2 = a.admit(ip(1)).unwrap();
        assert_eq!(a.admit(ip(1)).unwrap_err(), Refused::PerIp);
        let _others: Vec<_> = (2..5).map(|i| a.admit(ip(i)).unwrap()).collect();
        assert_eq!(a.running(ip(1)), (5, 2));
        assert_eq!(a.admit(ip(9)).unwrap_err(), Refused::Total);
        drop(t1);
        assert_eq!(a.running(ip(1)), (4, 1));
        let _t3 = a.admit(ip(1)).unwrap();
        assert_eq!(a.admit(ip(9)).unwrap_err(), Refused::Total);
    }

    #[test]
    fn dropped_tickets_free_everything() {
        let a = Admission::new(Limits::default());
        let ts: Vec<_> = (0..16).map(|_| a.admit(ip(1)).unwrap()).collect();
        assert_eq!(a.admit(ip(1)).unwrap_err(), Refused::PerIp);
        drop(ts);
        assert_eq!(a.running(ip(1)), (0, 0));
        assert!(a.running.lock().unwrap().by_ip.is_empty());
    }

    #[test]
    fn the_log_limiter_counts_what_it_held_back() {
        let l = LogLimiter::default();
        let t = Instant::now();
        assert_eq!(l.allow(t), Some(0));
        assert_eq!(l.allow(t + Duration::from_secs(1)), None);
        assert_eq!(l.allow(t + Duration::from_secs(2)), None);
        assert_eq!(l.allow(t + LOG_EVERY), Some(2));
        assert_eq!(l.allow(t + LOG_EVERY), None);
    }
}
