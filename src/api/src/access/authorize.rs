//! The access decision of object and list requests: key permissions,
//! then the bucket policy, then ACLs, in AWS's order (an explicit deny in
//! the policy wins over everything). See doc/access-control.md.
//!
//! Which operation is decided here, and which by key permissions alone,
//! is the table of `s3.rs` (see `access::step`). Bucket configuration
//! requests (ACLs, policies, CORS, …) are decided by key permissions
//! alone (the owner permission): a policy cannot lock the bucket's owners
//! out of changing it.

use std::sync::Arc;

use garage_model::access::{BucketAccess, CannedAcl, ObjectAcl, ObjectPerm};
use garage_util::data::Uuid;
use s3s::S3Request;

use crate::ctx::{Api, Need};
use crate::error::{ApiError, ApiResult};
use crate::request::{ConditionValues, Peer, Requester};
use garage_model::iam::identity::Identity;
use garage_model::iam::IamError;
use garage_model::policy::{Decision, Policy, Principal, Request as PolicyRequest, Resource};

/// The S3 actions decided here (the names bucket policies use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    GetObject,
    GetObjectVersion,
    GetObjectAttributes,
    PutObject,
    DeleteObject,
    DeleteObjectVersion,
    ListBucket,
    ListBucketVersions,
    ListBucketMultipartUploads,
    ListMultipartUploadParts,
    AbortMultipartUpload,
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::GetObject => "s3:GetObject",
            Action::GetObjectVersion => "s3:GetObjectVersion",
            Action::GetObjectAttributes => "s3:GetObjectAttributes",
            Action::PutObject => "s3:PutObject",
            Action::DeleteObject => "s3:DeleteObject",
            Action::DeleteObjectVersion => "s3:DeleteObjectVersion",
            Action::ListBucket => "s3:ListBucket",
            Action::ListBucketVersions => "s3:ListBucketVersions",
            Action::ListBucketMultipartUploads => "s3:ListBucketMultipartUploads",
            Action::ListMultipartUploadParts => "s3:ListMultipartUploadParts",
            Action::AbortMultipartUpload => "s3:AbortMultipartUpload",
        }
    }

    /// The key permission that allows it.
    pub fn need(&self) -> Need {
        match self {
            Action::GetObject
            | Action::GetObjectVersion
            | Action::GetObjectAttributes
            | Action::ListBucket
            | Action::ListBucketVersions
            | Action::ListBucketMultipartUploads
            | Action::ListMultipartUploadParts => Need::Read,
            Action::PutObject
            | Action::DeleteObject
            | Action::DeleteObjectVersion
            | Action::AbortMultipartUpload => Need::Write,
        }
    }

    /// The reading of a version, for which the version's ACL may grant.
    fn reads_object(&self) -> bool {
        matches!(self, Action::GetObject | Action::GetObjectVersion)
    }

    /// What a bucket ACL grants it from: READ (listing) or WRITE
    /// (creating and deleting objects), as on S3.
    fn bucket_acl_grants(&self, acl: CannedAcl, signed: bool) -> bool {
        match self {
            Action::ListBucket
            | Action::ListBucketVersions
            | Action::ListBucketMultipartUploads => acl.grants_read(signed),
            Action::PutObject | Action::DeleteObject | Action::AbortMultipartUpload => {
                acl.grants_write()
            }
            _ => false,
        }
    }
}

/// How a request was allowed.
#[derive(Clone, Debug)]
pub enum Grant {
    /// By a key permission, the policy or the bucket ACL: nothing more to
    /// check.
    Granted,
    /// Only if the version read has an ACL that grants it (checked by
    /// [`Access::check_version`] once the version is found).
    IfObjectAcl(Box<AclCheck>),
}

/// A check left for the version's ACL, once the version is found: what
/// it must grant, the bucket's access settings to apply to it, and the
/// requester's canonical ids (its grants to users name them).
#[derive(Clone, Debug)]
pub struct AclCheck {
    pub access: BucketAccess,
    pub ids: Vec<String>,
    /// Whether the request was signed.
    pub signed: bool,
}

