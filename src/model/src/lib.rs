//! `garage_model`: the tables of the metadata model.
//!
//! - `bucket` (id -> parameters: authorized keys, aliases, website, CORS,
//!   quotas), `bucket_alias` (global name -> id) and `key` (access key id
//!   -> secret, name, permissions): one partition each, listable;
//! - `object`, `version`, `block_ref`, `mpu` and the per-bucket counters
//!   (see their modules) for the data path.

pub mod bucket_alias_table;
pub mod bucket_table;
pub mod helper;
pub mod key_table;
pub mod permission;

#[cfg(test)]
mod testing;
