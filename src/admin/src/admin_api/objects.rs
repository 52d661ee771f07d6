//! PresignS3Request: an HTTP wrapper of [`crate::ops::presign`].

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ErrorBody;
use super::extract::{ok, Answer, Body};
use super::St;
use crate::ops::presign::{presign_for, PresignS3Request, PresignS3Response};

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
    ok(presign_for(&st.garage, &st.conf, req).await?)
}
