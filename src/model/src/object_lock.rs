//! Object lock: a version's retention (GOVERNANCE or COMPLIANCE, until a
//! date) and legal hold, as S3 has them. See doc/object-lock.md.
//!
//! A version's lock travels with it: written with the version (from the
//! request's headers or the bucket's default retention) into the object
//! entry and the history entry, and changed later (PutObjectRetention,
//! PutObjectLegalHold) in both. It merges so that a compliance retention
//! can never be shortened or removed by any merge: its date only grows.
//! Governance retention and legal hold are last-writer-wins registers
//! (changing them needs the right permissions, checked by the API before
//! the write).
//!
//! Deleting a version goes through [`ObjectLock::check_delete`]: the
//! history table's only way to make a deleted entry asks it
//! ([`crate::history_table::HistoryEntry::delete`]).

use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RetentionMode {
    Governance,
    Compliance,
}

impl RetentionMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            RetentionMode::Governance => "GOVERNANCE",
            RetentionMode::Compliance => "COMPLIANCE",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "GOVERNANCE" => Some(RetentionMode::Governance),
            "COMPLIANCE" => Some(RetentionMode::Compliance),
            _ => None,
        }
    }
}

/// A retention: the version cannot be deleted before `until` (ms since
/// the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Retention {
    pub mode: RetentionMode,
    pub until: u64,
}

/// Why a version cannot be deleted (or its retention changed) now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locked {
    LegalHold,
    Compliance {
        until: u64,
    },
    /// Bypassing governance retention needs the bucket's owner
    /// permission and `x-amz-bypass-governance-retention: true`.
    Governance {
        until: u64,
    },
    /// A retention that this node's clock says has expired, while that
    /// clock is off its peers' by more than the bound: the decision is
    /// refused rather than taken early (see doc/ordering.md).
    Clock(garage_util::clock::ClockSkewed),
}

impl std::fmt::Display for Locked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let date = |ms: u64| {
            time::OffsetDateTime::from_unix_timestamp((ms / 1000) as i64)
                .ok()
                .and_then(|d| {
                    d.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_else(|| format!("{ms} ms"))
        };
        match self {
            Locked::LegalHold => write!(f, "the version is under a legal hold"),
            Locked::Compliance { until } => {
                write!(f, "the version is under COMPLIANCE retention until {}", date(*until))
            }
            Locked::Governance { until } => write!(
                f,
                "the version is under GOVERNANCE retention until {} (the bucket's owner may bypass it)",
                date(*until)
            ),
            Locked::Clock(c) => write!(f, "its retention has expired by this node's clock, but {c}"),
        }
    }
}

/// One version's lock. The empty lock (the default) locks nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    /// Compliance retention date: only ever raised, by writes and by
    /// merges alike.
    #[serde(default)]
    compliance_until: Option<u64>,
    /// Governance retention date (`None` inside: removed). Ignored while
    /// a compliance retention is set.
    #[serde(default)]
    governance: Option<Lww<Option<u64>>>,
    #[serde(default)]
    legal_hold: Option<Lww<bool>>,
}

impl ObjectLock {
    /// The lock a version is written with.
    pub fn new(retention: Option<Retention>, legal_hold: bool) -> Self {
        let mut l = Self::default();
        if let Some(r) = retention {
            l.set_retention(Some(r));
        }
        if legal_hold {
            l.set_legal_hold(true);
        }
        l
    }

    /// The retention in force (it may have expired): compliance if one
    /// was ever set, else governance.
    pub fn retention(&self) -> Option<Retention> {
        if let Some(until) = self.compliance_until {
            return Some(Retention {
                mode: RetentionMode::Compliance,
                until,
            });
        }
        let until = (*self.governance.as_ref()?.get())?;
        Some(Retention {
            mode: RetentionMode::Governance,
            until,
        })
    }

    pub fn legal_hold(&self) -> bool {
        self.legal_hold.as_ref().is_some_and(|l| *l.get())
    }

    /// Whether a legal hold status was ever set (GetObjectLegalHold
    /// answers NoSuchObjectLockConfiguration otherwise).
    pub fn has_legal_hold_status(&self) -> bool {
        self.legal_hold.is_some()
    }

