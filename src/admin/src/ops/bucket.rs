//! Buckets: list, info, create, update (website access, quotas), delete,
//! aliases, and the rights of keys on them.

use garage_model::bucket_table::{Bucket, BucketParams, BucketQuotas, WebsiteConfig};
use garage_model::counter_table::{bytes_by_class, Counts, BYTES, OBJECTS, UNFINISHED_UPLOADS};
use garage_model::helper::{HelperError, Metadata};
use garage_model::key_table::Key;
use garage_model::object_table::ObjectFilter;
use garage_model::permission::BucketKeyPerm;
use garage_rpc::layout::classes;
use garage_rpc::layout::LayoutVersion;
use garage_table::EmptyKey;
use garage_util::data::Uuid;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::ApiError;
use super::key::{existing_key, ApiBucketKeyPerm};
use garage_model::garage::Garage;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListBucketsResponseItem {
    pub id: String,
    /// Creation date (RFC 3339).
    pub created: String,
    pub global_aliases: Vec<String>,
    pub local_aliases: Vec<BucketLocalAlias>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketLocalAlias {
    pub access_key_id: String,
    pub alias: String,
}

use garage_util::time::rfc3339;

fn local_aliases(b: &Bucket) -> Vec<BucketLocalAlias> {
    b.local_aliases()
        .into_iter()
        .map(|(access_key_id, alias)| BucketLocalAlias {
            access_key_id,
            alias,
        })
        .collect()
}

/// Every bucket.
pub async fn list_buckets(g: &Garage) -> Result<Vec<ListBucketsResponseItem>, ApiError> {
    let buckets = g.metadata().list_buckets().await?;
    Ok(buckets
        .iter()
        .filter_map(|b| {
            let p = b.params()?;
            Some(ListBucketsResponseItem {
                id: b.id.hex(),
                created: rfc3339(p.creation_date),
                global_aliases: b.global_aliases(),
                local_aliases: local_aliases(b),
            })
        })
        .collect())
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoResponse {
    pub id: String,
    /// Creation date (RFC 3339).
    pub created: String,
    pub global_aliases: Vec<String>,
    /// Whether the website endpoint serves this bucket.
    pub website_access: bool,
    pub website_config: Option<GetBucketInfoWebsiteResponse>,
    /// Keys with rights on the bucket.
    pub keys: Vec<GetBucketInfoKey>,
    pub objects: i64,
    pub bytes: i64,
    /// Bytes of current data per storage class (`STANDARD`: replicated;
    /// the others erasure-coded), classes holding nothing left out.
    #[serde(default)]
    pub bytes_by_class: std::collections::BTreeMap<String, i64>,
    /// The same bytes as stored on disk, by class: times the class's
    /// copies, or its code's overhead (shard padding aside), per the
    /// current layout.
    #[serde(default)]
    pub disk_bytes_by_class: std::collections::BTreeMap<String, i64>,
    /// The storage class of writes that name none.
    #[serde(default = "standard")]
    pub default_storage_class: String,
    /// The only storage classes writes may use; empty: any.
    #[serde(default)]
    pub allowed_storage_classes: Vec<String>,
    /// Multipart uploads not completed or aborted yet.
    pub unfinished_uploads: i64,
    /// The same count (every unfinished upload is a multipart one here).
    pub unfinished_multipart_uploads: i64,
    pub quotas: ApiBucketQuotas,
    /// S3 versioning: `off` (never enabled), `enabled` or `suspended`.
    pub versioning: String,
    /// S3 object lock: `off`, `enabled`, or `enabled, default
    /// GOVERNANCE|COMPLIANCE N days|years`.
    #[serde(default)]
    pub object_lock: String,
    /// S3 access control beyond key permissions.
    #[serde(default)]
    pub access: GetBucketInfoAccess,
    /// The CORS rules PutBucketCors set, in their order (empty: none).
    #[serde(default)]
    pub cors_rules: Vec<GetBucketInfoCorsRule>,
    /// The lifecycle rules PutBucketLifecycleConfiguration set, in their
    /// order (empty: none).
    #[serde(default)]
    pub lifecycle_rules: Vec<GetBucketInfoLifecycleRule>,
    /// The replication rules PutBucketReplication set, in their order
    /// (empty: none).
    #[serde(default)]
    pub replication_rules: Vec<GetBucketInfoReplicationRule>,
}

fn standard() -> String {
    classes::STANDARD.into()
}

/// One CORS rule of a bucket.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoCorsRule {
    pub id: Option<String>,
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age_seconds: Option<u64>,
}

/// One lifecycle rule of a bucket, in words.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoLifecycleRule {
    pub id: Option<String>,
    pub enabled: bool,
    /// Which objects it applies to, e.g. `prefix "logs/", larger than
    /// 1000 bytes`, or `every object`.
    pub filter: String,
    /// What it does, e.g. `expire 30 days after creation`.
    pub actions: Vec<String>,
}

