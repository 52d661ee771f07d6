//! Buckets, by id (a random 32-byte id; names are aliases, see
//! `bucket_alias_table`). One partition holds them all (partition key
//! [`EmptyKey`], sort key the id), so listing buckets is one range read.

use garage_table::{EmptyKey, Entry, Replication, TableSchema};
use garage_util::crdt::{Bool, Crdt, Deletable, Lww, LwwMap};
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};

use crate::access::BucketAccess;
use crate::notify::config::NotificationConfig;
use crate::object_lock::DefaultRetention;
use crate::permission::BucketKeyPerm;
use crate::replication::config::ReplicationConfig;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub id: Uuid,
    pub state: Deletable<BucketParams>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct BucketParams {
    /// Milliseconds since the epoch.
    pub creation_date: u64,
    /// Keys that may use the bucket.
    pub authorized_keys: LwwMap<String, BucketKeyPerm>,
    /// Global names (`true`: present).
    pub aliases: LwwMap<String, bool>,
    /// Names in one key's namespace: (key id, name).
    pub local_aliases: LwwMap<(String, String), bool>,
    pub website_config: Lww<Option<WebsiteConfig>>,
    /// The website switch: the web endpoint serves the bucket when this is
    /// on and it has a website configuration. `garage bucket website
    /// --deny` turns it off (keeping the configuration); `--allow` and
    /// PutBucketWebsite turn it on. On by default, so that a website
    /// configuration alone makes a bucket served, as in S3. Absent in
    /// older entries, where the configuration alone meant served.
    #[serde(default = "website_on")]
    pub website_access: Lww<bool>,
    pub cors_config: Lww<Option<Vec<CorsRule>>>,
    pub quotas: Lww<BucketQuotas>,
    /// Added with lifecycle support: absent in older entries.
    #[serde(default = "no_lifecycle")]
    pub lifecycle_config: Lww<Option<Vec<LifecycleRule>>>,
    /// The bucket's tags (PutBucketTagging; `None`: no tag set). Absent
    /// in older entries.
    #[serde(default = "no_tags")]
    pub tags: Lww<Option<Vec<(String, String)>>>,
    /// PutBucketVersioning. Absent in older entries: off.
    #[serde(default = "versioning_off")]
    pub versioning: Lww<Versioning>,
    /// Object lock: once enabled, never off again (and versioning stays
    /// enabled). Absent in older entries: off.
    #[serde(default)]
    pub object_lock: Bool,
    /// The default retention of new versions (PutObjectLockConfiguration).
    #[serde(default = "no_default_retention")]
    pub default_retention: Lww<Option<DefaultRetention>>,
    /// Default encryption of new objects (PutBucketEncryption). Absent in
    /// older entries: none.
    #[serde(default = "no_default_encryption")]
    pub encryption: Lww<Option<DefaultEncryption>>,
    /// ACL, policy, ownership controls, public access block (see
    /// [`crate::access`]). Absent in older entries: the defaults.
    #[serde(default)]
    pub access: BucketAccess,
    /// The storage class of writes that name none (`None`: `STANDARD`):
    /// an erasure-coded class of the layout. Absent in older entries.
    #[serde(default = "no_default_class")]
    pub default_storage_class: Lww<Option<String>>,
    /// Server access logging (PutBucketLogging). Absent in older entries:
    /// off.
    #[serde(default = "no_logging")]
    pub logging: Lww<Option<BucketLogging>>,
    /// The storage classes writes to the bucket may use (`None`: any the
    /// layout offers), `garage bucket set-placement`. Absent in older
    /// entries, and left out while never set, so that a bucket that does
    /// not use it is stored in the bytes v0.2.0 reads (set only once the
    /// cluster allows `placement-classes`).
    #[serde(default = "no_class_limit")]
    pub allowed_storage_classes: Lww<Option<Vec<String>>>,
    /// Bucket notifications (PutBucketNotificationConfiguration). Absent
    /// in older entries, and left out while never set (see
    /// [`BucketParamsOut`]); set only once the cluster allows
    /// `bucket-notifications`.
    #[serde(default = "no_notifications")]
    pub notifications: Lww<Option<NotificationConfig>>,
    /// Bucket replication (PutBucketReplication). Absent in older entries,
    /// and left out while never set (see [`BucketParamsOut`]); set only
    /// once the cluster allows `bucket-replication`.
    #[serde(default = "no_replication")]
    pub replication: Lww<Option<ReplicationConfig>>,
}

