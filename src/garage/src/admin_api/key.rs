//! Access keys: list, info, create, import, update, delete.

use axum::extract::State;
use garage_model::helper::Metadata;
use garage_model::key_table::Key;
use garage_model::permission::BucketKeyPerm;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body, Query};
use super::St;
use crate::admin_ops;

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(list_keys))
        .routes(routes!(get_key_info))
        .routes(routes!(create_key))
        .routes(routes!(import_key))
        .routes(routes!(update_key))
        .routes(routes!(delete_key))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListKeysResponseItem {
    pub id: String,
    pub name: String,
}

/// Every access key.
#[utoipa::path(get, path = "/v2/ListKeys", tag = "Access key",
    responses((status = 200, body = Vec<ListKeysResponseItem>), (status = 403, body = ErrorBody)))]
pub async fn list_keys(State(st): State<St>) -> Answer<Vec<ListKeysResponseItem>> {
    let keys = st.garage.metadata().list_keys().await?;
    ok(keys
        .into_iter()
        .filter(|k| !k.state.is_deleted())
        .map(|k| ListKeysResponseItem {
            name: k.name().to_string(),
            id: k.key_id,
        })
        .collect())
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Deserialize, IntoParams)]
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
#[utoipa::path(get, path = "/v2/GetKeyInfo", tag = "Access key", params(GetKeyInfoQuery),
    responses((status = 200, body = GetKeyInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn get_key_info(
    State(st): State<St>,
    Query(q): Query<GetKeyInfoQuery>,
) -> Answer<GetKeyInfoResponse> {
    let m = st.garage.metadata();
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
    ok(key_info(&m, &k, show).await?)
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateKeyRequest {
    /// A name for the key (default: empty).
    #[serde(default)]
    pub name: Option<String>,
}

/// Creates an access key; the answer holds its secret.
#[utoipa::path(post, path = "/v2/CreateKey", tag = "Access key",
    request_body = CreateKeyRequest,
    responses((status = 200, body = GetKeyInfoResponse), (status = 400, body = ErrorBody)))]
pub async fn create_key(
    State(st): State<St>,
    Body(req): Body<CreateKeyRequest>,
) -> Answer<GetKeyInfoResponse> {
    let m = st.garage.metadata();
    let k = m.create_key(req.name.as_deref().unwrap_or("")).await?;
    ok(key_info(&m, &k, true).await?)
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportKeyRequest {
    pub access_key_id: String,
    pub secret_access_key: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// Imports a key made elsewhere (to migrate it from another cluster).
#[utoipa::path(post, path = "/v2/ImportKey", tag = "Access key",
    request_body = ImportKeyRequest,
    responses((status = 200, body = GetKeyInfoResponse), (status = 409, body = ErrorBody)))]
pub async fn import_key(
    State(st): State<St>,
    Body(req): Body<ImportKeyRequest>,
) -> Answer<GetKeyInfoResponse> {
    let m = st.garage.metadata();
    let k = m
        .import_key(
            &req.access_key_id,
            &req.secret_access_key,
            req.name.as_deref().unwrap_or(""),
        )
        .await?;
    ok(key_info(&m, &k, false).await?)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IdQuery {
    /// The full id.
    pub id: String,
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
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
#[utoipa::path(post, path = "/v2/UpdateKey", tag = "Access key", params(IdQuery),
    request_body = UpdateKeyRequestBody,
    responses((status = 200, body = GetKeyInfoResponse), (status = 404, body = ErrorBody)))]
pub async fn update_key(
    State(st): State<St>,
    Query(q): Query<IdQuery>,
    Body(req): Body<UpdateKeyRequestBody>,
) -> Answer<GetKeyInfoResponse> {
    let m = st.garage.metadata();
    let mut k = existing_key(&m, &q.id).await?;
    if let Some(name) = req.name {
        k = admin_ops::rename_key(&m, &k, name).await?;
    }
    if req.allow.as_ref().is_some_and(|p| p.create_bucket) {
        k = admin_ops::set_allow_create_bucket(&m, &k, true).await?;
    }
    if req.deny.as_ref().is_some_and(|p| p.create_bucket) {
        k = admin_ops::set_allow_create_bucket(&m, &k, false).await?;
    }
    ok(key_info(&m, &k, false).await?)
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
#[utoipa::path(post, path = "/v2/DeleteKey", tag = "Access key", params(IdQuery),
    responses((status = 200), (status = 404, body = ErrorBody)))]
pub async fn delete_key(State(st): State<St>, Query(q): Query<IdQuery>) -> Answer<()> {
    let m = st.garage.metadata();
    let k = existing_key(&m, &q.id).await?;
    m.delete_key(&k).await?;
    tracing::info!("admin API: access key {} deleted", k.key_id);
    ok(())
}
