//! Access keys: list, info, create, import, update, delete.

use garage_model::helper::Metadata;
use garage_model::key_table::Key;
use garage_model::permission::BucketKeyPerm;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::ApiError;
use garage_model::garage::Garage;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListKeysResponseItem {
    pub id: String,
    pub name: String,
}

/// Every access key.
pub async fn list_keys(g: &Garage) -> Result<Vec<ListKeysResponseItem>, ApiError> {
    let keys = g.metadata().list_keys().await?;
    Ok(keys
        .into_iter()
        .filter(|k| !k.state.is_deleted())
        .map(|k| ListKeysResponseItem {
            name: k.name().to_string(),
            id: k.key_id,
        })
        .collect())
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetKeyInfoResponse {
    pub name: String,
    pub access_key_id: String,
    /// Only with `showSecretKey=true`, and on creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    pub permissions: KeyPerm,
    /// Buckets the key has rights on.
    pub buckets: Vec<KeyInfoBucketResponse>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyPerm {
    /// May create buckets.
    #[serde(default)]
    pub create_bucket: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfoBucketResponse {
    pub id: String,
    pub global_aliases: Vec<String>,
    /// Aliases of the bucket in this key's namespace.
    pub local_aliases: Vec<String>,
    pub permissions: ApiBucketKeyPerm,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiBucketKeyPerm {
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub write: bool,
    #[serde(default)]
    pub owner: bool,
}

impl From<BucketKeyPerm> for ApiBucketKeyPerm {
    fn from(p: BucketKeyPerm) -> Self {
        ApiBucketKeyPerm {
            read: p.allow_read,
            write: p.allow_write,
            owner: p.allow_owner,
        }
    }
}

impl From<ApiBucketKeyPerm> for BucketKeyPerm {
    fn from(p: ApiBucketKeyPerm) -> Self {
        BucketKeyPerm {
            allow_read: p.read,
            allow_write: p.write,
            allow_owner: p.owner,
        }
    }
}

/// What GetKeyInfo (and `garage key info`) say about a key.
pub async fn key_info(
    m: &Metadata,
    k: &Key,
    show_secret: bool,
) -> Result<GetKeyInfoResponse, ApiError> {
    let p = k
        .params()
        .ok_or_else(|| ApiError::NoSuchAccessKey(format!("access key {} is deleted", k.key_id)))?;
    let mut buckets = Vec::new();
    for (bucket_id, _, perm) in p.authorized_buckets.items() {
        if !perm.is_any() {
            continue;
        }
        let global_aliases = match m.get_bucket(&bucket_id.hex()).await {
            Ok(b) => b.global_aliases(),
            // A bucket deleted meanwhile: not listed.
            Err(_) => continue,
        };
        let local_aliases = p
            .local_aliases
            .items()
            .filter(|(_, _, t)| **t == Some(*bucket_id))
            .map(|(n, _, _)| n.clone())
            .collect();
        buckets.push(KeyInfoBucketResponse {
            id: bucket_id.hex(),
            global_aliases,
            local_aliases,
            permissions: (*perm).into(),
        });
    }
    Ok(GetKeyInfoResponse {
        name: k.name().to_string(),
        access_key_id: k.key_id.clone(),
        secret_access_key: show_secret.then(|| p.secret_key.clone()),
        permissions: KeyPerm {
            create_bucket: *p.allow_create_bucket.get(),
        },
        buckets,
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct GetKeyInfoQuery {
    /// The key's id.
    pub id: Option<String>,
    /// A unique prefix of the key's id, or its name.
    pub search: Option<String>,
    /// Include the secret key in the answer.
    #[serde(default)]
    pub show_secret_key: Option<String>,
}

/// One access key, by `id` or `search`.
pub async fn get_key_info(g: &Garage, q: GetKeyInfoQuery) -> Result<GetKeyInfoResponse, ApiError> {
    let m = g.metadata();
    let pattern = match (q.id, q.search) {
        (Some(id), None) => id,
        (None, Some(s)) => s,
        _ => {
            return Err(ApiError::bad(
                "give either the id or the search query parameter",
            ))
        }
    };
    let show = match q.show_secret_key.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad(format!(
                "showSecretKey must be true or false, not {other:?}"
            )))
        }
    };
    let k = m.get_key(&pattern).await?;
    key_info(&m, &k, show).await
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateKeyRequest {
    /// A name for the key (default: empty).
    #[serde(default)]
    pub name: Option<String>,
}

/// Creates an access key; the answer holds its secret.
pub async fn create_key(g: &Garage, req: CreateKeyRequest) -> Result<GetKeyInfoResponse, ApiError> {
    let m = g.metadata();
    let k = m.create_key(req.name.as_deref().unwrap_or("")).await?;
    key_info(&m, &k, true).await
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportKeyRequest {
    pub access_key_id: String,
    pub secret_access_key: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// Imports a key made elsewhere (to migrate it from another cluster).
pub async fn import_key(g: &Garage, req: ImportKeyRequest) -> Result<GetKeyInfoResponse, ApiError> {
    let m = g.metadata();
    let k = m
        .import_key(
            &req.access_key_id,
            &req.secret_access_key,
            req.name.as_deref().unwrap_or(""),
        )
        .await?;
    key_info(&m, &k, false).await
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateKeyRequestBody {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// Rights to grant.
    #[serde(default)]
    pub allow: Option<KeyPerm>,
    /// Rights to revoke.
    #[serde(default)]
    pub deny: Option<KeyPerm>,
}

/// Renames a key, or changes its key-wide rights.
pub async fn update_key(
    g: &Garage,
    id: &str,
    req: UpdateKeyRequestBody,
) -> Result<GetKeyInfoResponse, ApiError> {
    let m = g.metadata();
    let mut k = existing_key(&m, id).await?;
    if let Some(name) = req.name {
        k = rename_key(&m, &k, name).await?;
    }
    if req.allow.as_ref().is_some_and(|p| p.create_bucket) {
        k = set_allow_create_bucket(&m, &k, true).await?;
    }
    if req.deny.as_ref().is_some_and(|p| p.create_bucket) {
        k = set_allow_create_bucket(&m, &k, false).await?;
    }
    key_info(&m, &k, false).await
}

/// The key with exactly this id (no prefix or name matching: the
/// operations that change a key name it fully).
pub async fn existing_key(m: &Metadata, id: &str) -> Result<Key, ApiError> {
    let k = m.get_key(id).await?;
    if k.key_id != id {
        return Err(ApiError::NoSuchAccessKey(format!(
            "no access key with id {id:?}"
        )));
    }
    Ok(k)
}

/// Deletes a key, revoking its rights and local aliases first.
pub async fn delete_key(g: &Garage, id: &str) -> Result<(), ApiError> {
    let m = g.metadata();
    let k = existing_key(&m, id).await?;
    m.delete_key(&k).await?;
    tracing::info!("admin: access key {} deleted", k.key_id);
    Ok(())
}

/// Lets the key create buckets, or not.
pub async fn set_allow_create_bucket(m: &Metadata, k: &Key, allow: bool) -> Result<Key, ApiError> {
    Ok(m.update_key(k, |k| {
        if let Some(p) = k.params_mut() {
            p.allow_create_bucket.update(allow);
        }
    })
    .await?)
}

/// Renames the key.
pub async fn rename_key(m: &Metadata, k: &Key, name: String) -> Result<Key, ApiError> {
    Ok(m.update_key(k, |k| {
        if let Some(p) = k.params_mut() {
            p.name.update(name);
        }
    })
    .await?)
}
