//! `garage admin-token`: a client of the token operations
//! ([`garage_admin::ops::token::handle`], reached over the admin RPC),
//! formatting their answers.

use anyhow::{anyhow, bail};

use super::Admin;
use crate::args::AdminTokenOperation as Op;
use garage_admin::ops::token::{
    AdminTokenInfo, TokenRequest, TokenResponse, UpdateAdminTokenRequest,
};
use garage_admin::ops::{AdminRequest, AdminResponse};

async fn call(admin: &Admin, req: TokenRequest) -> anyhow::Result<TokenResponse> {
    match admin.op(AdminRequest::Token(req)).await? {
        AdminResponse::Token(r) => Ok(r),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

/// An RFC 3339 date `expires_in` from now (`30d`, `12h`, …), or
/// `expires_at` as given.
fn expiration(
    expires_in: &Option<String>,
    expires_at: &Option<String>,
) -> anyhow::Result<Option<String>> {
    Ok(match (expires_in, expires_at) {
        (Some(d), _) => {
            let d = garage_util::config::parse_duration(d)
                .map_err(|e| anyhow!("--expires-in {d:?}: {e}"))?;
            let at = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::try_from(d)?)
                .map_err(|e| anyhow!("--expires-in: {e}"))?;
            Some(at.to_string())
        }
        (None, Some(at)) => Some(at.clone()),
        (None, None) => None,
    })
}

fn scope(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn show(t: &AdminTokenInfo) {
    println!("Token ID:    {}", t.id);
    println!("Name:        {}", t.name);
    println!("Created:     {}", t.created);
    println!(
        "Expiration:  {}{}",
        t.expiration.as_deref().unwrap_or("never"),
        if t.expired { " (expired)" } else { "" }
    );
    println!("Scope:       {}", t.scope.join(", "));
}

fn one(r: TokenResponse) -> anyhow::Result<AdminTokenInfo> {
    match r {
        TokenResponse::Token(t) => Ok(t),
        other => bail!("unexpected answer from the node: {other:?}"),
    }
}

pub async fn run(admin: &Admin, op: &Op) -> anyhow::Result<()> {
    match op {
        Op::List => {
            let TokenResponse::Tokens(all) = call(admin, TokenRequest::List).await? else {
                bail!("unexpected answer from the node");
            };
            println!("ID\tCreated\tName\tExpiration\tScope");
            for t in all {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    t.id,
                    t.created,
                    t.name,
                    match (&t.expiration, t.expired) {
                        (None, _) => "never".to_string(),
                        (Some(e), true) => format!("{e} (expired)"),
                        (Some(e), false) => e.clone(),
                    },
                    t.scope.join(",")
                );
            }
            Ok(())
        }
        Op::Info { token } => {
            show(&one(call(admin, TokenRequest::Info(token.clone())).await?)?);
            Ok(())
        }
        Op::Create {
            name,
            expires_in,
            expires_at,
            scope: s,
            quiet,
        } => {
            let req = UpdateAdminTokenRequest {
                name: Some(name.clone()),
                expiration: expiration(expires_in, expires_at)?,
                never_expires: false,
                scope: Some(scope(s)),
            };
            let t = one(call(admin, TokenRequest::Create(req)).await?)?;
            let secret = t.secret_token.clone().unwrap_or_default();
            if *quiet {
                println!("{secret}");
            } else {
                show(&t);
                println!();
                println!("Secret token: {secret}");
                println!("(shown once: use it as `Authorization: Bearer <token>`)");
            }
            Ok(())
        }
        Op::Rename { token, new_name } => {
            let req = UpdateAdminTokenRequest {
                name: Some(new_name.clone()),
                expiration: None,
                never_expires: false,
                scope: None,
            };
            show(&one(
                call(admin, TokenRequest::Update(token.clone(), req)).await?
            )?);
            Ok(())
        }
        Op::Set {
            token,
            expires_in,
            expires_at,
            never_expires,
            scope: s,
        } => {
            let req = UpdateAdminTokenRequest {
                name: None,
                expiration: expiration(expires_in, expires_at)?,
                never_expires: *never_expires,
                scope: s.as_deref().map(scope),
            };
            show(&one(
                call(admin, TokenRequest::Update(token.clone(), req)).await?
            )?);
            Ok(())
        }
        Op::Delete { token, yes } => {
            if !yes {
                bail!("add --yes to revoke admin token {token}");
            }
            if let TokenResponse::Deleted(ids) =
                call(admin, TokenRequest::Delete(token.clone())).await?
            {
                for id in ids {
                    println!("Admin token {id} revoked.");
                }
            }
            Ok(())
        }
        Op::DeleteExpired { yes } => {
            if !yes {
                bail!("add --yes to revoke every expired admin token");
            }
            if let TokenResponse::Deleted(ids) = call(admin, TokenRequest::DeleteExpired).await? {
                println!("{} expired admin token(s) revoked.", ids.len());
                for id in ids {
                    println!("  {id}");
                }
            }
            Ok(())
        }
    }
}
