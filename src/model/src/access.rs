//! Access control state beyond key permissions, as S3 has it: canned ACLs
//! of buckets and object versions, the bucket policy, object ownership
//! controls and the public access block. See doc/access-control.md.
//!
//! Every part is a last-writer-wins register: a bucket's
//! [`BucketAccess`] lives in its bucket entry (fully replicated, read
//! locally on every request); an object version's ACL travels with the
//! version ([`crate::object_table::ObjectVersion::acl`]), like its lock.
//! The decision itself (which request is allowed) is the S3 API's.

use std::collections::BTreeMap;

use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};

/// The canned ACLs S3 has for buckets and objects (`x-amz-acl`), that
/// grant something beyond the owner's full control.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum CannedAcl {
    /// The owner only (`private`; also what `bucket-owner-full-control`
    /// and `bucket-owner-read` amount to here: a bucket has one owner).
    #[default]
    Private,
    /// Everyone may read (objects: GET/HEAD; buckets: list).
    PublicRead,
    /// Everyone may read and write (buckets only, as on S3).
    PublicReadWrite,
    /// Every signed request, whatever its key, may read.
    AuthenticatedRead,
}

impl CannedAcl {
    pub fn as_str(&self) -> &'static str {
        match self {
            CannedAcl::Private => "private",
            CannedAcl::PublicRead => "public-read",
            CannedAcl::PublicReadWrite => "public-read-write",
            CannedAcl::AuthenticatedRead => "authenticated-read",
        }
    }

    /// The canned ACL of an `x-amz-acl` value; `None` for a value S3 does
    /// not have. `aws-exec-read` and `log-delivery-write` grant to AWS
    /// services, which do not exist here: as private.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "private"
            | "bucket-owner-full-control"
            | "bucket-owner-read"
            | "aws-exec-read"
            | "log-delivery-write" => CannedAcl::Private,
            "public-read" => CannedAcl::PublicRead,
            "public-read-write" => CannedAcl::PublicReadWrite,
            "authenticated-read" => CannedAcl::AuthenticatedRead,
            _ => return None,
        })
    }

    /// Whether it grants anything to everyone or to every signed request
    /// (what S3's public access block calls a public ACL).
    pub fn is_public(&self) -> bool {
        *self != CannedAcl::Private
    }

    /// Whether it lets a request read: `signed` tells whether the request
    /// was signed by some key.
    pub fn grants_read(&self, signed: bool) -> bool {
        match self {
            CannedAcl::Private => false,
            CannedAcl::PublicRead | CannedAcl::PublicReadWrite => true,
            CannedAcl::AuthenticatedRead => signed,
        }
    }

    /// Whether it lets anyone write (only `public-read-write` does).
    pub fn grants_write(&self) -> bool {
        *self == CannedAcl::PublicReadWrite
    }
}

/// S3's object ownership setting. Keys are not accounts here, so the
/// setting matters only for ACLs: `BucketOwnerEnforced` disables them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectOwnership {
    BucketOwnerEnforced,
    BucketOwnerPreferred,
    ObjectWriter,
}

impl ObjectOwnership {
    pub fn as_str(&self) -> &'static str {
        match self {
            ObjectOwnership::BucketOwnerEnforced => "BucketOwnerEnforced",
            ObjectOwnership::BucketOwnerPreferred => "BucketOwnerPreferred",
            ObjectOwnership::ObjectWriter => "ObjectWriter",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "BucketOwnerEnforced" => ObjectOwnership::BucketOwnerEnforced,
            "BucketOwnerPreferred" => ObjectOwnership::BucketOwnerPreferred,
            "ObjectWriter" => ObjectOwnership::ObjectWriter,
            _ => return None,
        })
    }
}

/// S3's public access block of a bucket.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct PublicAccessBlock {
    /// Refuse requests that set a public ACL.
    pub block_public_acls: bool,
    /// Public ACLs grant nothing.
    pub ignore_public_acls: bool,
    /// Refuse a bucket policy that grants public access.
    pub block_public_policy: bool,
    /// A public policy grants only to keys with a permission on the
    /// bucket.
    pub restrict_public_buckets: bool,
}

/// A bucket's access control beyond key permissions. Each part is a
/// last-writer-wins register; absent in older entries (all defaults:
/// private, no policy, no ownership controls, no public access block).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketAccess {
    pub acl: Lww<CannedAcl>,
    /// The policy document as accepted (JSON, checked by the S3 API).
    pub policy: Lww<Option<String>>,
    pub ownership: Lww<Option<ObjectOwnership>>,
    pub public_access_block: Lww<Option<PublicAccessBlock>>,
}

