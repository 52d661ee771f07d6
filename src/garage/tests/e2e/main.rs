//! The end-to-end tests, one binary: each module starts real `garage`
//! processes through the shared harness ([`common`]) and drives them with
//! real clients. One binary links the whole stack once (it was 24 binaries,
//! each linking it), and the test runner fills both cores with tests from
//! every module. Run one module with `cargo test -p garage --test e2e
//! <module>::`, e.g. `cargo test -p garage --test e2e cluster::`.

mod common;

mod admin_api;
mod blocks;
mod checker;
mod clients;
mod clocks;
mod cluster;
mod conditional;
mod config_compat;
mod console;
mod convert_db;
mod cors;
mod erasure;
mod iam;
mod lifecycle;
mod metadata_replication;
mod metrics;
mod notifications;
mod placement;
mod replication;
mod s3;
mod s3_access;
mod s3_features;
mod s3_logging;
mod s3_object_lock;
mod s3_versioning;
mod sdk;
mod security;
mod server;
mod structure;
mod sts;
mod tables;
mod traces;
mod upgrade;
mod web;