impl AclCheck {
    /// Whether `acl` grants `need` to the requester: its canned part
    /// (READ only), or a grant to one of its ids; none when the bucket
    /// disables ACLs.
    pub fn grants(&self, acl: &ObjectAcl, need: ObjectPerm) -> bool {
        if !self.access.acls_enabled() {
            return false;
        }
        let canned =
            need == ObjectPerm::READ && self.access.effective(acl.canned).grants_read(self.signed);
        canned
            || acl
                .granted_to(self.ids.iter().map(|s| s.as_str()))
                .covers(need)
    }
}

/// An allowed request on a bucket.
#[derive(Clone, Debug)]
pub struct Access {
    pub bucket: Uuid,
    pub grant: Grant,
    /// The bucket's enabled lifecycle rules with an Expiration (for
    /// `x-amz-expiration`; usually none).
    pub expiration_rules: Arc<Vec<garage_model::bucket_table::LifecycleRule>>,
    /// The bucket has replication rules (reads then show a version's
    /// replication state, one more read).
    pub replicated: bool,
}

impl Access {
    /// For a read allowed only by the object's ACL: whether `v`'s ACL
    /// grants it. A missing object is AccessDenied too (the requester may
    /// not list the bucket, so it may not learn which keys exist).
    pub fn check_version(&self, acl: Option<&ObjectAcl>) -> ApiResult<()> {
        match &self.grant {
            Grant::Granted => Ok(()),
            Grant::IfObjectAcl(check) => match acl {
                Some(a) if check.grants(a, ObjectPerm::READ) => Ok(()),
                _ => Err(denied()),
            },
        }
    }

    /// A lookup's result for a read allowed only by the object's ACL: a
    /// missing key, version or a delete marker becomes AccessDenied (other
    /// errors, such as 503, stay).
    pub fn hide<T>(&self, r: ApiResult<T>) -> ApiResult<T> {
        match (&self.grant, r) {
            (
                Grant::IfObjectAcl(_),
                Err(
                    ApiError::NoSuchKey(_)
                    | ApiError::NoSuchVersion(_)
                    | ApiError::DeleteMarker { .. },
                ),
            ) => Err(denied()),
            (_, r) => r,
        }
    }
}

/// A session's requests carry its token (`x-amz-security-token`, or
/// `X-Amz-Security-Token` in a presigned URL), compared by digest.
pub fn check_session_token(
    identity: &Identity,
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
) -> ApiResult<()> {
    let Some(want) = &identity.token_sha256 else {
        return Ok(());
    };
    let given = headers
        .get("x-amz-security-token")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .or_else(|| {
            uri.query().and_then(|q| {
                crate::request::query_pairs(q)
                    .find(|(k, _)| k == "X-Amz-Security-Token")
                    .map(|(_, v)| v)
            })
        });
    match given {
        Some(t) if garage_model::iam::sts::token_digest(&t) == *want => Ok(()),
        Some(_) => Err(ApiError::InvalidToken(
            "The security token included in the request is invalid".into(),
        )),
        None => Err(ApiError::InvalidToken(
            "a session's key needs its session token (x-amz-security-token)".into(),
        )),
    }
}

/// The names a bucket is known by: the one a request used, and its
/// global aliases (an identity policy about any of them holds).
pub fn bucket_names(b: &garage_model::bucket_table::Bucket, requested: &str) -> Vec<String> {
    let mut names = vec![requested.to_string()];
    for a in b.global_aliases() {
        if a != requested {
            names.push(a);
        }
    }
    names
}

pub(crate) fn denied() -> ApiError {
    ApiError::AccessDenied("Access Denied".into())
}

impl Api {
    /// The IAM identity of key `key_id` (see
    /// `garage_model::iam::identity`); a revoked key is AccessDenied.
    pub async fn identity(&self, key_id: &str) -> ApiResult<Option<Identity>> {
        match self.garage.iam.identity(key_id).await {
            Ok(i) => Ok(i),
            Err(IamError::Denied(m)) => Err(ApiError::AccessDenied(m)),
            Err(IamError::Expired(m)) => Err(ApiError::ExpiredToken(m)),
            Err(IamError::Table(e)) => Err(e.into()),
            Err(e) => Err(ApiError::Internal(e.to_string())),
        }
    }

