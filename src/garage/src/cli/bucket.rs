//! `garage bucket …`: builds the bucket requests of [`garage_admin::ops`] and
//! prints their answers.

use super::date;
use std::fmt::Write;

use anyhow::{anyhow, bail};

use super::{expect, Admin};
use crate::args::{BucketOperation, BucketReplicationOperation, PermOpt, WebsiteOpt};
use garage_admin::columns::format as columns;
use garage_admin::ops::bucket::{
    ApiBucketQuotas, BucketAliasRequest, BucketKeyPermChangeRequest,
    CleanupIncompleteUploadsRequest, CreateBucketRequest, GetBucketInfoQuery,
    GetBucketInfoResponse, GetBucketInfoWebsiteResponse, UpdateBucketRequestBody,
    UpdateBucketWebsiteAccess,
};
use garage_admin::ops::key::ApiBucketKeyPerm;
use garage_admin::ops::remote::ResyncBucketReplicationRequest;
use garage_admin::ops::{AdminRequest as R, AdminResponse as A};
use garage_model::permission::BucketKeyPerm;
use garage_util::config::parse_size;

fn bucket_of(a: A) -> anyhow::Result<GetBucketInfoResponse> {
    expect!(a, A::Bucket(b) => *b)
}

/// A bucket by global alias, id or unique id prefix.
pub async fn find(admin: &Admin, name: &str) -> anyhow::Result<GetBucketInfoResponse> {
    bucket_of(
        admin
            .op(R::GetBucketInfo(GetBucketInfoQuery {
                id: None,
                global_alias: None,
                search: Some(name.to_string()),
            }))
            .await?,
    )
}

pub async fn run(admin: &Admin, op: &BucketOperation) -> anyhow::Result<()> {
    print!("{}", text(admin, op).await?);
    Ok(())
}