/// How [`BucketParams`] is written: its fields in their order, the last
/// ones left out while never set (from the end: a positional encoding
/// cannot leave out a field before one it writes), so that a bucket that
/// uses none of them is stored in the bytes v0.2.0 reads. They are set
/// only once the cluster allows their features (`placement-classes`,
/// `bucket-notifications`, `bucket-replication`).
#[derive(Serialize)]
#[serde(rename = "BucketParams")]
struct BucketParamsOut<'a> {
    creation_date: &'a u64,
    authorized_keys: &'a LwwMap<String, BucketKeyPerm>,
    aliases: &'a LwwMap<String, bool>,
    local_aliases: &'a LwwMap<(String, String), bool>,
    website_config: &'a Lww<Option<WebsiteConfig>>,
    website_access: &'a Lww<bool>,
    cors_config: &'a Lww<Option<Vec<CorsRule>>>,
    quotas: &'a Lww<BucketQuotas>,
    lifecycle_config: &'a Lww<Option<Vec<LifecycleRule>>>,
    tags: &'a Lww<Option<Vec<(String, String)>>>,
    versioning: &'a Lww<Versioning>,
    object_lock: &'a Bool,
    default_retention: &'a Lww<Option<DefaultRetention>>,
    encryption: &'a Lww<Option<DefaultEncryption>>,
    access: &'a BucketAccess,
    default_storage_class: &'a Lww<Option<String>>,
    logging: &'a Lww<Option<BucketLogging>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_storage_classes: Option<&'a Lww<Option<Vec<String>>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notifications: Option<&'a Lww<Option<NotificationConfig>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replication: Option<&'a Lww<Option<ReplicationConfig>>>,
}

impl Serialize for BucketParams {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Each trailing field is written if it or one after it is set.
        let no_replication = is_no_replication(&self.replication);
        let no_notifications = no_replication && is_no_notifications(&self.notifications);
        let tail_unset = no_notifications && is_no_class_limit(&self.allowed_storage_classes);
        BucketParamsOut {
            creation_date: &self.creation_date,
            authorized_keys: &self.authorized_keys,
            aliases: &self.aliases,
            local_aliases: &self.local_aliases,
            website_config: &self.website_config,
            website_access: &self.website_access,
            cors_config: &self.cors_config,
            quotas: &self.quotas,
            lifecycle_config: &self.lifecycle_config,
            tags: &self.tags,
            versioning: &self.versioning,
            object_lock: &self.object_lock,
            default_retention: &self.default_retention,
            encryption: &self.encryption,
            access: &self.access,
            default_storage_class: &self.default_storage_class,
            logging: &self.logging,
            allowed_storage_classes: (!tail_unset).then_some(&self.allowed_storage_classes),
            notifications: (!no_notifications).then_some(&self.notifications),
            replication: (!no_replication).then_some(&self.replication),
        }
        .serialize(s)
    }
}

fn no_replication() -> Lww<Option<ReplicationConfig>> {
    Lww::raw(0, None)
}

fn is_no_replication(l: &Lww<Option<ReplicationConfig>>) -> bool {
    l.timestamp() == 0 && l.get().is_none()
}

fn no_notifications() -> Lww<Option<NotificationConfig>> {
    Lww::raw(0, None)
}

