//! `garage kms`: a client of the KMS key operations
//! ([`garage_admin::ops::kms::handle`], reached over the admin RPC),
//! formatting their answers.

use anyhow::{bail, Context};

use super::Admin;
use crate::args::KmsOperation as Op;
use garage_admin::ops::kms::{
    CreateKmsKeyRequest, KmsKeyInfo, KmsRequest, KmsResponse, UpdateKmsKeyRequest,
};
use garage_admin::ops::{AdminRequest, AdminResponse};

async fn call(admin: &Admin, req: KmsRequest) -> anyhow::Result<KmsResponse> {
    match admin.op(AdminRequest::Kms(req)).await? {
        AdminResponse::Kms(r) => Ok(r),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

fn show(k: &KmsKeyInfo) {
    println!("Key ID:       {}", k.id);
    println!("Description:  {}", k.description);
    println!(
        "State:        {}",
        if k.enabled { "enabled" } else { "disabled" }
    );
    let aliases: Vec<String> = k.aliases.iter().map(|a| format!("alias/{a}")).collect();
    println!("Aliases:      {}", aliases.join(", "));
    println!("Created:      {}", k.created);
    println!(
        "Versions:     {} (current since {})",
        k.versions,
        k.current_version_created.as_deref().unwrap_or("-")
    );
    if k.sse_s3 {
        println!("Used by:      SSE-S3");
    }
}

async fn update(admin: &Admin, key: &str, req: UpdateKmsKeyRequest) -> anyhow::Result<()> {
    match call(admin, KmsRequest::Update(key.to_string(), req)).await? {
        KmsResponse::Key(k) => show(&k),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
    Ok(())
}

pub async fn run(admin: &Admin, op: &Op) -> anyhow::Result<()> {
    let req = match op {
        Op::List => {
            let KmsResponse::Keys(all) = call(admin, KmsRequest::List).await? else {
                bail!("unexpected answer from the node");
            };
            println!("ID\tState\tAliases\tVersions\tDescription");
            for k in all {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    k.id,
                    if k.enabled { "enabled" } else { "disabled" },
                    k.aliases.join(","),
                    k.versions,
                    k.description
                );
            }
            return Ok(());
        }
        Op::Info { key } => KmsRequest::Info(key.clone()),
        Op::Create {
            description,
            alias,
            id,
            material_file,
        } => {
            let material = match material_file {
                Some(path) => {
                    if id.is_none() {
                        bail!("--material-file needs --id: an imported key keeps the id it had");
                    }
                    let raw = std::fs::read(path).with_context(|| {
                        format!("--material-file: cannot read {}", path.display())
                    })?;
                    // 32 raw bytes, or their base64 (with a newline).
                    use base64::Engine;
                    let b64 = base64::engine::general_purpose::STANDARD;
                    Some(match raw.len() {
                        32 => b64.encode(&raw),
                        _ => String::from_utf8(raw)
                            .map(|s| s.trim().to_string())
                            .context("--material-file: neither 32 raw bytes nor base64")?,
                    })
                }
                None => None,
            };
            KmsRequest::Create(CreateKmsKeyRequest {
                description: Some(description.clone()),
                alias: alias.clone(),
                id: id.clone(),
                material,
            })
        }
        Op::Rotate { key } => KmsRequest::Rotate(key.clone()),
        Op::Disable { key } | Op::Enable { key } => {
            let enabled = Some(matches!(op, Op::Enable { .. }));
            let req = UpdateKmsKeyRequest {
                enabled,
                ..Default::default()
            };
            return update(admin, key, req).await;
        }
        Op::Alias { key, alias } => {
            let req = UpdateKmsKeyRequest {
                add_alias: Some(alias.trim_start_matches("alias/").to_string()),
                ..Default::default()
            };
            return update(admin, key, req).await;
        }
        Op::Unalias { key, alias } => {
            let req = UpdateKmsKeyRequest {
                remove_alias: Some(alias.trim_start_matches("alias/").to_string()),
                ..Default::default()
            };
            return update(admin, key, req).await;
        }
        Op::Describe { key, description } => {
            let req = UpdateKmsKeyRequest {
                description: Some(description.clone()),
                ..Default::default()
            };
            return update(admin, key, req).await;
        }
    };
    match call(admin, req).await? {
        KmsResponse::Key(k) => show(&k),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
    Ok(())
}