async fn text(admin: &Admin, op: &BucketOperation) -> anyhow::Result<String> {
    match op {
        BucketOperation::List => {
            let list = expect!(admin.op(R::ListBuckets).await?, A::Buckets(l) => l)?;
            let mut rows = vec!["ID\tCreated\tGlobal aliases\tLocal aliases".to_string()];
            for b in list {
                let locals: Vec<String> = b
                    .local_aliases
                    .iter()
                    .map(|l| {
                        let k = &l.access_key_id;
                        format!("{} ({})", l.alias, &k[..k.len().min(10)])
                    })
                    .collect();
                rows.push(format!(
                    "{}\t{}\t{}\t{}",
                    &b.id[..16.min(b.id.len())],
                    date(&b.created),
                    b.global_aliases.join(", "),
                    locals.join(", ")
                ));
            }
            Ok(columns(&rows))
        }
        BucketOperation::Info { name } => {
            let b = find(admin, name).await?;
            let mut text = info_text(&b);
            if !b.replication_rules.is_empty() {
                // What waits for the rules' destinations (also other
                // buckets' versions sent to the same destination).
                let dests: Vec<&str> = b
                    .replication_rules
                    .iter()
                    .filter_map(|r| r.destination.strip_prefix("arn:garage:s3:::"))
                    .collect();
                text.push_str(&super::remote::backlog_text(admin, |d| dests.contains(&d)).await?);
            }
            Ok(text)
        }
        BucketOperation::Create { name } => {
            admin
                .op(R::CreateBucket(CreateBucketRequest {
                    global_alias: Some(name.clone()),
                    local_alias: None,
                }))
                .await?;
            Ok(format!("Bucket {name} was created.\n"))
        }
        BucketOperation::Delete { yes, name } => {
            let b = find(admin, name).await?;
            if !yes {
                bail!("add --yes to delete bucket {name} ({})", b.id);
            }
            admin.op(R::DeleteBucket { id: b.id }).await?;
            Ok(format!("Bucket {name} was deleted.\n"))
        }
        BucketOperation::Alias {
            local,
            existing_bucket,
            new_name,
        } => {
            let b = find(admin, existing_bucket).await?;
            let mut req = BucketAliasRequest {
                bucket_id: b.id.clone(),
                global_alias: None,
                local_alias: None,
                access_key_id: None,
            };
            match local {
                None => {
                    req.global_alias = Some(new_name.clone());
                    admin.op(R::AddBucketAlias(req)).await?;
                    Ok(format!("Alias {new_name} now points to bucket {}.\n", b.id))
                }
                Some(k) => {
                    let key = super::key::find(admin, k, false).await?;
                    req.local_alias = Some(new_name.clone());
                    req.access_key_id = Some(key.access_key_id.clone());
                    admin.op(R::AddBucketAlias(req)).await?;
                    Ok(format!(
                        "Alias {new_name} now points to bucket {} in namespace of key {}.\n",
                        b.id, key.access_key_id
                    ))
                }
            }
        }
        BucketOperation::Unalias { local, name } => match local {
            None => {
                let b = bucket_of(
                    admin
                        .op(R::GetBucketInfo(GetBucketInfoQuery {
                            id: None,
                            global_alias: Some(name.clone()),
                            search: None,
                        }))
                        .await?,
                )?;
                admin
                    .op(R::RemoveBucketAlias(BucketAliasRequest {
                        bucket_id: b.id,
                        global_alias: Some(name.clone()),
                        local_alias: None,
                        access_key_id: None,
                    }))
                    .await?;
                Ok(format!("Alias {name} was removed.\n"))
            }
            Some(k) => {
                let key = super::key::find(admin, k, false).await?;
                let bucket = key
                    .buckets
                    .iter()
                    .find(|b| b.local_aliases.contains(name))
                    .ok_or_else(|| anyhow!("key {} has no alias {name:?}", key.access_key_id))?;
                admin
                    .op(R::RemoveBucketAlias(BucketAliasRequest {
                        bucket_id: bucket.id.clone(),
                        global_alias: None,
                        local_alias: Some(name.clone()),
                        access_key_id: Some(key.access_key_id.clone()),
                    }))
                    .await?;
                Ok(format!(
                    "Alias {name} was removed from the namespace of key {}.\n",
                    key.access_key_id
                ))
            }
        },
        BucketOperation::Allow(p) => permissions(admin, p, true).await,
        BucketOperation::Deny(p) => permissions(admin, p, false).await,
        BucketOperation::Website(w) => website(admin, w).await,
        BucketOperation::SetQuotas {
            bucket,
            max_size,
            max_objects,
        } => {
            if max_size.is_none() && max_objects.is_none() {
                bail!("give --max-size and/or --max-objects (a value, or \"none\" to remove the limit)");
            }
            let b = find(admin, bucket).await?;
            let mut q: ApiBucketQuotas = b.quotas;
            if let Some(s) = max_size {
                q.max_size = match s.as_str() {
                    "none" => None,
                    s => Some(parse_size(s).map_err(|e| anyhow!("--max-size: {e}"))?),
                };
            }
            if let Some(n) = max_objects {
                q.max_objects = match n.as_str() {
                    "none" => None,
                    n => Some(n.parse().map_err(|_| {
                        anyhow!("--max-objects: {n:?} is not a number (or \"none\")")
                    })?),
                };
            }
            admin
                .op(R::UpdateBucket {
                    id: b.id,
                    body: UpdateBucketRequestBody {
                        quotas: Some(q),
                        ..Default::default()
                    },
                })
                .await?;
            Ok(format!("Quotas of bucket {bucket} were updated.\n"))
        }
        BucketOperation::SetStorageClass { bucket, class } => {
            let b = find(admin, bucket).await?;
            admin
                .op(R::UpdateBucket {
                    id: b.id,
                    body: UpdateBucketRequestBody {
                        default_storage_class: Some(class.clone()),
                        ..Default::default()
                    },
                })
                .await?;
            Ok(format!(
                "Writes to bucket {bucket} that name no storage class now go to {class}.\n"
            ))
        }
        BucketOperation::SetPlacement {
            bucket,
            allow,
            default,
        } => {
            let b = find(admin, bucket).await?;
            let any = allow.iter().any(|c| c == "any");
            if any && allow.len() > 1 {
                bail!("--allow any lifts the limit: give it alone");
            }
            let allowed = if any { vec![] } else { allow.clone() };
            let default = default.clone().or_else(|| allowed.first().cloned());
            admin
                .op(R::UpdateBucket {
                    id: b.id,
                    body: UpdateBucketRequestBody {
                        default_storage_class: default.clone(),
                        allowed_storage_classes: Some(allowed.clone()),
                        ..Default::default()
                    },
                })
                .await?;
            Ok(if any {
                format!("Bucket {bucket} accepts any storage class the layout offers.\n")
            } else {
                format!(
                    "Bucket {bucket} accepts only the storage classes {}; writes that name none go to {}.\n",
                    allowed.join(", "),
                    default.unwrap_or_default()
                )
            })
        }
        BucketOperation::Replication(BucketReplicationOperation::Resync { bucket, all }) => {
            let b = find(admin, bucket).await?;
            let r = expect!(
                admin
                    .op(R::ResyncBucketReplication(ResyncBucketReplicationRequest {
                        bucket_id: Some(b.id.clone()),
                        global_alias: None,
                        all: *all,
                    }))
                    .await?,
                A::ReplicationResynced(r) => r
            )?;
            let mut out = format!(
                "queued {} (version, destination) pairs out of {} versions\n",
                r.queued, r.versions
            );
            if b.replication_rules.is_empty() {
                let _ = writeln!(
                    out,
                    "(bucket {bucket} has no replication rules: PutBucketReplication sets them)"
                );
            }
            Ok(out)
        }
        BucketOperation::CleanupIncompleteUploads {
            older_than,
            buckets,
        } => {
            let age = garage_util::config::parse_duration(older_than)
                .map_err(|e| anyhow!("--older-than {older_than:?}: {e}"))?;
            let mut out = String::new();
            for name in buckets {
                let b = find(admin, name).await?;
                let r = expect!(
                    admin
                        .op(R::CleanupIncompleteUploads(CleanupIncompleteUploadsRequest {
                            bucket_id: b.id,
                            older_than_secs: age.as_secs(),
                        }))
                        .await?,
                    A::UploadsCleaned(r) => r
                )?;
                let _ = writeln!(
                    out,
                    "{name}: {} incomplete multipart upload(s) aborted",
                    r.uploads_deleted
                );
            }
            Ok(out)
        }
    }
}

