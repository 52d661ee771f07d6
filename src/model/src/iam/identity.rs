//! Who an access key is, for the access decision: for a key made by IAM,
//! its user (name, id, ARN, tags) and the identity policies that apply
//! (the user's inline and attached ones, and those of its groups); for a
//! role's session (`ASIA…`), the role's policies, narrowed by the
//! session's policy. The key is refused when it was deleted, made
//! inactive, its user or role disabled, or its session expired.
//!
//! Read from this node's copies of the IAM tables, falling back to a
//! quorum only for an entry this node does not have yet: a deletion or a
//! revocation takes effect on a node when it reaches it (at once for the
//! nodes the write reached, at the next anti-entropy sync otherwise; see
//! doc/iam.md).

use std::collections::BTreeSet;
use std::sync::Arc;

use garage_util::clock::cluster_now_msec;

use crate::policy::{Decision, Policy, Request, SessionPrincipal, UserPrincipal};

use super::{arn, builtin, is_iam_key, Iam, IamError, IamResult};

/// An identity, as the access decision sees it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// An IAM user (its keys).
    pub user: Option<UserPrincipal>,
    /// A role's session.
    pub session: Option<SessionPrincipal>,
    /// Its identity policies (parsed once per process, shared).
    pub policies: Arc<Vec<Arc<Policy>>>,
    /// A session's policy: it only narrows `policies`.
    pub boundary: Option<Arc<Policy>>,
    /// A session's token (SHA-256, hex): its requests must carry it.
    pub token_sha256: Option<String>,
}

impl Identity {
    /// What its policies say of `r`: a deny of any wins; an allow needs
    /// the session policy's allow too, when there is one.
    pub fn decision(&self, r: &Request<'_>) -> Decision {
        let d = self
            .policies
            .iter()
            .fold(Decision::NotApplicable, |d, p| d.combine(p.evaluate(r)));
        match &self.boundary {
            None => d,
            Some(b) => match (d, b.evaluate(r)) {
                (Decision::Deny, _) | (_, Decision::Deny) => Decision::Deny,
                (Decision::Allow, Decision::Allow) => Decision::Allow,
                _ => Decision::NotApplicable,
            },
        }
    }

    /// Its name in messages: `user alice` or `role uploader (session x)`.
    pub fn describe(&self) -> String {
        match (&self.user, &self.session) {
            (Some(u), _) => format!("user {}", u.name),
            (None, Some(s)) => format!("{} (session {})", s.role_arn, s.session_name),
            (None, None) => "an identity".into(),
        }
    }
}

/// Whether `key_id` is a session's key.
pub fn is_session_key(key_id: &str) -> bool {
    key_id.starts_with("ASIA")
}

impl Iam {
    /// The identity of `key_id`: `None` for a key not made by IAM; an
    /// error when the key may not be used.
    pub async fn identity(&self, key_id: &str) -> IamResult<Option<Identity>> {
        if is_session_key(key_id) {
            return self.session_identity(key_id).await.map(Some);
        }
        if !is_iam_key(key_id) {
            return Ok(None);
        }
        let revoked = |why: String| IamError::Denied(format!("access key {key_id}: {why}"));
        let (_, owner) = Self::live(&self.access_keys, "access key", key_id)
            .await
            .map_err(|_| revoked("it was deleted".into()))?;
        if !owner.active {
            return Err(revoked("it is inactive".into()));
        }
        let (user, c) = self
            .user(&owner.user)
            .await
            .map_err(|_| revoked(format!("its user {} was deleted", owner.user)))?;
        if !c.enabled {
            return Err(revoked(format!("its user {} is disabled", owner.user)));
        }
        let mut docs: Vec<(String, String)> = c
            .policies
            .iter()
            .map(|(n, d)| {
                (
                    format!("inline policy {n} of user {}", user.name),
                    d.clone(),
                )
            })
            .collect();
        let mut attached: BTreeSet<String> = c.attached.clone();
        for g in &c.groups {
            // A group deleted while the user was still in it grants nothing.
            let Ok((_, gc)) = self.group(g).await else {
                continue;
            };
            docs.extend(
                gc.policies
                    .iter()
                    .map(|(n, d)| (format!("inline policy {n} of group {g}"), d.clone())),
            );
            attached.extend(gc.attached.iter().cloned());
        }
        Ok(Some(Identity {
            user: Some(UserPrincipal {
                name: user.name.clone(),
                id: c.id.clone(),
                arn: arn("user", &c.path, &user.name),
                tags: c.tags.into_iter().collect(),
            }),
            session: None,
            policies: Arc::new(self.policies_of(docs, &attached).await?),
            boundary: None,
            token_sha256: None,
        }))
    }

