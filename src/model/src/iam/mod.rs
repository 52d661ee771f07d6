//! Identities: IAM users, groups and policies, and the access keys IAM
//! makes for users. The operations here are what both the IAM API on the
//! S3 endpoint (`aws iam …`) and the admin API (`garage iam …`) do; who
//! may call them is decided by their callers. See doc/iam.md.
//!
//! Access keys made by IAM have AWS's form (`AKIA` and 16 characters);
//! their secret lives in the key table like every key's, and
//! `iam_access_key` says whose they are. Keys made by `garage key create`
//! (`GK…`) stay principals of their own, whose per-bucket flags are their
//! identity policy: nothing changes for their holders.
//!
//! The tables are new in v0.3.0: every operation that writes them is
//! refused until the cluster is finalized at v0.3.0 (feature gate
//! `iam`).

pub mod actions;
pub mod builtin;
pub mod holders;
pub mod identity;
pub mod roles;
pub mod sts;
pub mod tables;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use garage_rpc::system::versions::IAM;
use garage_rpc::system::System;
use garage_table::{EmptyKey, Table, TableSchema};

use crate::key_table::{Key, KeyTable};
use crate::named_table::{LiveFilter, Named};
use crate::policy::Policy;
use tables::*;

/// Most entries a listing reads (users, groups, policies, keys are few).
pub const MAX_LISTED: usize = 10_000;
/// AWS's limit on access keys per user.
pub const MAX_KEYS_PER_USER: usize = 2;
/// AWS's limit on managed policies attached to a user or group.
pub const MAX_ATTACHED: usize = 20;

/// Why an IAM operation is refused; the IAM API maps each to AWS's code.
#[derive(Debug, thiserror::Error)]
pub enum IamError {
    #[error("{0}")]
    NoSuchEntity(String),
    #[error("{0}")]
    EntityAlreadyExists(String),
    #[error("{0}")]
    DeleteConflict(String),
    #[error("{0}")]
    MalformedPolicyDocument(String),
    #[error("{0}")]
    InvalidInput(String),
    #[error("{0}")]
    LimitExceeded(String),
    #[error("{0}")]
    InvalidAction(String),
    /// The credentials may not be used (a deleted or inactive key, a
    /// disabled user or role).
    #[error("{0}")]
    Denied(String),
    /// A session's credentials, past their expiry.
    #[error("{0}")]
    Expired(String),
    #[error("IAM needs the cluster finalized at v{since} or later (it is at v{active}): upgrade every node, then run `garage upgrade finalize`")]
    NotFinalized { since: String, active: String },
    #[error("metadata: {0}")]
    Table(#[from] garage_table::Error),
}

pub type IamResult<T> = Result<T, IamError>;

/// The ARN of user, group or policy `name` under `path`.
pub fn arn(kind: &str, path: &str, name: &str) -> String {
    format!("arn:aws:iam:::{kind}{path}{name}")
}

/// The name of a customer managed policy's ARN (any account, any path).
pub fn policy_name_of_arn(arn: &str) -> Option<&str> {
    let rest = arn.strip_prefix("arn:aws:iam::")?;
    let (account, res) = rest.split_once(':')?;
    if account == "aws" {
        return None;
    }
    let path = res.strip_prefix("policy/")?;
    path.rsplit('/').next().filter(|n| !n.is_empty())
}

/// A new id: `prefix` and 17 characters of AWS's alphabet.
pub(crate) fn new_id(prefix: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut s = String::from(prefix);
    for _ in 0..len {
        s.push(ALPHABET[rand::random_range(0..ALPHABET.len())] as char);
    }
    s
}

/// Whether `key_id` was made by IAM (its owner is then looked up).
pub fn is_iam_key(key_id: &str) -> bool {
    key_id.starts_with("AKIA")
}

pub(crate) fn check_path(path: &str) -> IamResult<()> {
    let ok = path.starts_with('/')
        && path.ends_with('/')
        && path.len() <= 512
        && path.chars().all(|c| c.is_ascii_graphic());
    match ok {
        true => Ok(()),
        false => Err(IamError::InvalidInput(format!(
            "path {path:?} must begin and end with '/' (at most 512 printable characters)"
        ))),
    }
}

/// IAM names: 1 to `max` letters, digits and `+=,.@_-`.
pub(crate) fn check_iam_name(what: &str, name: &str, max: usize) -> IamResult<()> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c));
    match ok {
        true => Ok(()),
        false => Err(IamError::InvalidInput(format!(
            "{what} name {name:?}: 1 to {max} letters, digits and +=,.@_-"
        ))),
    }
}