fn is_no_notifications(l: &Lww<Option<NotificationConfig>>) -> bool {
    l.timestamp() == 0 && l.get().is_none()
}

fn no_class_limit() -> Lww<Option<Vec<String>>> {
    Lww::raw(0, None)
}

fn is_no_class_limit(l: &Lww<Option<Vec<String>>>) -> bool {
    l.timestamp() == 0 && l.get().is_none()
}

/// Where a bucket's server access logs go.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketLogging {
    /// The target bucket's id, and its name as given (for GetBucketLogging).
    pub target_bucket: Uuid,
    pub target_name: String,
    pub target_prefix: String,
    /// The key format: simple (`None`) or partitioned by date.
    pub partitioned: Option<PartitionDateSource>,
}

/// Which date a partitioned log key carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PartitionDateSource {
    /// When the logged requests were made.
    EventTime,
    /// When the log object is written.
    DeliveryTime,
}

fn no_logging() -> Lww<Option<BucketLogging>> {
    Lww::raw(0, None)
}

fn no_default_class() -> Lww<Option<String>> {
    Lww::raw(0, None)
}

/// A bucket's default encryption: SSE-S3, or SSE-KMS with a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DefaultEncryption {
    /// Echoed as set, and given to SSE-KMS objects (S3 Bucket Keys save
    /// calls to an external KMS; the cluster's keys need none).
    pub bucket_key_enabled: bool,
    /// SSE-KMS (`aws:kms`) instead of SSE-S3.
    #[serde(default)]
    pub kms: bool,
    /// The KMS key named (id, alias or ARN); none: the default `aws/s3`.
    #[serde(default)]
    pub kms_key_id: Option<String>,
}

fn no_default_encryption() -> Lww<Option<DefaultEncryption>> {
    Lww::raw(0, None)
}

fn no_default_retention() -> Lww<Option<DefaultRetention>> {
    Lww::raw(0, None)
}

/// A bucket's versioning, as S3 has it: off until it is first enabled,
/// then enabled or suspended, never off again.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Versioning {
    #[default]
    Off,
    Enabled,
    Suspended,
}

fn versioning_off() -> Lww<Versioning> {
    Lww::raw(0, Versioning::Off)
}

fn no_tags() -> Lww<Option<Vec<(String, String)>>> {
    Lww::raw(0, None)
}

fn website_on() -> Lww<bool> {
    Lww::raw(0, true)
}

fn no_lifecycle() -> Lww<Option<Vec<LifecycleRule>>> {
    Lww::raw(0, None)
}

