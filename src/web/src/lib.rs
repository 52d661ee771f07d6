//! `garage_web`: the static website endpoint (`[s3_web]`). Anonymous
//! `GET`, `HEAD` and `OPTIONS` requests are answered from the bucket the
//! `Host` header names, when that bucket has website access: index and
//! error documents, redirections and routing rules from its website
//! configuration, CORS from its rules, ranges and conditional requests.
//!
//! It reads objects through `garage_api` (the same read path, conditions
//! and CORS matching as GetObject) and buckets through `garage_model`; it
//! must never depend on the binary crate.

pub mod error;
pub mod host;
pub mod routing;
pub mod serve;
pub mod server;

pub use server::WebServer;
