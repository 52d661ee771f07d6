//! `garage_api`: the S3 API. The protocol (routing, SigV4 in headers and
//! query strings, aws-chunked bodies, XML, error documents) is the `s3s`
//! crate's; this crate implements its operations over the model tables
//! and the block manager.

pub mod acl;
pub mod attributes;
pub mod auth_scope;
pub mod authorize;
pub mod bucket;
pub mod bucket_config;
pub mod bucket_encryption;
pub mod checksum;
pub mod conditional;
pub mod copy;
pub mod cors;
pub mod ctx;
pub mod error;
#[cfg(test)]
mod fuzz_tests;
pub mod lifecycle;
pub mod lifecycle_worker;
pub mod list;
pub mod list_versions;
pub mod listener;
pub mod meta;
pub mod multipart;
pub mod object;
pub mod object_lock;
pub mod ordered;
pub mod part_copy;
pub mod policy;
pub mod put;
pub mod rechunk;
pub mod s3;
pub mod server;
pub mod sse;
pub mod storage_class;
pub mod stream;
pub mod tagging;
pub mod telemetry;
pub mod transition;
pub mod versioning;

pub use ctx::Api;
pub use server::S3Server;
