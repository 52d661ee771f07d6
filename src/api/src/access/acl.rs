//! The ACL requests: Get/PutBucketAcl, Get/PutObjectAcl; and the ACL a
//! new object version is written with (`x-amz-acl`, `x-amz-grant-*`).
//! The bucket's other access settings are [`crate::access::settings`]'s;
//! the decision they feed is in [`crate::access::authorize`]; see
//! doc/access-control.md.
//!
//! ACLs are canned here for groups: the group grants of a grant list (a
//! request body or `x-amz-grant-*` headers) must amount to a canned ACL.
//! Grants to users name canonical ids: access key ids, and IAM users' ids
//! (`AIDA…`, for every key of the user). On a bucket they are key
//! permissions (as `garage bucket allow` gives them: READ, WRITE,
//! FULL_CONTROL = read, write and owner); on an object they are kept in
//! the version's ACL (READ, READ_ACP, WRITE_ACP, FULL_CONTROL; feature
//! gate `object-acl-grants`). Get*Acl show them, with each key's or
//! user's name as its display name.

use std::collections::BTreeMap;
use std::sync::Arc;

use garage_model::access::{BucketAccess, CannedAcl, ObjectAcl, ObjectPerm};
use garage_model::bucket_table::Bucket;
use garage_model::permission::BucketKeyPerm;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::access::step::AcpGrant;
use crate::ctx::{check_key, Api};
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

pub(crate) fn access_of(b: &Bucket) -> BucketAccess {
    b.params().map(|p| p.access.clone()).unwrap_or_default()
}

pub(crate) fn no_content<T>(out: T) -> S3Response<T> {
    let mut r = S3Response::new(out);
    r.status = Some(hyper::StatusCode::NO_CONTENT);
    r
}

/// A canned ACL named by a request, checked against the bucket's
/// settings: refused when ACLs are disabled (unless it grants nothing
/// beyond the owner) or when it is public and public ACLs are blocked.
fn allowed_acl(access: &BucketAccess, acl: CannedAcl) -> ApiResult<CannedAcl> {
    if !access.acls_enabled() && acl != CannedAcl::Private {
        return Err(ApiError::AccessControlListNotSupported);
    }
    if acl.is_public() && access.block().block_public_acls {
        return Err(ApiError::AccessDenied(
            "Access Denied: the bucket's public access block (BlockPublicAcls) refuses public ACLs"
                .into(),
        ));
    }
    Ok(acl)
}

fn parse_canned(s: &str) -> ApiResult<CannedAcl> {
    CannedAcl::parse(s).ok_or_else(|| {
        ApiError::InvalidArgument(format!(
            "x-amz-acl {s:?} is not a canned ACL (private, public-read, public-read-write, authenticated-read, bucket-owner-full-control, …)"
        ))
    })
}

/// The ACL a new version is written with: `x-amz-acl` (`None`: none
/// given, private).
pub fn written_acl(access: &BucketAccess, given: Option<&str>) -> ApiResult<Option<CannedAcl>> {
    given
        .map(|g| allowed_acl(access, parse_canned(g)?))
        .transpose()
}

/// The ACL a new version is written with, from `x-amz-acl` or the
/// `x-amz-grant-*` headers of the write (`grants`: permission and header
/// value); a grant to the writing key (`writer`) is dropped (it wrote the
/// object), grants to other users are kept, to be checked by
/// [`Api::checked_object_acl`].
pub fn written_acl_with_grants(
    access: &BucketAccess,
    given: Option<&str>,
    grants: &[(&str, Option<&String>)],
    writer: Option<&str>,
) -> ApiResult<Option<ObjectAcl>> {
    let mut g = Vec::new();
    for (perm, value) in grants {
        header_grants(perm, *value, &mut g);
    }
    if g.is_empty() {
        return Ok(written_acl(access, given)?.map(ObjectAcl::canned));
    }
    if given.is_some() {
        return Err(ApiError::InvalidRequest(
            "Specifying both Canned ACLs and Header Grants is not allowed".into(),
        ));
    }
    let mut users = object_grants_of(&g)?;
    users.retain(|id, _| Some(id.as_str()) != writer);
    if !users.is_empty() && !access.acls_enabled() {
        return Err(ApiError::AccessControlListNotSupported);
    }
    Ok(Some(ObjectAcl {
        canned: allowed_acl(access, canned_of_grants(&g)?)?,
        grants: users,
    }))
}

