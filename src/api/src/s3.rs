//! The s3s trait, implemented by forwarding each operation to [`Api`]
//! once its authorization rule allowed it: the table below is the one
//! place that says what each operation needs. Operations not listed here
//! answer NotImplemented (s3s's default).

use std::sync::Arc;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::access::authorize::Action;
use crate::access::step::{ByKey, Copy, Decide, EachObject, ObjectAcp, Owner, Put, Signed};
use crate::ctx::{Api, Need};
use crate::request::Ctx;
use garage_model::access::ObjectPerm;

#[derive(Clone)]
pub struct GarageS3(pub Arc<Api>);

/// Each row: an operation, its input and output, and its authorization
/// rule (`access::step`), an expression of the request `$r`. The rule is
/// checked before the handler runs; the handler receives who asked and
/// what the rule granted.
macro_rules! forward {
    ($($name:ident($r:ident): $input:ty => $output:ty = $rule:expr;)*) => {
        #[async_trait::async_trait]
        impl S3 for GarageS3 {
            $(
                async fn $name(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    let api = self.0.clone();
                    let run = async {
                        let who = api.requester(&req, stringify!($name)).await?;
                        let granted = {
                            #[allow(unused_variables)]
                            let $r = &req;
                            $rule.check(&api, &who).await?
                        };
                        api.clone().$name(req, Ctx { who, granted }).await
                    };
                    run.await.map_err(Into::into)
                }
            )*
        }
    };
}

