//! The admin layer of garage: every admin operation is one typed request
//! and answer with one implementation ([`ops`]), served over the admin
//! HTTP API ([`admin_api`], the reference's v2 endpoints with a generated
//! OpenAPI document) and over the admin RPC ([`admin_rpc`], for the CLI
//! and for the `?node=` operations of other nodes).
//!
//! Modules point one way: `admin_api` → `admin_rpc` → `ops`. The binary
//! (`garage`) wires them into the daemon, and its CLI is a client of the
//! RPC.

pub mod admin_api;
pub mod admin_rpc;
pub mod bearer;
pub mod columns;
pub mod console;
pub mod ops;
