//! The Rust `aws-sdk-s3` crate against real `garage` processes, one node
//! and three nodes in three zones, with the SDK's default behaviour: it
//! sends a CRC32 checksum with every PutObject and UploadPart (in a header
//! for an in-memory body, in the signed trailer of a signed `aws-chunked`
//! body for a streamed one) and checks the checksum of what GetObject
//! returns.

use crate::common;

use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_s3::error::BoxError;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use sha2::{Digest, Sha256};

use crate::common::random_bytes;
use common::cluster::Cluster;
use common::s3::make_key;

const MIB: usize = 1 << 20;

/// Sizes around the inline limit (3 KiB) and the block size (1 MiB), and
/// one of many blocks.
const SIZES: &[usize] = &[0, 1, 3071, 3072, 3073, MIB - 1, MIB, MIB + 1, 17 * MIB];

/// One request as the SDK sent it: method, path and the headers that say
/// how its body and checksum travel.
#[derive(Clone, Debug)]
struct Sent {
    method: String,
    uri: String,
    content_encoding: Option<String>,
    trailer: Option<String>,
    content_sha256: Option<String>,
    crc32_header: bool,
}

/// Records what the SDK puts on the wire, to check that the default
/// checksum behaviour is really the one exercised.
#[derive(Clone, Debug, Default)]
struct Recorder(Arc<Mutex<Vec<Sent>>>);

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }

    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let r = ctx.request();
        let h = |n: &str| r.headers().get(n).map(String::from);
        self.0.lock().unwrap().push(Sent {
            method: r.method().to_string(),
            uri: r.uri().to_string(),
            content_encoding: h("content-encoding"),
            trailer: h("x-amz-trailer"),
            content_sha256: h("x-amz-content-sha256"),
            crc32_header: r.headers().contains_key("x-amz-checksum-crc32"),
        });
        Ok(())
    }
}

impl Recorder {
    /// The PUT requests whose path ends with `suffix`.
    fn puts(&self, suffix: &str) -> Vec<Sent> {
        let all = self.0.lock().unwrap();
        all.iter()
            .filter(|s| s.method == "PUT" && s.uri.split('?').next().unwrap().ends_with(suffix))
            .cloned()
            .collect()
    }
}

/// A client of node `i`, built by hand: static credentials, region
/// `garage`, path-style addressing, plain-HTTP hyper client, no retries
/// (a retry would hide a failure), every other setting the SDK's default.
fn client(c: &Cluster, i: usize, key: &(String, String), rec: &Recorder) -> Client {
    let conf = aws_sdk_s3::Config::builder()
        .interceptor(rec.clone())
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("garage"))
        .credentials_provider(Credentials::new(&key.0, &key.1, None, None, "test"))
        .endpoint_url(format!("http://{}:3900", c.nodes[i].ip))
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
        .build();
    Client::from_conf(conf)
}

/// One node (replication 1) started with `env`, and a client of it.
fn one_node(env: &[(&str, &str)]) -> (Cluster, Client, Recorder) {
    let mut c = Cluster::new(1, 1);
    c.env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let key = make_key(&c, "sdk");
    let rec = Recorder::default();
    let cl = client(&c, 0, &key, &rec);
    (c, cl, rec)
}

