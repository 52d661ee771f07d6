//! Sessions of roles: the temporary credentials STS hands out
//! (AssumeRole for IAM users, AssumeRoleWithWebIdentity for the holders
//! of an OpenID Connect provider's token; the token itself is checked by
//! the S3 crate, which fetches the provider's keys).
//!
//! A session is an access key (`ASIA…`, in the key table like every key,
//! so that signatures are checked as usual), a session token (requests
//! carry it in `x-amz-security-token`; only its SHA-256 is stored), and an
//! entry of `iam_session` saying which role it is of, until when, and
//! with which session policy and web identity claims.
//!
//! Expiry is judged against the cluster's time (this node's clock
//! corrected by its measured offset from the median of the nodes'),
//! never this node's wall clock alone: a node whose clock jumps does not
//! extend or cut sessions. Expired sessions are removed by the next
//! sessions made (at most [`CLEANUP_BATCH`] each time).

use std::collections::BTreeMap;

use garage_util::clock::cluster_now_msec;
use sha2::{Digest, Sha256};

use super::tables::{RoleConfig, SessionConfig};
use super::{check_document, new_id, Iam, IamError, IamResult};
use crate::key_table::Key;
use crate::named_table::Named;
use crate::policy::{Decision, Policy, Principal, Request, Resource, SessionPrincipal, Values};

/// AWS's bounds on a session's duration, in seconds.
pub const MIN_DURATION_SECS: u64 = 900;
pub const DEFAULT_DURATION_SECS: u64 = 3600;
/// Expired sessions removed per cleanup.
pub const CLEANUP_BATCH: usize = 100;
/// How often (ms) a node looks for expired sessions, when sessions are
/// made.
pub const CLEANUP_EVERY_MS: u64 = 60_000;
/// How long an expired session is kept (its requests then say it
/// expired, rather than that the key does not exist).
const KEEP_EXPIRED_MS: u64 = 15 * 60 * 1000;

/// A session's credentials, as AssumeRole… answers them.
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// Cluster time, ms since the epoch.
    pub expires: u64,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// Who asks to assume a role.
pub enum Asker {
    /// An IAM user, by name (AssumeRole), as policies see it.
    User(String, Box<Principal>),
    /// The holder of a web identity token checked against provider
    /// `provider`: its text claims (AssumeRoleWithWebIdentity).
    WebIdentity {
        provider: String,
        claims: BTreeMap<String, String>,
    },
}

/// The role an ARN names (`arn:aws:iam::ACCOUNT:role/PATH/NAME`).
pub fn role_of_arn(arn: &str) -> Option<&str> {
    let rest = arn.strip_prefix("arn:aws:iam::")?;
    let (_, res) = rest.split_once(':')?;
    res.strip_prefix("role/")?
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
}

fn check_session_name(n: &str) -> IamResult<()> {
    let ok = (2..=64).contains(&n.len())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c));
    match ok {
        true => Ok(()),
        false => Err(IamError::InvalidInput(format!(
            "RoleSessionName {n:?}: 2 to 64 letters, digits and +=,.@_-"
        ))),
    }
}

fn random_text(len: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|_| A[rand::random_range(0..A.len())] as char)
        .collect()
}

