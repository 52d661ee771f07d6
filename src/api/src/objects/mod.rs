//! Objects: PutObject (and PostObject) in [`write`], GetObject and
//! HeadObject with ranges and streaming in [`read`] and [`stream`],
//! DeleteObject(s) in [`delete`], the writes of replicas another
//! cluster sends ([`replica`]), CopyObject, GetObjectAttributes,
//! additional checksums, and the block writer every data write uses
//! ([`block_writer`]; the ordering of acknowledged writes is
//! `garage_model::object_write`).

pub mod attributes;
pub mod block_writer;
pub mod checksum;
pub mod copy;
pub mod delete;
pub mod read;
pub mod replica;
pub mod stream;
pub mod write;
