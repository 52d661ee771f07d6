//! Admin API tokens (as the reference v2 has them): named, scoped to some
//! endpoints, optionally expiring, stored in the `admin_token` table (see
//! [`garage_model::admin_token_table`]). One implementation,
//! [`handle`], serves the HTTP endpoints and `garage admin-token` (over
//! the admin RPC, as a typed [`TokenRequest`]).

use garage_model::admin_token_table::{AdminToken, AdminTokenFilter};
use garage_table::EmptyKey;
use garage_util::time::now_msec;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;
use garage_model::garage::Garage;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminTokenInfo {
    pub id: String,
    pub name: String,
    /// RFC 3339.
    pub created: String,
    /// RFC 3339; null: never.
    pub expiration: Option<String>,
    pub expired: bool,
    /// Endpoint names (`*` for all, `Prefix*` for those starting so).
    pub scope: Vec<String>,
    /// The whole token (`<id>.<secret>`): only in CreateAdminToken's
    /// answer, never again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_token: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAdminTokenRequest {
    #[serde(default)]
    pub name: Option<String>,
    /// RFC 3339 date, e.g. `2027-01-01T00:00:00Z`.
    #[serde(default)]
    pub expiration: Option<String>,
    /// Remove the expiration.
    #[serde(default)]
    pub never_expires: bool,
    #[serde(default)]
    pub scope: Option<Vec<String>>,
}

/// A token operation, as the HTTP API and the CLI send it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TokenRequest {
    List,
    /// By id, or by a unique id prefix or name.
    Info(String),
    Create(UpdateAdminTokenRequest),
    Update(String, UpdateAdminTokenRequest),
    Delete(String),
    DeleteExpired,
}

/// The `?id=` or `?search=` naming one token.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TokenQuery {
    /// The token's id (or a unique prefix of it).
    pub id: Option<String>,
    /// Its name, or a unique id prefix.
    pub search: Option<String>,
}

/// The token a [`TokenQuery`] names.
pub fn pattern(q: TokenQuery) -> Result<String, ApiError> {
    q.id.or(q.search)
        .ok_or_else(|| ApiError::bad("give ?id= or ?search="))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TokenResponse {
    Tokens(Vec<AdminTokenInfo>),
    Token(AdminTokenInfo),
    /// Ids of the tokens deleted.
    Deleted(Vec<String>),
}

use garage_util::time::rfc3339;

fn parse_date(s: &str) -> Result<u64, ApiError> {
    let t: jiff::Timestamp = s.parse().map_err(|e| {
        ApiError::bad(format!(
            "expiration {s:?} is not an RFC 3339 date (e.g. 2027-01-01T00:00:00Z): {e}"
        ))
    })?;
    Ok(t.as_millisecond().max(0) as u64)
}

fn info(t: &AdminToken, now: u64) -> Option<AdminTokenInfo> {
    let p = t.params()?;
    Some(AdminTokenInfo {
        id: t.id.clone(),
        name: p.name.get().clone(),
        created: rfc3339(p.created),
        expiration: p.expiration.get().map(rfc3339),
        expired: t.is_expired(now),
        scope: p.scope.get().clone(),
        secret_token: None,
    })
}

fn check_scope(scope: &[String]) -> Result<(), ApiError> {
    if scope.is_empty() {
        return Err(ApiError::bad(
            "a token needs a scope: endpoint names, `Prefix*`, or `*` for all",
        ));
    }
    for s in scope {
        let name = s.strip_suffix('*').unwrap_or(s);
        if !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(ApiError::bad(format!(
                "scope {s:?}: expected an endpoint name (e.g. ListBuckets), a prefix followed by *, or *"
            )));
        }
    }
    Ok(())
}

async fn live_tokens(g: &Garage) -> Result<Vec<AdminToken>, ApiError> {
    Ok(g.admin_token_table
        .get_range(&EmptyKey, None, Some(AdminTokenFilter::Live), 10_000, false)
        .await?)
}

/// The live token that `pattern` names: its id, a unique id prefix, or
/// its name.
async fn find(g: &Garage, pattern: &str) -> Result<AdminToken, ApiError> {
    let all = live_tokens(g).await?;
    let hits: Vec<&AdminToken> = all
        .iter()
        .filter(|t| {
            t.id.starts_with(pattern) || t.params().is_some_and(|p| p.name.get() == pattern)
        })
        .collect();
    match hits.as_slice() {
        [t] => Ok((*t).clone()),
        [] => Err(ApiError::NoSuchAdminToken(format!(
            "no admin token {pattern:?}"
        ))),
        _ => Err(ApiError::bad(format!(
            "{pattern:?} names {} tokens: give more of the id",
            hits.len()
        ))),
    }
}

