//! Who an access key is, for the access decision: for a key made by IAM,
//! its user (name, id, ARN, tags) and the identity policies that apply
//! (the user's inline and attached ones, and those of its groups); the
//! key refused when it was deleted, made inactive, or its user disabled.
//!
//! Read from this node's copies of the IAM tables, falling back to a
//! quorum only for an entry this node does not have yet: a deletion or a
//! revocation takes effect on a node when it reaches it (at once for the
//! nodes the write reached, at the next anti-entropy sync otherwise; see
//! doc/iam.md).

use std::sync::Arc;

use crate::policy::{Policy, UserPrincipal};

use super::{arn, builtin, is_iam_key, Iam, IamError, IamResult};

/// An IAM user's identity, as the access decision sees it.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user: UserPrincipal,
    pub policies: Arc<Vec<Policy>>,
}

impl Iam {
    /// The identity of `key_id`: `None` for a key not made by IAM; an
    /// error when the key may not be used.
    pub async fn identity(&self, key_id: &str) -> IamResult<Option<Identity>> {
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
        let mut attached: Vec<String> = c.attached.iter().cloned().collect();
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
        attached.sort();
        attached.dedup();
        for a in attached {
            let doc = match builtin::by_arn(&a) {
                Some(b) => b.document.to_string(),
                None => match self.policy(&a).await {
                    Ok((_, pc)) => pc.document,
                    // A deleted managed policy grants nothing.
                    Err(IamError::NoSuchEntity(_)) => continue,
                    Err(e) => return Err(e),
                },
            };
            docs.push((format!("managed policy {a}"), doc));
        }
        let policies = docs
            .iter()
            .map(|(what, d)| {
                // Checked when put: a failure here is a document this
                // release cannot read; refusing is the safe answer.
                Policy::parse_identity(d)
                    .map_err(|e| IamError::Denied(format!("{what} cannot be read: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Identity {
            user: UserPrincipal {
                name: user.name.clone(),
                id: c.id.clone(),
                arn: arn("user", &c.path, &user.name),
                tags: c.tags.into_iter().collect(),
            },
            policies: Arc::new(policies),
        }))
    }
}
