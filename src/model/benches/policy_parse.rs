//! What reading an identity's policies costs a request, parsed each time
//! or taken from the per-process cache of parsed documents:
//! `cargo bench -p garage_model --bench policy_parse`.
//!
//! The documents of `script/bench-iam.sh`'s user with `NPOLICIES`
//! (default 10) inline policies with conditions, a policy limiting to a
//! folder with a variable and a `s3:prefix` condition, and a 5-statement
//! bucket policy; each round parses (or looks up) all of them, as a
//! request of that user to that bucket does. Prints the time per round.

use std::time::Instant;

use garage_model::policy::Policy;

const INLINE: &str = r#"{"Statement":[{"Effect":"Deny","Action":"s3:DeleteBucket","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"},"StringLike":{"aws:UserAgent":"nothing-*"}}}]}"#;

const FOLDER: &str = r#"{"Version":"2012-10-17","Statement":[
  {"Effect":"Allow","Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],"Resource":"arn:aws:s3:::photos/${aws:username}/*"},
  {"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::photos","Condition":{"StringLike":{"s3:prefix":["${aws:username}/*"]}}}]}"#;

const BUCKET: &str = r#"{"Version":"2012-10-17","Statement":[
  {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::photos/public/*"},
  {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::photos/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"false"},"StringNotEqualsIfExists":{"s3:x-amz-server-side-encryption":"AES256"}}},
  {"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::photos/*","Condition":{"Bool":{"aws:SecureTransport":"false"},"NotIpAddress":{"aws:SourceIp":["10.0.0.0/8","192.168.0.0/16"]}}},
  {"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/alice"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::photos"},
  {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::photos/*","Condition":{"ForAnyValue:StringEquals":{"s3:RequestObjectTagKeys":["secret"]}}}]}"#;

fn main() {
    let n: usize = std::env::var("NPOLICIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let rounds = 2000;
    let identity: Vec<&str> = std::iter::repeat_n(INLINE, n).chain([FOLDER]).collect();

    let t = Instant::now();
    for _ in 0..rounds {
        for d in &identity {
            std::hint::black_box(Policy::parse_identity(d).unwrap());
        }
        std::hint::black_box(Policy::parse(BUCKET, None).unwrap());
    }
    let parsed = t.elapsed() / rounds;

    let t = Instant::now();
    for _ in 0..rounds {
        for d in &identity {
            std::hint::black_box(Policy::parse_identity_stored(d).unwrap());
        }
        std::hint::black_box(Policy::parse_stored(BUCKET).unwrap());
    }
    let cached = t.elapsed() / rounds;

    println!(
        "{} identity policies + 1 bucket policy per request: parsed each time {parsed:?}, from the cache {cached:?}",
        n + 1
    );
}