/// SHA-256 of a session token, hex.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Iam {
    /// Makes a session of role `role_arn` for `asker`, if the role's
    /// trust policy allows it: its credentials, and the role.
    pub async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        duration_secs: Option<u64>,
        policy: Option<&str>,
        asker: Asker,
    ) -> IamResult<(Credentials, String, RoleConfig)> {
        self.gate()?;
        check_session_name(session_name)?;
        let name = role_of_arn(role_arn).ok_or_else(|| {
            IamError::InvalidInput(format!("RoleArn {role_arn:?} is not a role's ARN"))
        })?;
        let not_authorized = || {
            IamError::Denied(format!(
                "Not authorized to perform sts:AssumeRole… on {role_arn}"
            ))
        };
        let (role, c) = self.role(name).await.map_err(|_| not_authorized())?;
        // Only its own ARN names it (not another path or account): the
        // caller's policies were asked about that text.
        if role_arn != super::arn("role", &c.path, &role.name) {
            return Err(not_authorized());
        }
        if !c.enabled {
            return Err(IamError::Denied(format!("role {name} is disabled")));
        }
        let duration = duration_secs.unwrap_or(DEFAULT_DURATION_SECS);
        if !(MIN_DURATION_SECS..=c.max_session_secs).contains(&duration) {
            return Err(IamError::InvalidInput(format!(
                "DurationSeconds {duration}: {MIN_DURATION_SECS} to the role's MaxSessionDuration, {}",
                c.max_session_secs
            )));
        }
        if let Some(p) = policy {
            check_document(p)?;
        }
        let arn = super::arn("role", &c.path, &role.name);
        let (action, who, user, provider, claims) = match asker {
            Asker::User(u, who) => {
                let id = who.user.as_ref().map(|p| p.id.clone());
                ("sts:AssumeRole", *who, Some((u, id)), None, BTreeMap::new())
            }
            Asker::WebIdentity { provider, claims } => {
                let who = Principal {
                    key_id: None,
                    user: None,
                    session: Some(SessionPrincipal {
                        role_arn: arn.clone(),
                        role_id: c.id.clone(),
                        session_name: session_name.to_string(),
                        provider: Some(provider.clone()),
                        claims: claims.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    }),
                };
                (
                    "sts:AssumeRoleWithWebIdentity",
                    who,
                    None,
                    Some(provider),
                    claims,
                )
            }
        };
        let trust = Policy::parse_trust(&c.trust).map_err(|e| {
            IamError::Denied(format!("role {name}'s trust policy cannot be read: {e}"))
        })?;
        let now = cluster_now_msec();
        let decision = trust.evaluate(&Request {
            who: &who,
            action,
            resource: Resource::Arn(&arn),
            values: Values {
                now_msec: Some(now),
                ..Values::default()
            },
        });
        if decision != Decision::Allow {
            return Err(not_authorized());
        }
        self.cleanup_sessions(now).await?;
        let creds = Credentials {
            access_key_id: new_id("ASIA", 16),
            secret_access_key: random_text(40),
            session_token: random_text(96),
            expires: now + duration * 1000,
        };
        let (user, user_id) = match user {
            Some((u, id)) => (Some(u), id),
            None => (None, None),
        };
        let session = SessionConfig {
            role: role.name.clone(),
            role_id: c.id.clone(),
            user_id,
            session_name: session_name.to_string(),
            issued: now,
            expires: creds.expires,
            token_sha256: token_digest(&creds.session_token),
            policy: policy.map(String::from),
            user,
            provider,
            claims,
        };
        // The session first: a node that has the key finds it.
        self.sessions
            .insert(&Named::new(creds.access_key_id.clone(), session, now))
            .await?;
        let label = format!("sts:{}/{session_name}", role.name);
        self.keys
            .insert(&Key::for_user(
                &creds.access_key_id,
                &creds.secret_access_key,
                &label,
            ))
            .await?;
        Ok((creds, arn, c))
    }

    /// Removes sessions expired for a while (at most [`CLEANUP_BATCH`]),
    /// at most once per [`CLEANUP_EVERY_MS`] on this node: it reads the
    /// whole session table, which AssumeRole… need not do each time.
    async fn cleanup_sessions(&self, now: u64) -> IamResult<()> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static LAST: AtomicU64 = AtomicU64::new(0);
        let last = LAST.load(Ordering::Relaxed);
        if now < last + CLEANUP_EVERY_MS
            || LAST
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return Ok(());
        }
        let all = Self::all(&self.sessions).await?;
        for (e, _) in all
            .into_iter()
            .filter(|(_, c)| c.expires + KEEP_EXPIRED_MS < now)
            .take(CLEANUP_BATCH)
        {
            self.keys.insert(&Key::deleted(&e.name)).await?;
            self.clear(&self.sessions, e).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_and_names() {
        assert_eq!(role_of_arn("arn:aws:iam:::role/uploader"), Some("uploader"));
        assert_eq!(
            role_of_arn("arn:aws:iam::123456789012:role/ci/uploader"),
            Some("uploader")
        );
        assert_eq!(role_of_arn("arn:aws:iam:::user/uploader"), None);
        assert!(check_session_name("ci-job-42").is_ok());
        assert!(check_session_name("x").is_err());
        assert_eq!(token_digest("t").len(), 64);
        assert_eq!(random_text(96).len(), 96);
    }
}
