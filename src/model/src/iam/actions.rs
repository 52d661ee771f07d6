//! The IAM actions by name, with AWS's parameters and the shape of AWS's
//! answers: one dispatcher that both the IAM API on the S3 endpoint
//! (form parameters in, XML out) and the admin API (`garage iam …`: JSON
//! in and out) serve. Who may call an action is decided by the caller of
//! [`call`], on the action's name and [`resource`].

use std::collections::BTreeMap;

use super::holders::HolderKind;
use super::tables::{GroupConfig, PolicyConfig, RoleConfig};
use super::{arn, builtin, Iam, IamError, IamResult, UserInfo};

/// An answer: text, a structure of named fields, or a list (`member`
/// elements in XML, an array in JSON).
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Text(String),
    Struct(Vec<(&'static str, Out)>),
    List(Vec<Out>),
}

fn t(s: impl Into<String>) -> Out {
    Out::Text(s.into())
}

/// The parameters of a call (`Tags.member.1.Key`, … kept flat).
pub type Params = BTreeMap<String, String>;

/// The actions served.
pub const ACTIONS: &[&str] = &[
    "CreateUser",
    "GetUser",
    "ListUsers",
    "DeleteUser",
    "SetUserEnabled",
    "TagUser",
    "UntagUser",
    "ListUserTags",
    "CreateAccessKey",
    "ListAccessKeys",
    "DeleteAccessKey",
    "UpdateAccessKey",
    "CreateGroup",
    "GetGroup",
    "ListGroups",
    "DeleteGroup",
    "AddUserToGroup",
    "RemoveUserFromGroup",
    "ListGroupsForUser",
    "PutUserPolicy",
    "GetUserPolicy",
    "DeleteUserPolicy",
    "ListUserPolicies",
    "PutGroupPolicy",
    "GetGroupPolicy",
    "DeleteGroupPolicy",
    "ListGroupPolicies",
    "CreatePolicy",
    "GetPolicy",
    "GetPolicyVersion",
    "ListPolicies",
    "DeletePolicy",
    "AttachUserPolicy",
    "DetachUserPolicy",
    "ListAttachedUserPolicies",
    "AttachGroupPolicy",
    "DetachGroupPolicy",
    "ListAttachedGroupPolicies",
    "CreateRole",
    "GetRole",
    "ListRoles",
    "DeleteRole",
    "UpdateAssumeRolePolicy",
    "SetRoleEnabled",
    "PutRolePolicy",
    "GetRolePolicy",
    "DeleteRolePolicy",
    "ListRolePolicies",
    "AttachRolePolicy",
    "DetachRolePolicy",
    "ListAttachedRolePolicies",
    "CreateOpenIDConnectProvider",
    "GetOpenIDConnectProvider",
    "ListOpenIDConnectProviders",
    "DeleteOpenIDConnectProvider",
];

fn need<'p>(p: &'p Params, name: &str) -> IamResult<&'p str> {
    p.get(name)
        .map(String::as_str)
        .ok_or_else(|| IamError::InvalidInput(format!("the parameter {name} is required")))
}

/// The user an action is about: `UserName`, or the caller's own (AWS's
/// default for GetUser and the access key actions).
fn user_param<'p>(p: &'p Params, caller: Option<&'p str>) -> IamResult<&'p str> {
    match p.get("UserName") {
        Some(u) => Ok(u),
        None => caller.ok_or_else(|| {
            IamError::InvalidInput(
                "the parameter UserName is required (the caller is not an IAM user)".into(),
            )
        }),
    }
}

/// The `Prefix.member.N.suffix` values of `p`, in N's order.
fn members(p: &Params, prefix: &str, suffix: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = p
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(prefix)?.strip_prefix(".member.")?;
            let n = match suffix {
                "" => rest,
                s => rest.strip_suffix(s)?.strip_suffix('.')?,
            };
            Some((n.parse().ok()?, v.clone()))
        })
        .collect();
    out.sort();
    out
}

