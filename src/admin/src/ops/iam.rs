//! IAM users, groups and policies for operators: any action of the IAM
//! API (`garage_model::iam::actions`), by name with AWS's parameters,
//! with the admin token's authority (no identity policy is asked). What
//! `garage iam …` and the `IamCall` endpoint run.

use std::collections::BTreeMap;

use garage_model::garage::Garage;
use garage_model::iam::{actions, IamError};
use serde::{Deserialize, Serialize};

use super::error::ApiError;

/// An IAM action and its parameters (`{"action": "CreateUser",
/// "params": {"UserName": "alice"}}`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IamCallRequest {
    pub action: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// Runs it: its answer as JSON text (AWS's result structure; `null` for
/// an action with none).
pub async fn call(g: &Garage, r: IamCallRequest) -> Result<String, ApiError> {
    match actions::call(&g.iam, &r.action, &r.params, None).await {
        Ok(Some(out)) => Ok(out.to_json().to_string()),
        Ok(None) => Ok("null".into()),
        Err(IamError::Table(e)) => Err(ApiError::Internal(e.to_string())),
        Err(IamError::NoSuchEntity(m)) => Err(ApiError::NoSuchEntity(m)),
        Err(IamError::DeleteConflict(m)) => Err(ApiError::IamConflict("DeleteConflict", m)),
        Err(IamError::EntityAlreadyExists(m)) => {
            Err(ApiError::IamConflict("EntityAlreadyExists", m))
        }
        Err(IamError::LimitExceeded(m)) => Err(ApiError::IamConflict("LimitExceeded", m)),
        Err(e) => Err(ApiError::BadRequest(e.to_string())),
    }
}