    /// Sets the retention (`None`: removes a governance retention; a
    /// compliance retention cannot be removed or shortened, see
    /// [`ObjectLock::check_retention_change`]).
    pub fn set_retention(&mut self, r: Option<Retention>) {
        match r {
            Some(Retention {
                mode: RetentionMode::Compliance,
                until,
            }) => self.compliance_until = self.compliance_until.max(Some(until)),
            Some(Retention {
                mode: RetentionMode::Governance,
                until,
            }) => update(&mut self.governance, Some(until)),
            None => update(&mut self.governance, None),
        }
    }

    pub fn set_legal_hold(&mut self, on: bool) {
        update(&mut self.legal_hold, on);
    }

    /// Whether the version may be deleted at `now` (ms); `bypass`: the
    /// caller may and asks to bypass governance retention.
    pub fn check_delete(&self, now: u64, bypass: bool) -> Result<(), Locked> {
        if self.legal_hold() {
            return Err(Locked::LegalHold);
        }
        match self.retention() {
            Some(r) if r.until > now => match r.mode {
                RetentionMode::Compliance => Err(Locked::Compliance { until: r.until }),
                RetentionMode::Governance if bypass => Ok(()),
                RetentionMode::Governance => Err(Locked::Governance { until: r.until }),
            },
            // Expired by this node's clock: only if that clock is right.
            Some(r) if !(r.mode == RetentionMode::Governance && bypass) => {
                garage_util::clock::check().map_err(Locked::Clock)
            }
            _ => Ok(()),
        }
    }

    /// Whether the retention may become `new` at `now`: an expired
    /// retention may become anything; a compliance one may only be
    /// extended; a governance one may be extended or made compliance,
    /// and shortened or removed only with `bypass`.
    pub fn check_retention_change(
        &self,
        new: Option<Retention>,
        now: u64,
        bypass: bool,
    ) -> Result<(), Locked> {
        let Some(cur) = self.retention() else {
            return Ok(());
        };
        let keeps = new.is_some_and(|n| n.until >= cur.until && n.mode >= cur.mode);
        if cur.until <= now {
            // Expired by this node's clock: anything goes, if that clock
            // is right; else only what keeps the retention.
            return match garage_util::clock::check() {
                Ok(()) => Ok(()),
                Err(_) if keeps => Ok(()),
                Err(c) => Err(Locked::Clock(c)),
            };
        }
        match cur.mode {
            _ if keeps => Ok(()),
            RetentionMode::Compliance => Err(Locked::Compliance { until: cur.until }),
            RetentionMode::Governance if bypass => Ok(()),
            RetentionMode::Governance => Err(Locked::Governance { until: cur.until }),
        }
    }
}

fn update<T: Clone + Ord>(reg: &mut Option<Lww<T>>, v: T) {
    match reg {
        Some(r) => r.update(v),
        None => *reg = Some(Lww::new(v)),
    }
}

fn merge_opt<T: Crdt + Clone>(a: &mut Option<T>, b: &Option<T>) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y),
        (None, Some(y)) => *a = Some(y.clone()),
        _ => (),
    }
}

impl Crdt for ObjectLock {
    fn merge(&mut self, other: &Self) {
        self.compliance_until = self.compliance_until.max(other.compliance_until);
        merge_opt(&mut self.governance, &other.governance);
        merge_opt(&mut self.legal_hold, &other.legal_hold);
    }
}

/// A bucket's default retention, applied to versions written without
/// one of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DefaultRetention {
    pub mode: RetentionMode,
    pub period: Period,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Period {
    Days(u32),
    /// A year is 365 days.
    Years(u32),
}

