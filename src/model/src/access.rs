//! Access control state beyond key permissions, as S3 has it: canned ACLs
//! of buckets and object versions, the bucket policy, object ownership
//! controls and the public access block. See doc/access-control.md.
//!
//! Every part is a last-writer-wins register: a bucket's
//! [`BucketAccess`] lives in its bucket entry (fully replicated, read
//! locally on every request); an object version's ACL travels with the
//! version ([`crate::object_table::ObjectVersion::acl`]), like its lock.
//! The decision itself (which request is allowed) is the S3 API's.

use garage_util::crdt::{Crdt, Lww};
use serde::{Deserialize, Serialize};

/// The canned ACLs S3 has for buckets and objects (`x-amz-acl`), that
/// grant something beyond the owner's full control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CannedAcl {
    /// The owner only (`private`; also what `bucket-owner-full-control`
    /// and `bucket-owner-read` amount to here: a bucket has one owner).
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