    /// Who sent `req`: the key that signed it (anonymous: none), its TCP
    /// peer's address and its condition values. The first thing the
    /// authorization step (`access::step`) does.
    pub async fn requester<T>(&self, req: &S3Request<T>, op: &'static str) -> ApiResult<Requester> {
        let key = match &req.credentials {
            Some(c) => Some(self.fetch_key(&c.access_key).await?.ok_or_else(|| {
                ApiError::AccessDenied(format!("no access key {}", c.access_key))
            })?),
            None => None,
        };
        let identity = match &key {
            Some(k) => self.identity(&k.key_id).await?,
            None => None,
        };
        if let Some(i) = &identity {
            check_session_token(i, &req.headers, &req.uri)?;
        }
        Ok(Requester {
            principal: Principal {
                key_id: key.as_ref().map(|k| k.key_id.clone()),
                user: identity.as_ref().and_then(|i| i.user.clone()),
                session: identity.as_ref().and_then(|i| i.session.clone()),
            },
            identity,
            key,
            action: crate::access::actions::of_operation(op),
            region: std::sync::Arc::from(self.region()),
            source_ip: req.extensions.get::<Peer>().map(|p| p.0.ip()),
            conditions: req
                .extensions
                .get::<ConditionValues>()
                .cloned()
                .unwrap_or_default(),
        })
    }

    /// The decisions of a copy: reading the source (its version's ACL
    /// still to check, see [`Access::check_version`]) and writing the
    /// destination; both at once.
    pub(crate) async fn authorize_copy(
        &self,
        who: &Requester,
        (src_bucket, src_key, src_vid): (&str, &str, Option<&str>),
        (dst_bucket, dst_key): (&str, &str),
    ) -> ApiResult<(Access, Uuid)> {
        let read = match src_vid {
            Some(_) => Action::GetObjectVersion,
            None => Action::GetObject,
        };
        let (src, dst) = tokio::join!(
            self.authorize(who, src_bucket, read, Some(src_key), None),
            self.authorize(who, dst_bucket, Action::PutObject, Some(dst_key), None)
        );
        Ok((src?, dst?.bucket))
    }

    /// Decides `action` on bucket `name` (and object `object`) for `who`:
    /// an explicit deny of the bucket policy refuses; then a key
    /// permission, a policy allow, or a bucket ACL grant allows; for a
    /// read of an object, the version's ACL may still (see
    /// [`Access::check_version`]). `prefix`: a list request's prefix (the
    /// `s3:prefix` condition).
    pub(crate) async fn authorize(
        &self,
        who: &Requester,
        name: &str,
        action: Action,
        object: Option<&str>,
        prefix: Option<&str>,
    ) -> ApiResult<Access> {
        let decider = self.decider(who, name, action.need()).await?;
        let tags = match object {
            Some(o) => decider.existing_tags(self, who, o).await?,
            None => None,
        };
        decider.decide(who, action, object, prefix, tags.as_ref())
    }

