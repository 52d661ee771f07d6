//! The IAM endpoint: `POST /v2/IamCall` `{"action", "params"}`, any
//! action of the IAM API by name with AWS's parameters, answered with
//! AWS's result structure as JSON (`null` for an action with none); an
//! HTTP wrapper of [`crate::ops::iam::call`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body};
use super::St;
use crate::ops::iam::{call, IamCallRequest};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(iam_call))
}

/// Any IAM action (`CreateUser`, `AttachUserPolicy`, `CreateRole`, …)
/// with its parameters (`{"UserName": "alice"}`), with the admin token's
/// authority. Refused until the cluster is finalized at v0.3.0.
#[utoipa::path(post, path = "/v2/IamCall", tag = "IAM",
    request_body = IamCallRequest,
    responses((status = 200, description = "the action's result, as AWS's result structure"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn iam_call(
    State(st): State<St>,
    Body(req): Body<IamCallRequest>,
) -> Answer<serde_json::Value> {
    let json = call(&st.garage, req).await?;
    ok(serde_json::from_str(&json).map_err(|e| ApiError::Internal(e.to_string()))?)
}