/// The ACL a new version is written with, from an object write's input
/// `$i` (PutObject, CopyObject, CreateMultipartUpload: `x-amz-acl` and
/// the grant headers, no WRITE grant on an object) into `$place` of
/// bucket `$bucket`, by requester `$who`, checked by `$api`
/// ([`written_acl_with_grants`], [`Api::checked_object_acl`]). Returns
/// on a refusal.
#[macro_export]
macro_rules! written_acl {
    ($api:expr, $place:expr, $bucket:expr, $i:expr, $who:expr) => {
        match $crate::access::acl::written_acl_with_grants(
            &$place.access,
            $i.acl.as_ref().map(|a| a.as_str()),
            &[
                ("READ", $i.grant_read.as_ref()),
                ("FULL_CONTROL", $i.grant_full_control.as_ref()),
                ("READ_ACP", $i.grant_read_acp.as_ref()),
                ("WRITE_ACP", $i.grant_write_acp.as_ref()),
            ],
            $who.key.as_ref().map(|k| k.key_id.as_str()),
        )? {
            Some(acl) => Some($api.checked_object_acl($bucket, acl).await?),
            None => None,
        }
    };
}

/// One grant of a grant list, reduced to what decides here.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum GroupGrant {
    AllUsersRead,
    AllUsersWrite,
    AuthenticatedRead,
}

/// The canned ACL a grant list's group grants amount to (grants to keys,
/// `id:…`, are [`key_grants_of`]'s); a grant with no equivalent is
/// refused with a message.
fn canned_of_grants(grants: &[(String, String)]) -> ApiResult<CannedAcl> {
    let mut groups = Vec::new();
    for (grantee, perm) in grants {
        let g = match (grantee.as_str(), perm.as_str()) {
            (ALL_USERS, "READ") => GroupGrant::AllUsersRead,
            (ALL_USERS, "WRITE") => GroupGrant::AllUsersWrite,
            (AUTHENTICATED_USERS, "READ") => GroupGrant::AuthenticatedRead,
            (g, _) if g.starts_with("id:") => continue,
            (g, _) if g.starts_with("emailAddress:") => {
                return Err(ApiError::Refused {
                    code: s3s::S3ErrorCode::UnresolvableGrantByEmailAddress,
                    message: format!(
                        "The e-mail address you provided does not match any account on record: {}",
                        &g["emailAddress:".len()..]
                    ),
                })
            }
            (g, p) => {
                return Err(ApiError::NotImplemented(format!(
                    "the grant of {p} to {g} has no equivalent here: ACLs are canned (private, public-read, public-read-write, authenticated-read); keys get permissions with `garage bucket allow`"
                )))
            }
        };
        groups.push(g);
    }
    groups.sort();
    groups.dedup();
    use GroupGrant::*;
    Ok(match groups.as_slice() {
        [] => CannedAcl::Private,
        [AllUsersRead] => CannedAcl::PublicRead,
        [AllUsersRead, AllUsersWrite] => CannedAcl::PublicReadWrite,
        [AuthenticatedRead] => CannedAcl::AuthenticatedRead,
        _ => {
            return Err(ApiError::NotImplemented(format!(
                "the grants {groups:?} have no canned ACL equivalent"
            )))
        }
    })
}

/// What a grant list gives each key it names (`id:<key id>`), as key
/// permissions: READ reads, WRITE writes, FULL_CONTROL is read, write and
/// owner. READ_ACP and WRITE_ACP alone give nothing here (the ACL is the
/// owner's), so they are accepted only for an owner key (checked by the
/// caller, which knows the owners: `acp_only`).
fn key_grants_of(grants: &[(String, String)]) -> BTreeMap<String, KeyGrant> {
    let mut out: BTreeMap<String, KeyGrant> = BTreeMap::new();
    for (grantee, perm) in grants {
        let Some(id) = grantee.strip_prefix("id:") else {
            continue;
        };
        let g = out.entry(id.to_string()).or_default();
        match perm.as_str() {
            "READ" => g.perm.allow_read = true,
            "WRITE" => g.perm.allow_write = true,
            "FULL_CONTROL" => {
                g.perm.allow_read = true;
                g.perm.allow_write = true;
                g.perm.allow_owner = true;
            }
            _ => g.acp = true,
        }
    }
    out
}

