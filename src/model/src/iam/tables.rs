//! The IAM tables, each one partition held by every node (every
//! request reads them, locally): users (`iam_user`), groups
//! (`iam_group`), managed policies (`iam_policy`), which user each
//! access key made by IAM belongs to (`iam_access_key`, by key id; the
//! key itself, with its secret, is in the key table), roles
//! (`iam_role`), OpenID Connect providers (`iam_oidc_provider`) and the
//! sessions of roles (`iam_session`, by the session key's id; its key and
//! secret are in the key table too).
//!
//! Each entry is a [`Named`] configuration: a last-writer-wins register
//! that deletion clears, so a node that missed a deletion cannot bring it
//! back and making the entry again sets a new one.

use std::collections::{BTreeMap, BTreeSet};

use garage_table::{EmptyKey, Replication, TableSchema};
use serde::{Deserialize, Serialize};

use crate::named_table::{LiveFilter, Named};

/// An IAM user: its name, when it was made, its configuration.
pub type User = Named<UserConfig>;
/// An IAM group.
pub type Group = Named<GroupConfig>;
/// A managed policy (attached to users and groups by ARN).
pub type ManagedPolicy = Named<PolicyConfig>;
/// An access key made by IAM, by its id.
pub type AccessKey = Named<AccessKeyConfig>;
/// A role (assumed through STS).
pub type Role = Named<RoleConfig>;
/// An OpenID Connect provider, by name (its URL without `https://`).
pub type OidcProvider = Named<OidcProviderConfig>;
/// A session of a role: temporary credentials, by access key id.
pub type Session = Named<SessionConfig>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UserConfig {
    /// `aws:userid`: `AIDA` and 17 characters, fixed at creation.
    pub id: String,
    /// `/` or `/division/team/` (part of its ARN).
    pub path: String,
    /// A disabled user's keys are refused (garage's revocation switch:
    /// `garage iam set-user-enabled --user-name NAME --enabled false`).
    pub enabled: bool,
    /// Inline policies: name → document.
    pub policies: BTreeMap<String, String>,
    /// Managed policies attached, by ARN.
    pub attached: BTreeSet<String>,
    /// The groups it is in, by name.
    pub groups: BTreeSet<String>,
    /// `aws:PrincipalTag/…`.
    pub tags: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupConfig {
    /// `AGPA` and 17 characters, fixed at creation.
    pub id: String,
    pub path: String,
    pub policies: BTreeMap<String, String>,
    pub attached: BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// `ANPA` and 17 characters, fixed at creation.
    pub id: String,
    pub path: String,
    pub description: String,
    /// The policy document (one version: `v1`).
    pub document: String,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AccessKeyConfig {
    /// The user it belongs to.
    pub user: String,
    /// `Inactive` keys are refused (UpdateAccessKey).
    pub active: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoleConfig {
    /// `AROA` and 17 characters, fixed at creation.
    pub id: String,
    pub path: String,
    pub description: String,
    /// Who may assume it (AssumeRolePolicyDocument).
    pub trust: String,
    pub policies: BTreeMap<String, String>,
    pub attached: BTreeSet<String>,
    /// The longest session, in seconds (3600 to 43200; 3600 by default).
    pub max_session_secs: u64,
    /// A disabled role's sessions are refused, and it cannot be assumed
    /// (garage's revocation switch: `SetRoleEnabled`).
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OidcProviderConfig {
    /// The issuer's URL (`https://auth.example.org/realms/x`): tokens'
    /// `iss`, and where discovery starts.
    pub url: String,
    /// The audiences (`aud`) taken: OAuth client ids.
    pub client_ids: BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionConfig {
    pub role: String,
    /// The role's id: a role deleted and made again under the same name
    /// is another role, whose sessions these are not.
    pub role_id: String,
    pub session_name: String,
    /// Cluster time (ms) it was issued at and expires at.
    pub issued: u64,
    pub expires: u64,
    /// SHA-256 of its session token (hex): requests carry the token.
    pub token_sha256: String,
    /// A session policy given to AssumeRole…: it can only narrow the
    /// role's.
    pub policy: Option<String>,
    /// The IAM user that assumed the role (AssumeRole), and its id.
    pub user: Option<String>,
    pub user_id: Option<String>,
    /// The OpenID Connect provider that vouched for the web identity
    /// (AssumeRoleWithWebIdentity), and the token's text claims.
    pub provider: Option<String>,
    pub claims: BTreeMap<String, String>,
}

macro_rules! named_table {
    ($schema:ident, $name:literal, $entry:ty, $doc:literal) => {
        #[doc = $doc]
        pub struct $schema;

        impl TableSchema for $schema {
            const TABLE_NAME: &'static str = $name;
            /// Read by every request on every node.
            const REPLICATION: Replication = Replication::Full;
            type P = EmptyKey;
            type S = String;
            type E = $entry;
            type Filter = LiveFilter;

            fn matches_filter(entry: &$entry, filter: &LiveFilter) -> bool {
                filter.matches(entry)
            }
        }
    };
}

named_table!(UserTable, "iam_user", User, "The IAM users, by name.");
named_table!(GroupTable, "iam_group", Group, "The IAM groups, by name.");
named_table!(
    PolicyTable,
    "iam_policy",
    ManagedPolicy,
    "The managed policies, by name."
);
named_table!(RoleTable, "iam_role", Role, "The IAM roles, by name.");
named_table!(
    OidcProviderTable,
    "iam_oidc_provider",
    OidcProvider,
    "The OpenID Connect providers, by name."
);
named_table!(
    SessionTable,
    "iam_session",
    Session,
    "The sessions of roles (temporary credentials), by access key id."
);
named_table!(
    AccessKeyTable,
    "iam_access_key",
    AccessKey,
    "The owners of the access keys made by IAM, by key id."
);