async fn permissions(admin: &Admin, p: &PermOpt, allow: bool) -> anyhow::Result<String> {
    if !(p.read || p.write || p.owner) {
        bail!("give at least one of --read, --write, --owner");
    }
    let b = find(admin, &p.bucket).await?;
    let key = super::key::find(admin, &p.key, false).await?;
    let req = BucketKeyPermChangeRequest {
        bucket_id: b.id,
        access_key_id: key.access_key_id.clone(),
        permissions: ApiBucketKeyPerm {
            read: p.read,
            write: p.write,
            owner: p.owner,
        },
    };
    let b = bucket_of(
        admin
            .op(match allow {
                true => R::AllowBucketKey(req),
                false => R::DenyBucketKey(req),
            })
            .await?,
    )?;
    let perm = b
        .keys
        .iter()
        .find(|k| k.access_key_id == key.access_key_id)
        .map(|k| k.permissions)
        .unwrap_or_default();
    Ok(format!(
        "New permissions for {} on {}: read {}, write {}, owner {}.\n",
        key.access_key_id, p.bucket, perm.read, perm.write, perm.owner
    ))
}

/// `garage bucket website`: UpdateBucket's website switch.
async fn website(admin: &Admin, w: &WebsiteOpt) -> anyhow::Result<String> {
    if w.allow == w.deny {
        bail!("give one of --allow and --deny");
    }
    if w.deny && (w.index_document.is_some() || w.error_document.is_some()) {
        bail!("--index-document and --error-document go with --allow");
    }
    let b = find(admin, &w.bucket).await?;
    let b = bucket_of(
        admin
            .op(R::UpdateBucket {
                id: b.id,
                body: UpdateBucketRequestBody {
                    website_access: Some(UpdateBucketWebsiteAccess {
                        enabled: w.allow,
                        index_document: w.index_document.clone(),
                        error_document: w.error_document.clone(),
                    }),
                    ..Default::default()
                },
            })
            .await?,
    )?;
    match (w.deny, &b.website_config) {
        (false, Some(c)) => Ok(format!(
            "The website endpoint serves bucket {}: {}.\n",
            w.bucket,
            website_summary(c)
        )),
        _ => Ok(format!(
            "The website endpoint no longer serves bucket {}.\n",
            w.bucket
        )),
    }
}

