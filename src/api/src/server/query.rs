//! Sends each AWS query protocol call (`crate::query`) to the service of
//! its credential scope: `sns` (topics), `iam` or `sts`; an unsigned call
//! only to STS's AssumeRoleWithWebIdentity (its token is its credential).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use s3s::HttpResponse;

use crate::ctx::Api;
use crate::query::{
    authenticate, elem, invalid, parse_authorization, read_body, text, xml, xml_response, Call,
    QueryError,
};

/// Serves one query API call: the service of its credential scope
/// answers.
pub async fn serve(api: Arc<Api>, req: Request<Incoming>) -> HttpResponse {
    let request_id = req
        .extensions()
        .get::<crate::request::RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let service = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_authorization)
        .map(|a| a.service)
        .unwrap_or_default();
    let xmlns = match service.as_str() {
        "iam" => crate::iam_api::XMLNS,
        "sns" => crate::notify::topics::XMLNS,
        _ => crate::sts::XMLNS,
    };
    let result = async {
        let (parts, body) = req.into_parts();
        let body = read_body(body).await?;
        let form: Vec<(String, String)> = crate::request::query_pairs(
            std::str::from_utf8(&body).map_err(|_| invalid("the form is not UTF-8"))?,
        )
        .collect();
        if service.is_empty()
            && form
                .iter()
                .any(|(k, v)| k == "Action" && v == "AssumeRoleWithWebIdentity")
        {
            return crate::sts::web_identity(&api, &form, &request_id).await;
        }
        let key = authenticate(&api, &parts.method, &parts.uri, &parts.headers, &body).await?;
        // The key's identity, for every service: a revoked key or an
        // expired session is refused here, a session's token checked.
        let identity = api
            .garage
            .iam
            .identity(&key.key_id)
            .await
            .map_err(crate::iam_api::error)?;
        if let Some(i) = &identity {
            crate::access::authorize::check_session_token(i, &parts.headers, &parts.uri).map_err(
                |e| QueryError {
                    code: "InvalidClientTokenId",
                    status: StatusCode::FORBIDDEN,
                    message: e.to_string(),
                },
            )?;
        }
        let call = Call {
            key,
            identity,
            form,
            request_id: request_id.clone(),
            source_ip: parts.extensions.get::<crate::request::Peer>().map(|p| p.0.ip()),
            conditions: parts
                .extensions
                .get::<crate::request::ConditionValues>()
                .cloned()
                .unwrap_or_default(),
        };
        match service.as_str() {
            "sns" => crate::notify::topics::handle(&api, call).await,
            "iam" => crate::iam_api::handle(&api, call).await,
            "sts" => crate::sts::handle(&api, call).await,
            other => Err(QueryError {
                code: "InvalidAction",
                status: StatusCode::BAD_REQUEST,
                message: format!(
                    "the credential scope's service is {other:?}: this endpoint serves s3, sns, iam and sts"
                ),
            }),
        }
    }
    .await;
    match result {
        Ok(body) => xml_response(StatusCode::OK, body),
        Err(e) => {
            let body = xml(|w| {
                elem(w, "ErrorResponse", Some(xmlns), |w| {
                    elem(w, "Error", None, |w| {
                        text(
                            w,
                            "Type",
                            if e.status.is_server_error() {
                                "Receiver"
                            } else {
                                "Sender"
                            },
                        );
                        text(w, "Code", e.code);
                        text(w, "Message", &e.message);
                    });
                    text(w, "RequestId", &request_id);
                });
            });
            xml_response(e.status, body)
        }
    }
}
