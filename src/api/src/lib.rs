//! `garage_api`: the S3 API. The protocol (routing, SigV4 in headers and
//! query strings, aws-chunked bodies, XML, error documents) is the `s3s`
//! crate's; this crate implements its operations over the model tables
//! and the block manager.
//!
//! One folder per family of S3 operations, each saying what it owns in
//! its `mod.rs`; below them the shared base: [`ctx`] (the tables and the
//! request's key and bucket), [`error`], [`meta`] (stored headers) and
//! [`storage_class`]. [`s3`] forwards each s3s operation to its family,
//! and [`server`] serves the whole over HTTP (the listener loop itself is
//! `garage_http`'s). Families do not import each other in circles (the
//! structure test checks it).

pub mod ctx;
pub mod error;
pub mod meta;
pub mod request;
pub mod s3;
pub mod storage_class;

pub mod access;
pub mod bucket;
pub mod conditional;
pub mod encryption;
pub mod iam_api;
pub mod lifecycle;
pub mod listing;
pub mod logging;
pub mod multipart;
pub mod notify;
pub mod objects;
pub mod query;
pub mod replication;
pub mod server;
pub mod sts;
pub mod versions;
pub mod website;

#[cfg(test)]
mod fuzz_tests;

pub use ctx::{Api, Regions};
pub use server::S3Server;