/// One replication rule of a bucket.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoReplicationRule {
    pub id: String,
    /// Among the rules of one destination that take a version, the
    /// highest decides.
    pub priority: i32,
    pub enabled: bool,
    /// The keys it takes (none: every key).
    pub prefix: Option<String>,
    /// The tags a version must have, as `KEY=VALUE`.
    pub tags: Vec<String>,
    /// Its `Destination.Bucket`: `arn:garage:s3:::REMOTE/BUCKET`.
    pub destination: String,
    /// The storage class the destination's writes name.
    pub storage_class: Option<String>,
    /// Delete markers are replicated too.
    pub delete_markers: bool,
    /// Versions written before the rule are queued when it is set.
    pub existing_objects: bool,
}

impl From<&garage_model::replication::config::ReplicationRule> for GetBucketInfoReplicationRule {
    fn from(r: &garage_model::replication::config::ReplicationRule) -> Self {
        GetBucketInfoReplicationRule {
            id: r.id.clone(),
            priority: r.priority,
            enabled: r.enabled,
            prefix: r.prefix.clone(),
            tags: r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            destination: r.destination.arn(),
            storage_class: r.destination.storage_class.clone(),
            delete_markers: r.delete_markers,
            existing_objects: r.existing_objects,
        }
    }
}

impl From<&garage_model::bucket_table::CorsRule> for GetBucketInfoCorsRule {
    fn from(r: &garage_model::bucket_table::CorsRule) -> Self {
        GetBucketInfoCorsRule {
            id: r.id.clone(),
            allowed_origins: r.allow_origins.clone(),
            allowed_methods: r.allow_methods.clone(),
            allowed_headers: r.allow_headers.clone(),
            expose_headers: r.expose_headers.clone(),
            max_age_seconds: r.max_age_seconds,
        }
    }
}

impl From<&garage_model::bucket_table::LifecycleRule> for GetBucketInfoLifecycleRule {
    fn from(r: &garage_model::bucket_table::LifecycleRule) -> Self {
        use garage_model::bucket_table::LifecycleExpiration;
        let f = &r.filter;
        let mut filter: Vec<String> = Vec::new();
        if let Some(p) = f.prefix.as_ref().filter(|p| !p.is_empty()) {
            filter.push(format!("prefix {p:?}"));
        }
        if let Some(n) = f.size_gt {
            filter.push(format!("larger than {n} bytes"));
        }
        if let Some(n) = f.size_lt {
            filter.push(format!("smaller than {n} bytes"));
        }
        for (k, v) in &f.tags {
            filter.push(format!("tag {k:?}={v:?}"));
        }
        let days = |n: u32| match n {
            1 => "1 day".to_string(),
            n => format!("{n} days"),
        };
        let mut actions = Vec::new();
        match r.expiration {
            Some(LifecycleExpiration::AfterDays(d)) => {
                actions.push(format!("expire {} after creation", days(d)))
            }
            Some(LifecycleExpiration::AtDate(ms)) => {
                actions.push(format!("expire on {}", rfc3339(ms)))
            }
            None => (),
        }
        if r.expired_delete_marker {
            actions.push("remove expired delete markers".into());
        }
        if let Some(n) = r.noncurrent_expiration {
            actions.push(match n.keep {
                Some(k) => format!(
                    "expire noncurrent versions {} after they stop being current, keeping the {k} newest",
                    days(n.days)
                ),
                None => format!(
                    "expire noncurrent versions {} after they stop being current",
                    days(n.days)
                ),
            });
        }
        for t in &r.transitions {
            actions.push(match t.when {
                LifecycleExpiration::AfterDays(d) => {
                    format!("move to {} {} after creation", t.class, days(d))
                }
                LifecycleExpiration::AtDate(ms) => {
                    format!("move to {} on {}", t.class, rfc3339(ms))
                }
            });
        }
        for t in &r.noncurrent_transitions {
            actions.push(match t.keep {
                Some(k) => format!(
                    "move noncurrent versions to {} {} after they stop being current, keeping the {k} newest where they are",
                    t.class,
                    days(t.days)
                ),
                None => format!(
                    "move noncurrent versions to {} {} after they stop being current",
                    t.class,
                    days(t.days)
                ),
            });
        }
        if let Some(d) = r.abort_incomplete_mpu_days {
            actions.push(format!("abort unfinished uploads after {}", days(d)));
        }
        GetBucketInfoLifecycleRule {
            id: r.id.clone(),
            enabled: r.enabled,
            filter: if filter.is_empty() {
                "every object".into()
            } else {
                filter.join(", ")
            },
            actions,
        }
    }
}

