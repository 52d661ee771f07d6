//! A bucket's website and CORS configuration documents, and the CORS
//! rules matched against a request (the website endpoint serves them too).

pub mod bucket_config;
pub mod cors;
