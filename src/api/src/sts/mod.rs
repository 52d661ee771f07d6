//! STS on the S3 endpoint (`aws sts … --endpoint-url`): the AWS query
//! protocol (`crate::query`) for service `sts`. AssumeRole (an IAM
//! user's key), AssumeRoleWithWebIdentity (unsigned: a token of an
//! OpenID Connect provider, checked by [`oidc`]), GetCallerIdentity. The
//! sessions themselves are `garage_model::iam::sts`'.

pub mod oidc;

use garage_model::iam::sts::{Asker, Credentials};
use garage_model::iam::tables::RoleConfig;
use garage_model::policy::{Decision, Principal};
use garage_util::clock::cluster_now_msec;
use hyper::StatusCode;
use tracing::info;

use crate::ctx::Api;
use crate::query::{elem, text, xml, Call, QueryError, W};

/// The keys of OpenID Connect providers, kept for the process (one
/// cache for every listener).
fn verifier() -> &'static oidc::Verifier {
    static V: std::sync::OnceLock<oidc::Verifier> = std::sync::OnceLock::new();
    V.get_or_init(oidc::Verifier::new)
}

/// The XML namespace of STS answers.
pub const XMLNS: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

fn err(code: &'static str, status: StatusCode, message: impl Into<String>) -> QueryError {
    QueryError {
        code,
        status,
        message: message.into(),
    }
}

fn invalid(m: impl Into<String>) -> QueryError {
    err("ValidationError", StatusCode::BAD_REQUEST, m)
}

fn iam_error(e: garage_model::iam::IamError) -> QueryError {
    use garage_model::iam::IamError as E;
    match e {
        E::InvalidInput(m) => invalid(m),
        E::MalformedPolicyDocument(m) => err("MalformedPolicyDocument", StatusCode::BAD_REQUEST, m),
        E::Denied(m) => err("AccessDenied", StatusCode::FORBIDDEN, m),
        E::Expired(m) => err("ExpiredToken", StatusCode::BAD_REQUEST, m),
        other => crate::iam_api::error(other),
    }
}

