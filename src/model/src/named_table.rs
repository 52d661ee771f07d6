//! Entries named by a string, in a table held by every node, whose
//! configuration is a last-writer-wins register that deletion clears:
//! bucket notification topics ([`crate::notify::topic_table`]) and
//! replication remotes ([`crate::replication::remote_table`]). An entry
//! is never removed: a node that did not hear of a deletion cannot bring
//! the configuration back, and making the entry again sets a new one.

use garage_table::{EmptyKey, Entry};
use garage_util::crdt::{Crdt, Lww};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Named<C> {
    pub name: String,
    /// Milliseconds since the epoch (merge keeps the earliest).
    pub created: u64,
    /// The current configuration; `None`: deleted.
    pub config: Lww<Option<C>>,
}

impl<C: Clone + Ord> Named<C> {
    pub fn new(name: String, config: C, now: u64) -> Self {
        Self {
            name,
            created: now,
            config: Lww::new(Some(config)),
        }
    }

    /// Its configuration, unless deleted.
    pub fn live(&self) -> Option<&C> {
        self.config.get().as_ref()
    }
}

impl<C: Clone + Ord> Crdt for Named<C> {
    fn merge(&mut self, other: &Self) {
        self.created = self.created.min(other.created);
        self.config.merge(&other.config);
    }
}

impl<C> Entry<EmptyKey, String> for Named<C>
where
    C: Clone
        + Ord
        + PartialEq
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
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

/// Which entries a range read returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LiveFilter {
    /// Those not deleted.
    Live,
}

impl LiveFilter {
    pub fn matches<C: Clone + Ord>(&self, entry: &Named<C>) -> bool {
        match self {
            LiveFilter::Live => entry.live().is_some(),
        }
    }
}

/// Whether `name` may name a `what`: 1 to `max` ASCII letters, digits,
/// hyphens and underscores (names are parts of ARNs, and of queue keys
/// where a zero byte follows them).
pub fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() || name.len() > max {
        return Err(format!(
            "a {what} name has 1 to {max} characters; {name:?} has {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "a {what} name has only ASCII letters, digits, '-' and '_'; {name:?} has {c:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::check_laws;

    #[test]
    fn a_deleted_entry_stays_deleted_until_made_again() {
        let a = Named::new("t".into(), "one".to_string(), 10);
        let mut b = a.clone();
        b.config.update(None);
        let mut c = b.clone();
        c.config.update(Some("two".to_string()));
        check_laws(&a, &b, &c);
        let mut m = a.clone();
        m.merge(&b);
        assert!(
            m.live().is_none(),
            "the deletion wins over the older config"
        );
        assert!(!LiveFilter::Live.matches(&m));
        m.merge(&c);
        assert_eq!(m.live().map(String::as_str), Some("two"));
        assert_eq!(m.created, 10);
    }

    #[test]
    fn names() {
        assert!(check_name("topic", "photos-events_1", 8).is_err());
        assert!(check_name("topic", "photos_1", 8).is_ok());
        assert!(check_name("topic", "", 8).is_err());
        assert!(check_name("topic", "a/b", 8).is_err());
    }
}