    /// What the decisions of `who` on bucket `name` for actions needing
    /// key permission `need` depend on, read once (for DeleteObjects,
    /// which decides each key).
    pub(crate) async fn decider(
        &self,
        who: &Requester,
        name: &str,
        need: Need,
    ) -> ApiResult<Decider> {
        let key = who.key.as_ref();
        let (id, by_key, refusal) = match key {
            Some(k) => match self.bucket_id(k, name, need).await {
                Ok(id) => (id, true, None),
                Err(e @ ApiError::AccessDenied(_)) => {
                    (self.resolve_bucket(Some(k), name).await?, false, Some(e))
                }
                Err(e) => return Err(e),
            },
            None => (self.resolve_bucket(None, name).await?, false, None),
        };
        let bucket = self.bucket(id, name).await?;
        let access = bucket
            .params()
            .map(|p| p.access.clone())
            .unwrap_or_default();
        let policy = access
            .policy
            .get()
            .as_deref()
            .and_then(|t| Policy::parse_stored(t).ok());
        let expiration_rules = Arc::new(
            bucket
                .params()
                .and_then(|p| p.lifecycle_config.get().as_ref())
                .map(|rules| {
                    rules
                        .iter()
                        .filter(|r| r.enabled && r.expiration.is_some())
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        );
        let replicated = bucket
            .params()
            .is_some_and(|p| p.replication.get().is_some());
        Ok(Decider {
            names: bucket_names(&bucket, name),
            expiration_rules,
            replicated,
            bucket: id,
            name: name.to_string(),
            by_key,
            refusal,
            access,
            policy,
        })
    }
}

/// The state one bucket's decisions for one requester depend on (see
/// [`Api::decider`]); [`Decider::decide`] is pure.
pub struct Decider {
    pub bucket: Uuid,
    name: String,
    /// Every name of the bucket (identity policies are asked under each).
    names: Vec<String>,
    /// The key has the permission needed.
    by_key: bool,
    /// Why the key's permissions refuse, if they do.
    refusal: Option<ApiError>,
    access: BucketAccess,
    policy: Option<Arc<Policy>>,
    expiration_rules: Arc<Vec<garage_model::bucket_table::LifecycleRule>>,
    replicated: bool,
}

impl Decider {
    /// The current tags of `object`, when the policy tests
    /// `s3:ExistingObjectTag` (one more read, only then); none for a
    /// missing object.
    pub async fn existing_tags(
        &self,
        api: &Api,
        who: &Requester,
        object: &str,
    ) -> ApiResult<Option<Vec<(String, String)>>> {
        let tested = self
            .policy
            .as_ref()
            .is_some_and(|p| p.tests_existing_tags())
            || who.identity.as_ref().is_some_and(|i| {
                i.policies.iter().any(|p| p.tests_existing_tags())
                    || i.boundary.as_ref().is_some_and(|b| b.tests_existing_tags())
            });
        if !tested {
            return Ok(None);
        }
        match api.find_current(self.bucket, object).await {
            Ok(found) => Ok(Some(found.tags())),
            Err(ApiError::NoSuchKey(_) | ApiError::DeleteMarker { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Decides `action` on `object` (see [`Api::authorize`]);
    /// `existing_tags`: see [`Decider::existing_tags`].
    pub fn decide(
        &self,
        who: &Requester,
        action: Action,
        object: Option<&str>,
        prefix: Option<&str>,
        existing_tags: Option<&Vec<(String, String)>>,
    ) -> ApiResult<Access> {
        let key = who.key.as_ref();
        let (id, access) = (self.bucket, &self.access);
        let signed = key.is_some();
        let granted = Access {
            bucket: id,
            grant: Grant::Granted,
            expiration_rules: self.expiration_rules.clone(),
            replicated: self.replicated,
        };
        let values = who.values(prefix, existing_tags.map(|t| t.as_slice()));
        let decision = self.policy.as_ref().map(|p| {
            p.evaluate(&PolicyRequest {
                who: &who.principal,
                action: action.name(),
                resource: Resource::S3 {
                    bucket: &self.name,
                    object,
                },
                values,
            })
        });
        let identity = who.identity_decision_names(action.name(), &self.names, object, values);
        if identity == Decision::Deny {
            return Err(ApiError::AccessDenied(format!(
                "Access Denied: explicitly denied by an identity policy of {}",
                who.user_name().unwrap_or_default()
            )));
        }
        match decision {
            Some(Decision::Deny) => {
                return Err(ApiError::AccessDenied(format!(
                    "Access Denied: explicitly denied by the policy of bucket {}",
                    self.name
                )))
            }
            _ if self.by_key || identity == Decision::Allow => return Ok(granted),
            Some(Decision::Allow) => {
                // RestrictPublicBuckets: a public policy grants only to
                // keys with some permission on the bucket.
                let restricted = access.block().restrict_public_buckets
                    && self.policy.as_ref().is_some_and(|p| p.is_public())
                    && !key.is_some_and(|k| k.bucket_permissions(&id).is_any());
                if !restricted {
                    return Ok(granted);
                }
            }
            _ => (),
        }
        if action.bucket_acl_grants(access.effective(*access.acl.get()), signed) {
            return Ok(granted);
        }
        if action.reads_object() && access.acls_enabled() {
            return Ok(Access {
                bucket: id,
                grant: Grant::IfObjectAcl(Box::new(AclCheck {
                    access: access.clone(),
                    ids: who.canonical_ids(),
                    signed,
                })),
                expiration_rules: self.expiration_rules.clone(),
                replicated: self.replicated,
            });
        }
        Err(match &self.refusal {
            Some(ApiError::AccessDenied(m)) => ApiError::AccessDenied(m.clone()),
            _ => denied(),
        })
    }
}