/// A bucket's ACL, policy, ownership controls and public access block.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoAccess {
    /// The canned ACL: `private`, `public-read`, `public-read-write`,
    /// `authenticated-read`.
    pub acl: String,
    /// The bucket policy (JSON), if any.
    pub policy: Option<String>,
    /// `BucketOwnerEnforced`, `BucketOwnerPreferred`, `ObjectWriter`, or
    /// null (not set).
    pub object_ownership: Option<String>,
    /// The public access block settings that are on (e.g.
    /// `BlockPublicAcls`); null: not set.
    pub public_access_block: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoWebsiteResponse {
    pub index_document: Option<String>,
    pub error_document: Option<String>,
    /// Where every request is redirected (`protocol://host`), when the
    /// configuration is a redirect-all one.
    #[serde(default)]
    pub redirect_all_to: Option<String>,
    /// How many routing rules PutBucketWebsite set.
    #[serde(default)]
    pub routing_rules: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetBucketInfoKey {
    pub access_key_id: String,
    pub name: String,
    pub permissions: ApiBucketKeyPerm,
    /// The key's aliases for this bucket.
    pub bucket_local_aliases: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiBucketQuotas {
    /// Bytes; null: no limit.
    pub max_size: Option<u64>,
    /// Null: no limit.
    pub max_objects: Option<u64>,
}

/// What GetBucketInfo (and `garage bucket info`) say about a bucket.
pub async fn bucket_info(g: &Garage, b: &Bucket) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let p = b
        .params()
        .ok_or_else(|| ApiError::NoSuchBucket(format!("bucket {} is deleted", b.id.hex())))?;
    let counts = bucket_counts(g, &b.id).await?;
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    let mut keys = Vec::new();
    for (key_id, _, perm) in p.authorized_keys.items() {
        if !perm.is_any() {
            continue;
        }
        let name = match m.get_key(key_id).await {
            Ok(k) => k.name().to_string(),
            Err(_) => String::new(),
        };
        keys.push(GetBucketInfoKey {
            access_key_id: key_id.clone(),
            name,
            permissions: (*perm).into(),
            bucket_local_aliases: b
                .local_aliases()
                .into_iter()
                .filter(|(k, _)| k == key_id)
                .map(|(_, n)| n)
                .collect(),
        });
    }
    let q = p.quotas.get();
    Ok(GetBucketInfoResponse {
        id: b.id.hex(),
        created: rfc3339(p.creation_date),
        global_aliases: b.global_aliases(),
        website_access: website_access(p),
        website_config: p
            .website_config
            .get()
            .as_ref()
            .map(|w| GetBucketInfoWebsiteResponse {
                index_document: w.index_document.clone(),
                error_document: w.error_document.clone(),
                redirect_all_to: w.redirect_all.as_ref().map(|r| {
                    format!(
                        "{}://{}",
                        r.protocol.as_deref().unwrap_or("(same protocol)"),
                        r.host_name
                    )
                }),
                routing_rules: w.routing_rules.len() as u64,
            }),
        keys,
        objects: count(OBJECTS),
        bytes: count(BYTES),
        bytes_by_class: bytes_by_class(&counts),
        disk_bytes_by_class: disk_bytes(g, &bytes_by_class(&counts)),
        default_storage_class: p
            .default_storage_class
            .get()
            .clone()
            .unwrap_or_else(standard),
        allowed_storage_classes: p.allowed_storage_classes.get().clone().unwrap_or_default(),
        unfinished_uploads: count(UNFINISHED_UPLOADS),
        unfinished_multipart_uploads: count(UNFINISHED_UPLOADS),
        quotas: ApiBucketQuotas {
            max_size: q.max_size,
            max_objects: q.max_objects,
        },
        versioning: match p.versioning.get() {
            garage_model::bucket_table::Versioning::Off => "off",
            garage_model::bucket_table::Versioning::Enabled => "enabled",
            garage_model::bucket_table::Versioning::Suspended => "suspended",
        }
        .into(),
        object_lock: lock_summary(p),
        access: access_summary(&p.access),
        cors_rules: p
            .cors_config
            .get()
            .iter()
            .flatten()
            .map(Into::into)
            .collect(),
        lifecycle_rules: p
            .lifecycle_config
            .get()
            .iter()
            .flatten()
            .map(Into::into)
            .collect(),
        replication_rules: p
            .replication
            .get()
            .iter()
            .flat_map(|c| c.rules.iter())
            .map(Into::into)
            .collect(),
    })
}

fn access_summary(a: &garage_model::access::BucketAccess) -> GetBucketInfoAccess {
    GetBucketInfoAccess {
        acl: a.acl.get().as_str().into(),
        policy: a.policy.get().clone(),
        object_ownership: a.ownership.get().map(|o| o.as_str().into()),
        public_access_block: a.public_access_block.get().map(|b| {
            [
                (b.block_public_acls, "BlockPublicAcls"),
                (b.ignore_public_acls, "IgnorePublicAcls"),
                (b.block_public_policy, "BlockPublicPolicy"),
                (b.restrict_public_buckets, "RestrictPublicBuckets"),
            ]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| n.to_string())
            .collect()
        }),
    }
}

/// How `bucket info` and GetBucketInfo describe a bucket's object lock.
fn lock_summary(p: &garage_model::bucket_table::BucketParams) -> String {
    use garage_model::object_lock::Period;
    if !p.object_lock.get() {
        return "off".into();
    }
    match p.default_retention.get() {
        None => "enabled".into(),
        Some(d) => {
            let period = match d.period {
                Period::Days(n) => format!("{n} days"),
                Period::Years(n) => format!("{n} years"),
            };
            format!("enabled, default {} {period}", d.mode.as_str())
        }
    }
}

/// The bucket with exactly this id.
async fn bucket_by_id(m: &Metadata, id: &str) -> Result<Bucket, ApiError> {
    let parsed = id
        .parse::<Uuid>()
        .map_err(|_| ApiError::bad(format!("{id:?} is not a bucket id (64 hexadecimal digits)")))?;
    let b = m.get_bucket(id).await?;
    if b.id != parsed {
        return Err(ApiError::NoSuchBucket(format!("no bucket with id {id}")));
    }
    Ok(b)
}