fn get<'f>(form: &'f [(String, String)], name: &str) -> Option<&'f str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn need<'f>(form: &'f [(String, String)], name: &str) -> Result<&'f str, QueryError> {
    get(form, name).ok_or_else(|| invalid(format!("the parameter {name} is required")))
}

fn duration(form: &[(String, String)]) -> Result<Option<u64>, QueryError> {
    get(form, "DurationSeconds")
        .map(|d| {
            d.parse()
                .map_err(|_| invalid(format!("DurationSeconds {d:?} is not a number")))
        })
        .transpose()
}

fn date(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn credentials(w: &mut W, c: &Credentials, role_arn: &str, role: &RoleConfig, session: &str) {
    elem(w, "Credentials", None, |w| {
        text(w, "AccessKeyId", &c.access_key_id);
        text(w, "SecretAccessKey", &c.secret_access_key);
        text(w, "SessionToken", &c.session_token);
        text(w, "Expiration", &date(c.expires));
    });
    let role_name = role_arn.rsplit('/').next().unwrap_or_default();
    elem(w, "AssumedRoleUser", None, |w| {
        text(w, "AssumedRoleId", &format!("{}:{session}", role.id));
        text(
            w,
            "Arn",
            &format!("arn:aws:sts:::assumed-role/{role_name}/{session}"),
        );
    });
}

fn answer(action: &str, request_id: &str, f: impl FnOnce(&mut W)) -> String {
    xml(|w| {
        elem(w, &format!("{action}Response"), Some(XMLNS), |w| {
            elem(w, &format!("{action}Result"), None, f);
            elem(w, "ResponseMetadata", None, |w| {
                text(w, "RequestId", request_id)
            });
        });
    })
}

/// Serves a signed STS call.
pub async fn handle(api: &Api, call: Call) -> Result<String, QueryError> {
    let action = need(&call.form, "Action")?.to_string();
    if action == "AssumeRoleWithWebIdentity" {
        return web_identity(api, &call.form, &call.request_id).await;
    }
    let identity = &call.identity;
    match action.as_str() {
        "GetCallerIdentity" => {
            let (arn, id) = match &identity {
                Some(i) => match (&i.user, &i.session) {
                    (Some(u), _) => (u.arn.clone(), u.id.clone()),
                    (None, Some(s)) => {
                        let role = s.role_arn.rsplit('/').next().unwrap_or_default();
                        (
                            format!("arn:aws:sts:::assumed-role/{role}/{}", s.session_name),
                            format!("{}:{}", s.role_id, s.session_name),
                        )
                    }
                    (None, None) => (String::new(), String::new()),
                },
                None => (
                    format!("arn:garage:iam:::key/{}", call.key.key_id),
                    call.key.key_id.clone(),
                ),
            };
            Ok(answer(&action, &call.request_id, |w| {
                text(w, "UserId", &id);
                text(w, "Account", "");
                text(w, "Arn", &arn);
            }))
        }
        "AssumeRole" => {
            let Some(user) = identity.as_ref().and_then(|i| i.user.clone()) else {
                return Err(err(
                    "AccessDenied",
                    StatusCode::FORBIDDEN,
                    "AssumeRole is for IAM users' keys (a key of its own or a session cannot assume a role)",
                ));
            };
            let role_arn = need(&call.form, "RoleArn")?;
            let session = need(&call.form, "RoleSessionName")?;
            let who = Principal {
                key_id: Some(call.key.key_id.clone()),
                user: Some(user.clone()),
                session: None,
            };
            // The user's own policies may deny it.
            if call.identity_decision("sts:AssumeRole", role_arn, api.region()) == Decision::Deny {
                return Err(err(
                    "AccessDenied",
                    StatusCode::FORBIDDEN,
                    format!("user {} is denied sts:AssumeRole on {role_arn} by its policies", user.name),
                ));
            }
            let (creds, arn, role) = api
                .garage
                .iam
                .assume_role(
                    role_arn,
                    session,
                    duration(&call.form)?,
                    get(&call.form, "Policy"),
                    Asker::User(user.name.clone(), Box::new(who)),
                )
                .await
                .map_err(iam_error)?;
            info!(user = %user.name, role = %arn, session, key = %creds.access_key_id, "role assumed");
            Ok(answer(&action, &call.request_id, |w| {
                credentials(w, &creds, &arn, &role, session)
            }))
        }
        other => Err(err(
            "InvalidAction",
            StatusCode::BAD_REQUEST,
            format!(
                "action {other:?} is not served (served: AssumeRole, AssumeRoleWithWebIdentity, GetCallerIdentity)"
            ),
        )),
    }
}

/// AssumeRoleWithWebIdentity (unsigned: the token is the credential).
pub async fn web_identity(
    api: &Api,
    form: &[(String, String)],
    request_id: &str,
) -> Result<String, QueryError> {
    let role_arn = need(form, "RoleArn")?;
    let session = need(form, "RoleSessionName")?;
    let token = need(form, "WebIdentityToken")?;
    let providers: Vec<_> = api
        .garage
        .iam
        .list_providers()
        .await
        .map_err(iam_error)?
        .into_iter()
        .map(|(e, c)| (e.name, c))
        .collect();
    let checked = verifier()
        .verify(token, &providers, cluster_now_msec())
        .await
        .map_err(|e| match e {
            oidc::TokenError::Invalid(m) => err("InvalidIdentityToken", StatusCode::BAD_REQUEST, m),
            oidc::TokenError::Expired(m) => {
                err("ExpiredTokenException", StatusCode::BAD_REQUEST, m)
            }
            oidc::TokenError::Provider(m) => {
                err("IDPCommunicationError", StatusCode::BAD_REQUEST, m)
            }
        })?;
    let subject = checked.claims.get("sub").cloned().unwrap_or_default();
    let (creds, arn, role) = api
        .garage
        .iam
        .assume_role(
            role_arn,
            session,
            duration(form)?,
            get(form, "Policy"),
            Asker::WebIdentity {
                provider: checked.provider.clone(),
                claims: checked.claims.clone(),
            },
        )
        .await
        .map_err(iam_error)?;
    info!(provider = %checked.provider, subject = %subject, role = %arn, session, key = %creds.access_key_id, "role assumed with a web identity");
    Ok(answer("AssumeRoleWithWebIdentity", request_id, |w| {
        credentials(w, &creds, &arn, &role, session);
        text(w, "SubjectFromWebIdentityToken", &subject);
        text(w, "Provider", &checked.provider);
        text(w, "Audience", &checked.audience);
    }))
}