fn website_summary(c: &GetBucketInfoWebsiteResponse) -> String {
    if let Some(to) = &c.redirect_all_to {
        return format!("every request redirected to {to}");
    }
    let mut s = format!(
        "index document {}, error document {}",
        c.index_document.as_deref().unwrap_or("index.html"),
        c.error_document.as_deref().unwrap_or("(none)")
    );
    if c.routing_rules > 0 {
        s.push_str(&format!(", {} routing rule(s)", c.routing_rules));
    }
    s
}

/// `garage bucket info`: GetBucketInfo, as text.
fn info_text(i: &GetBucketInfoResponse) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "==== BUCKET INFORMATION ====");
    let _ = writeln!(out, "Bucket:          {}", i.id);
    let _ = writeln!(out, "Created:         {}", date(&i.created));
    let _ = writeln!(out);
    let _ = writeln!(out, "Size:            {} B", i.bytes);
    if i.bytes_by_class.len() > 1 || i.bytes_by_class.keys().any(|c| c != "STANDARD") {
        for (class, n) in i.bytes_by_class.iter() {
            match i.disk_bytes_by_class.get(class) {
                Some(d) => {
                    let _ = writeln!(out, "  in {class}: {n} B ({d} B on disk)");
                }
                None => {
                    let _ = writeln!(out, "  in {class}: {n} B");
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "Storage class:   {} (of writes that name none)",
        i.default_storage_class
    );
    if !i.allowed_storage_classes.is_empty() {
        let _ = writeln!(
            out,
            "Placement:       only {} (garage bucket set-placement)",
            i.allowed_storage_classes.join(", ")
        );
    }
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
    match (i.website_access, &i.website_config) {
        (true, Some(w)) => {
            let _ = writeln!(out, "Website access:  true");
            let _ = writeln!(out, "  {}", website_summary(w));
        }
        _ => {
            let _ = writeln!(out, "Website access:  false");
        }
    }
    if i.cors_rules.is_empty() {
        let _ = writeln!(out, "CORS:            none");
    }
    for r in &i.cors_rules {
        let _ = writeln!(
            out,
            "CORS rule:       origins {}, methods {}{}{}",
            r.allowed_origins.join(" "),
            r.allowed_methods.join(" "),
            match r.allowed_headers.is_empty() {
                true => String::new(),
                false => format!(", headers {}", r.allowed_headers.join(" ")),
            },
            r.max_age_seconds
                .map(|s| format!(", max age {s} s"))
                .unwrap_or_default()
        );
    }
    if i.lifecycle_rules.is_empty() {
        let _ = writeln!(out, "Lifecycle:       none");
    }
    for r in &i.lifecycle_rules {
        let _ = writeln!(
            out,
            "Lifecycle rule:  {}{}{}: {}",
            r.id.as_deref().unwrap_or("(no id)"),
            if r.enabled { "" } else { " (disabled)" },
            format_args!(", {}", r.filter),
            r.actions.join("; ")
        );
    }
    if i.replication_rules.is_empty() {
        let _ = writeln!(out, "Replication:     none");
    }
    for r in &i.replication_rules {
        let _ = writeln!(
            out,
            "Replication:     {}{} (priority {}), {} -> {}{}",
            r.id,
            if r.enabled { "" } else { " (disabled)" },
            r.priority,
            match (&r.prefix, r.tags.is_empty()) {
                (None, true) => "every key".to_string(),
                (Some(p), true) => format!("prefix {p:?}"),
                (None, false) => format!("tags {}", r.tags.join(" ")),
                (Some(p), false) => format!("prefix {p:?}, tags {}", r.tags.join(" ")),
            },
            r.destination,
            if r.delete_markers {
                ", with delete markers"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out);
    for a in i.global_aliases.iter() {
        let _ = writeln!(out, "Global alias:    {a}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "==== KEYS FOR THIS BUCKET ====");
    let mut rows = vec!["Permissions\tAccess key\t\tLocal aliases".to_string()];
    for k in i.keys.iter() {
        rows.push(format!(
            "{}\t{}\t{}\t{}",
            BucketKeyPerm::from(k.permissions).letters(),
            k.access_key_id,
            k.name,
            k.bucket_local_aliases.join(", ")
        ));
    }
    out.push_str(&columns(&rows));
    out
}
