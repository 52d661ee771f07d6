//! The s3s trait, implemented by forwarding each operation to [`Api`];
//! operations not listed here answer NotImplemented (s3s's default).

use std::sync::Arc;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::ctx::Api;

#[derive(Clone)]
pub struct GarageS3(pub Arc<Api>);

macro_rules! forward {
    ($($name:ident: $input:ty => $output:ty;)*) => {
        #[async_trait::async_trait]
        impl S3 for GarageS3 {
            $(
                async fn $name(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.0.clone().$name(req).await.map_err(Into::into)
                }
            )*
        }
    };
}

forward! {
    list_buckets: ListBucketsInput => ListBucketsOutput;
    create_bucket: CreateBucketInput => CreateBucketOutput;
    head_bucket: HeadBucketInput => HeadBucketOutput;
    delete_bucket: DeleteBucketInput => DeleteBucketOutput;
    get_bucket_location: GetBucketLocationInput => GetBucketLocationOutput;
    get_bucket_versioning: GetBucketVersioningInput => GetBucketVersioningOutput;
    put_bucket_versioning: PutBucketVersioningInput => PutBucketVersioningOutput;
    get_bucket_cors: GetBucketCorsInput => GetBucketCorsOutput;
    put_bucket_cors: PutBucketCorsInput => PutBucketCorsOutput;
    delete_bucket_cors: DeleteBucketCorsInput => DeleteBucketCorsOutput;
    get_bucket_website: GetBucketWebsiteInput => GetBucketWebsiteOutput;
    put_bucket_website: PutBucketWebsiteInput => PutBucketWebsiteOutput;
    delete_bucket_website: DeleteBucketWebsiteInput => DeleteBucketWebsiteOutput;
    get_bucket_lifecycle_configuration: GetBucketLifecycleConfigurationInput => GetBucketLifecycleConfigurationOutput;
    put_bucket_lifecycle_configuration: PutBucketLifecycleConfigurationInput => PutBucketLifecycleConfigurationOutput;
    delete_bucket_lifecycle: DeleteBucketLifecycleInput => DeleteBucketLifecycleOutput;
    put_object: PutObjectInput => PutObjectOutput;
    get_object: GetObjectInput => GetObjectOutput;
    head_object: HeadObjectInput => HeadObjectOutput;
    copy_object: CopyObjectInput => CopyObjectOutput;
    delete_object: DeleteObjectInput => DeleteObjectOutput;
    delete_objects: DeleteObjectsInput => DeleteObjectsOutput;
    list_objects: ListObjectsInput => ListObjectsOutput;
    list_objects_v2: ListObjectsV2Input => ListObjectsV2Output;
    list_object_versions: ListObjectVersionsInput => ListObjectVersionsOutput;
    create_multipart_upload: CreateMultipartUploadInput => CreateMultipartUploadOutput;
    upload_part: UploadPartInput => UploadPartOutput;
    upload_part_copy: UploadPartCopyInput => UploadPartCopyOutput;
    complete_multipart_upload: CompleteMultipartUploadInput => CompleteMultipartUploadOutput;
    abort_multipart_upload: AbortMultipartUploadInput => AbortMultipartUploadOutput;
    list_parts: ListPartsInput => ListPartsOutput;
    list_multipart_uploads: ListMultipartUploadsInput => ListMultipartUploadsOutput;
    get_object_attributes: GetObjectAttributesInput => GetObjectAttributesOutput;
    put_object_tagging: PutObjectTaggingInput => PutObjectTaggingOutput;
    get_object_tagging: GetObjectTaggingInput => GetObjectTaggingOutput;
    delete_object_tagging: DeleteObjectTaggingInput => DeleteObjectTaggingOutput;
    put_bucket_tagging: PutBucketTaggingInput => PutBucketTaggingOutput;
    get_bucket_tagging: GetBucketTaggingInput => GetBucketTaggingOutput;
    put_bucket_logging: PutBucketLoggingInput => PutBucketLoggingOutput;
    get_bucket_logging: GetBucketLoggingInput => GetBucketLoggingOutput;
    delete_bucket_tagging: DeleteBucketTaggingInput => DeleteBucketTaggingOutput;
    put_bucket_encryption: PutBucketEncryptionInput => PutBucketEncryptionOutput;
    get_bucket_encryption: GetBucketEncryptionInput => GetBucketEncryptionOutput;
    delete_bucket_encryption: DeleteBucketEncryptionInput => DeleteBucketEncryptionOutput;
    put_object_lock_configuration: PutObjectLockConfigurationInput => PutObjectLockConfigurationOutput;
    get_object_lock_configuration: GetObjectLockConfigurationInput => GetObjectLockConfigurationOutput;
    put_object_retention: PutObjectRetentionInput => PutObjectRetentionOutput;
    get_object_retention: GetObjectRetentionInput => GetObjectRetentionOutput;
    put_object_legal_hold: PutObjectLegalHoldInput => PutObjectLegalHoldOutput;
    get_object_legal_hold: GetObjectLegalHoldInput => GetObjectLegalHoldOutput;
    get_bucket_acl: GetBucketAclInput => GetBucketAclOutput;
    put_bucket_acl: PutBucketAclInput => PutBucketAclOutput;
    get_object_acl: GetObjectAclInput => GetObjectAclOutput;
    put_object_acl: PutObjectAclInput => PutObjectAclOutput;
    put_bucket_policy: PutBucketPolicyInput => PutBucketPolicyOutput;
    get_bucket_policy: GetBucketPolicyInput => GetBucketPolicyOutput;
    get_bucket_policy_status: GetBucketPolicyStatusInput => GetBucketPolicyStatusOutput;
    delete_bucket_policy: DeleteBucketPolicyInput => DeleteBucketPolicyOutput;
    put_bucket_ownership_controls: PutBucketOwnershipControlsInput => PutBucketOwnershipControlsOutput;
    get_bucket_ownership_controls: GetBucketOwnershipControlsInput => GetBucketOwnershipControlsOutput;
    delete_bucket_ownership_controls: DeleteBucketOwnershipControlsInput => DeleteBucketOwnershipControlsOutput;
    put_public_access_block: PutPublicAccessBlockInput => PutPublicAccessBlockOutput;
    get_public_access_block: GetPublicAccessBlockInput => GetPublicAccessBlockOutput;
    delete_public_access_block: DeletePublicAccessBlockInput => DeletePublicAccessBlockOutput;
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
