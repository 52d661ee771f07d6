//! The authorization step: every S3 operation names its rule in the table
//! of `s3.rs`, the rule is checked before the handler runs, and the
//! handler receives what it granted (`request::Ctx`). No handler decides access
//! on its own (the structure test checks it).
//!
//! The rules, from the least to the most the bucket's settings count:
//! - [`Signed`]: any signed request (ListBuckets, CreateBucket);
//! - [`ByKey`]: a key permission on the bucket, whatever its policy and
//!   ACLs (bucket configuration reads, version metadata);
//! - [`Owner`]: the owner permission, with the bucket entry (bucket
//!   configuration);
//! - [`Decide`]: an [`Action`] decided by key permissions, the bucket
//!   policy and ACLs (objects, listings; see `authorize.rs`);
//! - [`EachObject`]: the state to decide each object of DeleteObjects on;
//! - [`Copy`]: reading a copy's source and writing its destination.

use garage_model::access::{ObjectAcl, ObjectPerm};
use garage_model::bucket_table::Bucket;
use garage_model::key_table::Key;
use garage_model::policy::{Decision, Policy, Request as PolicyRequest, Resource};
use garage_util::data::Uuid;
use s3s::dto::{CopySource, PutObjectInput};
use s3s::S3Request;

use crate::access::authorize::{Access, AclCheck, Action, Decider};
use crate::ctx::{Api, Need};
use crate::error::{ApiError, ApiResult};
use crate::request::{KeyBucket, Owned, Requester};

/// The key of a signed request; anonymous requests are refused.
fn signed_key(who: &Requester) -> ApiResult<Key> {
    who.key.clone().ok_or_else(|| {
        ApiError::AccessDenied(
            "anonymous requests are not allowed: sign the request with an access key".into(),
        )
    })
}

/// Any signed request; grants its key.
pub struct Signed;

impl Signed {
    pub async fn check(self, _api: &Api, who: &Requester) -> ApiResult<Key> {
        signed_key(who)
    }
}

/// The bucket a name designates, once the key's permission `need` on it
/// or the requester's identity policies allow the operation's action
/// (on `object` of it, for an object's sub-resource; under every name of
/// the bucket). An explicit deny of an identity policy refuses whatever
/// the key's permissions; a grant by an identity policy alone is still
/// refused by the bucket policy's explicit deny. The bucket's entry is
/// returned when it was read.
async fn key_or_identity(
    api: &Api,
    who: &Requester,
    bucket: &str,
    object: Option<&str>,
    need: Need,
) -> ApiResult<(Key, Uuid, Option<Bucket>)> {
    match key_or_identity_says(api, who, bucket, object, need).await? {
        Says::Allowed(key, id, b) => Ok((key, id, b.map(|b| *b))),
        Says::NotAllowed { refusal, .. } => Err(refusal),
    }
}

/// What key permissions and identity policies say of an operation,
/// explicit denies aside (those are errors).
enum Says {
    Allowed(Key, Uuid, Option<Box<Bucket>>),
    /// Neither allows it (`refusal` says why); the bucket it names.
    NotAllowed {
        bucket: Uuid,
        refusal: ApiError,
    },
}

/// [`key_or_identity`], telling a refusal by key permissions (which an
/// object's ACL may still overcome) from an explicit deny.
async fn key_or_identity_says(
    api: &Api,
    who: &Requester,
    bucket: &str,
    object: Option<&str>,
    need: Need,
) -> ApiResult<Says> {
    let key = signed_key(who)?;
    let by_key = api.bucket_id(&key, bucket, need).await;
    let not_allowed = |key: Key, id: Uuid, by_key: ApiResult<Uuid>| match by_key {
        Err(refusal) => Says::NotAllowed {
            bucket: id,
            refusal,
        },
        Ok(id) => Says::Allowed(key, id, None),
    };
    let id = match &by_key {
        Ok(id) => *id,
        Err(ApiError::AccessDenied(_)) => api.resolve_bucket(Some(&key), bucket).await?,
        Err(_) => return by_key.map(|id| Says::Allowed(key, id, None)),
    };
    if who.identity.is_none() {
        return Ok(not_allowed(key, id, by_key));
    }
    let b = api.bucket(id, bucket).await?;
    let names = crate::access::authorize::bucket_names(&b, bucket);
    let values = who.values(None, None);
    let decision = who.identity_decision_names(who.action, &names, object, values);
    if decision == Decision::Deny {
        return Err(ApiError::AccessDenied(format!(
            "Access Denied: {} is explicitly denied by an identity policy of {}",
            who.action,
            who.user_name().unwrap_or_default()
        )));
    }
    if by_key.is_ok() {
        return Ok(Says::Allowed(key, id, Some(Box::new(b))));
    }
    if decision != Decision::Allow {
        return Ok(not_allowed(key, id, by_key));
    }
    bucket_policy_deny(who, &b, bucket, object)?;
    Ok(Says::Allowed(key, id, Some(Box::new(b))))
}

