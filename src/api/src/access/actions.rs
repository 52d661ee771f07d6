//! The policy action of each S3 operation: what identity policies (and,
//! for objects and listings, bucket policies) are asked about. Most are
//! the operation's name (`put_bucket_policy`: `s3:PutBucketPolicy`); the
//! others are AWS's names, listed here (a deletion of a configuration is
//! its `Put…` action, as on AWS).

/// The action of operation `op` (the S3 trait's method name).
pub fn of_operation(op: &'static str) -> &'static str {
    match op {
        "list_buckets" => "s3:ListAllMyBuckets",
        "head_bucket" | "list_objects" | "list_objects_v2" => "s3:ListBucket",
        "list_object_versions" => "s3:ListBucketVersions",
        "head_object" => "s3:GetObject",
        "copy_object"
        | "create_multipart_upload"
        | "upload_part"
        | "upload_part_copy"
        | "complete_multipart_upload" => "s3:PutObject",
        "delete_objects" => "s3:DeleteObject",
        "list_parts" => "s3:ListMultipartUploadParts",
        "list_multipart_uploads" => "s3:ListBucketMultipartUploads",
        "get_bucket_cors" => "s3:GetBucketCORS",
        "put_bucket_cors" | "delete_bucket_cors" => "s3:PutBucketCORS",
        "delete_bucket_website" => "s3:DeleteBucketWebsite",
        "get_bucket_lifecycle_configuration" => "s3:GetLifecycleConfiguration",
        "put_bucket_lifecycle_configuration" | "delete_bucket_lifecycle" => {
            "s3:PutLifecycleConfiguration"
        }
        "get_bucket_notification_configuration" => "s3:GetBucketNotification",
        "put_bucket_notification_configuration" => "s3:PutBucketNotification",
        "get_bucket_replication" => "s3:GetReplicationConfiguration",
        "put_bucket_replication" | "delete_bucket_replication" => "s3:PutReplicationConfiguration",
        "delete_bucket_tagging" => "s3:PutBucketTagging",
        "get_bucket_encryption" => "s3:GetEncryptionConfiguration",
        "put_bucket_encryption" | "delete_bucket_encryption" => "s3:PutEncryptionConfiguration",
        "put_object_lock_configuration" => "s3:PutBucketObjectLockConfiguration",
        "get_object_lock_configuration" => "s3:GetBucketObjectLockConfiguration",
        "delete_bucket_ownership_controls" => "s3:PutBucketOwnershipControls",
        "get_public_access_block" => "s3:GetBucketPublicAccessBlock",
        "put_public_access_block" | "delete_public_access_block" => "s3:PutBucketPublicAccessBlock",
        "get_bucket_policy_status" => "s3:GetBucketPolicyStatus",
        other => by_name(other),
    }
}

/// `put_bucket_policy` → `s3:PutBucketPolicy`, for the operations named
/// as their action; interned once per name.
fn by_name(op: &'static str) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .expect("action names lock");
    names.entry(op).or_insert_with(|| {
        let mut s = String::from("s3:");
        for part in op.split('_') {
            let mut c = part.chars();
            if let Some(f) = c.next() {
                s.push(f.to_ascii_uppercase());
                s.push_str(c.as_str());
            }
        }
        Box::leak(s.into_boxed_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_aws_names() {
        assert_eq!(of_operation("put_bucket_policy"), "s3:PutBucketPolicy");
        assert_eq!(of_operation("get_object_tagging"), "s3:GetObjectTagging");
        assert_eq!(of_operation("delete_bucket_cors"), "s3:PutBucketCORS");
        assert_eq!(of_operation("list_buckets"), "s3:ListAllMyBuckets");
        assert_eq!(of_operation("create_bucket"), "s3:CreateBucket");
    }
}
