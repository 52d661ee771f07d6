//! PresignS3Request: an HTTP wrapper of [`crate::ops::presign`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ErrorBody};
use super::extract::{ok, Answer, Body};
use super::St;
use crate::ops::presign::{presign, PresignS3Request, PresignS3Response};

pub fn routes(r: OpenApiRouter<St>) -> OpenApiRouter<St> {
    r.routes(routes!(presign_s3_request))
}

/// Presigns an S3 request with an access key's secret (garage's own
/// endpoint; the web console uses it for objects). The answer's path goes
/// to the S3 endpoint, or through the admin listener's `/ui/s3` relay.
#[utoipa::path(post, path = "/v2/PresignS3Request", tag = "Object",
    request_body = PresignS3Request,
    responses((status = 200, body = PresignS3Response), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn presign_s3_request(
    State(st): State<St>,
    Body(req): Body<PresignS3Request>,
) -> Answer<PresignS3Response> {
    let host = st.s3_host.as_deref().ok_or_else(|| {
        ApiError::BadRequest(
            "s3_api.api_bind_addr is not a TCP address: there is no S3 endpoint to presign for"
                .into(),
        )
    })?;
    ok(presign(&st.garage, req, host, &st.region).await?)
}