/// What a grant list gives each user it names (`id:…`) on an object: READ,
/// READ_ACP, WRITE_ACP, FULL_CONTROL (WRITE is a bucket's permission).
fn object_grants_of(grants: &[(String, String)]) -> ApiResult<BTreeMap<String, ObjectPerm>> {
    let mut out: BTreeMap<String, ObjectPerm> = BTreeMap::new();
    for (grantee, perm) in grants {
        let Some(id) = grantee.strip_prefix("id:") else {
            continue;
        };
        if !out.entry(id.to_string()).or_default().add(perm) {
            return Err(ApiError::InvalidArgument(format!(
                "{perm} is not a permission of an object: grant READ, READ_ACP, WRITE_ACP or \
                 FULL_CONTROL to {id}"
            )));
        }
    }
    Ok(out)
}

/// The permissions a grant list gives one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct KeyGrant {
    perm: BucketKeyPerm,
    /// A READ_ACP or WRITE_ACP grant.
    acp: bool,
}

/// The canned ACL and the key grants of a Put*Acl request.
struct Requested {
    canned: CannedAcl,
    keys: BTreeMap<String, KeyGrant>,
    /// The grant list, as given (empty for a canned ACL).
    list: Vec<(String, String)>,
    /// A grant list (headers or body), which replaces the keys' grants;
    /// a canned ACL (`x-amz-acl`) leaves them as they are.
    grant_list: bool,
}

/// `x-amz-grant-*` header values: `uri="…"`, `id="…"` or
/// `emailAddress="…"`, comma-separated.
fn header_grants(perm: &str, value: Option<&String>, out: &mut Vec<(String, String)>) {
    let Some(v) = value else {
        return;
    };
    for part in v.split(',') {
        let (k, val) = part.trim().split_once('=').unwrap_or(("", part));
        let val = val.trim().trim_matches('"');
        let grantee = match k.trim() {
            "uri" => val.to_string(),
            "id" => format!("id:{val}"),
            other => format!("{other}:{val}"),
        };
        out.push((grantee, perm.to_string()));
    }
}

fn body_grants(p: &AccessControlPolicy) -> ApiResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    for g in p.grants.iter().flatten() {
        let grantee = g
            .grantee
            .as_ref()
            .ok_or_else(|| ApiError::MalformedAcl("a Grant has no Grantee".into()))?;
        let perm = g
            .permission
            .as_ref()
            .ok_or_else(|| ApiError::MalformedAcl("a Grant has no Permission".into()))?;
        let who = match (grantee.type_.as_str(), &grantee.uri, &grantee.id) {
            (Type::GROUP, Some(uri), _) => uri.clone(),
            (Type::CANONICAL_USER, _, Some(id)) => format!("id:{id}"),
            (t, _, _) => {
                return Err(ApiError::MalformedAcl(format!(
                    "a Grantee of type {t} lacks its URI or ID"
                )))
            }
        };
        out.push((who, perm.as_str().to_string()));
    }
    Ok(out)
}

/// What a Put*Acl request asks for (a [`Requested`]): `x-amz-acl`, grant
/// headers, or a body; exactly one of them.
macro_rules! requested_acl {
    ($i:expr) => {{
        let mut grants = Vec::new();
        header_grants("READ", $i.grant_read.as_ref(), &mut grants);
        header_grants("WRITE", $i.grant_write.as_ref(), &mut grants);
        header_grants("FULL_CONTROL", $i.grant_full_control.as_ref(), &mut grants);
        header_grants("READ_ACP", $i.grant_read_acp.as_ref(), &mut grants);
        header_grants("WRITE_ACP", $i.grant_write_acp.as_ref(), &mut grants);
        let given = [
            $i.acl.is_some(),
            !grants.is_empty(),
            $i.access_control_policy.is_some(),
        ];
        let of_grants = |g: Vec<(String, String)>| -> ApiResult<Requested> {
            Ok(Requested {
                canned: canned_of_grants(&g)?,
                keys: key_grants_of(&g),
                list: g,
                grant_list: true,
            })
        };
        match given {
            [true, false, false] => Ok(Requested {
                canned: parse_canned($i.acl.as_ref().unwrap().as_str())?,
                keys: BTreeMap::new(),
                list: Vec::new(),
                grant_list: false,
            }),
            [false, true, false] => of_grants(grants),
            [false, false, true] => {
                of_grants(body_grants($i.access_control_policy.as_ref().unwrap())?)
            }
            [false, false, false] => Err(ApiError::MalformedAcl(
                "give an ACL: x-amz-acl, x-amz-grant-* headers or an AccessControlPolicy body"
                    .into(),
            )),
            _ => Err(ApiError::InvalidRequest(
                "Specifying both Canned ACLs and Header Grants, or a body with either, is not allowed"
                    .into(),
            )),
        }
    }};
}