/// A bucket's website configuration: either index (and error) documents
/// with optional routing rules, or a redirection of every request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WebsiteConfig {
    /// `None` only with `redirect_all` (older entries always have one).
    pub index_document: Option<String>,
    pub error_document: Option<String>,
    #[serde(default)]
    pub redirect_all: Option<RedirectAll>,
    #[serde(default)]
    pub routing_rules: Vec<RoutingRule>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RedirectAll {
    pub host_name: String,
    /// `http` or `https`; `None`: the request's.
    pub protocol: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoutingRule {
    pub condition: Option<RoutingCondition>,
    pub redirect: Redirect,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoutingCondition {
    pub http_error_code: Option<u16>,
    pub key_prefix: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Redirect {
    pub host_name: Option<String>,
    pub http_redirect_code: Option<u16>,
    pub protocol: Option<String>,
    /// At most one of `replace_key_prefix_with` and `replace_key_with`.
    pub replace_key_prefix_with: Option<String>,
    pub replace_key_with: Option<String>,
}

/// One rule of a bucket's lifecycle configuration.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LifecycleRule {
    pub id: Option<String>,
    pub enabled: bool,
    pub filter: LifecycleFilter,
    pub expiration: Option<LifecycleExpiration>,
    /// Abort multipart uploads this many days after their creation.
    pub abort_incomplete_mpu_days: Option<u32>,
    /// NoncurrentVersionExpiration. Absent in older entries.
    #[serde(default)]
    pub noncurrent_expiration: Option<NoncurrentExpiration>,
    /// ExpiredObjectDeleteMarker: a delete marker that is a key's only
    /// version goes. Absent in older entries.
    #[serde(default)]
    pub expired_delete_marker: bool,
    /// Transitions of the current data to other storage classes. Absent
    /// in older entries: none.
    #[serde(default)]
    pub transitions: Vec<LifecycleTransition>,
    /// NoncurrentVersionTransitions: noncurrent versions move to other
    /// storage classes. Absent in older entries: none. A rule with one
    /// cannot be decoded by v0.2.0, so it is accepted only once the cluster
    /// is finalized at v0.3.0 (the feature gate
    /// `NONCURRENT_VERSION_TRANSITION`); the field is the struct's last and
    /// is not written when empty, so that every other rule keeps the bytes
    /// v0.2.0 reads (the one exception to "no field skipped", see
    /// `garage_table::encoding`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub noncurrent_transitions: Vec<NoncurrentTransition>,
}

/// A NoncurrentVersionTransition: a version moves to `class` `days` after
/// it stopped being current, except the `keep` newest noncurrent versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NoncurrentTransition {
    pub days: u32,
    pub keep: Option<u32>,
    pub class: String,
}

/// A Transition: from `when` on (counted from the object's creation, as
/// an Expiration is), the object's blocks are re-encoded in `class`, an
/// erasure-coded class of the layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LifecycleTransition {
    pub when: LifecycleExpiration,
    pub class: String,
}

/// Noncurrent versions go this many days after they stopped being
/// current, except the `keep` newest of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NoncurrentExpiration {
    pub days: u32,
    pub keep: Option<u32>,
}

/// Which objects a rule applies to: all of the conditions given.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LifecycleFilter {
    pub prefix: Option<String>,
    /// Strictly larger than this many bytes.
    pub size_gt: Option<u64>,
    /// Strictly smaller than this many bytes.
    pub size_lt: Option<u64>,
    /// Tags the object must all have (key and value). Absent in older
    /// entries: none.
    #[serde(default)]
    pub tags: Vec<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LifecycleExpiration {
    /// This many days after the object's creation (rounded up to the next
    /// midnight UTC, as S3 does).
    AfterDays(u32),
    /// From this instant on (milliseconds since the epoch, a midnight UTC).
    AtDate(u64),
}

/// One day in milliseconds.
pub const DAY_MSEC: u64 = 86_400_000;

impl LifecycleFilter {
    /// Whether an object of this key, size and tag set matches.
    pub fn matches(&self, key: &str, size: u64, tags: &[(String, String)]) -> bool {
        self.matches_key(key)
            && self.size_gt.is_none_or(|g| size > g)
            && self.size_lt.is_none_or(|l| size < l)
            && self.tags.iter().all(|t| tags.contains(t))
    }

    /// Whether a key matches the prefix (an upload has no size yet).
    pub fn matches_key(&self, key: &str) -> bool {
        self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
    }
}

/// The first midnight UTC at or after `ms` plus `days` days: when S3 acts
/// on a rule with Days for something created at `ms`.
pub fn days_after(ms: u64, days: u32) -> u64 {
    (ms + days as u64 * DAY_MSEC).div_ceil(DAY_MSEC) * DAY_MSEC
}

