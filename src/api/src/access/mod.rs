//! Who may do what: the access decision of a request (key permissions,
//! then the bucket policy, then ACLs), bucket policies, ACLs (canned and
//! grants), and what may authenticate a request at all (SigV4 for this
//! cluster's region, dated within 15 minutes of the cluster's time).

pub mod acl;
pub mod actions;
pub mod auth_scope;
pub mod authorize;
pub mod request_time;
pub mod settings;
pub mod step;
