//! The lifecycle of objects, applied in the background: the lifecycle
//! worker applies each bucket's rules ([`worker`]: expirations, aborts of
//! old uploads, noncurrent versions), moving data to erasure-coded
//! storage classes ([`transition`]); the catch-up worker re-encodes in
//! their class the blocks written replicated during an outage
//! ([`catch_up`]). Every object write they make goes through
//! [`crate::object_write`]. The rules themselves are checked and stored by
//! the S3 API (`garage_api::lifecycle`), in the bucket entry
//! ([`crate::bucket_table::LifecycleRule`]).

pub mod catch_up;
pub mod transition;
pub mod worker;

use garage_rpc::layout::Placement;

use crate::garage::Garage;
use crate::object_write::WriteError;

/// Why a lifecycle step failed (the pass logs it and goes on at the next).
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Table(#[from] garage_table::Error),
    #[error(transparent)]
    Block(#[from] garage_block::manager::Error),
    /// A rule or a queued job names a class the layout does not define.
    #[error("storage class {0:?} is not a class of the current layout")]
    UnknownClass(String),
    /// The bucket accepts only other classes (`garage bucket set-placement`).
    #[error("the bucket accepts only the storage classes {allowed}, not {class}")]
    ClassNotAllowed { class: String, allowed: String },
    /// Data already erasure-coded (or in a class with a place) is not moved
    /// to another such class yet (see `transition`).
    #[error("moving erasure-coded data to storage class {class} needs the cluster finalized at v0.3.0 (feature recoded-blocks)")]
    CrossCoded { class: String },
    #[error("{0}")]
    Internal(String),
}

pub type Result<T> = std::result::Result<T, LifecycleError>;

impl Garage {
    /// The code blocks of class `name` are written with now (a class's
    /// code may change between the parts of an upload).
    pub fn class_code(&self, name: Option<&str>) -> Option<Placement> {
        name.and_then(|n| self.system.layout().current().class_placement(n))
    }
}