impl Default for BucketAccess {
    fn default() -> Self {
        Self {
            acl: Lww::raw(0, CannedAcl::Private),
            policy: Lww::raw(0, None),
            ownership: Lww::raw(0, None),
            public_access_block: Lww::raw(0, None),
        }
    }
}

impl BucketAccess {
    /// Whether ACLs take part in decisions (ownership controls other than
    /// `BucketOwnerEnforced`).
    pub fn acls_enabled(&self) -> bool {
        *self.ownership.get() != Some(ObjectOwnership::BucketOwnerEnforced)
    }

    pub fn block(&self) -> PublicAccessBlock {
        self.public_access_block.get().unwrap_or_default()
    }

    /// The ACL a decision uses: none when ACLs are disabled, or when the
    /// ACL is public and public ACLs are ignored.
    pub fn effective(&self, acl: CannedAcl) -> CannedAcl {
        if !self.acls_enabled() || (acl.is_public() && self.block().ignore_public_acls) {
            CannedAcl::Private
        } else {
            acl
        }
    }
}

impl Crdt for BucketAccess {
    fn merge(&mut self, other: &Self) {
        self.acl.merge(&other.acl);
        self.policy.merge(&other.policy);
        self.ownership.merge(&other.ownership);
        self.public_access_block.merge(&other.public_access_block);
    }
}

/// An object version's ACL: a last-writer-wins register, set from
/// `x-amz-acl` when the version is written and by PutObjectAcl later.
/// Absent (the default, time 0): private.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionAcl(Lww<CannedAcl>);

impl Default for VersionAcl {
    fn default() -> Self {
        Self(Lww::raw(0, CannedAcl::Private))
    }
}

impl VersionAcl {
    /// The ACL a version is written with, at its time `ts`.
    pub fn written(ts: u64, acl: CannedAcl) -> Self {
        Self(Lww::raw(ts, acl))
    }

    pub fn get(&self) -> CannedAcl {
        *self.0.get()
    }

    /// A later change (after every value seen).
    pub fn update(&mut self, acl: CannedAcl) {
        self.0.update(acl);
    }
}

impl Crdt for VersionAcl {
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0);
    }
}

/// What an object ACL grants one user: S3's READ (the object's data and
/// metadata), READ_ACP and WRITE_ACP (its ACL); FULL_CONTROL is all
/// three (WRITE means nothing on an object).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ObjectPerm {
    pub read: bool,
    pub read_acp: bool,
    pub write_acp: bool,
}

impl ObjectPerm {
    pub const READ: Self = Self {
        read: true,
        read_acp: false,
        write_acp: false,
    };
    pub const READ_ACP: Self = Self {
        read: false,
        read_acp: true,
        write_acp: false,
    };
    pub const WRITE_ACP: Self = Self {
        read: false,
        read_acp: false,
        write_acp: true,
    };
    pub const FULL_CONTROL: Self = Self {
        read: true,
        read_acp: true,
        write_acp: true,
    };

    pub fn is_none(&self) -> bool {
        *self == Self::default()
    }

    /// Whether it has everything `need` has.
    pub fn covers(&self, need: ObjectPerm) -> bool {
        (self.read || !need.read)
            && (self.read_acp || !need.read_acp)
            && (self.write_acp || !need.write_acp)
    }

    /// Adds S3's permission `name` (`READ`, `READ_ACP`, `WRITE_ACP`,
    /// `FULL_CONTROL`); `false` for another name.
    pub fn add(&mut self, name: &str) -> bool {
        match name {
            "READ" => self.read = true,
            "READ_ACP" => self.read_acp = true,
            "WRITE_ACP" => self.write_acp = true,
            "FULL_CONTROL" => *self = Self::FULL_CONTROL,
            _ => return false,
        }
        true
    }

    /// Its S3 permission names: `FULL_CONTROL` alone when it is all.
    pub fn names(&self) -> Vec<&'static str> {
        if *self == Self::FULL_CONTROL {
            return vec!["FULL_CONTROL"];
        }
        [
            (self.read, "READ"),
            (self.read_acp, "READ_ACP"),
            (self.write_acp, "WRITE_ACP"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| n)
        .collect()
    }
}

/// An object version's whole ACL: its canned part, and its grants to
/// users by canonical id (an access key id, or an IAM user's id: the
/// grant then holds for every key of the user).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectAcl {
    pub canned: CannedAcl,
    pub grants: BTreeMap<String, ObjectPerm>,
}

