//! Users, groups and roles hold policies the same way: inline ones (a
//! name and a document) and attached managed ones (by ARN). One set of
//! operations serves the three (Put/Get/Delete/List…Policy and
//! Attach/Detach/ListAttached…Policies of each).

use std::collections::{BTreeMap, BTreeSet};

use super::tables::{GroupConfig, RoleConfig, UserConfig};
use super::{attach, check_document, check_iam_name, detach, no_policy};
use super::{Iam, IamResult};

/// Which kind of entity holds the policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderKind {
    User,
    Group,
    Role,
}

impl HolderKind {
    /// The kind an action is about (`PutGroupPolicy`: a group), and the
    /// parameter naming it (`GroupName`).
    pub fn of_action(action: &str) -> (Self, &'static str) {
        if action.contains("Group") {
            (HolderKind::Group, "GroupName")
        } else if action.contains("Role") {
            (HolderKind::Role, "RoleName")
        } else {
            (HolderKind::User, "UserName")
        }
    }
}

/// An entity's policies, whatever its kind.
pub trait Holder {
    fn policies(&mut self) -> &mut BTreeMap<String, String>;
    fn attached(&mut self) -> &mut BTreeSet<String>;
}

macro_rules! holder {
    ($t:ty) => {
        impl Holder for $t {
            fn policies(&mut self) -> &mut BTreeMap<String, String> {
                &mut self.policies
            }
            fn attached(&mut self) -> &mut BTreeSet<String> {
                &mut self.attached
            }
        }
    };
}
holder!(UserConfig);
holder!(GroupConfig);
holder!(RoleConfig);

impl Iam {
    /// Changes the policies of entity `name` of kind `kind` with `f`.
    async fn change_holder(
        &self,
        kind: HolderKind,
        name: &str,
        f: impl FnOnce(&mut dyn Holder) -> IamResult<()>,
    ) -> IamResult<()> {
        match kind {
            HolderKind::User => self
                .change(&self.users, "user", name, |c| f(c))
                .await
                .map(drop),
            HolderKind::Group => self
                .change(&self.groups, "group", name, |c| f(c))
                .await
                .map(drop),
            HolderKind::Role => self
                .change(&self.roles, "role", name, |c| f(c))
                .await
                .map(drop),
        }
    }

    /// The inline and attached policies of entity `name` of kind `kind`.
    pub async fn holder_policies(
        &self,
        kind: HolderKind,
        name: &str,
    ) -> IamResult<(BTreeMap<String, String>, BTreeSet<String>)> {
        Ok(match kind {
            HolderKind::User => {
                let (_, c) = self.user(name).await?;
                (c.policies, c.attached)
            }
            HolderKind::Group => {
                let (_, c) = self.group(name).await?;
                (c.policies, c.attached)
            }
            HolderKind::Role => {
                let (_, c) = self.role(name).await?;
                (c.policies, c.attached)
            }
        })
    }

    pub async fn put_inline(
        &self,
        kind: HolderKind,
        holder: &str,
        name: &str,
        doc: &str,
    ) -> IamResult<()> {
        check_iam_name("policy", name, 128)?;
        check_document(doc)?;
        self.change_holder(kind, holder, |h| {
            h.policies().insert(name.to_string(), doc.to_string());
            Ok(())
        })
        .await
    }

    pub async fn delete_inline(&self, kind: HolderKind, holder: &str, name: &str) -> IamResult<()> {
        self.change_holder(kind, holder, |h| match h.policies().remove(name) {
            Some(_) => Ok(()),
            None => Err(no_policy(name)),
        })
        .await
    }

    /// Attaches managed policy `arn` (its own ARN only, see
    /// [`Iam::policy`]).
    pub async fn attach(&self, kind: HolderKind, holder: &str, arn: &str) -> IamResult<()> {
        self.policy(arn).await?;
        self.change_holder(kind, holder, |h| attach(h.attached(), arn))
            .await
    }

    pub async fn detach(&self, kind: HolderKind, holder: &str, arn: &str) -> IamResult<()> {
        self.change_holder(kind, holder, |h| detach(h.attached(), arn))
            .await
    }
}
