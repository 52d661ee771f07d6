//! Unit tests of the grant lists and written ACLs.

use super::*;
use garage_model::access::{ObjectOwnership as Ownership, PublicAccessBlock};

fn g(who: &str, p: &str) -> (String, String) {
    (who.to_string(), p.to_string())
}

#[test]
fn grant_lists_amount_to_canned_acls() {
    assert_eq!(
        canned_of_grants(&[g("id:GK1", "FULL_CONTROL")]).unwrap(),
        CannedAcl::Private
    );
    assert_eq!(
        canned_of_grants(&[g("id:GK1", "FULL_CONTROL"), g(ALL_USERS, "READ")]).unwrap(),
        CannedAcl::PublicRead
    );
    assert_eq!(
        canned_of_grants(&[g(ALL_USERS, "WRITE"), g(ALL_USERS, "READ")]).unwrap(),
        CannedAcl::PublicReadWrite
    );
    assert_eq!(
        canned_of_grants(&[g(AUTHENTICATED_USERS, "READ")]).unwrap(),
        CannedAcl::AuthenticatedRead
    );
    assert!(canned_of_grants(&[g(ALL_USERS, "WRITE")]).is_err());
    assert!(matches!(
        canned_of_grants(&[g("emailAddress:a@b", "READ")]),
        Err(ApiError::Refused {
            code: s3s::S3ErrorCode::UnresolvableGrantByEmailAddress,
            ..
        })
    ));
    let keys = key_grants_of(&[
        g("id:GK1", "READ"),
        g("id:GK1", "WRITE"),
        g("id:GK2", "FULL_CONTROL"),
        g("id:GK3", "READ_ACP"),
        g(ALL_USERS, "READ"),
    ]);
    assert_eq!(keys.len(), 3);
    let p = |r, w, o| BucketKeyPerm {
        allow_read: r,
        allow_write: w,
        allow_owner: o,
    };
    assert_eq!(keys["GK1"].perm, p(true, true, false));
    assert_eq!(keys["GK2"].perm, p(true, true, true));
    assert!(keys["GK3"].acp && keys["GK3"].perm == BucketKeyPerm::NONE);
    let mut h = Vec::new();
    header_grants(
        "READ",
        Some(&format!("uri=\"{ALL_USERS}\", id=\"GK1\"")),
        &mut h,
    );
    assert_eq!(h, vec![g(ALL_USERS, "READ"), g("id:GK1", "READ")]);
}

#[test]
fn written_acls_respect_the_bucket_settings() {
    let mut a = BucketAccess::default();
    assert_eq!(written_acl(&a, None).unwrap(), None);
    assert_eq!(
        written_acl(&a, Some("public-read")).unwrap(),
        Some(CannedAcl::PublicRead)
    );
    assert!(matches!(
        written_acl(&a, Some("everyone")),
        Err(ApiError::InvalidArgument(_))
    ));
    a.public_access_block.update(Some(PublicAccessBlock {
        block_public_acls: true,
        ..Default::default()
    }));
    assert!(matches!(
        written_acl(&a, Some("public-read")),
        Err(ApiError::AccessDenied(_))
    ));
    assert!(written_acl(&a, Some("private")).is_ok());
    let mut e = BucketAccess::default();
    e.ownership.update(Some(Ownership::BucketOwnerEnforced));
    assert!(matches!(
        written_acl(&e, Some("public-read")),
        Err(ApiError::AccessControlListNotSupported)
    ));
    assert_eq!(
        written_acl(&e, Some("bucket-owner-full-control")).unwrap(),
        Some(CannedAcl::Private)
    );
}