fn tags_param(p: &Params) -> IamResult<BTreeMap<String, String>> {
    let keys = members(p, "Tags", "Key");
    let values: BTreeMap<usize, String> = members(p, "Tags", "Value").into_iter().collect();
    keys.into_iter()
        .map(|(n, k)| Ok((k, values.get(&n).cloned().unwrap_or_default())))
        .collect()
}

/// The resource an action is about, for the caller's policies: the ARN
/// of the user, group, role or policy with its stored path (the `Path`
/// given to a Create…), as the entity's own ARN is the only name a policy
/// about it sees.
pub async fn resource(iam: &Iam, action: &str, p: &Params, caller: Option<&str>) -> String {
    let name = |k: &str| p.get(k).cloned().unwrap_or_default();
    let given_path = p.get("Path").map_or("/", String::as_str);
    match action {
        "ListUsers" => arn("user", "/", ""),
        "ListGroups" => arn("group", "/", ""),
        "ListPolicies" => arn("policy", "/", ""),
        "ListRoles" => arn("role", "/", ""),
        "ListOpenIDConnectProviders" | "CreateOpenIDConnectProvider" => {
            arn("oidc-provider", "/", "")
        }
        "GetOpenIDConnectProvider" | "DeleteOpenIDConnectProvider" => {
            name("OpenIDConnectProviderArn")
        }
        a if a.contains("Role") => {
            let n = name("RoleName");
            match iam.role(&n).await {
                Ok((_, c)) => arn("role", &c.path, &n),
                Err(_) => arn("role", given_path, &n),
            }
        }
        "CreatePolicy" => arn("policy", given_path, &name("PolicyName")),
        a if a.contains("Group") && !a.ends_with("ForUser") => {
            let n = name("GroupName");
            match iam.group(&n).await {
                Ok((_, c)) => arn("group", &c.path, &n),
                Err(_) => arn("group", given_path, &n),
            }
        }
        "GetPolicy" | "GetPolicyVersion" | "DeletePolicy" => name("PolicyArn"),
        _ => {
            let n = user_param(p, caller).unwrap_or_default().to_string();
            match iam.user(&n).await {
                Ok((_, c)) => arn("user", &c.path, &n),
                Err(_) => arn("user", given_path, &n),
            }
        }
    }
}

fn date(ms: u64) -> Out {
    let ts = jiff::Timestamp::from_millisecond(ms as i64).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    t(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn user_out((u, c): &UserInfo) -> Out {
    let mut f = vec![
        ("Path", t(&c.path)),
        ("UserName", t(&u.name)),
        ("UserId", t(&c.id)),
        ("Arn", t(arn("user", &c.path, &u.name))),
        ("CreateDate", date(u.created)),
        // garage's: whether its keys work (`SetUserEnabled`).
        ("Enabled", t(if c.enabled { "true" } else { "false" })),
    ];
    if !c.tags.is_empty() {
        f.push(("Tags", tags_out(&c.tags)));
    }
    Out::Struct(f)
}

fn tags_out(tags: &BTreeMap<String, String>) -> Out {
    Out::List(
        tags.iter()
            .map(|(k, v)| Out::Struct(vec![("Key", t(k)), ("Value", t(v))]))
            .collect(),
    )
}

fn group_out(name: &str, created: u64, c: &GroupConfig) -> Out {
    Out::Struct(vec![
        ("Path", t(&c.path)),
        ("GroupName", t(name)),
        ("GroupId", t(&c.id)),
        ("Arn", t(arn("group", &c.path, name))),
        ("CreateDate", date(created)),
    ])
}

fn role_out(name: &str, created: u64, c: &RoleConfig) -> Out {
    Out::Struct(vec![
        ("Path", t(&c.path)),
        ("RoleName", t(name)),
        ("RoleId", t(&c.id)),
        ("Arn", t(arn("role", &c.path, name))),
        ("CreateDate", date(created)),
        ("AssumeRolePolicyDocument", document(&c.trust)),
        ("Description", t(&c.description)),
        ("MaxSessionDuration", t(c.max_session_secs.to_string())),
        // garage's: whether it may be assumed (`SetRoleEnabled`).
        ("Enabled", t(if c.enabled { "true" } else { "false" })),
    ])
}

/// An OpenID Connect provider's ARN.
pub fn provider_arn(name: &str) -> String {
    format!("arn:aws:iam:::oidc-provider/{name}")
}

/// The provider its own ARN names (no account, as [`provider_arn`]).
fn provider_of_arn(a: &str) -> IamResult<&str> {
    a.strip_prefix("arn:aws:iam:::oidc-provider/")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            IamError::InvalidInput(format!("{a:?} is not an OpenID Connect provider's ARN"))
        })
}