#[derive(Debug, Clone, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct GetBucketInfoQuery {
    /// The bucket's full id.
    pub id: Option<String>,
    /// One of its global aliases.
    pub global_alias: Option<String>,
    /// A global alias, or a unique prefix of the id.
    pub search: Option<String>,
}

/// One bucket, by `id`, `globalAlias` or `search`.
pub async fn get_bucket_info(
    g: &Garage,
    q: GetBucketInfoQuery,
) -> Result<GetBucketInfoResponse, ApiError> {
    let b = find_bucket(g, q).await?;
    bucket_info(g, &b).await
}

/// The bucket `q` names: by `id`, `globalAlias` or `search` (exactly
/// one).
pub async fn find_bucket(g: &Garage, q: GetBucketInfoQuery) -> Result<Bucket, ApiError> {
    let m = g.metadata();
    let b = match (q.id, q.global_alias, q.search) {
        (Some(id), None, None) => bucket_by_id(&m, &id).await?,
        (None, Some(alias), None) => {
            let id = m
                .resolve_global_alias(&alias)
                .await?
                .ok_or_else(|| ApiError::NoSuchBucket(format!("no bucket named {alias:?}")))?;
            bucket_by_id(&m, &id.hex()).await?
        }
        (None, None, Some(s)) => m.get_bucket(&s).await?,
        _ => {
            return Err(ApiError::bad(
                "give exactly one of the id, globalAlias and search query parameters",
            ))
        }
    };
    Ok(b)
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateBucketRequest {
    /// A global name for the bucket.
    #[serde(default)]
    pub global_alias: Option<String>,
    /// A name in one key's namespace (and that key's rights on the bucket).
    #[serde(default)]
    pub local_alias: Option<CreateBucketLocalAlias>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateBucketLocalAlias {
    pub access_key_id: String,
    pub alias: String,
    #[serde(default)]
    pub allow: ApiBucketKeyPerm,
}

/// Creates a bucket with a global alias, a local alias, or both.
pub async fn create_bucket(
    g: &Garage,
    req: CreateBucketRequest,
) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let local_key = match &req.local_alias {
        Some(la) => Some(existing_key(&m, &la.access_key_id).await?),
        None => None,
    };
    let b = match (&req.global_alias, &req.local_alias, &local_key) {
        (Some(name), local, key) => {
            // Both names are checked before anything is created: a taken
            // local alias must not leave a bucket behind.
            if let (Some(la), Some(k)) = (local, key) {
                m.check_local_alias_free(k, &la.alias).await?;
            }
            let b = m.create_bucket(name).await?;
            if let (Some(la), Some(k)) = (local, key) {
                m.set_local_alias(b.id, k, &la.alias).await?;
            }
            b
        }
        (None, Some(la), Some(k)) => m.create_bucket_local(k, &la.alias).await?,
        _ => {
            return Err(ApiError::bad(
                "give a globalAlias, a localAlias, or both: a bucket needs a name",
            ))
        }
    };
    if let (Some(la), Some(k)) = (&req.local_alias, &local_key) {
        let perm: garage_model::permission::BucketKeyPerm = la.allow.into();
        if perm.is_any() {
            m.set_permissions(b.id, &k.key_id, perm).await?;
        }
    }
    tracing::info!("admin: bucket {} created", b.id.hex());
    let b = bucket_by_id(&m, &b.id.hex()).await?;
    bucket_info(g, &b).await
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateBucketRequestBody {
    #[serde(default)]
    pub website_access: Option<UpdateBucketWebsiteAccess>,
    /// New quotas (both fields are set: null removes a limit).
    #[serde(default)]
    pub quotas: Option<ApiBucketQuotas>,
    /// The storage class of writes that name none: `STANDARD` or an
    /// erasure-coded class of the layout.
    #[serde(default)]
    pub default_storage_class: Option<String>,
    /// The only storage classes writes to the bucket may use (`[]`: any
    /// the layout offers). The default class must be one of them. Needs
    /// the cluster finalized at v0.3.0.
    #[serde(default)]
    pub allowed_storage_classes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateBucketWebsiteAccess {
    pub enabled: bool,
    /// A file name such as `index.html`. Left out when enabling, the
    /// current index document is kept (`index.html` if none).
    #[serde(default)]
    pub index_document: Option<String>,
    #[serde(default)]
    pub error_document: Option<String>,
}

/// Enables or disables website access, sets quotas, or the default
/// storage class.
pub async fn update_bucket(
    g: &Garage,
    id: &str,
    req: UpdateBucketRequestBody,
) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let b = bucket_by_id(&m, id).await?;
    if let Some(w) = req.website_access {
        let enable = if w.enabled {
            if let Some(i) = &w.index_document {
                check_index_document(i)?;
            }
            if w.error_document.as_deref() == Some("") {
                return Err(ApiError::bad("websiteAccess: errorDocument is empty"));
            }
            Some((w.index_document, w.error_document))
        } else {
            if w.index_document.is_some() || w.error_document.is_some() {
                return Err(ApiError::bad(
                    "websiteAccess: indexDocument and errorDocument cannot be set when disabling website access",
                ));
            }
            None
        };
        // The same switch as `garage bucket website`: routing rules set by
        // PutBucketWebsite are kept.
        set_website_access(&m, b.clone(), enable).await?;
    }
    if let Some(q) = req.quotas {
        m.set_quotas(
            b.id,
            BucketQuotas {
                max_size: q.max_size,
                max_objects: q.max_objects,
            },
        )
        .await?;
    }
    if req.default_storage_class.is_some() || req.allowed_storage_classes.is_some() {
        let p = b.params().expect("an existing bucket");
        let default = match req.default_storage_class {
            Some(c) if c == classes::STANDARD => None,
            Some(c) => {
                check_offered(g, "defaultStorageClass", &c)?;
                Some(c)
            }
            None => p.default_storage_class.get().clone(),
        };
        let allowed = match req.allowed_storage_classes {
            Some(list) => {
                let feature = garage_rpc::system::versions::PLACEMENT_CLASSES;
                if !g.system.feature_allowed(&feature) {
                    return Err(ApiError::bad(format!(
                        "allowedStorageClasses needs the cluster finalized at v{} or later (feature {}), and it is at v{}: upgrade every node, then run `garage upgrade finalize`",
                        feature.since,
                        feature.name,
                        g.system.active_version()
                    )));
                }
                let mut list = list;
                list.sort();
                list.dedup();
                for c in list.iter() {
                    check_offered(g, "allowedStorageClasses", c)?;
                }
                Some((!list.is_empty()).then_some(list))
            }
            None => None,
        };
        let effective = match &allowed {
            Some(a) => a.clone(),
            None => p.allowed_storage_classes.get().clone(),
        };
        if let Some(set) = &effective {
            let d = default.as_deref().unwrap_or(classes::STANDARD);
            if !set.iter().any(|c| c == d) {
                return Err(ApiError::bad(format!(
                    "the bucket's default storage class {d} must be one of the classes it accepts ({}): give defaultStorageClass too",
                    set.join(", ")
                )));
            }
        }
        match allowed {
            Some(a) => m.set_placement(b.id, default, a).await?,
            None => m.set_default_class(b.id, default).await?,
        }
    }
    let b = bucket_by_id(&m, id).await?;
    bucket_info(g, &b).await
}

/// Bytes on disk of `logical` bytes per class, per the current layout (a
/// class the layout no longer offers is left out).
fn disk_bytes(
    g: &Garage,
    logical: &std::collections::BTreeMap<String, i64>,
) -> std::collections::BTreeMap<String, i64> {
    let layout = g.system.layout();
    let v = layout.current();
    logical
        .iter()
        .filter_map(|(class, n)| {
            let factor = if class == classes::STANDARD {
                v.replication_factor as f64
            } else {
                v.class_placement(class)?.overhead()
            };
            Some((class.clone(), (*n as f64 * factor).round() as i64))
        })
        .collect()
}

/// Checks that the layout offers storage class `name` (for field `field`).
fn check_offered(g: &Garage, field: &str, name: &str) -> Result<(), ApiError> {
    if name == classes::STANDARD {
        return Ok(());
    }
    let layout = g.system.layout();
    let v = layout.current();
    if v.class_placement(name).is_none() {
        let offered: Vec<&str> = std::iter::once(classes::STANDARD)
            .chain(v.classes.keys().map(|s| s.as_str()))
            .chain(v.placed.keys().map(|s| s.as_str()))
            .collect();
        return Err(ApiError::bad(format!(
            "{field}: the layout offers no class {name:?} (offered: {}; `garage layout class` or `garage layout config --storage-class` adds one)",
            offered.join(", ")
        )));
    }
    Ok(())
}

/// Deletes an empty bucket.
pub async fn delete_bucket(g: &Garage, id: &str) -> Result<(), ApiError> {
    let m = g.metadata();
    let b = bucket_by_id(&m, id).await?;
    if !bucket_is_empty(g, &b.id).await? {
        return Err(ApiError::BucketNotEmpty(format!(
            "bucket {} is not empty: delete its objects first",
            b.id.hex()
        )));
    }
    m.delete_bucket(&b).await?;
    tracing::info!("admin: bucket {} deleted", b.id.hex());
    Ok(())
}

/// A global alias, or a local one (`localAlias` with `accessKeyId`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketAliasRequest {
    pub bucket_id: String,
    #[serde(default)]
    pub global_alias: Option<String>,
    #[serde(default)]
    pub local_alias: Option<String>,
    #[serde(default)]
    pub access_key_id: Option<String>,
}

enum AliasKind {
    Global(String),
    Local { alias: String, key_id: String },
}

fn alias_kind(req: BucketAliasRequest) -> Result<AliasKind, ApiError> {
    match (req.global_alias, req.local_alias, req.access_key_id) {
        (Some(g), None, None) => Ok(AliasKind::Global(g)),
        (None, Some(alias), Some(key_id)) => Ok(AliasKind::Local { alias, key_id }),
        _ => Err(ApiError::bad(
            "give either globalAlias, or localAlias and accessKeyId",
        )),
    }
}

/// Adds a global or local alias to a bucket.
pub async fn add_bucket_alias(
    g: &Garage,
    req: BucketAliasRequest,
) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let b = bucket_by_id(&m, &req.bucket_id).await?;
    match alias_kind(req)? {
        AliasKind::Global(name) => m.set_global_alias(b.id, &name).await?,
        AliasKind::Local { alias, key_id } => {
            let k = existing_key(&m, &key_id).await?;
            m.set_local_alias(b.id, &k, &alias).await?
        }
    }
    let b = bucket_by_id(&m, &b.id.hex()).await?;
    bucket_info(g, &b).await
}