    /// The identity of session key `key_id`: its role's policies, its
    /// session policy, refused once expired or revoked.
    async fn session_identity(&self, key_id: &str) -> IamResult<Identity> {
        let (_, s) = Self::live(&self.sessions, "session", key_id)
            .await
            .map_err(|_| IamError::Denied(format!("session {key_id} has ended")))?;
        let now = cluster_now_msec();
        if now >= s.expires {
            return Err(IamError::Expired(format!(
                "The security token included in the request is expired (session {key_id} of role {} ended {} s ago)",
                s.role,
                (now - s.expires) / 1000
            )));
        }
        let (role, c) = self.role(&s.role).await.map_err(|_| {
            IamError::Denied(format!(
                "the role {} of session {key_id} was deleted",
                s.role
            ))
        })?;
        if c.id != s.role_id {
            return Err(IamError::Denied(format!(
                "the role {} of session {key_id} was deleted (a role of that name was made since)",
                s.role
            )));
        }
        if !c.enabled {
            return Err(IamError::Denied(format!("role {} is disabled", s.role)));
        }
        if let Some(u) = &s.user {
            match self.user(u).await {
                Ok((_, uc)) if uc.enabled && Some(&uc.id) == s.user_id.as_ref() => (),
                _ => {
                    return Err(IamError::Denied(format!(
                        "user {u}, who assumed role {} in session {key_id}, is disabled or deleted",
                        s.role
                    )))
                }
            }
        }
        let docs = c
            .policies
            .iter()
            .map(|(n, d)| {
                (
                    format!("inline policy {n} of role {}", role.name),
                    d.clone(),
                )
            })
            .collect();
        let policies = self.policies_of(docs, &c.attached).await?;
        let boundary = match &s.policy {
            Some(p) => Some(Policy::parse_identity_stored(p).map_err(|e| {
                IamError::Denied(format!("the session policy cannot be read: {e}"))
            })?),
            None => None,
        };
        Ok(Identity {
            user: None,
            session: Some(SessionPrincipal {
                role_arn: arn("role", &c.path, &role.name),
                role_id: c.id.clone(),
                session_name: s.session_name.clone(),
                provider: s.provider.clone(),
                claims: s.claims.clone().into_iter().collect(),
            }),
            policies: Arc::new(policies),
            boundary,
            token_sha256: Some(s.token_sha256),
        })
    }

    /// The policies of inline documents `docs` (what, text) and of the
    /// managed policies `attached`.
    async fn policies_of(
        &self,
        mut docs: Vec<(String, String)>,
        attached: &BTreeSet<String>,
    ) -> IamResult<Vec<Arc<Policy>>> {
        for a in attached {
            let doc = match builtin::by_arn(a) {
                Some(b) => b.document.to_string(),
                None => match self.policy(a).await {
                    Ok((_, _, pc)) => pc.document,
                    // A deleted managed policy grants nothing.
                    Err(IamError::NoSuchEntity(_)) => continue,
                    Err(e) => return Err(e),
                },
            };
            docs.push((format!("managed policy {a}"), doc));
        }
        docs.iter()
            .map(|(what, d)| {
                // Checked when put: a failure here is a document this
                // release cannot read; refusing is the safe answer.
                Policy::parse_identity_stored(d)
                    .map_err(|e| IamError::Denied(format!("{what} cannot be read: {e}")))
            })
            .collect()
    }
}