/// The owner keys of a bucket.
fn owner_keys(b: &Bucket) -> Vec<String> {
    b.params()
        .map(|p| {
            p.authorized_keys
                .items()
                .filter(|(_, _, perm)| perm.allow_owner)
                .map(|(k, _, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn group(uri: &str, perm: &'static str) -> Grant {
    Grant {
        grantee: Some(Grantee {
            display_name: None,
            email_address: None,
            id: None,
            type_: Type::from_static(Type::GROUP),
            uri: Some(uri.into()),
        }),
        permission: Some(Permission::from_static(perm)),
    }
}

fn user(id: &str, name: Option<&str>, perm: &'static str) -> Grant {
    Grant {
        grantee: Some(Grantee {
            display_name: Some(name.unwrap_or(id).into()),
            email_address: None,
            id: Some(id.into()),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(perm)),
    }
}

fn canned_grants(acl: CannedAcl) -> Vec<Grant> {
    match acl {
        CannedAcl::Private => vec![],
        CannedAcl::PublicRead => vec![group(ALL_USERS, Permission::READ)],
        CannedAcl::PublicReadWrite => vec![
            group(ALL_USERS, Permission::READ),
            group(ALL_USERS, Permission::WRITE),
        ],
        CannedAcl::AuthenticatedRead => vec![group(AUTHENTICATED_USERS, Permission::READ)],
    }
}

/// The bucket's owner as S3 shows it: its first key with the owner
/// permission (keys are not accounts here), named by the key's name.
fn owner_of(b: &Bucket, names: &KeyNames) -> Option<Owner> {
    let id = owner_id_of(b)?;
    Some(Owner {
        display_name: Some(names.get(&id).cloned().unwrap_or_else(|| id.clone())),
        id: Some(id),
    })
}

/// The names of keys, by id.
type KeyNames = BTreeMap<String, String>;

/// The id of [`owner_of`].
pub fn owner_id_of(b: &Bucket) -> Option<String> {
    b.params()?
        .authorized_keys
        .items()
        .filter(|(_, _, perm)| perm.allow_owner)
        .map(|(k, _, _)| k.clone())
        .min()
}

/// The grants of the owner keys (FULL_CONTROL) and, for a bucket, of the
/// other keys (READ, WRITE): key permissions, as ACL grants.
fn key_grants(b: &Bucket, all_keys: bool, names: &KeyNames) -> Vec<Grant> {
    let mut out = Vec::new();
    let Some(p) = b.params() else {
        return out;
    };
    let mut keys: Vec<_> = p.authorized_keys.items().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    for (id, _, perm) in keys {
        let name = names.get(id).map(|n| n.as_str());
        if perm.allow_owner {
            out.push(user(id, name, Permission::FULL_CONTROL));
        } else if all_keys {
            if perm.allow_read {
                out.push(user(id, name, Permission::READ));
            }
            if perm.allow_write {
                out.push(user(id, name, Permission::WRITE));
            }
        }
    }
    out
}

impl Api {
    /// The names of the keys with a permission on `b`, from this node's
    /// copy of the key table.
    async fn key_names(&self, b: &Bucket) -> KeyNames {
        let mut out = KeyNames::new();
        let Some(p) = b.params() else {
            return out;
        };
        for (id, _, _) in p.authorized_keys.items() {
            if let Ok(Some(k)) = self
                .metadata
                .keys
                .get_local(&garage_table::EmptyKey, id)
                .await
            {
                if k.params().is_some() {
                    out.insert(id.clone(), k.name().to_string());
                }
            }
        }
        out
    }

    /// Gives the keys named by a PutBucketAcl grant list their
    /// permissions, and takes them from the keys it does not name (the
    /// list replaces the ACL, as on S3; owner keys keep theirs: the owner
    /// always has full control).
    async fn apply_key_grants(
        &self,
        b: &Bucket,
        keys: &BTreeMap<String, KeyGrant>,
    ) -> ApiResult<()> {
        let owners = owner_keys(b);
        for (id, g) in keys {
            let live = self
                .metadata
                .keys
                .get(&garage_table::EmptyKey, id)
                .await?
                .is_some_and(|k| k.params().is_some());
            if !live {
                return Err(ApiError::InvalidArgument(format!(
                    "Invalid id: no access key {id} (canonical user ids are access key ids)"
                )));
            }
            if g.acp && g.perm == BucketKeyPerm::NONE && !owners.contains(id) {
                return Err(ApiError::NotImplemented(format!(
                    "READ_ACP and WRITE_ACP alone give {id} nothing here: only owner keys read and \
                     write ACLs (grant FULL_CONTROL)"
                )));
            }
        }
        let current: Vec<(String, BucketKeyPerm)> = b
            .params()
            .map(|p| {
                p.authorized_keys
                    .items()
                    .map(|(k, _, perm)| (k.clone(), *perm))
                    .collect()
            })
            .unwrap_or_default();
        for (id, perm) in current {
            if owners.contains(&id) || keys.contains_key(&id) || perm == BucketKeyPerm::NONE {
                continue;
            }
            self.metadata
                .set_permissions(b.id, &id, BucketKeyPerm::NONE)
                .await?;
        }
        for (id, g) in keys {
            if owners.contains(id) {
                continue;
            }
            self.metadata.set_permissions(b.id, id, g.perm).await?;
        }
        Ok(())
    }

    pub async fn get_bucket_acl(
        self: Arc<Self>,
        _req: S3Request<GetBucketAclInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketAclOutput>> {
        let b = ctx.granted.bucket;
        let access = access_of(&b);
        let names = self.key_names(&b).await;
        let mut grants = key_grants(&b, true, &names);
        grants.extend(canned_grants(access.effective(*access.acl.get())));
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(grants),
            owner: owner_of(&b, &names),
        }))
    }

    pub async fn put_bucket_acl(
        self: Arc<Self>,
        req: S3Request<PutBucketAclInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketAclOutput>> {
        let i = req.input;
        let b = ctx.granted.bucket;
        let asked = requested_acl!(i)?;
        let acl = allowed_acl(&access_of(&b), asked.canned)?;
        if !asked.keys.is_empty() && !access_of(&b).acls_enabled() {
            return Err(ApiError::AccessControlListNotSupported);
        }
        if asked.grant_list {
            self.apply_key_grants(&b, &asked.keys).await?;
        }
        let b = self.bucket(b.id, &i.bucket).await?;
        self.update_bucket(b, |p| p.access.acl.update(acl)).await?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    pub async fn get_object_acl(
        self: Arc<Self>,
        req: S3Request<GetObjectAclInput>,
        ctx: Ctx<AcpGrant>,
    ) -> ApiResult<S3Response<GetObjectAclOutput>> {
        let i = req.input;
        check_key(&i.key)?;
        let id = ctx.granted.bucket;
        let b = self.bucket(id, &i.bucket).await?;
        let found = ctx
            .granted
            .hide(self.find_version(id, &i.key, i.version_id.as_deref()).await)?;
        let acl = match &found.history {
            Some(h) => h.version.object_acl(),
            None => found.version.object_acl(),
        };
        ctx.granted.check(&acl)?;
        let mut names = self.key_names(&b).await;
        let mut grants = key_grants(&b, false, &names);
        if access_of(&b).acls_enabled() {
            self.add_grantee_names(acl.grants.keys(), &mut names).await;
            for (who, perm) in &acl.grants {
                let name = names.get(who).map(|n| n.as_str());
                for p in perm.names() {
                    grants.push(user(who, name, p));
                }
            }
        }
        grants.extend(canned_grants(access_of(&b).effective(acl.canned)));
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(grants),
            owner: owner_of(&b, &names),
            request_charged: None,
        }))
    }

    pub async fn put_object_acl(
        self: Arc<Self>,
        req: S3Request<PutObjectAclInput>,
        ctx: Ctx<AcpGrant>,
    ) -> ApiResult<S3Response<PutObjectAclOutput>> {
        let cause =
            crate::request::cause(&req.extensions, &ctx.who, garage_model::notify::Op::AclPut);
        let i = req.input;
        check_key(&i.key)?;
        let id = ctx.granted.bucket;
        let b = self.bucket(id, &i.bucket).await?;
        let asked = requested_acl!(i)?;
        let found = ctx
            .granted
            .hide(self.find_version(id, &i.key, i.version_id.as_deref()).await)?;
        let current = match &found.history {
            Some(h) => h.version.object_acl(),
            None => found.version.object_acl(),
        };
        ctx.granted.check(&current)?;
        // The grantees are checked only once the requester may change the
        // ACL: a refusal must not tell which access keys exist.
        let canned = allowed_acl(&access_of(&b), asked.canned)?;
        let users = object_grants_of(&asked.list)?;
        if !users.is_empty() && !access_of(&b).acls_enabled() {
            return Err(ApiError::AccessControlListNotSupported);
        }
        let acl = self
            .checked_object_acl(
                id,
                ObjectAcl {
                    canned,
                    grants: users,
                },
            )
            .await?;
        let version_id = found.version_id();
        // One time for both copies (object and history entries), after
        // both.
        let last = found
            .history
            .as_ref()
            .map_or(0, |h| h.version.acl_stamp())
            .max(found.version.acl_stamp());
        let ts = garage_util::time::increment_after(last);
        self.change_version(
            id,
            &i.key,
            found,
            |v| v.set_object_acl(ts, acl.clone()),
            &cause,
        )
        .await?;
        let mut resp = S3Response::new(PutObjectAclOutput {
            request_charged: None,
        });
        if let Some(v) = version_id.and_then(|v| hyper::header::HeaderValue::from_str(&v).ok()) {
            resp.headers.insert("x-amz-version-id", v);
        }
        Ok(resp)
    }

    /// An object ACL's grants to users, checked: each names a live access
    /// key or an IAM user (by its id), or it is refused; grants to the
    /// bucket's owner keys are dropped (they have full control); any
    /// other needs the cluster finalized at the release that brought
    /// them (older nodes cannot read them).
    pub(crate) async fn checked_object_acl(
        &self,
        bucket: garage_util::data::Uuid,
        mut acl: ObjectAcl,
    ) -> ApiResult<ObjectAcl> {
        if acl.grants.is_empty() {
            return Ok(acl);
        }
        let b = self.bucket(bucket, "").await?;
        let owners = owner_keys(&b);
        acl.grants.retain(|id, _| !owners.contains(id));
        if acl.grants.is_empty() {
            return Ok(acl);
        }
        let gate = &garage_rpc::system::versions::OBJECT_ACL_GRANTS;
        if !self.blocks.system.feature_allowed(gate) {
            return Err(ApiError::NotImplemented(format!(
                "object ACL grants to users need the cluster finalized at v{} or later (it is at \
                 v{}): upgrade every node, then run `garage upgrade finalize`",
                gate.since,
                self.blocks.system.active_version()
            )));
        }
        let mut names = KeyNames::new();
        self.add_grantee_names(acl.grants.keys(), &mut names).await;
        if let Some(unknown) = acl.grants.keys().find(|id| !names.contains_key(*id)) {
            return Err(ApiError::InvalidArgument(format!(
                "Invalid id: {unknown} is neither an access key nor an IAM user's id (canonical \
                 user ids are access key ids, or IAM user ids: AIDA…)"
            )));
        }
        Ok(acl)
    }

    /// Adds the names of the grantees `ids` (access keys, IAM users by
    /// id) to `names`; an id that is neither is left out.
    async fn add_grantee_names(&self, ids: impl Iterator<Item = &String>, names: &mut KeyNames) {
        let mut users = None;
        for id in ids {
            if names.contains_key(id) {
                continue;
            }
            if id.starts_with("AIDA") {
                if users.is_none() {
                    users = Some(self.garage.iam.list_users("").await.unwrap_or_default());
                }
                let found = users
                    .iter()
                    .flatten()
                    .find(|(_, c)| c.id == *id)
                    .map(|(u, _)| u.name.clone());
                if let Some(n) = found {
                    names.insert(id.clone(), n);
                }
                continue;
            }
            if let Ok(Some(k)) = self.metadata.keys.get(&garage_table::EmptyKey, id).await {
                if k.params().is_some() {
                    names.insert(id.clone(), k.name().to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