/// Removes a global or local alias of a bucket (not its last name).
pub async fn remove_bucket_alias(
    g: &Garage,
    req: BucketAliasRequest,
) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let b = bucket_by_id(&m, &req.bucket_id).await?;
    match alias_kind(req)? {
        AliasKind::Global(name) => {
            if m.resolve_global_alias(&name).await? != Some(b.id) {
                return Err(ApiError::NoSuchBucket(format!(
                    "{name:?} is not a global alias of bucket {}",
                    b.id.hex()
                )));
            }
            m.unset_global_alias(&name).await?
        }
        AliasKind::Local { alias, key_id } => {
            let k = existing_key(&m, &key_id).await?;
            let target = k
                .params()
                .and_then(|p| p.local_aliases.get(&alias).cloned())
                .flatten();
            if target != Some(b.id) {
                return Err(ApiError::NoSuchBucket(format!(
                    "{alias:?} is not an alias of bucket {} for key {key_id}",
                    b.id.hex()
                )));
            }
            m.unset_local_alias(&k, &alias).await?
        }
    }
    let b = bucket_by_id(&m, &b.id.hex()).await?;
    bucket_info(g, &b).await
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketKeyPermChangeRequest {
    pub bucket_id: String,
    pub access_key_id: String,
    /// The rights to grant (AllowBucketKey) or revoke (DenyBucketKey);
    /// those set to false are left as they are.
    pub permissions: ApiBucketKeyPerm,
}