pub(crate) fn check_document(doc: &str) -> IamResult<()> {
    Policy::parse_identity(doc)
        .map(|_| ())
        .map_err(IamError::MalformedPolicyDocument)
}

/// The IAM tables and operations.
pub struct Iam {
    pub users: Arc<Table<UserTable>>,
    pub groups: Arc<Table<GroupTable>>,
    pub policies: Arc<Table<PolicyTable>>,
    pub access_keys: Arc<Table<AccessKeyTable>>,
    pub roles: Arc<Table<RoleTable>>,
    pub providers: Arc<Table<OidcProviderTable>>,
    pub sessions: Arc<Table<SessionTable>>,
    pub keys: Arc<Table<KeyTable>>,
    pub system: Arc<System>,
}

/// A user as listed: name, ARN, id, creation time (ms), and configuration.
pub type UserInfo = (User, UserConfig);

impl Iam {
    pub(crate) fn gate(&self) -> IamResult<()> {
        match self.system.feature_allowed(&IAM) {
            true => Ok(()),
            false => Err(IamError::NotFinalized {
                since: IAM.since.to_string(),
                active: self.system.active_version().to_string(),
            }),
        }
    }

    pub(crate) async fn live<S, C>(
        table: &Table<S>,
        what: &str,
        name: &str,
    ) -> IamResult<(Named<C>, C)>
    where
        S: TableSchema<P = EmptyKey, S = String, E = Named<C>>,
        C: Clone + Ord,
    {
        let e = table.get(&EmptyKey, &name.to_string()).await?;
        match e {
            Some(e) => match e.live().cloned() {
                Some(c) => Ok((e, c)),
                None => Err(IamError::NoSuchEntity(format!(
                    "The {what} with name {name} cannot be found."
                ))),
            },
            None => Err(IamError::NoSuchEntity(format!(
                "The {what} with name {name} cannot be found."
            ))),
        }
    }

    pub(crate) async fn all<S, C>(table: &Table<S>) -> IamResult<Vec<(Named<C>, C)>>
    where
        S: TableSchema<P = EmptyKey, S = String, E = Named<C>, Filter = LiveFilter>,
        C: Clone + Ord,
    {
        let all = table
            .get_range(&EmptyKey, None, Some(LiveFilter::Live), MAX_LISTED, false)
            .await?;
        Ok(all
            .into_iter()
            .filter_map(|e| e.live().cloned().map(|c| (e, c)))
            .collect())
    }

    /// Reads `name`, changes its configuration with `f`, writes it back.
    pub(crate) async fn change<S, C>(
        &self,
        table: &Table<S>,
        what: &str,
        name: &str,
        f: impl FnOnce(&mut C) -> IamResult<()>,
    ) -> IamResult<C>
    where
        S: TableSchema<P = EmptyKey, S = String, E = Named<C>>,
        C: Clone + Ord,
    {
        self.gate()?;
        let (mut e, mut c) = Self::live(table, what, name).await?;
        f(&mut c)?;
        e.config.update(Some(c.clone()));
        table.insert(&e).await?;
        Ok(c)
    }

    pub(crate) async fn create<S, C>(
        &self,
        table: &Table<S>,
        what: &str,
        name: &str,
        c: C,
    ) -> IamResult<()>
    where
        S: TableSchema<P = EmptyKey, S = String, E = Named<C>>,
        C: Clone + Ord,
    {
        self.gate()?;
        let existing = table.get(&EmptyKey, &name.to_string()).await?;
        let e = match existing {
            Some(e) if e.live().is_some() => {
                return Err(IamError::EntityAlreadyExists(format!(
                    "{what} with name {name} already exists."
                )))
            }
            Some(mut e) => {
                e.config.update(Some(c));
                e
            }
            None => Named::new(name.to_string(), c, garage_util::time::now_msec()),
        };
        table.insert(&e).await?;
        Ok(())
    }

    pub(crate) async fn clear<S, C>(&self, table: &Table<S>, mut e: Named<C>) -> IamResult<()>
    where
        S: TableSchema<P = EmptyKey, S = String, E = Named<C>>,
        C: Clone + Ord,
    {
        e.config.update(None);
        table.insert(&e).await?;
        Ok(())
    }