/// Refuses when the bucket's policy explicitly denies the operation.
fn bucket_policy_deny(
    who: &Requester,
    b: &Bucket,
    bucket: &str,
    object: Option<&str>,
) -> ApiResult<()> {
    let policy = b
        .params()
        .and_then(|p| p.access.policy.get().as_deref())
        .and_then(|t| Policy::parse_stored(t).ok());
    if let Some(p) = policy {
        let r = PolicyRequest {
            who: &who.principal,
            action: who.action,
            resource: Resource::S3 { bucket, object },
            values: who.values(None, None),
        };
        if p.evaluate(&r) == Decision::Deny {
            return Err(ApiError::AccessDenied(format!(
                "Access Denied: {} is explicitly denied by the policy of bucket {bucket}",
                who.action
            )));
        }
    }
    Ok(())
}

/// A key permission on the bucket a name designates, or an identity
/// policy allowing the operation.
pub struct ByKey<'a> {
    pub bucket: &'a str,
    pub need: Need,
    /// The object, for an object's sub-resource (tags, ACL, retention).
    pub object: Option<&'a str>,
}

impl ByKey<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<KeyBucket> {
        let (key, bucket, _) =
            key_or_identity(api, who, self.bucket, self.object, self.need).await?;
        Ok(KeyBucket { key, bucket })
    }
}

/// GetObjectAcl and PutObjectAcl: as [`ByKey`]; or else, when neither
/// the key's permissions nor its identity policies allow it and nothing
/// denies it explicitly, the version's ACL granting `perm` (READ_ACP,
/// WRITE_ACP) to the requester, checked once the version is found
/// ([`AcpGrant::check`]).
pub struct ObjectAcp<'a> {
    pub bucket: &'a str,
    pub object: &'a str,
    pub need: Need,
    pub perm: ObjectPerm,
}

/// What [`ObjectAcp`] grants: the bucket, and the check left for the
/// version's ACL, if any.
pub struct AcpGrant {
    pub bucket: Uuid,
    pending: Option<Pending>,
}

/// An [`AcpGrant`]'s check left for the version's ACL.
struct Pending {
    check: AclCheck,
    perm: ObjectPerm,
    refusal: ApiError,
}

impl ObjectAcp<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<AcpGrant> {
        let (bucket, refusal) = match key_or_identity_says(
            api,
            who,
            self.bucket,
            Some(self.object),
            self.need,
        )
        .await?
        {
            Says::Allowed(_, bucket, _) => {
                return Ok(AcpGrant {
                    bucket,
                    pending: None,
                })
            }
            Says::NotAllowed { bucket, refusal } => (bucket, refusal),
        };
        let b = api.bucket(bucket, self.bucket).await?;
        bucket_policy_deny(who, &b, self.bucket, Some(self.object))?;
        let access = b.params().map(|p| p.access.clone()).unwrap_or_default();
        if !access.acls_enabled() {
            return Err(refusal);
        }
        Ok(AcpGrant {
            bucket,
            pending: Some(Pending {
                check: AclCheck {
                    access,
                    ids: who.canonical_ids(),
                    signed: true,
                },
                perm: self.perm,
                refusal,
            }),
        })
    }
}

impl AcpGrant {
    /// Whether the version's ACL `acl` grants what is left to check.
    pub fn check(&self, acl: &ObjectAcl) -> ApiResult<()> {
        match &self.pending {
            None => Ok(()),
            Some(p) if p.check.grants(acl, p.perm) => Ok(()),
            Some(p) => Err(refusal_of(&p.refusal)),
        }
    }

    /// A lookup's result when the version's ACL is left to check: a
    /// missing key or version is the refusal (the requester may not
    /// learn which keys exist).
    pub fn hide<T>(&self, r: ApiResult<T>) -> ApiResult<T> {
        match (&self.pending, r) {
            (
                Some(p),
                Err(
                    ApiError::NoSuchKey(_)
                    | ApiError::NoSuchVersion(_)
                    | ApiError::DeleteMarker { .. },
                ),
            ) => Err(refusal_of(&p.refusal)),
            (_, r) => r,
        }
    }
}

/// A copy of a refusal by key permissions (always AccessDenied).
fn refusal_of(e: &ApiError) -> ApiError {
    match e {
        ApiError::AccessDenied(m) => ApiError::AccessDenied(m.clone()),
        _ => crate::access::authorize::denied(),
    }
}

/// The owner permission on the bucket a name designates, or an identity
/// policy allowing the operation.
pub struct Owner<'a>(pub &'a str);

impl Owner<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<Owned> {
        let (key, id, read) = key_or_identity(api, who, self.0, None, Need::Owner).await?;
        let bucket = match read {
            Some(b) => b,
            None => api.bucket(id, self.0).await?,
        };
        Ok(Owned { key, id, bucket })
    }
}

/// An action on a bucket (and one of its objects), decided by key
/// permissions, the bucket policy and ACLs.
pub struct Decide<'a> {
    action: Action,
    bucket: &'a str,
    object: Option<&'a str>,
    /// A listing's prefix (the `s3:prefix` condition).
    prefix: Option<&'a str>,
}

