//! Admin API tokens beyond the configuration's `admin_token`: named,
//! scoped to some admin endpoints, optionally expiring (as the reference
//! v2 has them). One partition holds them all, replicated on every node
//! like the key table, so that a token is checked without a round trip.
//!
//! A token is `<id>.<secret>`; only a hash of the secret is stored (the
//! secret is 256 random bits, so a fast hash is enough: there is nothing
//! to guess), and it is shown once, when the token is made.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Crdt, Deletable, Lww};
use garage_util::data::blake2sum;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminToken {
    /// 24 hex digits, the part of the token before the dot.
    pub id: String,
    pub state: Deletable<AdminTokenParams>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminTokenParams {
    /// Milliseconds since the epoch.
    pub created: u64,
    /// Hex of the hash of the secret; set once (merge keeps the larger,
    /// for determinism).
    pub secret_hash: String,
    pub name: Lww<String>,
    /// Milliseconds since the epoch; `None`: never.
    pub expiration: Lww<Option<u64>>,
    /// The endpoint names it may call (`*`: all of them; a trailing `*`:
    /// those starting with what precedes it).
    pub scope: Lww<Vec<String>>,
}

impl Crdt for AdminTokenParams {
    fn merge(&mut self, other: &Self) {
        self.created = self.created.min(other.created);
        if other.secret_hash > self.secret_hash {
            self.secret_hash = other.secret_hash.clone();
        }
        self.name.merge(&other.name);
        self.expiration.merge(&other.expiration);
        self.scope.merge(&other.scope);
    }
}

impl Crdt for AdminToken {
    fn merge(&mut self, other: &Self) {
        self.state.merge(&other.state);
    }
}

fn hash_secret(secret: &str) -> String {
    hex::encode(blake2sum(secret.as_bytes()).as_slice())
}

impl AdminToken {
    /// A new token; returns it and its whole value `<id>.<secret>` (to show
    /// once).
    pub fn new(
        name: &str,
        expiration: Option<u64>,
        scope: Vec<String>,
        now: u64,
    ) -> (Self, String) {
        let id = hex::encode(rand::random::<[u8; 12]>());
        let secret = hex::encode(rand::random::<[u8; 32]>());
        let t = Self {
            id: id.clone(),
            state: Deletable::Present(AdminTokenParams {
                created: now,
                secret_hash: hash_secret(&secret),
                name: Lww::new(name.to_string()),
                expiration: Lww::new(expiration),
                scope: Lww::new(scope),
            }),
        };
        (t, format!("{id}.{secret}"))
    }

    /// The tombstone of token `id`.
    pub fn deleted(id: &str) -> Self {
        Self {
            id: id.to_string(),
            state: Deletable::Deleted,
        }
    }

    pub fn params(&self) -> Option<&AdminTokenParams> {
        self.state.get()
    }

    pub fn params_mut(&mut self) -> Option<&mut AdminTokenParams> {
        self.state.get_mut()
    }

    /// Whether `secret` is this token's (compared as hashes, in constant
    /// time).
    pub fn secret_matches(&self, secret: &str) -> bool {
        let Some(p) = self.params() else {
            return false;
        };
        let given = hash_secret(secret);
        given.len() == p.secret_hash.len()
            && given
                .bytes()
                .zip(p.secret_hash.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    pub fn is_expired(&self, now: u64) -> bool {
        self.params()
            .and_then(|p| *p.expiration.get())
            .is_some_and(|e| e <= now)
    }

    /// Whether its scope allows `endpoint` (an admin API endpoint name,
    /// e.g. `ListBuckets`).
    pub fn allows(&self, endpoint: &str) -> bool {
        self.params().is_some_and(|p| {
            p.scope.get().iter().any(|s| match s.strip_suffix('*') {
                Some(prefix) => endpoint.starts_with(prefix),
                None => s == endpoint,
            })
        })
    }
}

/// Splits a bearer token `<id>.<secret>`.
pub fn split_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    (id.len() == 24 && id.chars().all(|c| c.is_ascii_hexdigit()) && !secret.is_empty())
        .then_some((id, secret))
}

impl Entry<EmptyKey, String> for AdminToken {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &String {
        &self.id
    }
    fn is_tombstone(&self) -> bool {
        self.state.is_deleted()
    }
}

/// Which tokens a range read returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum AdminTokenFilter {
    /// Live tokens.
    Live,
}

pub struct AdminTokenTable;

impl TableSchema for AdminTokenTable {
    const TABLE_NAME: &'static str = "admin_token";
    /// Read by every admin request: every node holds it.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = AdminToken;
    type Filter = AdminTokenFilter;

    fn matches_filter(entry: &AdminToken, filter: &AdminTokenFilter) -> bool {
        match filter {
            AdminTokenFilter::Live => entry.params().is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;

    #[test]
    fn a_token_checks_its_secret_scope_and_expiration() {
        let (t, whole) = AdminToken::new("ci", Some(1000), vec!["List*".into()], 5);
        let (id, secret) = split_token(&whole).unwrap();
        assert_eq!(id, t.id);
        assert!(t.secret_matches(secret));
        assert!(!t.secret_matches("00"));
        assert!(t.allows("ListBuckets") && t.allows("ListKeys"));
        assert!(!t.allows("DeleteBucket"));
        assert!(!t.is_expired(999) && t.is_expired(1000));
        assert!(split_token("nodot").is_none());
        assert!(split_token("abc.def").is_none());
        let (all, _) = AdminToken::new("all", None, vec!["*".into()], 5);
        assert!(all.allows("DeleteBucket") && !all.is_expired(u64::MAX));
        assert!(!AdminToken::deleted(&t.id).secret_matches(secret));
    }

    #[test]
    fn tokens_merge_as_crdts() {
        let (a, _) = AdminToken::new("a", None, vec!["*".into()], 5);
        let mut b = a.clone();
        b.params_mut().unwrap().name.update("b".into());
        let mut c = a.clone();
        c.params_mut()
            .unwrap()
            .scope
            .update(vec!["ListKeys".into()]);
        check_laws(&a, &b, &c);
        check_laws(&a, &AdminToken::deleted(&a.id), &c);
    }
}
