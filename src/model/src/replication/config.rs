//! A bucket's replication configuration (PutBucketReplication): rules,
//! each sending the new versions of some keys to one destination bucket
//! of a remote (another cluster or any S3 endpoint, see
//! [`super::remote_table`]).

use serde::{Deserialize, Serialize};

/// The rules of one bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReplicationConfig {
    /// `Role`, as given (no IAM here: kept and given back).
    pub role: String,
    pub rules: Vec<ReplicationRule>,
}

/// One `Rule`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReplicationRule {
    /// Its `ID`.
    pub id: String,
    /// When several rules of one destination match a key, the highest
    /// wins.
    pub priority: i32,
    /// `Status`: `Enabled`.
    pub enabled: bool,
    /// `Filter`'s prefix.
    pub prefix: Option<String>,
    /// `Filter`'s tags: a version is replicated if it has them all.
    pub tags: Vec<(String, String)>,
    pub destination: Destination,
    /// `DeleteMarkerReplication`: delete markers are replicated too.
    pub delete_markers: bool,
    /// `ExistingObjectReplication`: versions written before the rule are
    /// queued when it is set.
    pub existing_objects: bool,
}

/// Where a rule sends versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Destination {
    /// The remote's name.
    pub remote: String,
    /// The bucket's name on the remote.
    pub bucket: String,
    /// `StorageClass`, given to the destination's writes.
    pub storage_class: Option<String>,
}

impl Destination {
    /// `REMOTE/BUCKET`: names it in the queue and in version states.
    pub fn id(&self) -> String {
        format!("{}/{}", self.remote, self.bucket)
    }

    /// The ARN rules name it by (`Destination.Bucket`).
    pub fn arn(&self) -> String {
        destination_arn(&self.remote, &self.bucket)
    }
}

/// The ARN of bucket `bucket` of remote `remote`, as a rule's
/// `Destination.Bucket` names it (`garage remote add` prints it).
pub fn destination_arn(remote: &str, bucket: &str) -> String {
    format!("{ARN_PREFIX}{remote}/{bucket}")
}

const ARN_PREFIX: &str = "arn:garage:s3:::";

/// The (remote, bucket) an ARN designates.
pub fn parse_destination_arn(arn: &str) -> Option<(&str, &str)> {
    let (remote, bucket) = arn.strip_prefix(ARN_PREFIX)?.split_once('/')?;
    (super::remote_table::check_remote_name(remote).is_ok() && !bucket.is_empty())
        .then_some((remote, bucket))
}

impl ReplicationRule {
    /// Whether its filter takes a version of `key` with `tags` (a delete
    /// marker has none).
    pub fn applies(&self, key: &str, tags: &[(String, String)]) -> bool {
        self.enabled
            && self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            && self.tags.iter().all(|t| tags.contains(t))
    }
}

impl ReplicationConfig {
    /// The destinations a version of `key` with `tags` (a delete marker
    /// when `marker`) goes to: for each destination, the rule of highest
    /// priority among those whose filter takes the version decides.
    pub fn destinations(
        &self,
        key: &str,
        tags: &[(String, String)],
        marker: bool,
    ) -> Vec<&Destination> {
        let mut rules: Vec<&ReplicationRule> =
            self.rules.iter().filter(|r| r.applies(key, tags)).collect();
        rules.sort_by_key(|r| std::cmp::Reverse(r.priority));
        let mut decided: Vec<&Destination> = Vec::new();
        let mut out = Vec::new();
        for r in rules {
            if decided
                .iter()
                .any(|d| d.remote == r.destination.remote && d.bucket == r.destination.bucket)
            {
                continue;
            }
            decided.push(&r.destination);
            if !marker || r.delete_markers {
                out.push(&r.destination);
            }
        }
        out
    }

    /// The rules that ask for versions written before them.
    pub fn existing_objects(&self) -> impl Iterator<Item = &ReplicationRule> {
        self.rules
            .iter()
            .filter(|r| r.enabled && r.existing_objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, prio: i32, prefix: Option<&str>, bucket: &str) -> ReplicationRule {
        ReplicationRule {
            id: id.into(),
            priority: prio,
            enabled: true,
            prefix: prefix.map(String::from),
            tags: vec![],
            destination: Destination {
                remote: "dr".into(),
                bucket: bucket.into(),
                storage_class: None,
            },
            delete_markers: false,
            existing_objects: false,
        }
    }

    #[test]
    fn the_highest_priority_rule_of_a_destination_decides() {
        let mut a = rule("a", 1, Some("logs/"), "x");
        a.delete_markers = true;
        let b = rule("b", 2, None, "x");
        let c = rule("c", 0, Some("logs/"), "y");
        let cfg = ReplicationConfig {
            role: String::new(),
            rules: vec![a, b, c],
        };
        let ids = |k: &str, m: bool| -> Vec<String> {
            cfg.destinations(k, &[], m).iter().map(|d| d.id()).collect()
        };
        assert_eq!(ids("logs/1", false), ["dr/x", "dr/y"]);
        assert_eq!(ids("other", false), ["dr/x"]);
        // Rule b (priority 2) decides for x: it keeps no delete markers.
        assert!(ids("logs/1", true).is_empty());
    }

    #[test]
    fn tag_filters_and_disabled_rules() {
        let mut a = rule("a", 1, None, "x");
        a.tags = vec![("k".into(), "v".into())];
        let mut b = rule("b", 1, None, "y");
        b.enabled = false;
        let cfg = ReplicationConfig {
            role: String::new(),
            rules: vec![a, b],
        };
        assert!(cfg.destinations("k", &[], false).is_empty());
        let t = [("k".to_string(), "v".to_string())];
        assert_eq!(cfg.destinations("k", &t, false).len(), 1);
    }

    #[test]
    fn arns_round_trip() {
        let arn = destination_arn("dr-site", "photos");
        assert_eq!(arn, "arn:garage:s3:::dr-site/photos");
        assert_eq!(parse_destination_arn(&arn), Some(("dr-site", "photos")));
        for bad in [
            "arn:aws:s3:::photos",
            "arn:garage:s3:::x",
            "arn:garage:s3:::a b/c",
        ] {
            assert_eq!(parse_destination_arn(bad), None, "{bad}");
        }
    }
}
