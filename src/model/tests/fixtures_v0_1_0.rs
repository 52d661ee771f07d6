//! Fixtures of release v0.1.0 (commit cae52f3): the bytes that build wrote
//! for each table entry of the model (as the metadata database, insert
//! queues and `TableRpc` messages carry them), for its local counters, for
//! an object version in a compare-and-set register, and for `TableRpc`
//! requests naming each table's keys. Every later build must decode them
//! into the values below.
//!
//! The files in `tests/fixtures/v0.1.0/` were written by v0.1.0 itself:
//! this test, copied into `git archive cae52f3`, run there with
//! `GARAGE_WRITE_FIXTURES=1 cargo test -p garage_model --test fixtures_v0_1_0`
//! (which writes missing files, never overwrites one). Never regenerate
//! them from a later build: for a new release's formats, add a new
//! directory and test. When a field is added to an entry, add it to
//! the samples here with the value an older entry decodes to.

use garage_model::access::{
    BucketAccess, CannedAcl, ObjectOwnership, PublicAccessBlock, VersionAcl,
};
use garage_model::admin_token_table::{AdminToken, AdminTokenParams, AdminTokenTable};
use garage_model::block_ref_table::{BlockRef, BlockRefTable};
use garage_model::bucket_alias_table::{BucketAlias, BucketAliasTable};
use garage_model::bucket_table::*;
use garage_model::counter_table::{CounterEntry, CounterTable, Counts, LocalCounters};
use garage_model::history_table::{HistoryEntry, HistoryKey, HistoryTable};
use garage_model::key_table::{Key, KeyParams, KeyTable};
use garage_model::kms::table::{KmsKey, KmsKeyTable, Material};
use garage_model::mpu_table::{MpuChecksum, MpuPart, MpuPartKey, MpuTable, MultipartUpload};
use garage_model::object_lock::{DefaultRetention, ObjectLock, Period, RetentionMode};
use garage_model::object_table::*;
use garage_model::permission::BucketKeyPerm;
use garage_model::version_table::*;
use garage_rpc::layout::EcCode;
use garage_table::rpc::TableRpc;
use garage_table::{encoding, EmptyKey, TableSchema};
use garage_util::crdt::{Bool, Deletable, Lww, LwwMap, Map};
use garage_util::data::{Hash, Uuid};
use serde::{de::DeserializeOwned, Serialize};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v0.1.0");

/// The bytes of fixture `name` (see `garage_util::fixtures`).
fn fixture(name: &str, encode: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    garage_util::fixtures::fixture(DIR, name, encode)
}

/// Checks that fixture `name` decodes, as a table entry, into `sample`.
fn check_entry<E>(name: &str, sample: &E) -> E
where
    E: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = fixture(name, || encoding::encode(sample));
    let decoded: E = encoding::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(&decoded, sample, "{name}");
    decoded
}

fn id(b: u8) -> Uuid {
    Uuid::from([b; 32])
}

fn hash(b: u8) -> Hash {
    Hash::from([b; 32])
}

/// A time of the samples (ms since the epoch).
const T: u64 = 1_700_000_000_000;
const BUCKET: u8 = 0x11;
const KEY_ID: &str = "GK0123456789abcdef01234567";

fn s(x: &str) -> String {
    x.to_string()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(k, v)| (s(k), s(v))).collect()
}

/// A value built from its fields through serde, for types whose fields
/// are private and whose setters stamp with the clock (so that the sample
/// is the same at every run).
fn from_fields<T: DeserializeOwned>(fields: impl Serialize) -> T {
    rmp_serde::from_slice(&rmp_serde::to_vec_named(&fields).unwrap()).unwrap()
}

#[derive(Serialize)]
struct LockFields {
    compliance_until: Option<u64>,
    governance: Option<Lww<Option<u64>>>,
    legal_hold: Option<Lww<bool>>,
}

#[derive(Serialize)]
struct ObjectFields {
    bucket_id: Uuid,
    key: String,
    versions: Vec<ObjectVersion>,
    complete_mark: Option<(u64, Uuid)>,
    tag_updates: LwwMap<Uuid, Vec<(String, String)>>,
    null_mark: Option<(u64, Uuid)>,
    versioned: bool,
}