    // ---- users ----

    pub async fn create_user(
        &self,
        name: &str,
        path: Option<&str>,
        tags: BTreeMap<String, String>,
    ) -> IamResult<UserInfo> {
        check_iam_name("user", name, 64)?;
        let path = path.unwrap_or("/");
        check_path(path)?;
        let c = UserConfig {
            id: new_id("AIDA", 17),
            path: path.to_string(),
            enabled: true,
            policies: BTreeMap::new(),
            attached: BTreeSet::new(),
            groups: BTreeSet::new(),
            tags,
        };
        self.create(&self.users, "User", name, c).await?;
        self.user(name).await
    }

    pub async fn user(&self, name: &str) -> IamResult<UserInfo> {
        Self::live(&self.users, "user", name).await
    }

    pub async fn list_users(&self, path_prefix: &str) -> IamResult<Vec<UserInfo>> {
        let mut all = Self::all(&self.users).await?;
        all.retain(|(_, c)| c.path.starts_with(path_prefix));
        Ok(all)
    }

    /// Deletes a user with no keys, policies or groups left (AWS's
    /// `DeleteConflict` otherwise).
    pub async fn delete_user(&self, name: &str) -> IamResult<()> {
        self.gate()?;
        let (e, c) = self.user(name).await?;
        let keys = self.list_access_keys(name).await?;
        let what = if !keys.is_empty() {
            Some("access keys")
        } else if !c.policies.is_empty() || !c.attached.is_empty() {
            Some("policies")
        } else if !c.groups.is_empty() {
            Some("group memberships")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(IamError::DeleteConflict(format!(
                "Cannot delete entity, must remove {what} first (user {name})."
            )));
        }
        self.clear(&self.users, e).await
    }

    /// Enables or disables a user: a disabled user's keys are refused.
    pub async fn set_user_enabled(&self, name: &str, enabled: bool) -> IamResult<()> {
        self.change(&self.users, "user", name, |c| {
            c.enabled = enabled;
            Ok(())
        })
        .await
        .map(|_| ())
    }

    pub async fn tag_user(&self, name: &str, tags: BTreeMap<String, String>) -> IamResult<()> {
        self.change(&self.users, "user", name, |c| {
            c.tags.extend(tags);
            match c.tags.len() > 50 {
                true => Err(IamError::LimitExceeded("a user has at most 50 tags".into())),
                false => Ok(()),
            }
        })
        .await
        .map(|_| ())
    }

    pub async fn untag_user(&self, name: &str, keys: &[String]) -> IamResult<()> {
        self.change(&self.users, "user", name, |c| {
            for k in keys {
                c.tags.remove(k);
            }
            Ok(())
        })
        .await
        .map(|_| ())
    }

    // ---- access keys ----

    /// Makes an access key for user `name`: its id and secret (shown
    /// once).
    pub async fn create_access_key(&self, name: &str) -> IamResult<(String, String)> {
        self.gate()?;
        self.user(name).await?;
        if self.list_access_keys(name).await?.len() >= MAX_KEYS_PER_USER {
            return Err(IamError::LimitExceeded(format!(
                "Cannot exceed quota for AccessKeysPerUser: {MAX_KEYS_PER_USER} (user {name})"
            )));
        }
        let id = new_id("AKIA", 16);
        let secret: String = (0..40)
            .map(|_| {
                const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
                A[rand::random_range(0..A.len())] as char
            })
            .collect();
        // The owner first: a node that has the key always finds it.
        let owner = AccessKeyConfig {
            user: name.to_string(),
            active: true,
        };
        self.access_keys
            .insert(&Named::new(
                id.clone(),
                owner,
                garage_util::time::now_msec(),
            ))
            .await?;
        self.keys.insert(&Key::for_user(&id, &secret, name)).await?;
        Ok((id, secret))
    }

    /// The keys of user `name`: (id, active, created ms).
    pub async fn list_access_keys(&self, name: &str) -> IamResult<Vec<(String, bool, u64)>> {
        let all = Self::all(&self.access_keys).await?;
        Ok(all
            .into_iter()
            .filter(|(_, c)| c.user == name)
            .map(|(e, c)| (e.name, c.active, e.created))
            .collect())
    }

    async fn owned_key(&self, user: &str, key_id: &str) -> IamResult<AccessKey> {
        let (e, c) = Self::live(&self.access_keys, "access key", key_id).await?;
        match c.user == user {
            true => Ok(e),
            false => Err(IamError::NoSuchEntity(format!(
                "The Access Key with id {key_id} cannot be found (user {user})."
            ))),
        }
    }