forward! {
    list_buckets(r): ListBucketsInput => ListBucketsOutput
        = Signed;
    create_bucket(r): CreateBucketInput => CreateBucketOutput
        = Signed;
    head_bucket(r): HeadBucketInput => HeadBucketOutput
        = Decide::bucket(Action::ListBucket, &r.input.bucket);
    delete_bucket(r): DeleteBucketInput => DeleteBucketOutput
        = Owner(&r.input.bucket);
    get_bucket_location(r): GetBucketLocationInput => GetBucketLocationOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: None };
    get_bucket_versioning(r): GetBucketVersioningInput => GetBucketVersioningOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: None };
    put_bucket_versioning(r): PutBucketVersioningInput => PutBucketVersioningOutput
        = Owner(&r.input.bucket);
    get_bucket_cors(r): GetBucketCorsInput => GetBucketCorsOutput
        = Owner(&r.input.bucket);
    put_bucket_cors(r): PutBucketCorsInput => PutBucketCorsOutput
        = Owner(&r.input.bucket);
    delete_bucket_cors(r): DeleteBucketCorsInput => DeleteBucketCorsOutput
        = Owner(&r.input.bucket);
    get_bucket_website(r): GetBucketWebsiteInput => GetBucketWebsiteOutput
        = Owner(&r.input.bucket);
    put_bucket_website(r): PutBucketWebsiteInput => PutBucketWebsiteOutput
        = Owner(&r.input.bucket);
    delete_bucket_website(r): DeleteBucketWebsiteInput => DeleteBucketWebsiteOutput
        = Owner(&r.input.bucket);
    get_bucket_lifecycle_configuration(r): GetBucketLifecycleConfigurationInput => GetBucketLifecycleConfigurationOutput
        = Owner(&r.input.bucket);
    put_bucket_lifecycle_configuration(r): PutBucketLifecycleConfigurationInput => PutBucketLifecycleConfigurationOutput
        = Owner(&r.input.bucket);
    delete_bucket_lifecycle(r): DeleteBucketLifecycleInput => DeleteBucketLifecycleOutput
        = Owner(&r.input.bucket);
    get_bucket_notification_configuration(r): GetBucketNotificationConfigurationInput => GetBucketNotificationConfigurationOutput
        = Owner(&r.input.bucket);
    put_bucket_notification_configuration(r): PutBucketNotificationConfigurationInput => PutBucketNotificationConfigurationOutput
        = Owner(&r.input.bucket);
    put_bucket_replication(r): PutBucketReplicationInput => PutBucketReplicationOutput
        = Owner(&r.input.bucket);
    get_bucket_replication(r): GetBucketReplicationInput => GetBucketReplicationOutput
        = Owner(&r.input.bucket);
    delete_bucket_replication(r): DeleteBucketReplicationInput => DeleteBucketReplicationOutput
        = Owner(&r.input.bucket);
    put_object(r): PutObjectInput => PutObjectOutput
        = Put(r);
    get_object(r): GetObjectInput => GetObjectOutput
        = Decide::object(Action::read(&r.input.version_id), &r.input.bucket, &r.input.key);
    head_object(r): HeadObjectInput => HeadObjectOutput
        = Decide::object(Action::read(&r.input.version_id), &r.input.bucket, &r.input.key);
    copy_object(r): CopyObjectInput => CopyObjectOutput
        = Copy { source: &r.input.copy_source, bucket: &r.input.bucket, key: &r.input.key };
    delete_object(r): DeleteObjectInput => DeleteObjectOutput
        = Decide::object(Action::delete(&r.input.version_id), &r.input.bucket, &r.input.key);
    delete_objects(r): DeleteObjectsInput => DeleteObjectsOutput
        = EachObject { bucket: &r.input.bucket, need: Action::DeleteObject.need() };
    list_objects(r): ListObjectsInput => ListObjectsOutput
        = Decide::list(Action::ListBucket, &r.input.bucket, r.input.prefix.as_deref());
    list_objects_v2(r): ListObjectsV2Input => ListObjectsV2Output
        = Decide::list(Action::ListBucket, &r.input.bucket, r.input.prefix.as_deref());
    list_object_versions(r): ListObjectVersionsInput => ListObjectVersionsOutput
        = Decide::list(Action::ListBucketVersions, &r.input.bucket, r.input.prefix.as_deref());
    create_multipart_upload(r): CreateMultipartUploadInput => CreateMultipartUploadOutput
        = Decide::object(Action::PutObject, &r.input.bucket, &r.input.key);
    upload_part(r): UploadPartInput => UploadPartOutput
        = Decide::object(Action::PutObject, &r.input.bucket, &r.input.key);
    upload_part_copy(r): UploadPartCopyInput => UploadPartCopyOutput
        = Copy { source: &r.input.copy_source, bucket: &r.input.bucket, key: &r.input.key };
    complete_multipart_upload(r): CompleteMultipartUploadInput => CompleteMultipartUploadOutput
        = Decide::object(Action::PutObject, &r.input.bucket, &r.input.key);
    abort_multipart_upload(r): AbortMultipartUploadInput => AbortMultipartUploadOutput
        = Decide::object(Action::AbortMultipartUpload, &r.input.bucket, &r.input.key);
    list_parts(r): ListPartsInput => ListPartsOutput
        = Decide::object(Action::ListMultipartUploadParts, &r.input.bucket, &r.input.key);
    list_multipart_uploads(r): ListMultipartUploadsInput => ListMultipartUploadsOutput
        = Decide::list(Action::ListBucketMultipartUploads, &r.input.bucket, r.input.prefix.as_deref());
    get_object_attributes(r): GetObjectAttributesInput => GetObjectAttributesOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: Some(&r.input.key) };
    put_object_tagging(r): PutObjectTaggingInput => PutObjectTaggingOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Write, object: Some(&r.input.key) };
    get_object_tagging(r): GetObjectTaggingInput => GetObjectTaggingOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: Some(&r.input.key) };
    delete_object_tagging(r): DeleteObjectTaggingInput => DeleteObjectTaggingOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Write, object: Some(&r.input.key) };
    put_bucket_tagging(r): PutBucketTaggingInput => PutBucketTaggingOutput
        = Owner(&r.input.bucket);
    get_bucket_tagging(r): GetBucketTaggingInput => GetBucketTaggingOutput
        = Owner(&r.input.bucket);
    put_bucket_logging(r): PutBucketLoggingInput => PutBucketLoggingOutput
        = Owner(&r.input.bucket);
    get_bucket_logging(r): GetBucketLoggingInput => GetBucketLoggingOutput
        = Owner(&r.input.bucket);
    delete_bucket_tagging(r): DeleteBucketTaggingInput => DeleteBucketTaggingOutput
        = Owner(&r.input.bucket);
    put_bucket_encryption(r): PutBucketEncryptionInput => PutBucketEncryptionOutput
        = Owner(&r.input.bucket);
    get_bucket_encryption(r): GetBucketEncryptionInput => GetBucketEncryptionOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: None };
    delete_bucket_encryption(r): DeleteBucketEncryptionInput => DeleteBucketEncryptionOutput
        = Owner(&r.input.bucket);
    put_object_lock_configuration(r): PutObjectLockConfigurationInput => PutObjectLockConfigurationOutput
        = Owner(&r.input.bucket);
    get_object_lock_configuration(r): GetObjectLockConfigurationInput => GetObjectLockConfigurationOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: None };
    put_object_retention(r): PutObjectRetentionInput => PutObjectRetentionOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Write, object: Some(&r.input.key) };
    get_object_retention(r): GetObjectRetentionInput => GetObjectRetentionOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: Some(&r.input.key) };
    put_object_legal_hold(r): PutObjectLegalHoldInput => PutObjectLegalHoldOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Write, object: Some(&r.input.key) };
    get_object_legal_hold(r): GetObjectLegalHoldInput => GetObjectLegalHoldOutput
        = ByKey { bucket: &r.input.bucket, need: Need::Read, object: Some(&r.input.key) };
    get_bucket_acl(r): GetBucketAclInput => GetBucketAclOutput
        = Owner(&r.input.bucket);
    put_bucket_acl(r): PutBucketAclInput => PutBucketAclOutput
        = Owner(&r.input.bucket);
    get_object_acl(r): GetObjectAclInput => GetObjectAclOutput
        = ObjectAcp { bucket: &r.input.bucket, object: &r.input.key, need: Need::Read, perm: ObjectPerm::READ_ACP };
    put_object_acl(r): PutObjectAclInput => PutObjectAclOutput
        = ObjectAcp { bucket: &r.input.bucket, object: &r.input.key, need: Need::Write, perm: ObjectPerm::WRITE_ACP };
    put_bucket_policy(r): PutBucketPolicyInput => PutBucketPolicyOutput
        = Owner(&r.input.bucket);
    get_bucket_policy(r): GetBucketPolicyInput => GetBucketPolicyOutput
        = Owner(&r.input.bucket);
    get_bucket_policy_status(r): GetBucketPolicyStatusInput => GetBucketPolicyStatusOutput
        = Owner(&r.input.bucket);
    delete_bucket_policy(r): DeleteBucketPolicyInput => DeleteBucketPolicyOutput
        = Owner(&r.input.bucket);
    put_bucket_ownership_controls(r): PutBucketOwnershipControlsInput => PutBucketOwnershipControlsOutput
        = Owner(&r.input.bucket);
    get_bucket_ownership_controls(r): GetBucketOwnershipControlsInput => GetBucketOwnershipControlsOutput
        = Owner(&r.input.bucket);
    delete_bucket_ownership_controls(r): DeleteBucketOwnershipControlsInput => DeleteBucketOwnershipControlsOutput
        = Owner(&r.input.bucket);
    put_public_access_block(r): PutPublicAccessBlockInput => PutPublicAccessBlockOutput
        = Owner(&r.input.bucket);
    get_public_access_block(r): GetPublicAccessBlockInput => GetPublicAccessBlockOutput
        = Owner(&r.input.bucket);
    delete_public_access_block(r): DeletePublicAccessBlockInput => DeletePublicAccessBlockOutput
        = Owner(&r.input.bucket);
}

/// Signature checks: the secret of an existing key.
pub struct KeyAuth(pub Arc<Api>);

#[async_trait::async_trait]
impl s3s::auth::S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<s3s::auth::SecretKey> {
        match self.0.fetch_key(access_key).await {
            Ok(Some(k)) => Ok(k
                .params()
                .map(|p| p.secret_key.clone())
                .unwrap_or_default()
                .into()),
            Ok(None) => Err(s3s::s3_error!(
                InvalidAccessKeyId,
                "The AWS access key Id you provided does not exist in our records."
            )),
            Err(e) => Err(e.into()),
        }
    }
}