fn sha256(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

async fn get_bytes(client: &Client, bucket: &str, key: &str) -> Vec<u8> {
    let out = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetObject {key}: {e:?}"));
    out.body
        .collect()
        .await
        .unwrap_or_else(|e| panic!("GetObject {key} body: {e:?}"))
        .to_vec()
}

/// The whole scenario; `writer` writes, every client in `readers` reads.
async fn scenario(writer: &Client, readers: &[Client], rec: &Recorder) {
    let bucket = "sdk-bucket";
    writer.create_bucket().bucket(bucket).send().await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    // PutObject from memory (checksum header) and from a file (streamed:
    // aws-chunked with a CRC32 trailer), read back byte for byte.
    let mut expected = Vec::new();
    for &size in SIZES {
        let data = random_bytes(size);
        let key = format!("mem/{size}");
        let put = writer
            .put_object()
            .bucket(bucket)
            .key(&key)
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("PutObject {key} from memory: {e:?}"));
        assert!(put.e_tag().is_some(), "{key}: no ETag");
        expected.push((key, sha256(&data), size));

        let data = random_bytes(size);
        let path = dir.path().join(format!("f{size}"));
        std::fs::write(&path, &data).unwrap();
        let key = format!("file/{size}");
        writer
            .put_object()
            .bucket(bucket)
            .key(&key)
            .body(ByteStream::from_path(&path).await.unwrap())
            .send()
            .await
            .unwrap_or_else(|e| panic!("PutObject {key} from a file: {e:?}"));
        expected.push((key, sha256(&data), size));
    }
    // What the SDK sent: a CRC32 header for an in-memory body; for a
    // file, an aws-chunked body with the CRC32 in its trailer (over plain
    // HTTP the SDK signs every chunk and the trailer too).
    for &size in SIZES {
        let mem = rec.puts(&format!("/mem/{size}"));
        assert_eq!(mem.len(), 1, "{mem:?}");
        assert!(mem[0].crc32_header, "{mem:?}");
        let file = rec.puts(&format!("/file/{size}"));
        assert_eq!(file.len(), 1, "{file:?}");
        let f = &file[0];
        assert_eq!(f.content_encoding.as_deref(), Some("aws-chunked"), "{f:?}");
        assert_eq!(f.trailer.as_deref(), Some("x-amz-checksum-crc32"), "{f:?}");
        assert_eq!(
            f.content_sha256.as_deref(),
            Some("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"),
            "{f:?}"
        );
    }

    for r in readers {
        for (key, digest, size) in &expected {
            let got = get_bytes(r, bucket, key).await;
            assert_eq!(got.len(), *size, "{key}: length");
            assert!(&sha256(&got) == digest, "{key}: content differs");
            let head = r
                .head_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .unwrap_or_else(|e| panic!("HeadObject {key}: {e:?}"));
            assert_eq!(head.content_length(), Some(*size as i64), "{key}");
        }
    }

    // The checksum the SDK sent is stored and given back on request.
    let head = writer
        .head_object()
        .bucket(bucket)
        .key("file/3073")
        .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert!(head.checksum_crc32().is_some(), "{head:?}");

    // Multipart upload: two parts of 5 MiB and a last one of 1 MiB + 1,
    // the parts' CRC32 echoed in the completion, as the SDK's guide does.
    let sizes = [5 * MIB, 5 * MIB, MIB + 1];
    let data = random_bytes(sizes.iter().sum());
    let mpu = writer
        .create_multipart_upload()
        .bucket(bucket)
        .key("multipart")
        .send()
        .await
        .unwrap();
    let upload_id = mpu.upload_id().expect("upload id");
    let mut parts = Vec::new();
    let mut off = 0;
    for (i, s) in sizes.iter().enumerate() {
        let n = i as i32 + 1;
        let out = writer
            .upload_part()
            .bucket(bucket)
            .key("multipart")
            .upload_id(upload_id)
            .part_number(n)
            .body(ByteStream::from(data[off..off + s].to_vec()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("UploadPart {n}: {e:?}"));
        off += s;
        parts.push(
            CompletedPart::builder()
                .part_number(n)
                .set_e_tag(out.e_tag().map(String::from))
                .set_checksum_crc32(out.checksum_crc32().map(String::from))
                .build(),
        );
    }
    let done = writer
        .complete_multipart_upload()
        .bucket(bucket)
        .key("multipart")
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("CompleteMultipartUpload: {e:?}"));
    assert!(
        done.e_tag().is_some_and(|t| t.ends_with("-3\"")),
        "{done:?}"
    );
    for r in readers {
        let got = get_bytes(r, bucket, "multipart").await;
        assert!(sha256(&got) == sha256(&data), "multipart content differs");
    }

    // ListObjectsV2, 5 keys a page, by hand and with the SDK's paginator.
    let mut all: Vec<String> = expected.iter().map(|e| e.0.clone()).collect();
    all.push("multipart".into());
    all.sort();
    for r in readers {
        let mut listed = Vec::new();
        let mut token = None;
        let mut pages = 0;
        loop {
            let out = r
                .list_objects_v2()
                .bucket(bucket)
                .max_keys(5)
                .set_continuation_token(token)
                .send()
                .await
                .unwrap();
            pages += 1;
            assert!(out.key_count().unwrap_or(0) <= 5);
            listed.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(String::from)),
            );
            if out.is_truncated() != Some(true) {
                break;
            }
            token = out.next_continuation_token().map(String::from);
            assert!(token.is_some(), "truncated page without a token");
        }
        assert_eq!(listed, all);
        assert_eq!(pages, all.len().div_ceil(5));

        let mut pager = r
            .list_objects_v2()
            .bucket(bucket)
            .prefix("file/")
            .max_keys(4)
            .into_paginator()
            .send();
        let mut listed = Vec::new();
        while let Some(page) = pager.next().await {
            let page = page.unwrap();
            listed.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key().map(String::from)),
            );
        }
        let files: Vec<&String> = all.iter().filter(|k| k.starts_with("file/")).collect();
        assert_eq!(listed.iter().collect::<Vec<_>>(), files);
    }

    // DeleteObject, then the typed errors: NoSuchKey on GET, NotFound on
    // HEAD (a HEAD response has no body to carry a code).
    writer
        .delete_object()
        .bucket(bucket)
        .key("mem/1")
        .send()
        .await
        .unwrap();
    for r in readers {
        let e = r
            .get_object()
            .bucket(bucket)
            .key("mem/1")
            .send()
            .await
            .expect_err("deleted object");
        let e = e.into_service_error();
        assert!(matches!(e, GetObjectError::NoSuchKey(_)), "{e:?}");
        let e = r
            .head_object()
            .bucket(bucket)
            .key("mem/1")
            .send()
            .await
            .expect_err("deleted object");
        let e = e.into_service_error();
        assert!(matches!(e, HeadObjectError::NotFound(_)), "{e:?}");
    }
}