    pub async fn delete_access_key(&self, user: &str, key_id: &str) -> IamResult<()> {
        self.gate()?;
        let e = self.owned_key(user, key_id).await?;
        // The key first: it is refused from then on.
        self.keys.insert(&Key::deleted(key_id)).await?;
        self.clear(&self.access_keys, e).await
    }

    pub async fn update_access_key(&self, user: &str, key_id: &str, active: bool) -> IamResult<()> {
        self.owned_key(user, key_id).await?;
        self.change(&self.access_keys, "access key", key_id, |c| {
            c.active = active;
            Ok(())
        })
        .await
        .map(|_| ())
    }

    // ---- groups ----

    pub async fn create_group(
        &self,
        name: &str,
        path: Option<&str>,
    ) -> IamResult<(Group, GroupConfig)> {
        check_iam_name("group", name, 128)?;
        let path = path.unwrap_or("/");
        check_path(path)?;
        let c = GroupConfig {
            id: new_id("AGPA", 17),
            path: path.to_string(),
            policies: BTreeMap::new(),
            attached: BTreeSet::new(),
        };
        self.create(&self.groups, "Group", name, c).await?;
        self.group(name).await
    }

    pub async fn group(&self, name: &str) -> IamResult<(Group, GroupConfig)> {
        Self::live(&self.groups, "group", name).await
    }

    pub async fn list_groups(&self, path_prefix: &str) -> IamResult<Vec<(Group, GroupConfig)>> {
        let mut all = Self::all(&self.groups).await?;
        all.retain(|(_, c)| c.path.starts_with(path_prefix));
        Ok(all)
    }

    /// The users in group `name`.
    pub async fn members(&self, name: &str) -> IamResult<Vec<UserInfo>> {
        let mut all = Self::all(&self.users).await?;
        all.retain(|(_, c)| c.groups.contains(name));
        Ok(all)
    }

    pub async fn delete_group(&self, name: &str) -> IamResult<()> {
        self.gate()?;
        let (e, c) = self.group(name).await?;
        if !self.members(name).await?.is_empty() {
            return Err(IamError::DeleteConflict(format!(
                "Cannot delete entity, must remove users from group first (group {name})."
            )));
        }
        if !c.policies.is_empty() || !c.attached.is_empty() {
            return Err(IamError::DeleteConflict(format!(
                "Cannot delete entity, must delete policies first (group {name})."
            )));
        }
        self.clear(&self.groups, e).await
    }

    pub async fn add_user_to_group(&self, group: &str, user: &str) -> IamResult<()> {
        self.group(group).await?;
        self.change(&self.users, "user", user, |c| {
            c.groups.insert(group.to_string());
            Ok(())
        })
        .await
        .map(|_| ())
    }

    pub async fn remove_user_from_group(&self, group: &str, user: &str) -> IamResult<()> {
        self.group(group).await?;
        self.change(&self.users, "user", user, |c| {
            match c.groups.remove(group) {
                true => Ok(()),
                false => Err(IamError::NoSuchEntity(format!(
                    "User {user} is not in group {group}."
                ))),
            }
        })
        .await
        .map(|_| ())
    }

    // ---- managed policies ----

    pub async fn create_policy(
        &self,
        name: &str,
        path: Option<&str>,
        description: &str,
        doc: &str,
    ) -> IamResult<(ManagedPolicy, PolicyConfig)> {
        check_iam_name("policy", name, 128)?;
        let path = path.unwrap_or("/");
        check_path(path)?;
        check_document(doc)?;
        let c = PolicyConfig {
            id: new_id("ANPA", 17),
            path: path.to_string(),
            description: description.to_string(),
            document: doc.to_string(),
        };
        self.create(&self.policies, "A policy", name, c).await?;
        self.policy_by_name(name).await
    }

    async fn policy_by_name(&self, name: &str) -> IamResult<(ManagedPolicy, PolicyConfig)> {
        Self::live(&self.policies, "policy", name).await
    }

