//! A bucket's notification configuration (PutBucketNotificationConfiguration):
//! rules, each sending the events of some types, for keys with a prefix
//! and a suffix, to one topic.

use serde::{Deserialize, Serialize};

use super::event::EventName;

/// The rules of one bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NotificationConfig {
    pub rules: Vec<NotificationRule>,
}

/// One `TopicConfiguration` (or `QueueConfiguration`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NotificationRule {
    /// Its `Id`: the `configurationId` of the records it sends.
    pub id: String,
    /// The topic's name.
    pub topic: String,
    /// The ARN as given (given back by GetBucketNotificationConfiguration).
    pub arn: String,
    /// Given as a `QueueConfiguration` (`Queue` instead of `Topic`).
    pub queue: bool,
    /// Event types, as given: `s3:ObjectCreated:*`, `s3:ObjectRemoved:Delete`, …
    pub events: Vec<String>,
    pub prefix: Option<String>,
    pub suffix: Option<String>,
}

/// Every event type a rule may name, patterns included.
pub fn known_event_type(t: &str) -> bool {
    t == "s3:*"
        || EventName::ALL
            .iter()
            .any(|e| e.s3_name() == t || format!("s3:{}:*", e.family()) == t)
}

impl NotificationRule {
    /// Whether this rule sends event `name` of `key`.
    pub fn matches(&self, name: EventName, key: &str) -> bool {
        let typed = self.events.iter().any(|t| {
            t == "s3:*" || *t == name.s3_name() || *t == format!("s3:{}:*", name.family())
        });
        typed
            && self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            && self.suffix.as_deref().is_none_or(|s| key.ends_with(s))
    }
}

impl NotificationConfig {
    /// The rules that send event `name` of `key`.
    pub fn rules_for<'a>(
        &'a self,
        name: EventName,
        key: &'a str,
    ) -> impl Iterator<Item = &'a NotificationRule> + 'a {
        self.rules.iter().filter(move |r| r.matches(name, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(events: &[&str], prefix: Option<&str>, suffix: Option<&str>) -> NotificationRule {
        NotificationRule {
            id: "r".into(),
            topic: "t".into(),
            arn: "arn:aws:sns:garage::t".into(),
            queue: false,
            events: events.iter().map(|s| s.to_string()).collect(),
            prefix: prefix.map(Into::into),
            suffix: suffix.map(Into::into),
        }
    }

    #[test]
    fn rules_match_types_patterns_prefixes_and_suffixes() {
        let r = rule(&["s3:ObjectCreated:*"], Some("photos/"), Some(".jpg"));
        assert!(r.matches(EventName::ObjectCreatedPut, "photos/a.jpg"));
        assert!(r.matches(
            EventName::ObjectCreatedCompleteMultipartUpload,
            "photos/b.jpg"
        ));
        assert!(!r.matches(EventName::ObjectCreatedPut, "photos/a.png"));
        assert!(!r.matches(EventName::ObjectCreatedPut, "other/a.jpg"));
        assert!(!r.matches(EventName::ObjectRemovedDelete, "photos/a.jpg"));
        let r = rule(&["s3:ObjectRemoved:DeleteMarkerCreated"], None, None);
        assert!(r.matches(EventName::ObjectRemovedDeleteMarkerCreated, "k"));
        assert!(!r.matches(EventName::ObjectRemovedDelete, "k"));
        assert!(rule(&["s3:*"], None, None).matches(EventName::ObjectAclPut, "k"));
    }

    #[test]
    fn known_types() {
        for t in [
            "s3:ObjectCreated:*",
            "s3:ObjectCreated:Put",
            "s3:ObjectCreated:Post",
            "s3:ObjectCreated:Copy",
            "s3:ObjectCreated:CompleteMultipartUpload",
            "s3:ObjectRemoved:*",
            "s3:ObjectRemoved:Delete",
            "s3:ObjectRemoved:DeleteMarkerCreated",
            "s3:LifecycleExpiration:*",
            "s3:LifecycleExpiration:Delete",
            "s3:LifecycleExpiration:DeleteMarkerCreated",
            "s3:LifecycleTransition",
            "s3:ObjectTagging:*",
            "s3:ObjectTagging:Put",
            "s3:ObjectTagging:Delete",
            "s3:ObjectAcl:Put",
        ] {
            assert!(known_event_type(t), "{t}");
        }
        assert!(!known_event_type("s3:ObjectRestore:Post"));
        assert!(!known_event_type("s3:ObjectCreated"));
    }
}
