//! Listings: ListObjects (v1 and v2) and ListObjectVersions.

pub mod list;
pub mod list_versions;