    /// A managed policy by ARN: a built-in one (`arn:aws:iam::aws:policy/…`)
    /// or one of the table. Built-in ones have no table entry.
    pub async fn policy(&self, arn: &str) -> IamResult<(String, u64, PolicyConfig)> {
        if let Some(b) = builtin::by_arn(arn) {
            return Ok((b.name.to_string(), 0, b.config()));
        }
        let name = policy_name_of_arn(arn).ok_or_else(|| {
            IamError::InvalidInput(format!(
                "{arn:?} is not a policy's ARN (arn:aws:iam:::policy/NAME)"
            ))
        })?;
        let missing =
            || IamError::NoSuchEntity(format!("Policy {arn} does not exist or is not attachable."));
        let (e, c) = self.policy_by_name(name).await.map_err(|_| missing())?;
        // Only its own ARN names it (not another path or account): a
        // policy about that ARN must hold for every way of naming it.
        if arn != self::arn("policy", &c.path, &e.name) {
            return Err(missing());
        }
        Ok((e.name, e.created, c))
    }

    pub async fn list_policies(&self) -> IamResult<Vec<(ManagedPolicy, PolicyConfig)>> {
        Self::all(&self.policies).await
    }

    /// How many users, groups and roles `arn` is attached to.
    pub async fn attachments(&self, arn: &str) -> IamResult<usize> {
        let users = Self::all(&self.users).await?;
        let groups = Self::all(&self.groups).await?;
        let roles = Self::all(&self.roles).await?;
        let n = |attached: &mut dyn Iterator<Item = &BTreeSet<String>>| {
            attached.filter(|a| a.contains(arn)).count()
        };
        Ok(n(&mut users.iter().map(|(_, c)| &c.attached))
            + n(&mut groups.iter().map(|(_, c)| &c.attached))
            + n(&mut roles.iter().map(|(_, c)| &c.attached)))
    }

    pub async fn delete_policy(&self, arn: &str) -> IamResult<()> {
        self.gate()?;
        if builtin::by_arn(arn).is_some() {
            return Err(IamError::InvalidInput(format!(
                "{arn} is built in and cannot be deleted"
            )));
        }
        let (name, _, _) = self.policy(arn).await?;
        if self.attachments(arn).await? > 0 {
            return Err(IamError::DeleteConflict(format!(
                "Cannot delete a policy attached to entities ({arn})."
            )));
        }
        let (e, _) = self.policy_by_name(&name).await?;
        self.clear(&self.policies, e).await
    }
}

pub(crate) fn no_policy(name: &str) -> IamError {
    IamError::NoSuchEntity(format!("The policy with name {name} cannot be found."))
}

pub(crate) fn attach(set: &mut BTreeSet<String>, arn: &str) -> IamResult<()> {
    set.insert(arn.to_string());
    match set.len() > MAX_ATTACHED {
        true => Err(IamError::LimitExceeded(format!(
            "Cannot exceed quota for PoliciesPerUser/Group: {MAX_ATTACHED}"
        ))),
        false => Ok(()),
    }
}

pub(crate) fn detach(set: &mut BTreeSet<String>, arn: &str) -> IamResult<()> {
    match set.remove(arn) {
        true => Ok(()),
        false => Err(IamError::NoSuchEntity(format!(
            "Policy {arn} was not attached."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_ids_and_arns() {
        assert!(check_iam_name("user", "alice.b@x", 64).is_ok());
        assert!(check_iam_name("user", "a b", 64).is_err());
        assert!(check_iam_name("user", "", 64).is_err());
        assert!(check_path("/").is_ok());
        assert!(check_path("/team/").is_ok());
        assert!(check_path("team").is_err());
        let id = new_id("AKIA", 16);
        assert_eq!(id.len(), 20);
        assert!(is_iam_key(&id));
        assert!(!is_iam_key("GK0123"));
        assert_eq!(arn("user", "/", "alice"), "arn:aws:iam:::user/alice");
        assert_eq!(
            policy_name_of_arn("arn:aws:iam:::policy/team/p1"),
            Some("p1")
        );
        assert_eq!(
            policy_name_of_arn("arn:aws:iam::aws:policy/AdministratorAccess"),
            None
        );
        assert!(check_document(
            r#"{"Statement":{"Effect":"Allow","Action":"s3:*","Resource":"*"}}"#
        )
        .is_ok());
        assert!(matches!(
            check_document(r#"{"Statement":{"Effect":"Allow","Action":"s3:*","Resource":"*","Condition":{"StringEquals":{"x:y":"z"}}}}"#),
            Err(IamError::MalformedPolicyDocument(m)) if m.contains("x:y")
        ));
    }
}