fn full_bucket() -> Bucket {
    let mut authorized_keys = LwwMap::new();
    authorized_keys.merge_raw(s(KEY_ID), T + 1, BucketKeyPerm::ALL);
    authorized_keys.merge_raw(
        s("GKfedcba9876543210fedcba98"),
        T + 2,
        BucketKeyPerm {
            allow_read: true,
            allow_write: false,
            allow_owner: false,
        },
    );
    let mut aliases = LwwMap::new();
    aliases.merge_raw(s("photos"), T + 3, true);
    aliases.merge_raw(s("old-photos"), T + 4, false);
    let mut local_aliases = LwwMap::new();
    local_aliases.merge_raw((s(KEY_ID), s("my-photos")), T + 5, true);
    let website = WebsiteConfig {
        index_document: Some(s("index.html")),
        error_document: Some(s("404.html")),
        redirect_all: None,
        routing_rules: vec![RoutingRule {
            condition: Some(RoutingCondition {
                http_error_code: Some(404),
                key_prefix: Some(s("docs/")),
            }),
            redirect: Redirect {
                host_name: Some(s("example.com")),
                http_redirect_code: Some(301),
                protocol: Some(s("https")),
                replace_key_prefix_with: Some(s("documents/")),
                replace_key_with: None,
            },
        }],
    };
    let cors = vec![CorsRule {
        id: Some(s("web")),
        max_age_seconds: Some(3600),
        allow_origins: vec![s("https://example.com")],
        allow_methods: vec![s("GET"), s("PUT")],
        allow_headers: vec![s("*")],
        expose_headers: vec![s("ETag")],
    }];
    let lifecycle = vec![
        LifecycleRule {
            id: Some(s("logs")),
            enabled: true,
            filter: LifecycleFilter {
                prefix: Some(s("logs/")),
                size_gt: Some(0),
                size_lt: Some(1 << 30),
                tags: pairs(&[("class", "tmp")]),
            },
            expiration: Some(LifecycleExpiration::AfterDays(30)),
            abort_incomplete_mpu_days: Some(7),
            noncurrent_expiration: Some(NoncurrentExpiration {
                days: 10,
                keep: Some(3),
            }),
            expired_delete_marker: true,
            transitions: vec![LifecycleTransition {
                when: LifecycleExpiration::AfterDays(7),
                class: s("STANDARD_IA"),
            }],
            noncurrent_transitions: vec![],
        },
        LifecycleRule {
            id: None,
            enabled: false,
            filter: LifecycleFilter::default(),
            expiration: Some(LifecycleExpiration::AtDate(T / DAY_MSEC * DAY_MSEC)),
            abort_incomplete_mpu_days: None,
            noncurrent_expiration: None,
            expired_delete_marker: false,
            transitions: vec![],
            noncurrent_transitions: vec![],
        },
    ];
    Bucket {
        id: id(BUCKET),
        state: Deletable::Present(BucketParams {
            creation_date: T,
            authorized_keys,
            aliases,
            local_aliases,
            website_config: Lww::raw(T + 6, Some(website)),
            website_access: Lww::raw(T + 7, true),
            cors_config: Lww::raw(T + 8, Some(cors)),
            quotas: Lww::raw(
                T + 9,
                BucketQuotas {
                    max_size: Some(10 << 30),
                    max_objects: Some(1_000_000),
                },
            ),
            lifecycle_config: Lww::raw(T + 10, Some(lifecycle)),
            tags: Lww::raw(T + 11, Some(pairs(&[("team", "web")]))),
            versioning: Lww::raw(T + 12, Versioning::Enabled),
            object_lock: Bool::new(true),
            default_retention: Lww::raw(
                T + 13,
                Some(DefaultRetention {
                    mode: RetentionMode::Governance,
                    period: Period::Days(30),
                }),
            ),
            encryption: Lww::raw(
                T + 14,
                Some(DefaultEncryption {
                    bucket_key_enabled: true,
                    kms: true,
                    kms_key_id: Some(s("alias/photos")),
                }),
            ),
            access: BucketAccess {
                acl: Lww::raw(T + 15, CannedAcl::PublicRead),
                policy: Lww::raw(
                    T + 16,
                    Some(s(r#"{"Version":"2012-10-17","Statement":[]}"#)),
                ),
                ownership: Lww::raw(T + 17, Some(ObjectOwnership::BucketOwnerPreferred)),
                public_access_block: Lww::raw(
                    T + 18,
                    Some(PublicAccessBlock {
                        block_public_acls: true,
                        ignore_public_acls: false,
                        block_public_policy: true,
                        restrict_public_buckets: false,
                    }),
                ),
            },
            default_storage_class: Lww::raw(T + 19, Some(s("STANDARD_IA"))),
            logging: Lww::raw(
                T + 20,
                Some(BucketLogging {
                    target_bucket: id(0x12),
                    target_name: s("logs"),
                    target_prefix: s("photos/"),
                    partitioned: Some(PartitionDateSource::EventTime),
                }),
            ),
            allowed_storage_classes: Lww::raw(0, None),
            notifications: Lww::raw(0, None),
            replication: Lww::raw(0, None),
        }),
    }
}

#[test]
fn buckets() {
    let b = check_entry("bucket", &full_bucket());
    let p = b.params().unwrap();
    assert_eq!(b.global_aliases(), vec![s("photos")]);
    assert_eq!(
        p.website().unwrap().error_document.as_deref(),
        Some("404.html")
    );
    assert_eq!(*p.versioning.get(), Versioning::Enabled);

    // A website that redirects everything, on a bucket otherwise new.
    let mut redirect = full_bucket();
    let p = redirect.params_mut().unwrap();
    p.website_config = Lww::raw(
        T + 30,
        Some(WebsiteConfig {
            index_document: None,
            error_document: None,
            redirect_all: Some(RedirectAll {
                host_name: s("www.example.com"),
                protocol: None,
            }),
            routing_rules: vec![],
        }),
    );
    p.lifecycle_config = Lww::raw(0, None);
    p.default_retention = Lww::raw(T + 31, None);
    check_entry("bucket_redirect_all", &redirect);

    check_entry("bucket_deleted", &Bucket::deleted(id(0x13)));
}

#[test]
fn bucket_aliases() {
    check_entry(
        "bucket_alias",
        &BucketAlias {
            name: s("photos"),
            state: Lww::raw(T + 3, Some(id(BUCKET))),
        },
    );
    check_entry(
        "bucket_alias_removed",
        &BucketAlias {
            name: s("old-photos"),
            state: Lww::raw(T + 4, None),
        },
    );
}

#[test]
fn keys() {
    let mut authorized_buckets = LwwMap::new();
    authorized_buckets.merge_raw(id(BUCKET), T + 1, BucketKeyPerm::ALL);
    authorized_buckets.merge_raw(
        id(0x12),
        T + 2,
        BucketKeyPerm {
            allow_read: false,
            allow_write: true,
            allow_owner: false,
        },
    );
    let mut local_aliases = LwwMap::new();
    local_aliases.merge_raw(s("my-photos"), T + 5, Some(id(BUCKET)));
    local_aliases.merge_raw(s("gone"), T + 6, None);
    let key = Key {
        key_id: s(KEY_ID),
        state: Deletable::Present(KeyParams {
            secret_key: s("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
            name: Lww::raw(T, s("alice")),
            allow_create_bucket: Lww::raw(T + 7, true),
            authorized_buckets,
            local_aliases,
        }),
    };
    let k = check_entry("key", &key);
    assert_eq!(k.name(), "alice");
    assert_eq!(k.bucket_permissions(&id(BUCKET)), BucketKeyPerm::ALL);
    check_entry("key_deleted", &Key::deleted("GKffffffffffffffffffffffff"));
}

#[test]
fn admin_tokens() {
    let token = AdminToken {
        id: s("0123456789abcdef01234567"),
        state: Deletable::Present(AdminTokenParams {
            created: T,
            secret_hash: hex::encode(garage_util::data::blake2sum(b"the secret").as_slice()),
            name: Lww::raw(T, s("ci")),
            expiration: Lww::raw(T + 1, Some(T + 90 * DAY_MSEC)),
            scope: Lww::raw(T + 2, vec![s("ListBuckets"), s("GetBucketInfo"), s("Key*")]),
        }),
    };
    let t = check_entry("admin_token", &token);
    assert!(t.secret_matches("the secret"));
    assert!(t.allows("KeyInfo") && !t.allows("DeleteBucket"));
}

#[test]
fn kms_keys() {
    let mut aliases = LwwMap::new();
    aliases.merge_raw(s("photos"), T + 1, true);
    aliases.merge_raw(s("old"), T + 2, false);
    let mut materials = Map::new();
    for (v, created) in [(0x21, T), (0x22, T + 1000)] {
        materials.put(
            id(v),
            Material {
                created,
                // 12-byte nonce, 32 sealed bytes, 16-byte tag.
                sealed: (0..60).map(|i| i as u8 ^ v).collect(),
            },
        );
    }
    let key = KmsKey {
        id: s("1234abcd-12ab-34cd-56ef-1234567890ab"),
        created: T,
        description: Lww::raw(T, s("the photos key")),
        aliases,
        enabled: Lww::raw(T + 3, true),
        materials,
    };
    let k = check_entry("kms_key", &key);
    assert_eq!(k.aliases(), vec![s("photos")]);
    assert_eq!(k.current_material().unwrap().0, &id(0x22));
}

fn meta(size: u64, etag: &str) -> ObjectVersionMeta {
    ObjectVersionMeta {
        headers: pairs(&[
            ("content-type", "text/plain"),
            ("x-amz-meta-author", "alice"),
        ]),
        size,
        etag: s(etag),
        storage_class: None,
        first_ec: None,
        recoded: 0,
    }
}

fn version(
    uuid: u8,
    timestamp: u64,
    state: ObjectVersionState,
    versioning: Versioning,
) -> ObjectVersion {
    ObjectVersion::new(id(uuid), timestamp, state, versioning)
}

fn locked_version() -> ObjectVersion {
    let data = ObjectVersionData::FirstBlock(
        ObjectVersionMeta {
            storage_class: Some(s("STANDARD_IA")),
            first_ec: Some(EcCode { data: 4, parity: 2 }.into()),
            ..meta(10 << 20, "9b2cf535f27731c974343645a3985328-2")
        },
        hash(0x31),
    );
    ObjectVersion {
        lock: from_fields::<ObjectLock>(LockFields {
            compliance_until: Some(T + 365 * DAY_MSEC),
            governance: Some(Lww::raw(T + 1, Some(T + 30 * DAY_MSEC))),
            legal_hold: Some(Lww::raw(T + 2, true)),
        }),
        acl: VersionAcl::written(T + 3, CannedAcl::AuthenticatedRead),
        ..version(
            0x32,
            T + 100,
            ObjectVersionState::Complete(data),
            Versioning::Enabled,
        )
    }
}

#[test]
fn objects() {
    // Inline data, with a newer upload in progress and tags set later.
    let inline = ObjectVersionData::Inline(
        meta(11, "5eb63bbbe01eeed093cb22bb8f5acdc3"),
        b"hello world".to_vec(),
    );
    let done = ObjectVersion {
        acl: VersionAcl::written(T + 1, CannedAcl::PublicRead),
        ..version(
            0x41,
            T,
            ObjectVersionState::Complete(inline),
            Versioning::Off,
        )
    };
    let uploading = ObjectVersionState::Uploading {
        multipart: true,
        headers: pairs(&[("content-type", "image/png")]),
    };
    let mut tag_updates = LwwMap::new();
    tag_updates.merge_raw(id(0x41), T + 2, pairs(&[("project", "demo")]));
    let object: Object = from_fields(ObjectFields {
        bucket_id: id(BUCKET),
        key: s("notes/hello.txt"),
        versions: vec![done, version(0x42, T + 10, uploading, Versioning::Off)],
        complete_mark: Some((T, id(0x41))),
        tag_updates,
        null_mark: Some((T, id(0x41))),
        versioned: false,
    });
    let o = check_entry("object_inline", &object);
    assert_eq!(o.last_data().unwrap().size(), 11);
    assert_eq!(
        o.updated_tags(&id(0x41)),
        Some(&pairs(&[("project", "demo")]))
    );
    assert!(o.versions()[1].is_uploading(Some(true)));

    // A first block, erasure-coded, locked, in a versioned bucket.
    let object = Object::new(id(BUCKET), s("photos/cat.jpg"), vec![locked_version()]);
    let o = check_entry("object_first_block", &object);
    let v = o.last_data().unwrap();
    assert_eq!(
        (v.size(), v.storage_class()),
        (10 << 20, Some("STANDARD_IA"))
    );
    assert!(v.lock.legal_hold());
    assert_eq!(v.acl.get(), CannedAcl::AuthenticatedRead);

    // A null delete marker (versioning suspended), and a newer aborted
    // upload.
    let object = Object::new(
        id(BUCKET),
        s("photos/dog.jpg"),
        vec![
            version(
                0x43,
                T,
                ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
                Versioning::Suspended,
            ),
            version(
                0x44,
                T + 5,
                ObjectVersionState::Aborted,
                Versioning::Suspended,
            ),
        ],
    );
    let o = check_entry("object_delete_marker", &object);
    assert!(o.is_versioned() && o.last_data().is_none());
    assert_eq!(o.versions().len(), 2);
}

#[test]
fn object_version_in_a_register() {
    let v = locked_version();
    let bytes = fixture("register_object_version", || v.to_register_value());
    assert_eq!(ObjectVersion::from_register_value(&bytes).unwrap(), v);
}

#[test]
fn object_history() {
    let mut live = HistoryEntry::new(id(BUCKET), "photos/cat.jpg", locked_version());
    live.tags = Lww::raw(T + 200, Some(pairs(&[("color", "grey")])));
    let h = check_entry("object_history", &live);
    assert_eq!(h.hkey, HistoryKey::of("photos/cat.jpg", T + 100, id(0x32)));
    assert!(!h.is_deleted());

    let marker = version(
        0x45,
        T + 300,
        ObjectVersionState::Complete(ObjectVersionData::DeleteMarker),
        Versioning::Enabled,
    );
    let gone = HistoryEntry::withdrawn(id(BUCKET), "photos/cat.jpg", marker);
    assert!(check_entry("object_history_deleted", &gone).is_deleted());
}

fn backlink() -> VersionBacklink {
    VersionBacklink::Object {
        bucket_id: id(BUCKET),
        key: s("photos/cat.jpg"),
    }
}

#[test]
fn versions() {
    let mut blocks = Map::new();
    let key = |offset| VersionBlockKey {
        part_number: 1,
        offset,
    };
    blocks.put(
        key(0),
        VersionBlock {
            hash: hash(0x51),
            size: 1 << 20,
            ec: None,
            recoded: 0,
        },
    );
    blocks.put(
        key(1 << 20),
        VersionBlock {
            hash: hash(0x52),
            size: 512 << 10,
            ec: Some(EcCode { data: 4, parity: 2 }.into()),
            recoded: 0,
        },
    );
    let segment = Version {
        uuid: id(0x32),
        segment: VersionSegment::of_block(1, 0),
        deleted: Bool::new(false),
        blocks,
        parts_etags: LwwMap::new(),
        backlink: backlink(),
        created: T,
    };
    let v = check_entry("version_segment", &segment);
    assert_eq!(v.size(), (1 << 20) + (512 << 10));

    let mut parts_etags = LwwMap::new();
    parts_etags.merge_raw(1, T + 1, s("e1f1b0b5dfa2b2d2f67b0f1c7f8a9d11"));
    parts_etags.merge_raw(2, T + 2, s("0c4b0a1f0a5e1c2d3e4f5a6b7c8d9e0f"));
    let head = Version {
        uuid: id(0x53),
        segment: VersionSegment::HEAD,
        deleted: Bool::new(false),
        blocks: Map::new(),
        parts_etags,
        backlink: VersionBacklink::MultipartUpload {
            upload_id: id(0x61),
        },
        created: T,
    };
    assert!(check_entry("version_head_mpu", &head).segment.is_head());

    let deleted = Version {
        uuid: id(0x54),
        segment: VersionSegment::HEAD,
        deleted: Bool::new(true),
        blocks: Map::new(),
        parts_etags: LwwMap::new(),
        backlink: backlink(),
        created: T,
    };
    check_entry("version_deleted", &deleted);
}

#[test]
fn block_refs() {
    let live = BlockRef {
        ec: Some(EcCode { data: 4, parity: 2 }.into()),
        ..BlockRef::new(hash(0x52), id(0x32), false)
    };
    check_entry("block_ref", &live);
    check_entry(
        "block_ref_deleted",
        &BlockRef::new(hash(0x51), id(0x54), true),
    );
}

#[test]
fn multipart_uploads() {
    let mut parts = Map::new();
    parts.put(
        MpuPartKey {
            part_number: 1,
            timestamp: T + 1,
        },
        MpuPart {
            version: id(0x62),
            etag: Some(s("e1f1b0b5dfa2b2d2f67b0f1c7f8a9d11")),
            size: Some(5 << 20),
            checksum: Some(s("yZRlqg==")),
        },
    );
    parts.put(
        MpuPartKey {
            part_number: 2,
            timestamp: T + 2,
        },
        MpuPart {
            version: id(0x63),
            etag: None,
            size: None,
            checksum: None,
        },
    );
    let mpu = MultipartUpload {
        upload_id: id(0x61),
        timestamp: T,
        deleted: Bool::new(false),
        parts,
        bucket_id: id(BUCKET),
        key: s("videos/big.mp4"),
        checksum: Some(MpuChecksum {
            algorithm: s("CRC32C"),
            full_object: false,
        }),
        storage_class: Some(s("STANDARD_IA")),
        // Not in v0.1.0's bytes: skipped when false, so they are unchanged.
        parts_apart: false,
    };
    check_entry("multipart_upload", &mpu);
}

fn counts(objects: i64, bytes: i64) -> Counts {
    [
        (s("objects"), objects),
        (s("bytes"), bytes),
        (s("unfinished_uploads"), 1),
        (s("bytes.STANDARD_IA"), bytes / 2),
    ]
    .into_iter()
    .collect()
}

#[test]
fn counters() {
    let mut values = Map::new();
    values.put(id(0x71), Lww::raw(T + 1, counts(3, 12_345)));
    values.put(id(0x72), Lww::raw(T + 2, counts(2, 10_000)));
    let c = check_entry(
        "bucket_counters",
        &CounterEntry {
            bucket_id: id(BUCKET),
            values,
        },
    );
    assert_eq!(c.total(&[id(0x71), id(0x72)]).get("objects"), Some(&3));
}

/// A node's own counts, in its local tree: written and read by
/// `LocalCounters` itself (its stamp is the clock's of the writing run).
#[test]
fn local_counters() {
    let (_dir, db) = garage_table::testing::temp_db();
    let local = LocalCounters::open(&db).unwrap();
    let bytes = fixture("local_counters", || {
        db.transaction(|tx| -> garage_db::TxResult<(), ()> {
            local.set(tx, id(0x71), id(BUCKET), &counts(3, 12_345))?;
            Ok(())
        })
        .unwrap();
        local.tree.get(id(BUCKET).as_slice()).unwrap().unwrap()
    });
    local.tree.insert(id(BUCKET).as_slice(), &bytes).unwrap();
    assert_eq!(local.get(&id(BUCKET)).unwrap(), counts(3, 12_345));
}

/// `TableRpc` requests carry each table's partition and sort keys (the
/// rest of the message is checked in garage_table's fixtures).
fn check_read_entry<F: TableSchema>(p: F::P, s: F::S) {
    let name = format!("rpc_read_entry_{}", F::TABLE_NAME);
    let msg = TableRpc::<F>::ReadEntry(p.clone(), s.clone());
    // As `garage_net`'s endpoints encode every message.
    let bytes = fixture(&name, || rmp_serde::to_vec_named(&msg).unwrap());
    match rmp_serde::from_slice::<TableRpc<F>>(&bytes) {
        Ok(TableRpc::ReadEntry(dp, ds)) => assert_eq!((dp, ds), (p, s), "{name}"),
        Ok(other) => panic!("{name}: decoded as {}", other.kind()),
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn table_rpc_keys() {
    check_read_entry::<BucketTable>(EmptyKey, id(BUCKET));
    check_read_entry::<BucketAliasTable>(EmptyKey, s("photos"));
    check_read_entry::<KeyTable>(EmptyKey, s(KEY_ID));
    check_read_entry::<AdminTokenTable>(EmptyKey, s("0123456789abcdef01234567"));
    check_read_entry::<KmsKeyTable>(EmptyKey, s("1234abcd-12ab-34cd-56ef-1234567890ab"));
    check_read_entry::<ObjectTable>(id(BUCKET), s("photos/cat.jpg"));
    check_read_entry::<VersionTable>(id(0x32), VersionSegment::of_block(1, 70));
    check_read_entry::<BlockRefTable>(hash(0x52), id(0x32));
    check_read_entry::<MpuTable>(id(0x61), EmptyKey);
    check_read_entry::<CounterTable>(id(BUCKET), EmptyKey);
    check_read_entry::<HistoryTable>(
        id(BUCKET),
        HistoryKey::of("photos/cat.jpg", T + 100, id(0x32)),
    );
}
