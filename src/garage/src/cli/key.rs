//! `garage key …`: builds the access key requests of [`garage_admin::ops`] and
//! prints their answers.

use std::fmt::Write;

use anyhow::bail;

use super::{expect, Admin};
use crate::args::KeyOperation;
use garage_admin::columns::format as columns;
use garage_admin::ops::key::{
    CreateKeyRequest, GetKeyInfoQuery, GetKeyInfoResponse, ImportKeyRequest, KeyPerm,
    UpdateKeyRequestBody,
};
use garage_admin::ops::{AdminRequest as R, AdminResponse as A};
use garage_model::permission::BucketKeyPerm;

fn key_of(a: A) -> anyhow::Result<GetKeyInfoResponse> {
    expect!(a, A::Key(k) => k)
}

/// A key by id, unique id prefix or name.
pub async fn find(
    admin: &Admin,
    pattern: &str,
    secret: bool,
) -> anyhow::Result<GetKeyInfoResponse> {
    key_of(
        admin
            .op(R::GetKeyInfo(GetKeyInfoQuery {
                id: None,
                search: Some(pattern.to_string()),
                show_secret_key: secret.then(|| "true".to_string()),
            }))
            .await?,
    )
}

async fn update(admin: &Admin, id: String, body: UpdateKeyRequestBody) -> anyhow::Result<String> {
    Ok(info_text(&key_of(
        admin.op(R::UpdateKey { id, body }).await?,
    )?))
}

pub async fn run(admin: &Admin, op: &KeyOperation) -> anyhow::Result<()> {
    print!("{}", text(admin, op).await?);
    Ok(())
}

async fn text(admin: &Admin, op: &KeyOperation) -> anyhow::Result<String> {
    match op {
        KeyOperation::List => {
            let keys = expect!(admin.op(R::ListKeys).await?, A::Keys(k) => k)?;
            let mut rows = vec!["ID\tName".to_string()];
            for k in keys {
                rows.push(format!("{}\t{}", k.id, k.name));
            }
            Ok(columns(&rows))
        }
        KeyOperation::Info {
            show_secret,
            key_pattern,
        } => Ok(info_text(&find(admin, key_pattern, *show_secret).await?)),
        KeyOperation::Create { name } => {
            let k = key_of(
                admin
                    .op(R::CreateKey(CreateKeyRequest {
                        name: Some(name.clone()),
                    }))
                    .await?,
            )?;
            Ok(info_text(&k))
        }
        KeyOperation::Rename {
            key_pattern,
            new_name,
        } => {
            let k = find(admin, key_pattern, false).await?;
            let body = UpdateKeyRequestBody {
                name: Some(new_name.clone()),
                ..Default::default()
            };
            update(admin, k.access_key_id, body).await
        }
        KeyOperation::Delete { yes, key_pattern } => {
            let k = find(admin, key_pattern, false).await?;
            if !yes {
                bail!("add --yes to delete key {} ({})", k.access_key_id, k.name);
            }
            admin
                .op(R::DeleteKey {
                    id: k.access_key_id.clone(),
                })
                .await?;
            Ok(format!(
                "Access key {} has been deleted.\n",
                k.access_key_id
            ))
        }
        KeyOperation::Allow {
            create_bucket,
            key_pattern,
        }
        | KeyOperation::Deny {
            create_bucket,
            key_pattern,
        } => {
            if !create_bucket {
                bail!("give --create-bucket (the only key-wide right)");
            }
            let k = find(admin, key_pattern, false).await?;
            let perm = Some(KeyPerm {
                create_bucket: true,
            });
            let body = match op {
                KeyOperation::Allow { .. } => UpdateKeyRequestBody {
                    allow: perm,
                    ..Default::default()
                },
                _ => UpdateKeyRequestBody {
                    deny: perm,
                    ..Default::default()
                },
            };
            update(admin, k.access_key_id, body).await
        }
        KeyOperation::Import {
            name,
            yes,
            key_id,
            secret_key,
        } => {
            if !yes {
                bail!("importing a key is for migrating it from another cluster, where it must not be used any more: add --yes to confirm");
            }
            let k = key_of(
                admin
                    .op(R::ImportKey(ImportKeyRequest {
                        access_key_id: key_id.clone(),
                        secret_access_key: secret_key.clone(),
                        name: Some(name.clone()),
                    }))
                    .await?,
            )?;
            Ok(info_text(&k))
        }
    }
}

/// `garage key info`: GetKeyInfo, as text.
fn info_text(i: &GetKeyInfoResponse) -> String {
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
    for b in i.buckets.iter() {
        rows.push(format!(
            "{}\t{}\t{}\t{}",
            BucketKeyPerm::from(b.permissions).letters(),
            &b.id[..16.min(b.id.len())],
            b.global_aliases.join(", "),
            b.local_aliases.join(", ")
        ));
    }
    out.push_str(&columns(&rows));
    out
}
