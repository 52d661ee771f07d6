//! The `notify_topic` table: where bucket notifications go. A topic is a
//! named endpoint (a webhook URL, a NATS server, an AMQP, Kafka or MQTT broker) with its
//! attributes, made through the SNS-compatible topic API on the S3
//! endpoint (`CreateTopic`), the admin API or the CLI. One partition holds
//! them all, replicated on every node: the node that serves a write finds
//! a bucket's topics without a round trip.
//!
//! A topic is never removed from the table: deleting it clears its
//! configuration (a last-writer-wins register), so a node that did not
//! hear of the deletion cannot bring it back; creating it again sets a
//! new configuration.

use std::collections::BTreeMap;

use garage_table::{EmptyKey, Replication, TableSchema};
use serde::{Deserialize, Serialize};

use crate::named_table::{check_name, LiveFilter, Named};

use super::endpoint::Endpoint;

/// Longest topic name (SNS's limit).
pub const MAX_TOPIC_NAME: usize = 256;

/// A topic: its name, when it was made, and its configuration (see
/// [`crate::named_table`]).
pub type Topic = Named<TopicConfig>;

/// What a topic sends to, as given at its creation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopicConfig {
    /// The access key that made it (its owner).
    pub owner: String,
    /// `push-endpoint`: the endpoint's URL, which may hold a user name
    /// and password (never logged; see [`Endpoint::redacted`]).
    pub endpoint: String,
    /// The other attributes, as given (`OpaqueData`, `verify-ssl`,
    /// `nats-subject`, `mqtt-topic`, `mqtt-qos`, …).
    pub attributes: BTreeMap<String, String>,
}

impl TopicConfig {
    /// The endpoint, parsed (checked when the topic was made).
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        Endpoint::parse(&self.endpoint, &self.attributes)
    }

    /// `OpaqueData`: given back in every event record.
    pub fn opaque_data(&self) -> &str {
        self.attributes
            .get("OpaqueData")
            .map(String::as_str)
            .unwrap_or("")
    }
}

/// Whether `name` may name a topic: 1 to 256 ASCII letters, digits,
/// hyphens and underscores (SNS's rule, which also keeps names out of the
/// byte that separates them from sequence numbers in the outbox).
pub fn check_topic_name(name: &str) -> Result<(), String> {
    check_name("topic", name, MAX_TOPIC_NAME)
}

/// The ARN of topic `name` in `region`: what notification configurations
/// name it by.
pub fn topic_arn(region: &str, name: &str) -> String {
    format!("arn:aws:sns:{region}::{name}")
}

/// The topic name an ARN designates (`arn:aws:sns:REGION:ACCOUNT:NAME`:
/// any region and account are accepted, the cluster has one of each).
pub fn topic_of_arn(arn: &str) -> Option<&str> {
    let rest = arn.strip_prefix("arn:aws:sns:")?;
    let mut parts = rest.splitn(3, ':');
    let (_region, _account, name) = (parts.next()?, parts.next()?, parts.next()?);
    check_topic_name(name).ok()?;
    Some(name)
}

/// Which topics a range read returns.
pub type TopicFilter = LiveFilter;

pub struct TopicTable;

impl TableSchema for TopicTable {
    const TABLE_NAME: &'static str = "notify_topic";
    /// Read by every write to a bucket with notifications: every node
    /// holds it.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = String;
    type E = Topic;
    type Filter = TopicFilter;

    fn matches_filter(entry: &Topic, filter: &TopicFilter) -> bool {
        filter.matches(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_arns() {
        assert!(check_topic_name("photos-events_1").is_ok());
        assert!(check_topic_name("").is_err());
        assert!(check_topic_name("a/b").is_err());
        assert!(check_topic_name(&"x".repeat(257)).is_err());
        let arn = topic_arn("garage", "t1");
        assert_eq!(arn, "arn:aws:sns:garage::t1");
        assert_eq!(topic_of_arn(&arn), Some("t1"));
        assert_eq!(
            topic_of_arn("arn:aws:sns:us-east-1:123456789012:t2"),
            Some("t2")
        );
        assert_eq!(topic_of_arn("arn:aws:sqs:garage::t1"), None);
        assert_eq!(topic_of_arn("arn:aws:sns:garage::a/b"), None);
    }
}
