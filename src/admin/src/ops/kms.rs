//! The cluster's KMS keys (see [`garage_model::kms`]): listed, made,
//! rotated, disabled and enabled, aliased. One implementation, [`handle`],
//! serves the HTTP endpoints and `garage kms` (over the admin RPC, as a
//! typed [`KmsRequest`]).

use garage_model::kms::table::KmsKey;
use garage_model::kms::KmsError;
use garage_util::time::rfc3339;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use garage_model::garage::Garage;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KmsKeyInfo {
    /// The key id (`x-amz-server-side-encryption-aws-kms-key-id` takes it,
    /// `alias/NAME`, or an ARN of either).
    pub id: String,
    pub description: String,
    pub enabled: bool,
    /// Alias names, without `alias/`.
    pub aliases: Vec<String>,
    /// RFC 3339.
    pub created: String,
    /// Versions of its material (rotation adds one; all stay usable for
    /// reading).
    pub versions: usize,
    /// RFC 3339: when the version that wraps new data keys was made.
    pub current_version_created: Option<String>,
    /// The key SSE-S3 uses (made by the cluster; cannot be disabled).
    pub sse_s3: bool,
}

#[derive(Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateKmsKeyRequest {
    #[serde(default)]
    pub description: Option<String>,
    /// An alias name (without `alias/`).
    #[serde(default)]
    pub alias: Option<String>,
    /// The key's id, chosen (`my-app-key`: what a configuration carried
    /// from Ceph or Vault names); by default a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The key's material, imported: 32 bytes in base64 (an existing
    /// AES-256 key); by default new material. Needs `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<String>,
}

/// The material is never shown.
impl std::fmt::Debug for CreateKmsKeyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateKmsKeyRequest")
            .field("description", &self.description)
            .field("alias", &self.alias)
            .field("id", &self.id)
            .field("material", &self.material.as_ref().map(|_| "****"))
            .finish()
    }
}

/// The material of a request: 32 bytes in base64.
fn material(r: &CreateKmsKeyRequest) -> Result<Option<[u8; 32]>, ApiError> {
    use base64::Engine;
    let Some(m) = &r.material else {
        return Ok(None);
    };
    if r.id.is_none() {
        return Err(ApiError::BadRequest(
            "imported material needs the key's id (--id / \"id\")".into(),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(m.trim())
        .map_err(|_| ApiError::BadRequest("the key material is not base64".into()))?;
    let arr: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
        ApiError::BadRequest(format!(
            "the key material has {} bytes: an AES-256 key has 32",
            b.len()
        ))
    })?;
    Ok(Some(arr))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateKmsKeyRequest {
    #[serde(default)]
    pub description: Option<String>,
    /// false disables the key: objects it protects can no longer be read
    /// or written (`KMS.DisabledException`) until it is enabled again.
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub add_alias: Option<String>,
    #[serde(default)]
    pub remove_alias: Option<String>,
}

/// The `?id=` naming one key: its id, `alias/NAME`, or an ARN.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KmsKeyQuery {
    pub id: String,
}

/// A KMS key operation, as the HTTP API and the CLI send it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum KmsRequest {
    List,
    Info(String),
    Create(CreateKmsKeyRequest),
    Update(String, UpdateKmsKeyRequest),
    Rotate(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum KmsResponse {
    Keys(Vec<KmsKeyInfo>),
    Key(KmsKeyInfo),
}

fn info(k: &KmsKey) -> KmsKeyInfo {
    KmsKeyInfo {
        id: k.id.clone(),
        description: k.description.get().clone(),
        enabled: k.is_enabled(),
        aliases: k.aliases(),
        created: rfc3339(k.created),
        versions: k.materials.len(),
        current_version_created: k.current_material().map(|(_, m)| rfc3339(m.created)),
        sse_s3: k.id == garage_model::kms::table::SSE_S3_KEY_ID,
    }
}

impl From<KmsError> for ApiError {
    fn from(e: KmsError) -> Self {
        match e {
            KmsError::NotFound(_) => ApiError::NoSuchKmsKey(e.to_string()),
            KmsError::AlreadyExists(m) => ApiError::KeyAlreadyExists(m),
            KmsError::Invalid(m) | KmsError::Disabled(m) => ApiError::BadRequest(m),
            KmsError::Table(t) => t.into(),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

/// Runs a KMS key operation: the one implementation of the HTTP
/// endpoints and of `garage kms`.
pub async fn handle(g: &Garage, req: KmsRequest) -> Result<KmsResponse, ApiError> {
    let kms = &g.kms;
    let one = |k: KmsKey| Ok(KmsResponse::Key(info(&k)));
    match req {
        KmsRequest::List => {
            let mut all: Vec<KmsKeyInfo> = kms.list().await?.iter().map(info).collect();
            all.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
            Ok(KmsResponse::Keys(all))
        }
        KmsRequest::Info(name) => one(kms.find(&name).await?),
        KmsRequest::Create(r) => one(kms
            .create_with(
                r.description.as_deref().unwrap_or_default(),
                r.alias.as_deref(),
                r.id.as_deref(),
                material(&r)?,
            )
            .await?),
        KmsRequest::Update(name, r) => one(kms
            .update(
                &name,
                r.description,
                r.enabled,
                r.add_alias.as_deref(),
                r.remove_alias.as_deref(),
            )
            .await?),
        KmsRequest::Rotate(name) => one(kms.rotate(&name).await?),
    }
}