/// AllowBucketKey (`allow`) and DenyBucketKey.
pub async fn change_perm(
    g: &Garage,
    req: BucketKeyPermChangeRequest,
    allow: bool,
) -> Result<GetBucketInfoResponse, ApiError> {
    let m = g.metadata();
    let b = bucket_by_id(&m, &req.bucket_id).await?;
    let k = existing_key(&m, &req.access_key_id).await?;
    let perm = change_permissions(&m, &b, &k, req.permissions.into(), allow).await?;
    tracing::info!(
        "admin API: key {} on bucket {}: {}",
        k.key_id,
        b.id.hex(),
        perm.letters()
    );
    let b = bucket_by_id(&m, &b.id.hex()).await?;
    bucket_info(g, &b).await
}

// ---- InspectObject ----

#[derive(Debug, Clone, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct InspectObjectQuery {
    /// The bucket's full id.
    pub bucket_id: String,
    pub key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectObjectResponse {
    pub bucket_id: String,
    pub key: String,
    /// The versions of the object entry, oldest first, then those of the
    /// history table (versioned buckets; at most 100), newest first.
    pub versions: Vec<InspectObjectVersion>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectObjectVersion {
    pub uuid: String,
    /// RFC 3339.
    pub timestamp: String,
    /// `uploading`, `complete` or `aborted`.
    pub state: String,
    /// `objectEntry` or `history` (and, there, whether it was deleted by
    /// its id).
    pub r#where: String,
    pub deleted: bool,
    pub is_delete_marker: bool,
    /// `off`, `enabled` or `suspended`: the bucket's versioning when it was
    /// written.
    pub versioning: String,
    pub inline: bool,
    pub size: Option<u64>,
    pub etag: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Its data blocks, in order (versions with blocks).
    pub blocks: Vec<InspectObjectBlock>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectObjectBlock {
    pub part_number: u64,
    pub offset: u64,
    pub hash: String,
    pub size: u64,
}

async fn inspect_version(
    g: &Garage,
    v: &garage_model::object_table::ObjectVersion,
    r#where: &str,
    deleted: bool,
) -> Result<InspectObjectVersion, ApiError> {
    use garage_model::object_table::{ObjectVersionData as D, ObjectVersionState as S};
    let (state, meta, inline, marker, first) = match &v.state {
        S::Uploading { headers, .. } => (
            "uploading",
            Some((headers.clone(), None, None)),
            false,
            false,
            false,
        ),
        S::Aborted => ("aborted", None, false, false, false),
        S::Complete(D::DeleteMarker) => ("complete", None, false, true, false),
        S::Complete(D::Inline(m, _)) => (
            "complete",
            Some((m.headers.clone(), Some(m.size), Some(m.etag.clone()))),
            true,
            false,
            false,
        ),
        S::Complete(D::FirstBlock(m, _)) => (
            "complete",
            Some((m.headers.clone(), Some(m.size), Some(m.etag.clone()))),
            false,
            false,
            true,
        ),
    };
    let mut blocks = Vec::new();
    if first || state == "uploading" {
        if let Some(ver) =
            garage_model::version_table::read_version(&g.version_table, &v.uuid).await?
        {
            for (k, b) in ver.blocks.items() {
                blocks.push(InspectObjectBlock {
                    part_number: k.part_number,
                    offset: k.offset,
                    hash: b.hash.hex(),
                    size: b.size,
                });
            }
        }
    }
    let (headers, size, etag) = meta.unwrap_or((vec![], None, None));
    Ok(InspectObjectVersion {
        uuid: v.uuid.hex(),
        timestamp: rfc3339(v.timestamp),
        state: state.into(),
        r#where: r#where.into(),
        deleted,
        is_delete_marker: marker,
        versioning: format!("{:?}", v.versioning).to_lowercase(),
        inline,
        size,
        etag,
        headers,
        blocks,
    })
}

/// The internal state of an object: the versions of its entry and of the
/// history table, their states and data blocks (read at quorum).
pub async fn inspect_object(
    g: &Garage,
    q: InspectObjectQuery,
) -> Result<InspectObjectResponse, ApiError> {
    let b = bucket_by_id(&g.metadata(), &q.bucket_id).await?;
    let obj = g.object_table.get(&b.id, &q.key).await?;
    let history = g
        .history_table
        .get_range(
            &b.id,
            Some(garage_model::history_table::HistoryKey::first_of(&q.key)),
            None,
            100,
            false,
        )
        .await?;
    let mut versions = Vec::new();
    if let Some(o) = &obj {
        for v in o.versions() {
            versions.push(inspect_version(g, v, "objectEntry", false).await?);
        }
    }
    for h in history.iter().filter(|h| h.key == q.key) {
        versions.push(inspect_version(g, &h.version, "history", h.is_deleted()).await?);
    }
    if versions.is_empty() {
        return Err(ApiError::NoSuchObject(format!(
            "no object {:?} in bucket {}",
            q.key, q.bucket_id
        )));
    }
    Ok(InspectObjectResponse {
        bucket_id: b.id.hex(),
        key: q.key,
        versions,
    })
}

// ---- CleanupIncompleteUploads ----

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupIncompleteUploadsRequest {
    pub bucket_id: String,
    /// Abort the multipart uploads started more than this many seconds
    /// ago.
    pub older_than_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupIncompleteUploadsResponse {
    pub uploads_deleted: u64,
}

/// Aborts the bucket's multipart uploads older than `olderThanSecs` (as
/// AbortMultipartUpload does each: their parts are released). Scans the
/// bucket's object entries 1 000 at a time.
pub async fn cleanup_incomplete_uploads(
    g: &Garage,
    req: &CleanupIncompleteUploadsRequest,
) -> Result<CleanupIncompleteUploadsResponse, ApiError> {
    use garage_model::mpu_table::MultipartUpload;
    let b = bucket_by_id(&g.metadata(), &req.bucket_id).await?;
    let cutoff = garage_util::time::now_msec().saturating_sub(req.older_than_secs * 1000);
    let mut from: Option<String> = None;
    let mut deleted = 0u64;
    loop {
        let page = g
            .object_table
            .get_range(&b.id, from.clone(), None, 1000, false)
            .await?;
        let full = page.len() == 1000;
        for o in page.iter() {
            if from.as_deref() == Some(o.key.as_str()) {
                continue;
            }
            for v in o.versions() {
                if v.is_uploading(Some(true)) && v.timestamp < cutoff {
                    let mpu = MultipartUpload::new(v.uuid, v.timestamp, b.id, o.key.clone());
                    g.writer.abort_upload(&mpu).await?;
                    deleted += 1;
                }
            }
        }
        match (full, page.last()) {
            (true, Some(last)) => from = Some(last.key.clone()),
            _ => break,
        }
    }
    Ok(CleanupIncompleteUploadsResponse {
        uploads_deleted: deleted,
    })
}

// ---- /check ----

/// Whether the website endpoint serves `domain`: the bucket whose global
/// alias is the domain, or the domain without one of `root_domains`
/// (`s3_web.root_domain`, `s3_api.root_domain`), has website access. For a
/// reverse proxy that gets TLS certificates on demand (`/check?domain=`);
/// the answer's text says why not.
pub async fn check_domain(
    g: &Garage,
    domain: &str,
    root_domains: &[String],
) -> Result<String, ApiError> {
    let domain = domain.trim_end_matches('.');
    let name = root_domains
        .iter()
        .find_map(|r| domain.strip_suffix(r.as_str()).filter(|n| !n.is_empty()))
        .unwrap_or(domain);
    let m = g.metadata();
    let not_served = |why: String| ApiError::bad(format!("domain {domain:?} is not served: {why}"));
    let Some(id) = m.resolve_global_alias(name).await? else {
        return Err(not_served(format!("no bucket is named {name:?}")));
    };
    let b = bucket_by_id(&m, &id.hex()).await?;
    match b.params() {
        Some(p) if website_access(p) => Ok(format!("Domain '{domain}' is managed by Garage")),
        _ => Err(not_served(format!(
            "bucket {name:?} has no website access (garage bucket website --allow {name})"
        ))),
    }
}

// ---- Shared rules ----

/// An index document is a file name: S3 refuses an empty suffix or one
/// with '/'.
pub fn check_index_document(i: &str) -> Result<(), ApiError> {
    if i.is_empty() || i.contains('/') {
        return Err(ApiError::bad(format!(
            "index document {i:?}: give a file name without '/', such as index.html"
        )));
    }
    Ok(())
}

/// Whether the bucket holds no object, upload or version.
pub async fn bucket_is_empty(g: &Garage, id: &Uuid) -> Result<bool, ApiError> {
    // As S3's DeleteBucket: any object, upload or version (delete
    // markers and locked versions included) keeps the bucket.
    let (objects, versions) = tokio::join!(
        g.object_table
            .get_range(id, None, Some(ObjectFilter::HasVersions), 1, false),
        g.history_table.get_range(id, None, None, 1, false)
    );
    Ok(objects?.is_empty() && versions?.is_empty())
}

/// Grants (`allow`) or revokes the rights set in `change` of `key` on the
/// bucket; returns the key's new rights there.
pub async fn change_permissions(
    m: &Metadata,
    b: &Bucket,
    key: &Key,
    change: BucketKeyPerm,
    allow: bool,
) -> Result<BucketKeyPerm, ApiError> {
    let mut perm = key.bucket_permissions(&b.id);
    if change.allow_read {
        perm.allow_read = allow;
    }
    if change.allow_write {
        perm.allow_write = allow;
    }
    if change.allow_owner {
        perm.allow_owner = allow;
    }
    m.set_permissions(b.id, &key.key_id, perm).await?;
    Ok(perm)
}

/// Whether the bucket is served by the website endpoint: its switch is on
/// and it has a website configuration.
pub fn website_access(p: &BucketParams) -> bool {
    p.website().is_some()
}

/// The website switch of UpdateBucket (and so of `garage bucket
/// website`). `None` turns it off (the configuration is kept).
/// `Some((index, error))` turns it on and merges the documents given into
/// the bucket's configuration: routing rules are kept, a redirect-all
/// configuration is replaced when documents are given, and `index.html` is
/// the index when there is neither an index nor a redirect. Returns the
/// configuration now in effect.
pub async fn set_website_access(
    m: &Metadata,
    mut b: Bucket,
    enable: Option<(Option<String>, Option<String>)>,
) -> Result<Option<WebsiteConfig>, ApiError> {
    let id = b.id;
    let Some(p) = b.params_mut() else {
        return Err(HelperError::NoSuchBucket(id.hex()).into());
    };
    let Some((index, error)) = enable else {
        p.website_access.update(false);
        m.buckets.insert(&b).await?;
        return Ok(None);
    };
    let old = p.website_config.get().clone();
    let mut config = old.clone().unwrap_or(WebsiteConfig {
        index_document: None,
        error_document: None,
        redirect_all: None,
        routing_rules: Vec::new(),
    });
    if index.is_some() || error.is_some() {
        config.redirect_all = None;
    }
    if let Some(i) = index {
        config.index_document = Some(i);
    }
    if let Some(e) = error {
        config.error_document = Some(e);
    }
    if config.index_document.is_none() && config.redirect_all.is_none() {
        config.index_document = Some("index.html".into());
    }
    if old.as_ref() != Some(&config) {
        p.website_config.update(Some(config.clone()));
    }
    if !*p.website_access.get() {
        p.website_access.update(true);
    }
    m.buckets.insert(&b).await?;
    Ok(Some(config))
}

/// Object, byte and unfinished-upload counts of a bucket, as counted by
/// the nodes of its partition.
pub async fn bucket_counts(g: &Garage, id: &Uuid) -> Result<Counts, ApiError> {
    Ok(match g.counter_table.get(id, &EmptyKey).await? {
        Some(c) => {
            let partition = LayoutVersion::partition_of(id.as_slice());
            let nodes: Vec<Uuid> = g
                .system
                .layout()
                .current()
                .nodes_of(partition)
                .iter()
                .map(|n| Uuid::from(n.0))
                .collect();
            c.total(&nodes)
        }
        None => Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use garage_model::replication::config::{Destination, ReplicationRule};

    #[test]
    fn replication_rules_are_shown_with_their_destination_arn() {
        let rule = ReplicationRule {
            id: "to-dr".into(),
            priority: 2,
            enabled: true,
            prefix: Some("logs/".into()),
            tags: vec![("k".into(), "v".into())],
            destination: Destination {
                remote: "dr".into(),
                bucket: "photos".into(),
                storage_class: None,
            },
            delete_markers: true,
            existing_objects: false,
        };
        let shown = GetBucketInfoReplicationRule::from(&rule);
        assert_eq!(shown.destination, "arn:garage:s3:::dr/photos");
        assert_eq!(shown.tags, ["k=v"]);
        assert_eq!(shown.prefix.as_deref(), Some("logs/"));
        assert_eq!((shown.priority, shown.enabled), (2, true));
        assert!(shown.delete_markers && !shown.existing_objects);
        let json = serde_json::to_value(&shown).unwrap();
        assert_eq!(json["deleteMarkers"], true);
        assert_eq!(json["destination"], "arn:garage:s3:::dr/photos");
    }
}
