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

use garage_table::{EmptyKey, Replication, TableSchema};
use serde::{Deserialize, Serialize};

use crate::named_table::{check_name, LiveFilter, Named};

/// Longest remote name.
pub const MAX_REMOTE_NAME: usize = 64;

/// A remote: its name, when it was added, and its configuration (see
/// [`crate::named_table`]).
pub type Remote = Named<RemoteConfig>;

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

/// Whether `name` may name a remote: 1 to 64 ASCII letters, digits,
/// hyphens and underscores (it is part of ARNs and of queue keys).
pub fn check_remote_name(name: &str) -> Result<(), String> {
    check_name("remote", name, MAX_REMOTE_NAME)
}

/// Which remotes a range read returns.
pub type RemoteFilter = LiveFilter;

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
        filter.matches(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> RemoteConfig {
        RemoteConfig {
            endpoint: url.into(),
            region: "garage".into(),
            access_key_id: "GK1".into(),
            secret_access_key: "s3cr3t".into(),
        }
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