impl ObjectAcl {
    /// A canned ACL, with no grant to a user.
    pub fn canned(canned: CannedAcl) -> Self {
        Self {
            canned,
            grants: BTreeMap::new(),
        }
    }

    /// What it grants the requester whose canonical ids (its key's id,
    /// its IAM user's id) are `ids`.
    pub fn granted_to<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> ObjectPerm {
        let mut out = ObjectPerm::default();
        for id in ids {
            if let Some(p) = self.grants.get(id) {
                out.read |= p.read;
                out.read_acp |= p.read_acp;
                out.write_acp |= p.write_acp;
            }
        }
        out
    }
}

/// The grants of an object version's ACL to users, with its canned part
/// ([`ObjectAcl`]), as one last-writer-wins register beside the canned
/// one ([`VersionAcl`], which v0.2.0 reads): the newer of the two is the
/// version's ACL (this one on a tie). Written only when an ACL grants to
/// a user, which needs the `object-acl-grants` feature (v0.3.0
/// finalized): an entry without grants has the bytes it had before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionGrants(Option<Lww<ObjectAcl>>);

impl VersionGrants {
    /// A register with an explicit timestamp (for tests).
    pub fn raw(ts: u64, acl: ObjectAcl) -> Self {
        Self(Some(Lww::raw(ts, acl)))
    }

    pub fn is_unset(&self) -> bool {
        self.0.is_none()
    }

    fn timestamp(&self) -> Option<u64> {
        self.0.as_ref().map(|l| l.timestamp())
    }
}

impl Crdt for VersionGrants {
    fn merge(&mut self, other: &Self) {
        match (&mut self.0, &other.0) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.0 = Some(b.clone()),
            _ => (),
        }
    }
}

/// The ACL of a version from its two registers (see [`VersionGrants`]).
pub fn version_acl(canned: &VersionAcl, grants: &VersionGrants) -> ObjectAcl {
    match &grants.0 {
        Some(g) if g.timestamp() >= canned.0.timestamp() => g.get().clone(),
        _ => ObjectAcl::canned(canned.get()),
    }
}

/// The time after which a change of a version's ACL must come (the
/// later of its two registers').
pub fn version_acl_stamp(canned: &VersionAcl, grants: &VersionGrants) -> u64 {
    canned.0.timestamp().max(grants.timestamp().unwrap_or(0))
}

