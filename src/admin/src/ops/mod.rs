//! The admin operations, one implementation each: typed requests and
//! answers, run on a node's [`Garage`]. They know nothing of HTTP or of
//! the RPC. The admin HTTP API (`admin_api`) wraps them in its handlers,
//! the admin RPC (`admin_rpc`) runs them for the CLI and for other nodes,
//! and the CLI (`admin`) builds their requests and formats their answers.
//!
//! Modules only point down: `admin` → `admin_rpc` → `ops`, and
//! `admin_api` → `admin_rpc` → `ops`; nothing here names those modules
//! (`script/import-cycles.py` and the `no_import_cycles` test check it).

pub mod blocks;
pub mod bucket;
pub mod error;
pub mod history;
pub mod key;
pub mod layout;
pub mod node;
pub mod presign;
pub mod repair;
pub mod stats;
pub mod token;

use serde::{Deserialize, Serialize};

use error::ApiError;
use garage_model::garage::Garage;

/// A cluster-wide admin operation (buckets, keys, admin tokens), as the CLI
/// sends it to a node. Node-local operations are [`node::NodeRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminRequest {
    ListBuckets,
    GetBucketInfo(bucket::GetBucketInfoQuery),
    CreateBucket(bucket::CreateBucketRequest),
    UpdateBucket {
        id: String,
        body: bucket::UpdateBucketRequestBody,
    },
    DeleteBucket {
        id: String,
    },
    AddBucketAlias(bucket::BucketAliasRequest),
    RemoveBucketAlias(bucket::BucketAliasRequest),
    AllowBucketKey(bucket::BucketKeyPermChangeRequest),
    DenyBucketKey(bucket::BucketKeyPermChangeRequest),
    InspectObject(bucket::InspectObjectQuery),
    CleanupIncompleteUploads(bucket::CleanupIncompleteUploadsRequest),
    ListKeys,
    GetKeyInfo(key::GetKeyInfoQuery),
    CreateKey(key::CreateKeyRequest),
    ImportKey(key::ImportKeyRequest),
    UpdateKey {
        id: String,
        body: key::UpdateKeyRequestBody,
    },
    DeleteKey {
        id: String,
    },
    Token(token::TokenRequest),
}

/// The answer to an [`AdminRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminResponse {
    Buckets(Vec<bucket::ListBucketsResponseItem>),
    Bucket(Box<bucket::GetBucketInfoResponse>),
    Object(bucket::InspectObjectResponse),
    UploadsCleaned(bucket::CleanupIncompleteUploadsResponse),
    Keys(Vec<key::ListKeysResponseItem>),
    Key(key::GetKeyInfoResponse),
    Token(token::TokenResponse),
    /// Done, nothing to say (deletions).
    Done,
}

/// Runs one admin operation on this node.
pub async fn run(g: &Garage, req: AdminRequest) -> Result<AdminResponse, ApiError> {
    use AdminRequest as R;
    use AdminResponse as A;
    let bucket = |b| A::Bucket(Box::new(b));
    Ok(match req {
        R::ListBuckets => A::Buckets(bucket::list_buckets(g).await?),
        R::GetBucketInfo(q) => bucket(bucket::get_bucket_info(g, q).await?),
        R::CreateBucket(r) => bucket(bucket::create_bucket(g, r).await?),
        R::UpdateBucket { id, body } => bucket(bucket::update_bucket(g, &id, body).await?),
        R::DeleteBucket { id } => {
            bucket::delete_bucket(g, &id).await?;
            A::Done
        }
        R::AddBucketAlias(r) => bucket(bucket::add_bucket_alias(g, r).await?),
        R::RemoveBucketAlias(r) => bucket(bucket::remove_bucket_alias(g, r).await?),
        R::AllowBucketKey(r) => bucket(bucket::change_perm(g, r, true).await?),
        R::DenyBucketKey(r) => bucket(bucket::change_perm(g, r, false).await?),
        R::InspectObject(q) => A::Object(bucket::inspect_object(g, q).await?),
        R::CleanupIncompleteUploads(r) => {
            A::UploadsCleaned(bucket::cleanup_incomplete_uploads(g, &r).await?)
        }
        R::ListKeys => A::Keys(key::list_keys(g).await?),
        R::GetKeyInfo(q) => A::Key(key::get_key_info(g, q).await?),
        R::CreateKey(r) => A::Key(key::create_key(g, r).await?),
        R::ImportKey(r) => A::Key(key::import_key(g, r).await?),
        R::UpdateKey { id, body } => A::Key(key::update_key(g, &id, body).await?),
        R::DeleteKey { id } => {
            key::delete_key(g, &id).await?;
            A::Done
        }
        R::Token(r) => A::Token(token::handle(g, r).await?),
    })
}
