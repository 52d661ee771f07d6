//! `garage_http`: the HTTP plumbing shared by the S3 API, the website
//! endpoint and the admin API, below all three: the listener loop (TCP or
//! Unix socket, HTTP/1.1 and h2c, header limits, byte counters, graceful
//! stop) and request ids. Nothing here knows S3 or the admin API.

pub mod listener;
pub mod request_id;