fn run(scenario_fut: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenario_fut);
}

#[test]
fn sdk_on_one_node() {
    let (_c, cl, rec) = one_node(&[]);
    run(scenario(&cl, std::slice::from_ref(&cl), &rec));
}

#[test]
fn sdk_on_three_nodes_in_three_zones() {
    let c = Cluster::three_zones();
    let key = make_key(&c, "sdk");
    let rec = Recorder::default();
    let readers: Vec<Client> = (0..3).map(|i| client(&c, i, &key, &rec)).collect();
    run(scenario(&readers[0], &readers, &rec));
}

/// One item of a listing, in the order S3 pages through them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    Key(String),
    Prefix(String),
}

impl Item {
    fn name(&self) -> &str {
        match self {
            Item::Key(k) | Item::Prefix(k) => k,
        }
    }
}

/// What a listing of `keys` must return, computed from the keys alone.
fn model_listing(
    keys: &std::collections::BTreeSet<String>,
    prefix: &str,
    delim: Option<&str>,
) -> Vec<Item> {
    let mut out: Vec<Item> = vec![];
    for k in keys.iter().filter(|k| k.starts_with(prefix)) {
        let rest = &k[prefix.len()..];
        let item = match delim.and_then(|d| rest.find(d).map(|i| (i, d))) {
            Some((i, d)) => Item::Prefix(format!("{prefix}{}", &rest[..i + d.len()])),
            None => Item::Key(k.clone()),
        };
        if out.last() != Some(&item) {
            out.push(item);
        }
    }
    out
}

async fn list_all(
    client: &Client,
    bucket: &str,
    prefix: &str,
    delim: Option<&str>,
    max_keys: i32,
) -> Vec<Item> {
    let mut out: Vec<Item> = vec![];
    let mut token = None;
    for _ in 0..10_000 {
        let r = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_delimiter(delim.map(str::to_string))
            .max_keys(max_keys)
            .set_continuation_token(token.take())
            .send()
            .await
            .unwrap_or_else(|e| panic!("ListObjectsV2 {prefix:?} {delim:?}: {e:?}"));
        let mut page: Vec<Item> = r
            .contents()
            .iter()
            .map(|o| Item::Key(o.key().unwrap().to_string()))
            .chain(
                r.common_prefixes()
                    .iter()
                    .map(|p| Item::Prefix(p.prefix().unwrap().to_string())),
            )
            .collect();
        page.sort_by(|a, b| a.name().cmp(b.name()));
        assert!(page.len() <= max_keys as usize, "page over max-keys");
        out.extend(page);
        match r.next_continuation_token() {
            Some(t) if r.is_truncated() == Some(true) => token = Some(t.to_string()),
            _ => return out,
        }
    }
    panic!("listing did not end within 10 000 pages");
}

