//! The IAM API on the S3 endpoint (`aws iam … --endpoint-url`): the AWS
//! query protocol (`crate::query`) signed for service `iam`. The actions
//! and their answers are `garage_model::iam::actions`'; here each call is
//! authorized (the caller's identity policies must allow `iam:<Action>`
//! on its resource, and an explicit deny refuses) and its answer written
//! in AWS's XML. Keys made by `garage key create` have no identity
//! policy: they may not call IAM (an operator uses `garage iam …`).

use garage_model::iam::actions::{self, Out, Params};
use garage_model::iam::IamError;
use garage_model::policy::Decision;
use hyper::StatusCode;
use tracing::info;

use crate::ctx::Api;
use crate::query::{elem, text, xml, Call, QueryError, W};

/// The XML namespace of IAM answers.
pub const XMLNS: &str = "https://iam.amazonaws.com/doc/2010-05-08/";

pub fn error(e: IamError) -> QueryError {
    let (code, status) = match &e {
        IamError::NoSuchEntity(_) => ("NoSuchEntity", StatusCode::NOT_FOUND),
        IamError::EntityAlreadyExists(_) => ("EntityAlreadyExists", StatusCode::CONFLICT),
        IamError::DeleteConflict(_) => ("DeleteConflict", StatusCode::CONFLICT),
        IamError::MalformedPolicyDocument(_) => {
            ("MalformedPolicyDocument", StatusCode::BAD_REQUEST)
        }
        IamError::InvalidInput(_) => ("InvalidInput", StatusCode::BAD_REQUEST),
        IamError::LimitExceeded(_) => ("LimitExceeded", StatusCode::CONFLICT),
        IamError::InvalidAction(_) => ("InvalidAction", StatusCode::BAD_REQUEST),
        IamError::Denied(_) => ("AccessDenied", StatusCode::FORBIDDEN),
        IamError::Expired(_) => ("ExpiredToken", StatusCode::BAD_REQUEST),
        IamError::NotFinalized { .. } => ("ClusterNotFinalized", StatusCode::BAD_REQUEST),
        IamError::Table(_) => ("ServiceFailure", StatusCode::INTERNAL_SERVER_ERROR),
    };
    QueryError {
        code,
        status,
        message: e.to_string(),
    }
}

fn write(w: &mut W, o: &Out) {
    match o {
        Out::Text(s) => {
            let _ = w.write_event(quick_xml::events::Event::Text(
                quick_xml::events::BytesText::new(s),
            ));
        }
        Out::Struct(fields) => {
            for (name, v) in fields {
                match v {
                    Out::Text(s) => text(w, name, s),
                    v => elem(w, name, None, |w| write(w, v)),
                }
            }
        }
        Out::List(items) => {
            for i in items {
                match i {
                    Out::Text(s) => text(w, "member", s),
                    i => elem(w, "member", None, |w| write(w, i)),
                }
            }
        }
    }
}

/// Serves one IAM call.
pub async fn handle(api: &Api, call: Call) -> Result<String, QueryError> {
    let action = call
        .get("Action")
        .ok_or_else(|| crate::query::invalid("the form names no Action"))?
        .to_string();
    let params: Params = call
        .form
        .iter()
        .filter(|(k, _)| k != "Action" && k != "Version")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let identity = &call.identity;
    let caller = identity
        .as_ref()
        .and_then(|i| i.user.as_ref())
        .map(|u| u.name.as_str());
    let resource = actions::resource(&api.garage.iam, &action, &params, caller).await;
    let iam_action = format!("iam:{action}");
    let decision = call.identity_decision(&iam_action, &resource, api.region());
    if decision != Decision::Allow {
        let who = match &identity {
            Some(i) => i.describe(),
            None => format!(
                "Access key {} (made by `garage key create`, it has no identity policy: manage IAM with `garage iam …` or an IAM user's key)",
                call.key.key_id
            ),
        };
        let how = match decision {
            Decision::Deny => "with an explicit deny",
            _ => "because no identity-based policy allows the action",
        };
        return Err(QueryError {
            code: "AccessDenied",
            status: StatusCode::FORBIDDEN,
            message: format!(
                "{who} is not authorized to perform: {iam_action} on resource: {resource} {how}"
            ),
        });
    }
    let out = actions::call(&api.garage.iam, &action, &params, caller)
        .await
        .map_err(error)?;
    if !action.starts_with("Get") && !action.starts_with("List") {
        info!(action = %action, key = %call.key.key_id, user = caller.unwrap_or(""), resource = %resource, "IAM change");
    }
    let request_id = call.request_id.as_str();
    Ok(xml(|w| {
        elem(w, &format!("{action}Response"), Some(XMLNS), |w| {
            if let Some(o) = &out {
                elem(w, &format!("{action}Result"), None, |w| write(w, o));
            }
            elem(w, "ResponseMetadata", None, |w| {
                text(w, "RequestId", request_id)
            });
        });
    }))
}
