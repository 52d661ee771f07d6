//! `garage bucket …` and `garage key …`, run by the daemon that the CLI
//! reached; each returns the text the CLI prints.

use std::fmt::Write;

use garage_model::bucket_table::{Bucket, BucketParams, BucketQuotas, WebsiteConfig};
use garage_model::helper::{HelperError, Metadata};
use garage_model::key_table::Key;
use garage_model::permission::BucketKeyPerm;
use garage_util::config::parse_size;

use garage_model::counter_table::Counts;
use garage_model::object_table::ObjectFilter;
use garage_rpc::layout::LayoutVersion;
use garage_table::EmptyKey;
use garage_util::data::Uuid;

use crate::admin::table::format as columns;
use crate::cli::{BucketOperation, KeyOperation, PermOpt, WebsiteOpt};
use garage_model::garage::Garage;

type Result<T> = std::result::Result<T, HelperError>;

fn refuse(msg: impl Into<String>) -> HelperError {
    HelperError::Refused(msg.into())
}

fn date(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

pub async fn bucket(g: &Garage, op: BucketOperation) -> Result<String> {
    let m = &g.metadata();
    match op {
        BucketOperation::CleanupIncompleteUploads {
            older_than,
            buckets,
        } => {
            let age = garage_util::config::parse_duration(&older_than)
                .map_err(|e| refuse(format!("--older-than {older_than:?}: {e}")))?;
            let mut out = String::new();
            for name in buckets {
                let b = m.get_bucket(&name).await?;
                let req = crate::admin_api::bucket::CleanupIncompleteUploadsRequest {
                    bucket_id: b.id.hex(),
                    older_than_secs: age.as_secs(),
                };
                let r = crate::admin_api::bucket::cleanup_incomplete_uploads_of(g, &req)
                    .await
                    .map_err(|e| refuse(e.to_string()))?;
                let _ = writeln!(
                    out,
                    "{name}: {} incomplete multipart upload(s) aborted",
                    r.uploads_deleted
                );
            }
            Ok(out)
        }
        BucketOperation::List => {
            let mut rows = vec!["ID\tCreated\tGlobal aliases\tLocal aliases".to_string()];
            for b in m.list_buckets().await? {
                let created = b
                    .params()
                    .map(|p| date(p.creation_date))
                    .unwrap_or_default();
                let locals: Vec<String> = b
                    .local_aliases()
                    .iter()
                    .map(|(k, n)| format!("{n} ({})", &k[..k.len().min(10)]))
                    .collect();
                rows.push(format!(
                    "{}\t{}\t{}\t{}",
                    &b.id.hex()[..16],
                    created,
                    b.global_aliases().join(", "),
                    locals.join(", ")
                ));
            }
            Ok(columns(&rows))
        }
        BucketOperation::Info { name } => {
            let b = m.get_bucket(&name).await?;
            bucket_info(g, &b).await
        }
        BucketOperation::Create { name } => {
            m.create_bucket(&name).await?;
            Ok(format!("Bucket {name} was created.\n"))
        }
        BucketOperation::Delete { yes, name } => {
            let b = m.get_bucket(&name).await?;
            if !yes {
                return Err(refuse(format!(
                    "add --yes to delete bucket {name} ({})",
                    b.id.hex()
                )));
            }
            if !bucket_is_empty(g, &b.id).await? {
                return Err(refuse(format!(
                    "bucket {name} is not empty: delete its objects first"
                )));
            }
            m.delete_bucket(&b).await?;
            Ok(format!("Bucket {name} was deleted.\n"))
        }
        BucketOperation::Alias {
            local,
            existing_bucket,
            new_name,
        } => {
            let b = m.get_bucket(&existing_bucket).await?;
            match local {
                None => {
                    m.set_global_alias(b.id, &new_name).await?;
                    Ok(format!(
                        "Alias {new_name} now points to bucket {}.\n",
                        b.id.hex()
                    ))
                }
                Some(k) => {
                    let key = m.get_key(&k).await?;
                    m.set_local_alias(b.id, &key, &new_name).await?;
                    Ok(format!(
                        "Alias {new_name} now points to bucket {} in namespace of key {}.\n",
                        b.id.hex(),
                        key.key_id
                    ))
                }
            }
        }
        BucketOperation::Unalias { local, name } => match local {
            None => {
                m.unset_global_alias(&name).await?;
                Ok(format!("Alias {name} was removed.\n"))
            }
            Some(k) => {
                let key = m.get_key(&k).await?;
                m.unset_local_alias(&key, &name).await?;
                Ok(format!(
                    "Alias {name} was removed from the namespace of key {}.\n",
                    key.key_id
                ))
            }
        },
        BucketOperation::Allow(p) => permissions(m, p, true).await,
        BucketOperation::Deny(p) => permissions(m, p, false).await,
        BucketOperation::Website(w) => website(m, w).await,
        BucketOperation::SetQuotas {
            bucket,
            max_size,
            max_objects,
        } => {
            if max_size.is_none() && max_objects.is_none() {
                return Err(refuse(
                    "give --max-size and/or --max-objects (a value, or \"none\" to remove the limit)",
                ));
            }
            let b = m.get_bucket(&bucket).await?;
            let mut q = b
                .params()
                .map(|p| *p.quotas.get())
                .unwrap_or(BucketQuotas::default());
            if let Some(s) = max_size {
                q.max_size = match s.as_str() {
                    "none" => None,
                    s => Some(parse_size(s).map_err(|e| refuse(format!("--max-size: {e}")))?),
                };
            }
            if let Some(n) = max_objects {
                q.max_objects = match n.as_str() {
                    "none" => None,
                    n => Some(n.parse().map_err(|_| {
                        refuse(format!(
                            "--max-objects: {n:?} is not a number (or \"none\")"
                        ))
                    })?),
                };
            }
            m.set_quotas(b.id, q).await?;
            Ok(format!("Quotas of bucket {bucket} were updated.\n"))
        }
    }
}

async fn permissions(m: &Metadata, p: PermOpt, allow: bool) -> Result<String> {
    if !(p.read || p.write || p.owner) {
        return Err(refuse("give at least one of --read, --write, --owner"));
    }
    let b = m.get_bucket(&p.bucket).await?;
    let key = m.get_key(&p.key).await?;
    let change = BucketKeyPerm {
        allow_read: p.read,
        allow_write: p.write,
        allow_owner: p.owner,
    };
    let perm = change_permissions(m, &b, &key, change, allow).await?;
    Ok(format!(
        "New permissions for {} on {}: read {}, write {}, owner {}.\n",
        key.key_id, p.bucket, perm.allow_read, perm.allow_write, perm.allow_owner
    ))
}

/// `garage bucket website`: the website switch, and with `--allow` the
/// index and error documents (a redirect-all configuration is replaced
/// when documents are given; routing rules are kept).
async fn website(m: &Metadata, w: WebsiteOpt) -> Result<String> {
    if w.allow == w.deny {
        return Err(refuse("give one of --allow and --deny"));
    }
    if w.deny && (w.index_document.is_some() || w.error_document.is_some()) {
        return Err(refuse(
            "--index-document and --error-document go with --allow",
        ));
    }
    if let Some(i) = &w.index_document {
        if i.is_empty() || i.contains('/') {
            return Err(refuse(format!(
                "--index-document {i:?}: give a file name without '/', such as index.html"
            )));
        }
    }
    if w.error_document.as_deref() == Some("") {
        return Err(refuse("--error-document is empty"));
    }
    let b = m.get_bucket(&w.bucket).await?;
    if w.deny {
        set_website_access(m, b, None).await?;
        return Ok(format!(
            "The website endpoint no longer serves bucket {}.\n",
            w.bucket
        ));
    }
    let config = set_website_access(m, b, Some((w.index_document, w.error_document)))
        .await?
        .expect("website enabled");
    Ok(format!(
        "The website endpoint serves bucket {}: {}.\n",
        w.bucket,
        website_summary(&config)
    ))
}

fn website_summary(c: &WebsiteConfig) -> String {
    if let Some(r) = &c.redirect_all {
        return format!(
            "every request redirected to {}://{}",
            r.protocol.as_deref().unwrap_or("(same protocol)"),
            r.host_name
        );
    }
    let mut s = format!(
        "index document {}, error document {}",
        c.index_document.as_deref().unwrap_or("index.html"),
        c.error_document.as_deref().unwrap_or("(none)")
    );
    if !c.routing_rules.is_empty() {
        s.push_str(&format!(", {} routing rule(s)", c.routing_rules.len()));
    }
    s
}

/// Whether the bucket holds no object, upload or version.
pub async fn bucket_is_empty(g: &Garage, id: &Uuid) -> Result<bool> {
    // As S3's DeleteBucket: any object, upload or version (delete
    // markers and locked versions included) keeps the bucket.
    let (objects, versions) = tokio::join!(
        g.object_table
            .get_range(id, None, Some(ObjectFilter::HasVersions), 1, false),
        g.history_table.get_range(id, None, None, 1, false)
    );
    Ok(objects?.is_empty() && versions?.is_empty())
}

/// Grants (`allow`) or revokes the rights set in `change` of `key` on the
/// bucket; returns the key's new rights there.
pub async fn change_permissions(
    m: &Metadata,
    b: &Bucket,
    key: &Key,
    change: BucketKeyPerm,
    allow: bool,
) -> Result<BucketKeyPerm> {
    let mut perm = key.bucket_permissions(&b.id);
    if change.allow_read {
        perm.allow_read = allow;
    }
    if change.allow_write {
        perm.allow_write = allow;
    }
    if change.allow_owner {
        perm.allow_owner = allow;
    }
    m.set_permissions(b.id, &key.key_id, perm).await?;
    Ok(perm)
}

/// Whether the bucket is served by the website endpoint: its switch is on
/// and it has a website configuration.
pub fn website_access(p: &BucketParams) -> bool {
    p.website().is_some()
}

/// The website switch of `garage bucket website` and of the admin API's
/// UpdateBucket. `None` turns it off (the configuration is kept).
/// `Some((index, error))` turns it on and merges the documents given into
/// the bucket's configuration: routing rules are kept, a redirect-all
/// configuration is replaced when documents are given, and `index.html` is
/// the index when there is neither an index nor a redirect. Returns the
/// configuration now in effect.
pub async fn set_website_access(
    m: &Metadata,
    mut b: Bucket,
    enable: Option<(Option<String>, Option<String>)>,
) -> Result<Option<WebsiteConfig>> {
    let id = b.id;
    let Some(p) = b.params_mut() else {
        return Err(HelperError::NoSuchBucket(id.hex()));
    };
    let Some((index, error)) = enable else {
        p.website_access.update(false);
        m.buckets.insert(&b).await?;
        return Ok(None);
    };
    let old = p.website_config.get().clone();
    let mut config = old.clone().unwrap_or(WebsiteConfig {
        index_document: None,
        error_document: None,
        redirect_all: None,
        routing_rules: Vec::new(),
    });
    if index.is_some() || error.is_some() {
        config.redirect_all = None;
    }
    if let Some(i) = index {
        config.index_document = Some(i);
    }
    if let Some(e) = error {
        config.error_document = Some(e);
    }
    if config.index_document.is_none() && config.redirect_all.is_none() {
        config.index_document = Some("index.html".into());
    }
    if old.as_ref() != Some(&config) {
        p.website_config.update(Some(config.clone()));
    }
    if !*p.website_access.get() {
        p.website_access.update(true);
    }
    m.buckets.insert(&b).await?;
    Ok(Some(config))
}

/// Object, byte and unfinished-upload counts of a bucket, as counted by
/// the nodes of its partition.
pub async fn bucket_counts(g: &Garage, id: &Uuid) -> Result<Counts> {
    Ok(match g.counter_table.get(id, &EmptyKey).await? {
        Some(c) => {
            let partition = LayoutVersion::partition_of(id.as_slice());
            let nodes: Vec<Uuid> = g
                .system
                .layout()
                .current()
                .nodes_of(partition)
                .iter()
                .map(|n| Uuid::from(n.0))
                .collect();
            c.total(&nodes)
        }
        None => Default::default(),
    })
}

/// An admin API error as the CLI reports it.
fn api_error(e: crate::admin_api::error::ApiError) -> HelperError {
    HelperError::Refused(e.to_string())
}

/// `garage bucket info`: the admin API's GetBucketInfo, as text.
async fn bucket_info(g: &Garage, b: &Bucket) -> Result<String> {
    let i = crate::admin_api::bucket::bucket_info(g, b)
        .await
        .map_err(api_error)?;
    let created = i
        .created
        .parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or(i.created);
    let mut out = String::new();
    let _ = writeln!(out, "==== BUCKET INFORMATION ====");
    let _ = writeln!(out, "Bucket:          {}", i.id);
    let _ = writeln!(out, "Created:         {created}");
    let _ = writeln!(out);
    let _ = writeln!(out, "Size:            {} B", i.bytes);
    let _ = writeln!(out, "Objects:         {}", i.objects);
    let _ = writeln!(out, "Unfinished MPUs: {}", i.unfinished_uploads);
    let _ = writeln!(out);
    let limit = |v: Option<u64>| v.map(|s| s.to_string()).unwrap_or("none".into());
    let _ = writeln!(
        out,
        "Quotas:          max size {}, max objects {}",
        limit(i.quotas.max_size),
        limit(i.quotas.max_objects)
    );
    let _ = writeln!(out, "Versioning:      {}", i.versioning);
    let _ = writeln!(out, "Object lock:     {}", i.object_lock);
    let a = &i.access;
    let _ = writeln!(
        out,
        "ACL:             {}{}",
        a.acl,
        match a.object_ownership.as_deref() {
            Some("BucketOwnerEnforced") => " (ACLs disabled: BucketOwnerEnforced)",
            _ => "",
        }
    );
    if let Some(block) = &a.public_access_block {
        let _ = writeln!(
            out,
            "Public access:   blocked by {}",
            match block.is_empty() {
                true => "nothing (all settings off)".to_string(),
                false => block.join(", "),
            }
        );
    }
    match &a.policy {
        None => {
            let _ = writeln!(out, "Policy:          none");
        }
        Some(p) => {
            let _ = writeln!(out, "Policy:");
            for line in p.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    match b.params().and_then(|p| p.website()) {
        Some(w) => {
            let _ = writeln!(out, "Website access:  true");
            let _ = writeln!(out, "  {}", website_summary(w));
        }
        None => {
            let _ = writeln!(out, "Website access:  false");
        }
    }
    let _ = writeln!(out);
    for a in i.global_aliases.iter() {
        let _ = writeln!(out, "Global alias:    {a}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "==== KEYS FOR THIS BUCKET ====");
    let mut rows = vec!["Permissions\tAccess key\t\tLocal aliases".to_string()];
    for k in i.keys {
        rows.push(format!(
            "{}\t{}\t{}\t{}",
            BucketKeyPerm::from(k.permissions).letters(),
            k.access_key_id,
            k.name,
            k.bucket_local_aliases.join(", ")
        ));
    }
    out.push_str(&columns(&rows));
    Ok(out)
}

pub async fn key(m: &Metadata, op: KeyOperation) -> Result<String> {
    match op {
        KeyOperation::List => {
            let mut rows = vec!["ID\tName".to_string()];
            for k in m.list_keys().await? {
                rows.push(format!("{}\t{}", k.key_id, k.name()));
            }
            Ok(columns(&rows))
        }
        KeyOperation::Info {
            show_secret,
            key_pattern,
        } => {
            let k = m.get_key(&key_pattern).await?;
            key_info(m, &k, show_secret).await
        }
        KeyOperation::Create { name } => {
            let k = m.create_key(&name).await?;
            key_info(m, &k, true).await
        }
        KeyOperation::Rename {
            key_pattern,
            new_name,
        } => {
            let k = m.get_key(&key_pattern).await?;
            let k = rename_key(m, &k, new_name).await?;
            key_info(m, &k, false).await
        }
        KeyOperation::Delete { yes, key_pattern } => {
            let k = m.get_key(&key_pattern).await?;
            if !yes {
                return Err(refuse(format!(
                    "add --yes to delete key {} ({})",
                    k.key_id,
                    k.name()
                )));
            }
            m.delete_key(&k).await?;
            Ok(format!("Access key {} has been deleted.\n", k.key_id))
        }
        KeyOperation::Allow {
            create_bucket,
            key_pattern,
        }
        | KeyOperation::Deny {
            create_bucket,
            key_pattern,
        } if !create_bucket => {
            let _ = key_pattern;
            Err(refuse("give --create-bucket (the only key-wide right)"))
        }
        KeyOperation::Allow { key_pattern, .. } => set_create_bucket(m, &key_pattern, true).await,
        KeyOperation::Deny { key_pattern, .. } => set_create_bucket(m, &key_pattern, false).await,
        KeyOperation::Import {
            name,
            yes,
            key_id,
            secret_key,
        } => {
            if !yes {
                return Err(refuse(
                    "importing a key is for migrating it from another cluster, where it must not be used any more: add --yes to confirm",
                ));
            }
            let k = m.import_key(&key_id, &secret_key, &name).await?;
            key_info(m, &k, false).await
        }
    }
}

async fn set_create_bucket(m: &Metadata, pattern: &str, allow: bool) -> Result<String> {
    let k = m.get_key(pattern).await?;
    let k = set_allow_create_bucket(m, &k, allow).await?;
    key_info(m, &k, false).await
}

/// Lets the key create buckets, or not.
pub async fn set_allow_create_bucket(m: &Metadata, k: &Key, allow: bool) -> Result<Key> {
    m.update_key(k, |k| {
        if let Some(p) = k.params_mut() {
            p.allow_create_bucket.update(allow);
        }
    })
    .await
}

/// Renames the key.
pub async fn rename_key(m: &Metadata, k: &Key, name: String) -> Result<Key> {
    m.update_key(k, |k| {
        if let Some(p) = k.params_mut() {
            p.name.update(name);
        }
    })
    .await
}

/// `garage key info`: the admin API's GetKeyInfo, as text.
async fn key_info(m: &Metadata, k: &Key, show_secret: bool) -> Result<String> {
    let i = crate::admin_api::key::key_info(m, k, show_secret)
        .await
        .map_err(api_error)?;
    let mut out = String::new();
    let _ = writeln!(out, "==== ACCESS KEY INFORMATION ====");
    let _ = writeln!(out, "Key ID:              {}", i.access_key_id);
    let _ = writeln!(out, "Key name:            {}", i.name);
    match &i.secret_access_key {
        Some(secret) => {
            let _ = writeln!(out, "Secret key:          {secret}");
        }
        None => {
            let _ = writeln!(
                out,
                "Secret key:          (redacted; --show-secret prints it)"
            );
        }
    }
    let _ = writeln!(out, "Can create buckets:  {}", i.permissions.create_bucket);
    let _ = writeln!(out);
    let _ = writeln!(out, "==== BUCKETS FOR THIS KEY ====");
    let mut rows = vec!["Permissions\tID\tGlobal aliases\tLocal aliases".to_string()];
    for b in i.buckets {
        rows.push(format!(
            "{}\t{}\t{}\t{}",
            BucketKeyPerm::from(b.permissions).letters(),
            &b.id[..16],
            b.global_aliases.join(", "),
            b.local_aliases.join(", ")
        ));
    }
    out.push_str(&columns(&rows));
    Ok(out)
}
