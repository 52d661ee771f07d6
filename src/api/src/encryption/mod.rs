//! Encryption at rest: SSE-C and SSE-S3 keys, the encrypted block
//! format, and a bucket's default encryption (Get/Put/DeleteBucketEncryption).

pub mod bucket_encryption;
pub mod sse;
