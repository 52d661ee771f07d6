//! Object versions: bucket versioning, object lock (retention, legal hold,
//! a bucket's default retention) and object tags, which are kept per
//! version.

pub mod object_lock;
pub mod tagging;
pub mod versioning;