fn enabled_param(p: &Params) -> IamResult<bool> {
    match need(p, "Enabled")? {
        "true" => Ok(true),
        "false" => Ok(false),
        e => Err(IamError::InvalidInput(format!(
            "Enabled {e:?}: true or false"
        ))),
    }
}

fn policy_out(
    name: &str,
    policy_arn: &str,
    created: u64,
    c: &PolicyConfig,
    attached: usize,
) -> Out {
    Out::Struct(vec![
        ("PolicyName", t(name)),
        ("PolicyId", t(&c.id)),
        ("Arn", t(policy_arn)),
        ("Path", t(&c.path)),
        ("DefaultVersionId", t("v1")),
        ("AttachmentCount", t(attached.to_string())),
        ("IsAttachable", t("true")),
        ("Description", t(&c.description)),
        ("CreateDate", date(created)),
        ("UpdateDate", date(created)),
    ])
}

/// A policy document as AWS gives it back: URL-encoded (the SDKs decode
/// it).
fn document(d: &str) -> Out {
    t(percent_encoding::utf8_percent_encode(d, percent_encoding::NON_ALPHANUMERIC).to_string())
}

fn names(v: impl IntoIterator<Item = String>) -> Out {
    Out::List(v.into_iter().map(Out::Text).collect())
}