/// Delimiter listings where common prefixes hold more keys than one read
/// of the object table (1 000), sit next to single keys, and hide deleted
/// keys: every listing, paged by 1, 7 and 1 000, equals the model.
#[test]
fn listings_with_a_delimiter_over_many_batches() {
    let (_c, cl, _rec) = one_node(&[]);
    run(async {
        let bucket = "listing";
        cl.create_bucket().bucket(bucket).send().await.unwrap();
        let mut keys: Vec<String> = vec![];
        keys.extend((0..1200).map(|i| format!("a/{i:04}")));
        keys.extend(["a0", "a1", "b/x/1", "b/x/2", "b/y", "d", "e/only"].map(String::from));
        keys.extend((0..1100).map(|i| format!("c/{:02}/{i:04}", i % 3)));
        keys.extend((0..40).map(|i| format!("f/{i:02}")));
        use futures::stream::{self, StreamExt};
        let failed = stream::iter(keys.iter())
            .map(|k| {
                cl.put_object()
                    .bucket(bucket)
                    .key(k)
                    .body(ByteStream::from_static(b"x"))
                    .send()
            })
            .buffer_unordered(16)
            .filter(|r| futures::future::ready(r.is_err()))
            .count()
            .await;
        assert_eq!(failed, 0);
        // Deleted: one key inside a big prefix, the only key under "e/",
        // and every key of "f/".
        let mut deleted: Vec<String> = vec!["a/0500".into(), "e/only".into()];
        deleted.extend((0..40).map(|i| format!("f/{i:02}")));
        for k in deleted.iter() {
            cl.delete_object()
                .bucket(bucket)
                .key(k)
                .send()
                .await
                .unwrap();
        }
        let live: std::collections::BTreeSet<String> =
            keys.into_iter().filter(|k| !deleted.contains(k)).collect();
        for (prefix, delim) in [
            ("", Some("/")),
            ("c/", Some("/")),
            ("b/", Some("/")),
            ("a/", None),
            ("", Some("0")),
        ] {
            let want = model_listing(&live, prefix, delim);
            for max_keys in [1, 7, 1000] {
                if max_keys == 1 && want.len() > 50 {
                    continue;
                }
                let got = list_all(&cl, bucket, prefix, delim, max_keys).await;
                assert_eq!(
                    got, want,
                    "prefix {prefix:?}, delimiter {delim:?}, max-keys {max_keys}"
                );
            }
        }
    });
}

fn md5_hex(b: &[u8]) -> String {
    use md5::Digest as _;
    format!("\"{}\"", hex::encode(md5::Md5::digest(b)))
}