impl LifecycleExpiration {
    /// Whether an object created at `created` (ms) has expired at `now`.
    pub fn expired(&self, created: u64, now: u64) -> bool {
        match *self {
            LifecycleExpiration::AfterDays(d) => now >= days_after(created, d),
            LifecycleExpiration::AtDate(t) => now >= t,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CorsRule {
    pub id: Option<String>,
    pub max_age_seconds: Option<u64>,
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketQuotas {
    pub max_size: Option<u64>,
    pub max_objects: Option<u64>,
}

impl BucketParams {
    /// The website configuration, when the web endpoint serves the bucket.
    pub fn website(&self) -> Option<&WebsiteConfig> {
        if *self.website_access.get() {
            self.website_config.get().as_ref()
        } else {
            None
        }
    }
}

impl Crdt for BucketParams {
    fn merge(&mut self, other: &Self) {
        self.creation_date = self.creation_date.min(other.creation_date);
        self.authorized_keys.merge(&other.authorized_keys);
        self.aliases.merge(&other.aliases);
        self.local_aliases.merge(&other.local_aliases);
        self.website_config.merge(&other.website_config);
        self.website_access.merge(&other.website_access);
        self.cors_config.merge(&other.cors_config);
        self.quotas.merge(&other.quotas);
        self.lifecycle_config.merge(&other.lifecycle_config);
        self.tags.merge(&other.tags);
        self.versioning.merge(&other.versioning);
        self.object_lock.merge(&other.object_lock);
        self.default_retention.merge(&other.default_retention);
        self.encryption.merge(&other.encryption);
        self.access.merge(&other.access);
        self.default_storage_class
            .merge(&other.default_storage_class);
        self.logging.merge(&other.logging);
        self.allowed_storage_classes
            .merge(&other.allowed_storage_classes);
        self.notifications.merge(&other.notifications);
        self.replication.merge(&other.replication);
    }
}

impl Bucket {
    pub fn new(id: Uuid) -> Self {
        Self {
            id,
            state: Deletable::Present(BucketParams {
                creation_date: garage_util::time::now_msec(),
                authorized_keys: LwwMap::new(),
                aliases: LwwMap::new(),
                local_aliases: LwwMap::new(),
                website_config: Lww::new(None),
                website_access: website_on(),
                cors_config: Lww::new(None),
                quotas: Lww::new(BucketQuotas::default()),
                lifecycle_config: Lww::new(None),
                tags: no_tags(),
                versioning: versioning_off(),
                object_lock: Bool::new(false),
                default_retention: no_default_retention(),
                encryption: no_default_encryption(),
                access: BucketAccess::default(),
                default_storage_class: no_default_class(),
                logging: no_logging(),
                allowed_storage_classes: no_class_limit(),
                notifications: no_notifications(),
                replication: no_replication(),
            }),
        }
    }

    pub fn deleted(id: Uuid) -> Self {
        Self {
            id,
            state: Deletable::Deleted,
        }
    }

    pub fn params(&self) -> Option<&BucketParams> {
        self.state.get()
    }

    pub fn params_mut(&mut self) -> Option<&mut BucketParams> {
        self.state.get_mut()
    }

    /// The global names of the bucket.
    pub fn global_aliases(&self) -> Vec<String> {
        self.params()
            .map(|p| {
                p.aliases
                    .items()
                    .filter(|(_, _, on)| **on)
                    .map(|(n, _, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// (key id, name) of the bucket's local aliases.
    pub fn local_aliases(&self) -> Vec<(String, String)> {
        self.params()
            .map(|p| {
                p.local_aliases
                    .items()
                    .filter(|(_, _, on)| **on)
                    .map(|(n, _, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Crdt for Bucket {
    fn merge(&mut self, other: &Self) {
        self.state.merge(&other.state);
    }
}

impl Entry<EmptyKey, Uuid> for Bucket {
    fn partition_key(&self) -> &EmptyKey {
        &EmptyKey
    }
    fn sort_key(&self) -> &Uuid {
        &self.id
    }
    fn is_tombstone(&self) -> bool {
        self.state.is_deleted()
    }
}

pub struct BucketTable;

impl TableSchema for BucketTable {
    const TABLE_NAME: &'static str = "bucket";
    /// Read by every request: every node holds it and reads it locally.
    const REPLICATION: Replication = Replication::Full;
    type P = EmptyKey;
    type S = Uuid;
    type E = Bucket;
    type Filter = ();

    fn matches_filter(_: &Bucket, _: &()) -> bool {
        true
    }
}

/// Checks a bucket name against S3's rules (3-63 characters: lowercase
/// letters, digits, `-` and `.`; starting and ending with a letter or digit;
/// not an IP address).
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    // Each dot-separated label starts and ends with a letter or digit (a
    // DNS name): no "..", ".-" or "-.".
    let labels_ok = name
        .split('.')
        .all(|l| ends_ok(l.chars().next()) && ends_ok(l.chars().last()));
    if !(3..=63).contains(&name.len()) || !ok_chars || !labels_ok {
        return Err(format!(
            "invalid bucket name {name:?}: use 3 to 63 lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit"
        ));
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!(
            "invalid bucket name {name:?}: it must not look like an IP address"
        ));
    }
    const RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
    const RESERVED_SUFFIXES: [&str; 5] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];
    if let Some(p) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Err(format!(
            "invalid bucket name {name:?}: names starting with {p:?} are reserved"
        ));
    }
    if let Some(x) = RESERVED_SUFFIXES.iter().find(|x| name.ends_with(*x)) {
        return Err(format!(
            "invalid bucket name {name:?}: names ending with {x:?} are reserved"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::check_laws;

    fn round_trip(b: &Bucket) -> Bucket {
        let bytes = garage_table::encoding::encode(b);
        garage_table::encoding::decode(&bytes).expect("decodes")
    }

    #[test]
    fn the_trailing_fields_are_written_only_when_set_and_read_back() {
        // The compact format: an array of v0.2.0's 17 fields (array16
        // header 0xdc, then the count), whatever is left unset.
        let fields = |p: &BucketParams| {
            let v = rmp_serde::to_vec(p).unwrap();
            assert_eq!(v[0], 0xdc, "an array16");
            u16::from_be_bytes([v[1], v[2]])
        };
        let mut b = Bucket::new(Uuid::from([2; 32]));
        assert_eq!(fields(b.params().unwrap()), 17);
        let plain = garage_table::encoding::encode(&b);
        assert_eq!(round_trip(&b), b);
        // Notifications without a class limit: the limit is written too
        // (a positional encoding cannot leave it out before them).
        let config = NotificationConfig {
            rules: vec![crate::notify::config::NotificationRule {
                id: "r".into(),
                topic: "t".into(),
                arn: "arn:aws:sns:garage::t".into(),
                queue: false,
                events: vec!["s3:ObjectCreated:*".into()],
                prefix: None,
                suffix: Some(".jpg".into()),
            }],
        };
        b.params_mut().unwrap().notifications.update(Some(config));
        assert_eq!(fields(b.params().unwrap()), 19);
        let with = garage_table::encoding::encode(&b);
        assert!(with.len() > plain.len());
        assert_eq!(round_trip(&b), b);
        // Field names (format 1) round-trip too.
        let named = rmp_serde::to_vec_named(b.params().unwrap()).unwrap();
        assert_eq!(
            &rmp_serde::from_slice::<BucketParams>(&named).unwrap(),
            b.params().unwrap()
        );
        // Replication alone: the two fields before it are written too.
        let mut r = Bucket::new(Uuid::from([4; 32]));
        r.params_mut()
            .unwrap()
            .replication
            .update(Some(ReplicationConfig::default()));
        assert_eq!(fields(r.params().unwrap()), 20);
        assert_eq!(round_trip(&r), r);
        // A class limit alone.
        let mut c = Bucket::new(Uuid::from([3; 32]));
        c.params_mut()
            .unwrap()
            .allowed_storage_classes
            .update(Some(vec!["EU".into()]));
        assert_eq!(fields(c.params().unwrap()), 18);
        assert_eq!(round_trip(&c), c);
    }

    fn bucket() -> impl Strategy<Value = Bucket> {
        (
            0u8..3,
            0u64..4,
            proptest::collection::vec((0u8..3, 0u64..3, any::<bool>()), 0..3),
            0u64..3,
        )
            .prop_map(|(kind, date, aliases, qts)| {
                let id = Uuid::from([1; 32]);
                if kind == 0 {
                    return Bucket::deleted(id);
                }
                let mut b = Bucket::new(id);
                let p = b.params_mut().unwrap();
                p.creation_date = date;
                for (n, ts, on) in aliases {
                    p.aliases.merge_raw(format!("b{n}"), ts, on);
                }
                p.quotas = Lww::raw(
                    qts,
                    BucketQuotas {
                        max_size: Some(qts),
                        max_objects: None,
                    },
                );
                p.website_config = Lww::raw(0, None);
                p.website_access = Lww::raw(qts, qts != 1);
                p.cors_config = Lww::raw(0, None);
                p.lifecycle_config = Lww::raw(0, None);
                b
            })
    }

    proptest! {
        #[test]
        fn bucket_merge_laws(a in bucket(), b in bucket(), c in bucket()) {
            check_laws(&a, &b, &c);
        }
    }

    #[test]
    fn bucket_names_follow_s3_rules() {
        for ok in ["abc", "my-bucket.2", "0ab", "a-b.c-d", "xn-a", "s3alias-b"] {
            assert!(check_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "a.-b",
            "a-.b",
            "a.b-",
            "192.168.1.1",
            "xn--abc",
            "sthree-abc",
            "my-s3alias",
            "b--ol-s3",
            "b.mrap",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(bad).is_err(), "{bad}");
        }
    }

    /// A bucket entry written before website redirects and lifecycle
    /// rules existed (a website with index and error documents, no CORS).
    const OLD_BUCKET: &str = "0182a26964c4200707070707070707070707070707070707070707070707070707070707070707a5737461746581a750726573656e7487ad6372656174696f6e5f64617465cf0000018bcfe56800af617574686f72697a65645f6b65797381a7656e747269657390a7616c696173657381a7656e74726965739193a47369746505c3ad6c6f63616c5f616c696173657381a7656e747269657390ae776562736974655f636f6e66696782a274730aa576616c756582ae696e6465785f646f63756d656e74aa696e6465782e68746d6cae6572726f725f646f63756d656e74a86572722e68746d6cab636f72735f636f6e66696782a274730ba576616c7565c0a671756f74617382a274730ca576616c756582a86d61785f73697a65c0ab6d61785f6f626a65637473c0";

    #[test]
    fn old_bucket_entries_still_decode() {
        let bytes = hex::decode(OLD_BUCKET).unwrap();
        let b: Bucket = garage_table::encoding::decode(&bytes).unwrap();
        assert_eq!(b.id, Uuid::from([7; 32]));
        let p = b.params().unwrap();
        assert_eq!(p.creation_date, 1_700_000_000_000);
        assert_eq!(b.global_aliases(), vec!["site".to_string()]);
        let w = p.website_config.get().clone().unwrap();
        assert_eq!(w.index_document.as_deref(), Some("index.html"));
        assert_eq!(w.error_document.as_deref(), Some("err.html"));
        assert_eq!(w.redirect_all, None);
        assert!(w.routing_rules.is_empty());
        assert_eq!(p.website_config.timestamp(), 10);
        // Served, as before the website switch existed.
        assert_eq!(
            p.website().and_then(|w| w.index_document.as_deref()),
            Some("index.html")
        );
        let mut denied = b.clone();
        denied.params_mut().unwrap().website_access.update(false);
        let mut merged = b.clone();
        merged.merge(&denied);
        assert!(merged.params().unwrap().website().is_none());
        assert_eq!(*p.lifecycle_config.get(), None);
        assert_eq!(p.lifecycle_config.timestamp(), 0);
        // Any lifecycle configuration set later wins over the missing one.
        let mut newer = b.clone();
        newer
            .params_mut()
            .unwrap()
            .lifecycle_config
            .update(Some(Vec::new()));
        let mut merged = b.clone();
        merged.merge(&newer);
        assert_eq!(
            *merged.params().unwrap().lifecycle_config.get(),
            Some(Vec::new())
        );
        // And a new entry round-trips.
        let again: Bucket =
            garage_table::encoding::decode(&garage_table::encoding::encode(&newer)).unwrap();
        assert_eq!(again, newer);
    }

    #[test]
    fn lifecycle_dates_and_filters() {
        // Created one minute after midnight: one day later means the
        // second midnight after creation.
        let created = 10 * DAY_MSEC + 60_000;
        let e = LifecycleExpiration::AfterDays(1);
        assert!(!e.expired(created, 11 * DAY_MSEC + 60_000));
        assert!(!e.expired(created, 12 * DAY_MSEC - 1));
        assert!(e.expired(created, 12 * DAY_MSEC));
        assert_eq!(days_after(10 * DAY_MSEC, 2), 12 * DAY_MSEC);
        let d = LifecycleExpiration::AtDate(20 * DAY_MSEC);
        assert!(!d.expired(0, 20 * DAY_MSEC - 1));
        assert!(d.expired(0, 20 * DAY_MSEC));
        let f = LifecycleFilter {
            prefix: Some("logs/".into()),
            size_gt: Some(10),
            size_lt: Some(100),
            tags: vec![],
        };
        assert!(f.matches("logs/a", 50, &[]));
        assert!(!f.matches("logs/a", 10, &[]));
        assert!(!f.matches("logs/a", 100, &[]));
        assert!(!f.matches("data/a", 50, &[]));
        assert!(f.matches_key("logs/b"));
        assert!(LifecycleFilter::default().matches("anything", 0, &[]));
        // Tags: every tag of the filter, with its value.
        let t = |k: &str, v: &str| (k.to_string(), v.to_string());
        let tagged = LifecycleFilter {
            tags: vec![t("class", "tmp"), t("team", "a")],
            ..Default::default()
        };
        assert!(tagged.matches("k", 1, &[t("team", "a"), t("x", "y"), t("class", "tmp")]));
        assert!(!tagged.matches("k", 1, &[t("team", "a")]));
        assert!(!tagged.matches("k", 1, &[t("team", "b"), t("class", "tmp")]));
    }

    #[test]
    fn a_rule_without_noncurrent_transitions_keeps_the_bytes_v0_2_0_reads() {
        let mut rule = LifecycleRule {
            id: Some("r".into()),
            enabled: true,
            filter: LifecycleFilter::default(),
            expiration: None,
            abort_incomplete_mpu_days: None,
            noncurrent_expiration: None,
            expired_delete_marker: false,
            transitions: vec![],
            noncurrent_transitions: vec![],
        };
        // The compact format: an array of v0.2.0's 8 fields.
        let old = rmp_serde::to_vec(&rule).unwrap();
        assert_eq!(old[0], 0x98, "a fixarray of 8 elements");
        assert_eq!(rmp_serde::from_slice::<LifecycleRule>(&old).unwrap(), rule);
        // With one: 9 elements, which round-trip (v0.2.0 refuses them,
        // hence the gate).
        rule.noncurrent_transitions = vec![NoncurrentTransition {
            days: 30,
            keep: Some(2),
            class: "STANDARD_IA".into(),
        }];
        let new = rmp_serde::to_vec(&rule).unwrap();
        assert_eq!(new[0], 0x99, "a fixarray of 9 elements");
        assert_eq!(rmp_serde::from_slice::<LifecycleRule>(&new).unwrap(), rule);
        // Field names (format 1) round-trip too.
        let named = rmp_serde::to_vec_named(&rule).unwrap();
        assert_eq!(
            rmp_serde::from_slice::<LifecycleRule>(&named).unwrap(),
            rule
        );
    }
}
