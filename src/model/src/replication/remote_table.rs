//! The `replication_remote` table: the S3 endpoints buckets replicate to
//! (another garage cluster, or any S3 service), each a name, a URL, a
//! region and an access key of the remote. Made by `garage remote add`
//! or the admin API; a replication rule names one of its buckets by the
//! ARN [`super::config::destination_arn`] gives. One partition holds them
//! all, replicated on every node: the node that sends a version finds its
//! remote without a round trip.
//!
//! A remote is never removed from the table: deleting it clears its
//! configuration (a last-writer-wins register), so a node that did not
//! hear of the deletion cannot bring it back.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};

/// Longest remote name.
pub const MAX_REMOTE_NAME: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    pub name: String,
    /// Milliseconds since the epoch (merge keeps the earliest).
    pub created: u64,
    /// The current configuration; `None`: deleted.
    pub config: Lww<Option<RemoteConfig>>,
}

/// How to reach a remote.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RemoteConfig {
    /// Its S3 endpoint: `http(s)://host:port` (buckets addressed in the
    /// path).
    pub endpoint: String,
    /// The region requests are signed for.
    pub region: String,
    pub access_key_id: String,
    /// Never logged, never shown (see the `Debug` below).
    pub secret_access_key: String,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"****")
            .finish()
    }
}

impl RemoteConfig {
    /// Checks what a new remote is given: an http(s) URL without a path
    /// or query, a region, a key.
    pub fn check(&self) -> Result<(), String> {
        let url = url::Url::parse(&self.endpoint)
            .map_err(|e| format!("the endpoint {:?} is not a URL: {e}", self.endpoint))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "the endpoint {:?} is not http:// or https://",
                self.endpoint
            ));
        }
        if url.host_str().is_none() {
            return Err(format!("the endpoint {:?} names no host", self.endpoint));
        }
        if url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
            return Err(format!(
                "the endpoint {:?} has a path, a query or a user name: give scheme, host and port only",
                self.endpoint
            ));
        }
        if self.region.is_empty() {
            return Err("the remote's region is empty (garage's default is `garage`)".into());
        }
        if self.access_key_id.is_empty() || self.secret_access_key.is_empty() {
            return Err("the remote's access key id and secret key are required".into());
        }
        Ok(())
    }
}

impl Crdt for Remote {
    fn merge(&mut self, other: &Self) {
        self.created = self.created.min(other.created);
        self.config.merge(&other.config);
    }
}

impl Remote {
    pub fn new(name: String, config: RemoteConfig, now: u64) -> Self {
        Self {
            name,
            created: now,
            config: Lww::new(Some(config)),
        }
    }

    /// Its configuration, unless deleted.
    pub fn live(&self) -> Option<&RemoteConfig> {
        self.config.get().as_ref()
    }
}

/// Whether `name` may name a remote: 1 to 64 ASCII letters, digits,
/// hyphens and underscores (it is part of ARNs and of queue keys).
pub fn check_remote_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_REMOTE_NAME {
        return Err(format!(
            "a remote name has 1 to {MAX_REMOTE_NAME} characters; {name:?} has {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "a remote name has only ASCII letters, digits, '-' and '_'; {name:?} has {c:?}"
        ));
    }
    Ok(())
}

impl Entry<EmptyKey, String> for Remote {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &String {
        &self.name
    }
    fn is_tombstone(&self) -> bool {
        false
    }
}

/// Which remotes a range read returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RemoteFilter {
    /// Those not deleted.
    Live,
}

pub struct RemoteTable;

impl TableSchema for RemoteTable {
    const TABLE_NAME: &'static str = "replication_remote";
    /// Read by the replication worker of every node: every node holds it.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = Remote;
    type Filter = RemoteFilter;

    fn matches_filter(entry: &Remote, filter: &RemoteFilter) -> bool {
        match filter {
            RemoteFilter::Live => entry.live().is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;

    fn config(url: &str) -> RemoteConfig {
        RemoteConfig {
            endpoint: url.into(),
            region: "garage".into(),
            access_key_id: "GK1".into(),
            secret_access_key: "s3cr3t".into(),
        }
    }

    #[test]
    fn a_deleted_remote_stays_deleted_until_added_again() {
        let a = Remote::new("dr".into(), config("http://127.0.0.1:1"), 10);
        let mut b = a.clone();
        b.config.update(None);
        let mut c = b.clone();
        c.config.update(Some(config("http://127.0.0.1:2")));
        check_laws(&a, &b, &c);
        let mut m = a.clone();
        m.merge(&b);
        assert!(m.live().is_none());
        m.merge(&c);
        assert_eq!(m.live().unwrap().endpoint, "http://127.0.0.1:2");
    }

    #[test]
    fn checks_and_secrets() {
        assert!(config("http://127.0.0.1:3900").check().is_ok());
        assert!(config("https://s3.example.org").check().is_ok());
        for bad in ["ftp://x", "http://x/bucket", "not a url", "http://u:p@x"] {
            assert!(config(bad).check().is_err(), "{bad}");
        }
        assert!(!format!("{:?}", config("http://x")).contains("s3cr3t"));
        assert!(check_remote_name("dr-site_2").is_ok());
        assert!(check_remote_name("a/b").is_err());
        assert!(check_remote_name("").is_err());
    }
}