/// UploadPartCopy of ranges on the source's block boundaries (the whole
/// object, its first 5 MiB) shares the source's blocks: no block file is
/// written, and the object completed from those parts reads back exactly,
/// with each part's ETag the MD5 of its bytes. A range that cuts a block
/// is written anew (the count of block files moves, so the first check can
/// fail). Deleting the source and letting the block GC run leaves the
/// copy whole. An upload with a CRC32 checksum gets the part's CRC32, read
/// from the shared blocks.
#[test]
fn part_copies_on_block_boundaries_share_the_source_blocks() {
    // Blocks without references are deleted 2 s after their release.
    let (c, cl, _rec) = one_node(&[("GARAGE_BLOCK_DELETE_DELAY_SECS", "2")]);
    run(async {
        let bucket = "partcopy";
        cl.create_bucket().bucket(bucket).send().await.unwrap();
        let src = random_bytes(6 * MIB + 100);
        cl.put_object()
            .bucket(bucket)
            .key("src")
            .body(ByteStream::from(src.clone()))
            .send()
            .await
            .unwrap();
        let blocks_before = c.block_files(0).len();
        assert_eq!(blocks_before, 7, "6 MiB + 100 B: 7 blocks");

        let copy_part = |upload: String, n: i32, range: Option<&str>| {
            let r = cl
                .upload_part_copy()
                .bucket(bucket)
                .key("dst")
                .upload_id(upload)
                .part_number(n)
                .copy_source(format!("{bucket}/src"));
            let r = match range {
                Some(range) => r.copy_source_range(range),
                None => r,
            };
            async move { r.send().await.unwrap().copy_part_result.unwrap() }
        };
        let upload = cl
            .create_multipart_upload()
            .bucket(bucket)
            .key("dst")
            .send()
            .await
            .unwrap()
            .upload_id
            .unwrap();
        let first = format!("bytes=0-{}", 5 * MIB - 1);
        let p1 = copy_part(upload.clone(), 1, Some(&first)).await;
        let p2 = copy_part(upload.clone(), 2, None).await;
        assert_eq!(p1.e_tag.as_deref(), Some(md5_hex(&src[..5 * MIB]).as_str()));
        assert_eq!(p2.e_tag.as_deref(), Some(md5_hex(&src).as_str()));
        let parts = [(1, p1.e_tag.unwrap()), (2, p2.e_tag.unwrap())]
            .into_iter()
            .map(|(n, e)| CompletedPart::builder().part_number(n).e_tag(e).build())
            .collect();
        cl.complete_multipart_upload()
            .bucket(bucket)
            .key("dst")
            .upload_id(&upload)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(c.block_files(0).len(), blocks_before, "no block written");
        let mut want = src[..5 * MIB].to_vec();
        want.extend_from_slice(&src);
        assert_eq!(sha256(&get_bytes(&cl, bucket, "dst").await), sha256(&want));

        // A range that cuts blocks: written anew.
        let upload = cl
            .create_multipart_upload()
            .bucket(bucket)
            .key("dst")
            .send()
            .await
            .unwrap()
            .upload_id
            .unwrap();
        let shared_files = c.block_files(0);
        let cut = copy_part(upload.clone(), 1, Some("bytes=1-1048576")).await;
        assert_eq!(
            cut.e_tag.as_deref(),
            Some(md5_hex(&src[1..MIB + 1]).as_str())
        );
        let cut_files: Vec<_> = c
            .block_files(0)
            .into_iter()
            .filter(|f| !shared_files.contains(f))
            .collect();
        assert!(!cut_files.is_empty(), "new blocks written");

        // The source goes, then the cut part: once the GC has deleted the
        // cut part's blocks (released after the source's), the shared
        // blocks must all still be there, held by "dst" alone.
        cl.delete_object()
            .bucket(bucket)
            .key("src")
            .send()
            .await
            .unwrap();
        cl.abort_multipart_upload()
            .bucket(bucket)
            .key("dst")
            .upload_id(&upload)
            .send()
            .await
            .unwrap();
        common::cluster::wait_until(
            "the aborted part's blocks deleted",
            std::time::Duration::from_secs(60),
            || cut_files.iter().all(|f| !f.exists()),
        );
        assert_eq!(c.block_files(0), shared_files, "shared blocks kept");
        assert_eq!(sha256(&get_bytes(&cl, bucket, "dst").await), sha256(&want));
        // The source again, for the checksum case.
        cl.put_object()
            .bucket(bucket)
            .key("src")
            .body(ByteStream::from(src.clone()))
            .send()
            .await
            .unwrap();

        // An upload with a CRC32 checksum: the whole source's, as the SDK
        // sent it with the PutObject.
        let src_crc = cl
            .head_object()
            .bucket(bucket)
            .key("src")
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
            .unwrap()
            .checksum_crc32
            .expect("the source's CRC32");
        let upload = cl
            .create_multipart_upload()
            .bucket(bucket)
            .key("crc")
            .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Crc32)
            .send()
            .await
            .unwrap()
            .upload_id
            .unwrap();
        let r = cl
            .upload_part_copy()
            .bucket(bucket)
            .key("crc")
            .upload_id(&upload)
            .part_number(1)
            .copy_source(format!("{bucket}/src"))
            .send()
            .await
            .unwrap()
            .copy_part_result
            .unwrap();
        assert_eq!(r.checksum_crc32.as_deref(), Some(src_crc.as_str()));
        assert_eq!(r.e_tag.as_deref(), Some(md5_hex(&src).as_str()));
    });
}
