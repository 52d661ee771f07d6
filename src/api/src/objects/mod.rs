//! Objects: PutObject (and PostObject), GetObject and HeadObject with
//! ranges and streaming, CopyObject, DeleteObject(s), GetObjectAttributes,
//! additional checksums, and the cutting of request bodies (the ordering of
//! acknowledged writes is `garage_model::object_write`).

pub mod attributes;
pub mod checksum;
pub mod copy;
pub mod object;
pub mod put;
pub mod rechunk;
pub mod stream;