impl DefaultRetention {
    /// The retention of a version written at `now` (ms).
    pub fn at(&self, now: u64) -> Retention {
        let days = match self.period {
            Period::Days(d) => d as u64,
            Period::Years(y) => y as u64 * 365,
        };
        Retention {
            mode: self.mode,
            until: now.saturating_add(days * crate::bucket_table::DAY_MSEC),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;
    use proptest::prelude::*;

    fn gov(until: u64) -> Option<Retention> {
        Some(Retention {
            mode: RetentionMode::Governance,
            until,
        })
    }

    fn comp(until: u64) -> Option<Retention> {
        Some(Retention {
            mode: RetentionMode::Compliance,
            until,
        })
    }

    #[test]
    fn what_each_lock_allows() {
        let now = 1000;
        assert_eq!(ObjectLock::default().check_delete(now, false), Ok(()));
        let g = ObjectLock::new(gov(2000), false);
        assert_eq!(
            g.check_delete(now, false),
            Err(Locked::Governance { until: 2000 })
        );
        assert_eq!(g.check_delete(now, true), Ok(()));
        assert_eq!(g.check_delete(2000, false), Ok(()));
        let c = ObjectLock::new(comp(2000), false);
        assert_eq!(
            c.check_delete(now, true),
            Err(Locked::Compliance { until: 2000 })
        );
        assert_eq!(c.check_delete(2001, false), Ok(()));
        let mut h = ObjectLock::new(None, true);
        assert_eq!(h.check_delete(5000, true), Err(Locked::LegalHold));
        h.set_legal_hold(false);
        assert_eq!(h.check_delete(5000, false), Ok(()));
        assert!(h.has_legal_hold_status());
    }

    #[test]
    fn retention_changes() {
        let now = 1000;
        let c = ObjectLock::new(comp(2000), false);
        assert!(c.check_retention_change(comp(3000), now, false).is_ok());
        assert!(c.check_retention_change(comp(1500), now, true).is_err());
        assert!(c.check_retention_change(gov(3000), now, true).is_err());
        assert!(c.check_retention_change(None, now, true).is_err());
        assert!(c.check_retention_change(None, 2001, false).is_ok());
        let g = ObjectLock::new(gov(2000), false);
        assert!(g.check_retention_change(gov(3000), now, false).is_ok());
        assert!(g.check_retention_change(comp(2000), now, false).is_ok());
        assert!(g.check_retention_change(gov(1500), now, false).is_err());
        assert!(g.check_retention_change(None, now, false).is_err());
        assert!(g.check_retention_change(None, now, true).is_ok());
        // Compliance, once set, is what a version keeps.
        let mut x = g.clone();
        x.set_retention(comp(1500));
        x.set_retention(gov(9000));
        assert_eq!(x.retention(), comp(1500));
        x.set_retention(None);
        assert_eq!(x.retention(), comp(1500));
    }

    #[test]
    fn no_merge_shortens_a_compliance_retention() {
        let a = ObjectLock::new(comp(5000), false);
        let mut b = ObjectLock::new(gov(9000), false);
        b.set_retention(None);
        let mut m = b.clone();
        m.merge(&a);
        assert_eq!(m.retention(), comp(5000));
        let mut n = a.clone();
        n.merge(&b);
        assert_eq!(n, m);
    }

    fn lock() -> impl Strategy<Value = ObjectLock> {
        (
            proptest::option::of(0u64..4),
            proptest::option::of((0u64..3, proptest::option::of(0u64..4))),
            proptest::option::of((0u64..3, any::<bool>())),
        )
            .prop_map(|(c, g, h)| ObjectLock {
                compliance_until: c,
                governance: g.map(|(ts, v)| Lww::raw(ts, v)),
                legal_hold: h.map(|(ts, v)| Lww::raw(ts, v)),
            })
    }

    proptest! {
        #[test]
        fn lock_merge_laws(a in lock(), b in lock(), c in lock()) {
            check_laws(&a, &b, &c);
        }

        #[test]
        fn merging_never_unlocks_compliance(a in lock(), b in lock(), now in 0u64..4) {
            let mut m = a.clone();
            m.merge(&b);
            if let Err(Locked::Compliance { until }) = a.check_delete(now, true) {
                prop_assert!(m.check_delete(now, true).is_err());
                prop_assert_eq!(m.retention().map(|r| r.mode), Some(RetentionMode::Compliance));
                prop_assert!(m.retention().unwrap().until >= until);
            }
        }
    }
}