/// Runs a token operation: the one implementation of the HTTP endpoints
/// and of `garage admin-token`.
pub async fn handle(g: &Garage, req: TokenRequest) -> Result<TokenResponse, ApiError> {
    let now = now_msec();
    match req {
        TokenRequest::List => {
            let mut out: Vec<AdminTokenInfo> = live_tokens(g)
                .await?
                .iter()
                .filter_map(|t| info(t, now))
                .collect();
            out.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
            Ok(TokenResponse::Tokens(out))
        }
        TokenRequest::Info(p) => {
            let t = find(g, &p).await?;
            Ok(TokenResponse::Token(info(&t, now).expect("live")))
        }
        TokenRequest::Create(r) => {
            let name = r.name.unwrap_or_default();
            if name.is_empty() {
                return Err(ApiError::bad("a token needs a name"));
            }
            let scope = r.scope.unwrap_or_else(|| vec!["*".into()]);
            check_scope(&scope)?;
            let expiration = match (&r.expiration, r.never_expires) {
                (Some(_), true) => {
                    return Err(ApiError::bad(
                        "give an expiration or neverExpires, not both",
                    ))
                }
                (Some(e), false) => Some(parse_date(e)?),
                (None, _) => None,
            };
            let (t, whole) = AdminToken::new(&name, expiration, scope, now);
            g.admin_token_table.insert(&t).await?;
            let mut i = info(&t, now).expect("live");
            i.secret_token = Some(whole);
            Ok(TokenResponse::Token(i))
        }
        TokenRequest::Update(p, r) => {
            let mut t = find(g, &p).await?;
            let params = t.params_mut().expect("live");
            if let Some(n) = r.name.filter(|n| !n.is_empty()) {
                params.name.update(n);
            }
            match (&r.expiration, r.never_expires) {
                (Some(_), true) => {
                    return Err(ApiError::bad(
                        "give an expiration or neverExpires, not both",
                    ))
                }
                (Some(e), false) => params.expiration.update(Some(parse_date(e)?)),
                (None, true) => params.expiration.update(None),
                (None, false) => (),
            }
            if let Some(s) = r.scope {
                check_scope(&s)?;
                params.scope.update(s);
            }
            g.admin_token_table.insert(&t).await?;
            Ok(TokenResponse::Token(info(&t, now).expect("live")))
        }
        TokenRequest::Delete(p) => {
            let t = find(g, &p).await?;
            g.admin_token_table
                .insert(&AdminToken::deleted(&t.id))
                .await?;
            Ok(TokenResponse::Deleted(vec![t.id]))
        }
        TokenRequest::DeleteExpired => {
            let mut gone = Vec::new();
            for t in live_tokens(g).await?.iter().filter(|t| t.is_expired(now)) {
                g.admin_token_table
                    .insert(&AdminToken::deleted(&t.id))
                    .await?;
                gone.push(t.id.clone());
            }
            Ok(TokenResponse::Deleted(gone))
        }
    }
}

/// What the admin_token table says of a bearer token for one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenVerdict {
    Allowed,
    /// Unknown, wrong secret, or expired.
    Invalid,
    /// A live token (its secret matched) whose scope does not name the
    /// endpoint. Saying so leaks nothing: the caller holds the secret.
    OutOfScope,
}

/// Whether `token` (a bearer token `<id>.<secret>`) is a live, unexpired
/// token whose scope allows `endpoint`. Read from this node's copy of the
/// table (every node holds it whole).
pub async fn user_token_verdict(g: &Garage, token: &str, endpoint: &str) -> TokenVerdict {
    let Some((id, secret)) = garage_model::admin_token_table::split_token(token) else {
        return TokenVerdict::Invalid;
    };
    let Ok(Some(t)) = g.admin_token_table.get(&EmptyKey, &id.to_string()).await else {
        return TokenVerdict::Invalid;
    };
    if !t.secret_matches(secret) || t.is_expired(now_msec()) {
        TokenVerdict::Invalid
    } else if t.allows(endpoint) {
        TokenVerdict::Allowed
    } else {
        TokenVerdict::OutOfScope
    }
}
