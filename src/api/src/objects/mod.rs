//! Objects: PutObject (and PostObject), GetObject and HeadObject with
//! ranges and streaming, CopyObject, DeleteObject(s), GetObjectAttributes,
//! additional checksums, the ordering of acknowledged writes, and the
//! cutting of request bodies.

pub mod attributes;
pub mod checksum;
pub mod copy;
pub mod object;
pub mod ordered;
pub mod put;
pub mod rechunk;
pub mod stream;