impl<'a> Decide<'a> {
    /// `action` on object `key` of `bucket`.
    pub fn object(action: Action, bucket: &'a str, key: &'a str) -> Self {
        Self {
            action,
            bucket,
            object: Some(key),
            prefix: None,
        }
    }

    /// A listing of `bucket` (`prefix`: the request's; absent, empty).
    pub fn list(action: Action, bucket: &'a str, prefix: Option<&'a str>) -> Self {
        Self {
            action,
            bucket,
            object: None,
            prefix: Some(prefix.unwrap_or_default()),
        }
    }

    /// `action` on `bucket` itself (HeadBucket).
    pub fn bucket(action: Action, bucket: &'a str) -> Self {
        Self {
            action,
            bucket,
            object: None,
            prefix: None,
        }
    }

    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<Access> {
        api.authorize(who, self.bucket, self.action, self.object, self.prefix)
            .await
    }
}

/// PutObject, PostObject's form included: the form's credential scope
/// (not seen by the check in front of s3s, `auth_scope::check_request`,
/// as it is in the body), then [`Action::PutObject`] on the key the
/// object is written under (a form's `${filename}` replaced by the name
/// of the file it carries).
pub struct Put<'a>(pub &'a S3Request<PutObjectInput>);

/// What [`Put`] grants: the bucket's access, the key the object is
/// written under, and the form's other fields (none for a PUT).
pub struct PutGrant {
    pub access: Access,
    pub key: String,
    pub form: Fields,
}

impl Put<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<PutGrant> {
        let req = self.0;
        crate::access::auth_scope::check_form(
            req.credentials.is_some(),
            req.region.as_ref().map(|r| r.as_str()),
            &api.regions,
        )?;
        let form = req
            .extensions
            .get::<FormFields>()
            .map(|f| f.get())
            .unwrap_or_default();
        let key = match &form.file_name {
            Some(name) => req.input.key.replace("${filename}", name),
            None => req.input.key.clone(),
        };
        let access = api
            .authorize(who, &req.input.bucket, Action::PutObject, Some(&key), None)
            .await?;
        Ok(PutGrant { access, key, form })
    }
}

/// DeleteObjects: the bucket's state each object is decided on (read
/// once), with the key permission `need`.
pub struct EachObject<'a> {
    pub bucket: &'a str,
    pub need: Need,
}

impl EachObject<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<Decider> {
        api.decider(who, self.bucket, self.need).await
    }
}

/// CopyObject and UploadPartCopy: reading the source (its version's ACL
/// still to check, see [`Access::check_version`]) and writing the
/// destination, decided at once.
pub struct Copy<'a> {
    pub source: &'a CopySource,
    pub bucket: &'a str,
    pub key: &'a str,
}

/// What [`Copy`] grants: the source's access and the destination bucket.
pub struct CopyGrant {
    pub source: Access,
    pub bucket: Uuid,
}

impl Copy<'_> {
    pub async fn check(self, api: &Api, who: &Requester) -> ApiResult<CopyGrant> {
        let (src_bucket, src_key, src_vid) = source_of(self.source)?;
        let (source, bucket) = api
            .authorize_copy(who, (src_bucket, src_key, src_vid), (self.bucket, self.key))
            .await?;
        Ok(CopyGrant { source, bucket })
    }
}

impl Action {
    /// The reading of an object: of a version named by its id, or of the
    /// current one.
    pub fn read(version_id: &Option<String>) -> Self {
        match version_id {
            Some(_) => Action::GetObjectVersion,
            None => Action::GetObject,
        }
    }

    /// The deletion of an object: of a version named by its id, or of
    /// the current one (a delete marker, when versioned).
    pub fn delete(version_id: &Option<String>) -> Self {
        match version_id {
            Some(_) => Action::DeleteObjectVersion,
            None => Action::DeleteObject,
        }
    }
}

/// What PostObject needs of a form that s3s does not pass on: the file's
/// name (for `${filename}` in the key) and the `tagging` field (an XML
/// tag set), once the body was read that far.
#[derive(Clone, Default, Debug)]
pub struct FormFields(std::sync::Arc<std::sync::Mutex<Fields>>);

#[derive(Clone, Default, Debug)]
pub struct Fields {
    pub file_name: Option<String>,
    pub tagging: Option<String>,
}

impl FormFields {
    pub fn get(&self) -> Fields {
        self.0.lock().expect("form fields lock").clone()
    }

    /// Notes a field (the reader of the form's body does, see
    /// the server family's `rechunk`).
    pub fn set(&self, f: impl FnOnce(&mut Fields)) {
        f(&mut self.0.lock().expect("form fields lock"))
    }
}

/// The (bucket, key, version id) of an `x-amz-copy-source`.
pub fn source_of(c: &CopySource) -> ApiResult<(&str, &str, Option<&str>)> {
    match c {
        CopySource::Bucket {
            bucket,
            key,
            version_id,
        } => Ok((bucket, key, version_id.as_deref())),
        _ => Err(ApiError::InvalidArgument(
            "x-amz-copy-source must be <bucket>/<key>: access points are not supported".into(),
        )),
    }
}