fn untruncated(mut f: Vec<(&'static str, Out)>) -> Out {
    f.push(("IsTruncated", t("false")));
    Out::Struct(f)
}

async fn attached_out(iam: &Iam, arns: &std::collections::BTreeSet<String>) -> IamResult<Out> {
    let mut out = Vec::new();
    for a in arns {
        let name = match iam.policy(a).await {
            Ok((n, _, _)) => n,
            Err(IamError::NoSuchEntity(_)) => continue,
            Err(e) => return Err(e),
        };
        out.push(Out::Struct(vec![
            ("PolicyName", t(name)),
            ("PolicyArn", t(a)),
        ]));
    }
    Ok(Out::List(out))
}

/// Runs `action` with parameters `p` for a caller whose IAM user is
/// `caller` (`None`: an operator, or a key of its own). `Ok(None)`: an
/// action with no result.
pub async fn call(
    iam: &Iam,
    action: &str,
    p: &Params,
    caller: Option<&str>,
) -> IamResult<Option<Out>> {
    let one = |name: &'static str, o: Out| Ok(Some(Out::Struct(vec![(name, o)])));
    match action {
        "CreateUser" => {
            let u = iam
                .create_user(
                    need(p, "UserName")?,
                    p.get("Path").map(String::as_str),
                    tags_param(p)?,
                )
                .await?;
            one("User", user_out(&u))
        }
        "GetUser" => one("User", user_out(&iam.user(user_param(p, caller)?).await?)),
        "ListUsers" => {
            let all = iam
                .list_users(p.get("PathPrefix").map_or("/", String::as_str))
                .await?;
            Ok(Some(untruncated(vec![(
                "Users",
                Out::List(all.iter().map(user_out).collect()),
            )])))
        }
        "DeleteUser" => iam.delete_user(need(p, "UserName")?).await.map(|_| None),
        // garage's own: disabling a user refuses all its keys at once.
        "SetUserEnabled" => iam
            .set_user_enabled(need(p, "UserName")?, enabled_param(p)?)
            .await
            .map(|_| None),
        "TagUser" => iam
            .tag_user(need(p, "UserName")?, tags_param(p)?)
            .await
            .map(|_| None),
        "UntagUser" => {
            let keys: Vec<String> = members(p, "TagKeys", "")
                .into_iter()
                .map(|(_, k)| k)
                .collect();
            iam.untag_user(need(p, "UserName")?, &keys)
                .await
                .map(|_| None)
        }
        "ListUserTags" => {
            let (_, c) = iam.user(need(p, "UserName")?).await?;
            Ok(Some(untruncated(vec![("Tags", tags_out(&c.tags))])))
        }
        "CreateAccessKey" => {
            let user = user_param(p, caller)?;
            let (id, secret) = iam.create_access_key(user).await?;
            one(
                "AccessKey",
                Out::Struct(vec![
                    ("UserName", t(user)),
                    ("AccessKeyId", t(id)),
                    ("Status", t("Active")),
                    ("SecretAccessKey", t(secret)),
                    ("CreateDate", date(garage_util::time::now_msec())),
                ]),
            )
        }
        "ListAccessKeys" => {
            let user = user_param(p, caller)?;
            iam.user(user).await?;
            let keys = iam.list_access_keys(user).await?;
            let list = keys
                .into_iter()
                .map(|(id, active, created)| {
                    Out::Struct(vec![
                        ("UserName", t(user)),
                        ("AccessKeyId", t(id)),
                        ("Status", t(if active { "Active" } else { "Inactive" })),
                        ("CreateDate", date(created)),
                    ])
                })
                .collect();
            Ok(Some(untruncated(vec![(
                "AccessKeyMetadata",
                Out::List(list),
            )])))
        }
        "DeleteAccessKey" => iam
            .delete_access_key(user_param(p, caller)?, need(p, "AccessKeyId")?)
            .await
            .map(|_| None),
        "UpdateAccessKey" => {
            let active = match need(p, "Status")? {
                "Active" => true,
                "Inactive" => false,
                s => {
                    return Err(IamError::InvalidInput(format!(
                        "Status {s:?}: Active or Inactive"
                    )))
                }
            };
            iam.update_access_key(user_param(p, caller)?, need(p, "AccessKeyId")?, active)
                .await
                .map(|_| None)
        }
        "CreateGroup" => {
            let (g, c) = iam
                .create_group(need(p, "GroupName")?, p.get("Path").map(String::as_str))
                .await?;
            one("Group", group_out(&g.name, g.created, &c))
        }
        "GetGroup" => {
            let (g, c) = iam.group(need(p, "GroupName")?).await?;
            let users = iam.members(&g.name).await?;
            Ok(Some(untruncated(vec![
                ("Group", group_out(&g.name, g.created, &c)),
                ("Users", Out::List(users.iter().map(user_out).collect())),
            ])))
        }
        "ListGroups" => {
            let all = iam
                .list_groups(p.get("PathPrefix").map_or("/", String::as_str))
                .await?;
            let list = all
                .iter()
                .map(|(g, c)| group_out(&g.name, g.created, c))
                .collect();
            Ok(Some(untruncated(vec![("Groups", Out::List(list))])))
        }
        "DeleteGroup" => iam.delete_group(need(p, "GroupName")?).await.map(|_| None),
        "AddUserToGroup" => iam
            .add_user_to_group(need(p, "GroupName")?, need(p, "UserName")?)
            .await
            .map(|_| None),
        "RemoveUserFromGroup" => iam
            .remove_user_from_group(need(p, "GroupName")?, need(p, "UserName")?)
            .await
            .map(|_| None),
        "ListGroupsForUser" => {
            let (_, c) = iam.user(need(p, "UserName")?).await?;
            let mut list = Vec::new();
            for g in &c.groups {
                if let Ok((e, gc)) = iam.group(g).await {
                    list.push(group_out(&e.name, e.created, &gc));
                }
            }
            Ok(Some(untruncated(vec![("Groups", Out::List(list))])))
        }
        a @ ("PutUserPolicy" | "PutGroupPolicy" | "PutRolePolicy") => {
            let (kind, param) = HolderKind::of_action(a);
            iam.put_inline(
                kind,
                need(p, param)?,
                need(p, "PolicyName")?,
                need(p, "PolicyDocument")?,
            )
            .await
            .map(|_| None)
        }
        a @ ("GetUserPolicy" | "GetGroupPolicy" | "GetRolePolicy") => {
            let (kind, param) = HolderKind::of_action(a);
            let (holder, name) = (need(p, param)?, need(p, "PolicyName")?);
            let (inline, _) = iam.holder_policies(kind, holder).await?;
            let d = inline.get(name).ok_or_else(|| super::no_policy(name))?;
            Ok(Some(Out::Struct(vec![
                (param, t(holder)),
                ("PolicyName", t(name)),
                ("PolicyDocument", document(d)),
            ])))
        }
        a @ ("DeleteUserPolicy" | "DeleteGroupPolicy" | "DeleteRolePolicy") => {
            let (kind, param) = HolderKind::of_action(a);
            iam.delete_inline(kind, need(p, param)?, need(p, "PolicyName")?)
                .await
                .map(|_| None)
        }
        a @ ("ListUserPolicies" | "ListGroupPolicies" | "ListRolePolicies") => {
            let (kind, param) = HolderKind::of_action(a);
            let (inline, _) = iam.holder_policies(kind, need(p, param)?).await?;
            Ok(Some(untruncated(vec![(
                "PolicyNames",
                names(inline.into_keys()),
            )])))
        }
        a @ ("AttachUserPolicy" | "AttachGroupPolicy" | "AttachRolePolicy") => {
            let (kind, param) = HolderKind::of_action(a);
            iam.attach(kind, need(p, param)?, need(p, "PolicyArn")?)
                .await
                .map(|_| None)
        }
        a @ ("DetachUserPolicy" | "DetachGroupPolicy" | "DetachRolePolicy") => {
            let (kind, param) = HolderKind::of_action(a);
            iam.detach(kind, need(p, param)?, need(p, "PolicyArn")?)
                .await
                .map(|_| None)
        }
        a @ ("ListAttachedUserPolicies"
        | "ListAttachedGroupPolicies"
        | "ListAttachedRolePolicies") => {
            let (kind, param) = HolderKind::of_action(a);
            let (_, attached) = iam.holder_policies(kind, need(p, param)?).await?;
            Ok(Some(untruncated(vec![(
                "AttachedPolicies",
                attached_out(iam, &attached).await?,
            )])))
        }
        "CreatePolicy" => {
            let (e, c) = iam
                .create_policy(
                    need(p, "PolicyName")?,
                    p.get("Path").map(String::as_str),
                    p.get("Description").map_or("", String::as_str),
                    need(p, "PolicyDocument")?,
                )
                .await?;
            let a = arn("policy", &c.path, &e.name);
            one("Policy", policy_out(&e.name, &a, e.created, &c, 0))
        }
        "GetPolicy" => {
            let a = need(p, "PolicyArn")?;
            let (name, created, c) = iam.policy(a).await?;
            let n = iam.attachments(a).await?;
            one("Policy", policy_out(&name, a, created, &c, n))
        }
        "GetPolicyVersion" => {
            let a = need(p, "PolicyArn")?;
            if need(p, "VersionId")? != "v1" {
                return Err(IamError::NoSuchEntity(format!(
                    "Policy {a} has one version, v1"
                )));
            }
            let (_, _, c) = iam.policy(a).await?;
            one(
                "PolicyVersion",
                Out::Struct(vec![
                    ("Document", document(&c.document)),
                    ("VersionId", t("v1")),
                    ("IsDefaultVersion", t("true")),
                ]),
            )
        }
        "ListPolicies" => {
            let scope = p.get("Scope").map_or("All", String::as_str);
            let mut list = Vec::new();
            if scope != "Local" {
                for b in builtin::BUILTIN {
                    let a = b.arn();
                    let n = iam.attachments(&a).await?;
                    list.push(policy_out(b.name, &a, 0, &b.config(), n));
                }
            }
            if scope != "AWS" {
                for (e, c) in iam.list_policies().await? {
                    let a = arn("policy", &c.path, &e.name);
                    let n = iam.attachments(&a).await?;
                    list.push(policy_out(&e.name, &a, e.created, &c, n));
                }
            }
            Ok(Some(untruncated(vec![("Policies", Out::List(list))])))
        }
        "DeletePolicy" => iam.delete_policy(need(p, "PolicyArn")?).await.map(|_| None),
        "CreateRole" => {
            let max = match p.get("MaxSessionDuration") {
                Some(m) => Some(m.parse().map_err(|_| {
                    IamError::InvalidInput(format!("MaxSessionDuration {m:?} is not a number"))
                })?),
                None => None,
            };
            let (r, c) = iam
                .create_role(
                    need(p, "RoleName")?,
                    p.get("Path").map(String::as_str),
                    p.get("Description").map_or("", String::as_str),
                    need(p, "AssumeRolePolicyDocument")?,
                    max,
                )
                .await?;
            one("Role", role_out(&r.name, r.created, &c))
        }
        "GetRole" => {
            let (r, c) = iam.role(need(p, "RoleName")?).await?;
            one("Role", role_out(&r.name, r.created, &c))
        }
        "ListRoles" => {
            let all = iam
                .list_roles(p.get("PathPrefix").map_or("/", String::as_str))
                .await?;
            let list = all
                .iter()
                .map(|(r, c)| role_out(&r.name, r.created, c))
                .collect();
            Ok(Some(untruncated(vec![("Roles", Out::List(list))])))
        }
        "DeleteRole" => iam.delete_role(need(p, "RoleName")?).await.map(|_| None),
        "UpdateAssumeRolePolicy" => iam
            .update_trust(need(p, "RoleName")?, need(p, "PolicyDocument")?)
            .await
            .map(|_| None),
        // garage's own: disabling a role refuses its sessions at once.
        "SetRoleEnabled" => iam
            .set_role_enabled(need(p, "RoleName")?, enabled_param(p)?)
            .await
            .map(|_| None),
        "CreateOpenIDConnectProvider" => {
            let ids = members(p, "ClientIDList", "")
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            let name = iam.create_provider(need(p, "Url")?, ids).await?;
            one("OpenIDConnectProviderArn", t(provider_arn(&name)))
        }
        "GetOpenIDConnectProvider" => {
            let (e, c) = iam
                .provider(provider_of_arn(need(p, "OpenIDConnectProviderArn")?)?)
                .await?;
            Ok(Some(Out::Struct(vec![
                ("Url", t(&c.url)),
                ("ClientIDList", names(c.client_ids.into_iter())),
                ("ThumbprintList", Out::List(vec![])),
                ("CreateDate", date(e.created)),
            ])))
        }
        "ListOpenIDConnectProviders" => {
            let all = iam.list_providers().await?;
            let list = all
                .iter()
                .map(|(e, _)| Out::Struct(vec![("Arn", t(provider_arn(&e.name)))]))
                .collect();
            Ok(Some(Out::Struct(vec![(
                "OpenIDConnectProviderList",
                Out::List(list),
            )])))
        }
        "DeleteOpenIDConnectProvider" => iam
            .delete_provider(provider_of_arn(need(p, "OpenIDConnectProviderArn")?)?)
            .await
            .map(|_| None),
        other => Err(IamError::InvalidAction(format!(
            "action {other:?} is not served (served: {})",
            ACTIONS.join(", ")
        ))),
    }
}

impl Out {
    /// As JSON (the admin API's answer).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Out::Text(s) => serde_json::Value::String(s.clone()),
            Out::List(l) => serde_json::Value::Array(l.iter().map(Out::to_json).collect()),
            Out::Struct(f) => serde_json::Value::Object(
                f.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_and_tags_are_read_in_order() {
        let p: Params = [
            ("Tags.member.2.Key", "b"),
            ("Tags.member.2.Value", "2"),
            ("Tags.member.1.Key", "a"),
            ("Tags.member.1.Value", "1"),
            ("TagKeys.member.1", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let tags = tags_param(&p).unwrap();
        assert_eq!(tags.get("a").map(String::as_str), Some("1"));
        assert_eq!(tags.get("b").map(String::as_str), Some("2"));
        assert_eq!(members(&p, "TagKeys", ""), vec![(1, "x".to_string())]);
    }
}
