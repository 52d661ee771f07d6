//! `garage_model`: the tables of the metadata model.
//!
//! - `bucket` (id -> parameters: authorized keys, aliases, website, CORS,
//!   quotas), `bucket_alias` (global name -> id), `key` (access key id
//!   -> secret, name, permissions) and `admin_token`: one partition each,
//!   listable; the first three kept consistent with each other by
//!   [`helper::Metadata`].
//! - `object` ((bucket id, key) -> versions), `version` (version id ->
//!   blocks), `block_ref` ((block, version) -> deleted flag),
//!   `multipart_upload` (upload id -> parts), `bucket_counters`, and
//!   `object_history` (the ordered history of each key's writes).
//!
//! Changes propagate inside the transaction that makes them, through the
//! next table's insert queue: an object version that goes away deletes its
//! `version` entry; a deleted version marks its `block_ref`s deleted; a
//! `block_ref` change calls the block manager's [`block_ref_table::BlockRefHook`];
//! a multipart upload whose object version stops uploading (completed,
//! aborted, or pruned by a newer write) is deleted, which deletes its
//! parts' versions; and every
//! object change moves this node's counters of its bucket, which are
//! published in `bucket_counters`.

pub mod access;
pub mod admin_token_table;
pub mod block_ref_table;
pub mod bucket_alias_table;
pub mod bucket_table;
pub mod counter_table;
pub mod ec_catch_up;
#[cfg(test)]
mod entry_dictionary;
pub mod garage;
pub mod helper;
pub mod history_table;
pub mod iam;
pub mod key_table;
pub mod kms;
pub mod lifecycle;
pub mod mpu_table;
pub mod named_table;
pub mod notify;
pub mod object_lock;
pub mod object_register;
pub mod object_table;
pub mod object_write;
pub mod permission;
pub mod policy;
pub mod purge;
pub mod replication;
pub mod tags;
pub mod upload_parts;
pub mod version_table;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod version_tests;