/// The ACL a version is written with at its time `ts`, or set at `ts`
/// (after [`version_acl_stamp`]): in the canned register when it grants
/// to no user, else in the grants register.
pub fn write_version_acl(
    canned: &mut VersionAcl,
    grants: &mut VersionGrants,
    ts: u64,
    acl: ObjectAcl,
) {
    if acl.grants.is_empty() {
        *canned = VersionAcl::written(ts, acl.canned);
    } else {
        *grants = VersionGrants(Some(Lww::raw(ts, acl)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_acls_parse_and_grant() {
        for a in [
            CannedAcl::Private,
            CannedAcl::PublicRead,
            CannedAcl::PublicReadWrite,
            CannedAcl::AuthenticatedRead,
        ] {
            assert_eq!(CannedAcl::parse(a.as_str()), Some(a));
        }
        assert_eq!(
            CannedAcl::parse("bucket-owner-full-control"),
            Some(CannedAcl::Private)
        );
        assert_eq!(CannedAcl::parse("public"), None);
        assert!(!CannedAcl::AuthenticatedRead.grants_read(false));
        assert!(CannedAcl::AuthenticatedRead.grants_read(true));
        assert!(CannedAcl::PublicRead.grants_read(false));
        assert!(!CannedAcl::PublicRead.grants_write());
        assert!(CannedAcl::PublicReadWrite.grants_write());
    }

    #[test]
    fn ownership_enforced_and_ignored_public_acls_grant_nothing() {
        let mut a = BucketAccess::default();
        assert_eq!(a.effective(CannedAcl::PublicRead), CannedAcl::PublicRead);
        a.public_access_block.update(Some(PublicAccessBlock {
            ignore_public_acls: true,
            ..Default::default()
        }));
        assert_eq!(a.effective(CannedAcl::PublicRead), CannedAcl::Private);
        let mut b = BucketAccess::default();
        b.ownership
            .update(Some(ObjectOwnership::BucketOwnerEnforced));
        assert_eq!(b.effective(CannedAcl::PublicReadWrite), CannedAcl::Private);
    }

    fn reader_acl(canned: CannedAcl) -> ObjectAcl {
        ObjectAcl {
            canned,
            grants: [(
                "AIDAREADER".to_string(),
                ObjectPerm {
                    read: true,
                    ..Default::default()
                },
            )]
            .into(),
        }
    }

    #[test]
    fn object_perms_parse_cover_and_name() {
        let mut p = ObjectPerm::default();
        assert!(p.is_none());
        assert!(p.add("READ_ACP") && !p.add("WRITE"));
        assert_eq!(p.names(), vec!["READ_ACP"]);
        assert!(!p.covers(ObjectPerm::FULL_CONTROL));
        p.add("FULL_CONTROL");
        assert_eq!(p.names(), vec!["FULL_CONTROL"]);
        let acl = reader_acl(CannedAcl::Private);
        assert!(acl.granted_to(["GKother", "AIDAREADER"]).read);
        assert!(acl.granted_to(["GKother"]).is_none());
    }

    #[test]
    fn the_newer_register_is_the_version_acl() {
        let (mut canned, mut grants) = (VersionAcl::default(), VersionGrants::default());
        assert_eq!(version_acl(&canned, &grants), ObjectAcl::default());
        write_version_acl(
            &mut canned,
            &mut grants,
            10,
            reader_acl(CannedAcl::PublicRead),
        );
        assert!(canned.0.timestamp() == 0 && !grants.is_unset());
        assert_eq!(
            version_acl(&canned, &grants),
            reader_acl(CannedAcl::PublicRead)
        );
        // A canned ACL set later replaces the grants, and the reverse.
        let ts = version_acl_stamp(&canned, &grants) + 1;
        write_version_acl(
            &mut canned,
            &mut grants,
            ts,
            ObjectAcl::canned(CannedAcl::Private),
        );
        assert_eq!(version_acl(&canned, &grants), ObjectAcl::default());
        let ts = version_acl_stamp(&canned, &grants) + 1;
        write_version_acl(&mut canned, &mut grants, ts, reader_acl(CannedAcl::Private));
        assert_eq!(
            version_acl(&canned, &grants),
            reader_acl(CannedAcl::Private)
        );
        // Written without grants, a version keeps its bytes of before.
        let (mut c2, mut g2) = (VersionAcl::default(), VersionGrants::default());
        write_version_acl(
            &mut c2,
            &mut g2,
            10,
            ObjectAcl::canned(CannedAcl::PublicRead),
        );
        assert!(g2.is_unset());
        assert_eq!(c2, VersionAcl::written(10, CannedAcl::PublicRead));
    }

    #[test]
    fn concurrent_acl_changes_merge_to_one_acl() {
        // Two copies of a version, each changed by a different node at the
        // same moment: one to a canned ACL, one to a grant list. Every
        // order of merging gives the same ACL.
        let base = (
            VersionAcl::written(5, CannedAcl::Private),
            VersionGrants::default(),
        );
        let mut a = base.clone();
        write_version_acl(
            &mut a.0,
            &mut a.1,
            9,
            ObjectAcl::canned(CannedAcl::PublicRead),
        );
        let mut b = base.clone();
        write_version_acl(&mut b.0, &mut b.1, 9, reader_acl(CannedAcl::Private));
        let merge = |x: &(VersionAcl, VersionGrants), y: &(VersionAcl, VersionGrants)| {
            let mut m = x.clone();
            m.0.merge(&y.0);
            m.1.merge(&y.1);
            m
        };
        let (ab, ba) = (merge(&a, &b), merge(&b, &a));
        assert_eq!(ab, ba);
        // On a tie, the grant list wins.
        assert_eq!(version_acl(&ab.0, &ab.1), reader_acl(CannedAcl::Private));
        // A later canned change wins over both.
        let mut c = ab.clone();
        let ts = version_acl_stamp(&c.0, &c.1) + 1;
        write_version_acl(
            &mut c.0,
            &mut c.1,
            ts,
            ObjectAcl::canned(CannedAcl::AuthenticatedRead),
        );
        assert_eq!(
            version_acl(&merge(&ab, &c).0, &merge(&ab, &c).1),
            ObjectAcl::canned(CannedAcl::AuthenticatedRead)
        );
    }

    #[test]
    fn bucket_access_merges_per_register() {
        let mut a = BucketAccess::default();
        let mut b = a.clone();
        a.acl.update(CannedAcl::PublicRead);
        b.policy.update(Some("{}".into()));
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(*ab.acl.get(), CannedAcl::PublicRead);
        assert_eq!(ab.policy.get().as_deref(), Some("{}"));
    }
}
