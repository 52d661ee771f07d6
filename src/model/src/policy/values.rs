//! What a request says about itself to a policy: the values of the
//! condition keys (`aws:SourceIp`, `s3:prefix`, `aws:username`, …) and
//! of the policy variables (`${aws:username}`), which are the same keys.
//!
//! Which keys exist is [`known_key`]'s list: a policy naming another key
//! is refused when it is put, never evaluated with the key missing (a
//! condition that could never hold would turn a Deny into nothing).

use std::collections::HashMap;
use std::net::IpAddr;

/// Who is asking, as far as policies can tell.
#[derive(Clone, Debug, Default)]
pub struct Principal {
    /// The access key id that signed the request; `None`: anonymous.
    pub key_id: Option<String>,
    /// The IAM user the key belongs to (`None`: a key of its own, made
    /// before users existed, a role's session, or anonymous).
    pub user: Option<UserPrincipal>,
    /// A role's session (temporary credentials from STS), or a web
    /// identity asking to assume a role.
    pub session: Option<SessionPrincipal>,
}

/// A session of a role, as `aws:userid` (`ROLEID:SESSION`),
/// `aws:PrincipalArn` (the role's ARN) and the web identity's claims
/// (`PROVIDER:sub`, `PROVIDER:aud`, …) show it.
#[derive(Clone, Debug, Default)]
pub struct SessionPrincipal {
    pub role_arn: String,
    pub role_id: String,
    pub session_name: String,
    /// The OpenID Connect provider that vouched for it, by name.
    pub provider: Option<String>,
    /// The web identity token's claims (text values).
    pub claims: Vec<(String, String)>,
}

/// An IAM user, as `aws:username`, `aws:userid`, `aws:PrincipalArn` and
/// `aws:PrincipalTag/…` show it.
#[derive(Clone, Debug, Default)]
pub struct UserPrincipal {
    pub name: String,
    pub id: String,
    pub arn: String,
    pub tags: Vec<(String, String)>,
}

/// The values of a request's condition keys.
#[derive(Clone, Copy, Default)]
pub struct Values<'a> {
    /// The values taken from headers and the query (by lowercase key;
    /// `s3:requestobjecttag/<tag>`, see the API's `ConditionValues`).
    pub headers: Option<&'a HashMap<String, String>>,
    /// The current tags of the object acted on, when a statement tests
    /// `s3:ExistingObjectTag` (see `Policy::tests_existing_tags`).
    pub existing_tags: Option<&'a [(String, String)]>,
    pub source_ip: Option<IpAddr>,
    pub secure: bool,
    /// `s3:prefix` (list requests: their `prefix`, `""` without one).
    pub prefix: Option<&'a str>,
    /// `aws:SourceArn`: the resource on whose behalf a service acts (the
    /// logged bucket, for server access log delivery).
    pub source_arn: Option<&'a str>,
    /// `aws:RequestedRegion`: the cluster's region.
    pub region: Option<&'a str>,
    /// The time the request is decided at, in milliseconds since the
    /// epoch (`aws:CurrentTime`, `aws:EpochTime`); `None`: now.
    pub now_msec: Option<u64>,
}

/// Keys taken from the request's headers or query (see the API's
/// `ConditionValues`), lowercase as compared.
pub const HEADER_KEYS: &[&str] = &[
    "s3:delimiter",
    "s3:max-keys",
    "s3:versionid",
    "s3:x-amz-acl",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id",
    "s3:x-amz-server-side-encryption-customer-algorithm",
    "s3:x-amz-storage-class",
    "s3:x-amz-content-sha256",
    "s3:x-amz-copy-source",
    "s3:x-amz-metadata-directive",
    "s3:x-amz-website-redirect-location",
    "s3:x-amz-grant-read",
    "s3:x-amz-grant-write",
    "s3:x-amz-grant-read-acp",
    "s3:x-amz-grant-write-acp",
    "s3:x-amz-grant-full-control",
    "s3:object-lock-mode",
    "s3:object-lock-retain-until-date",
    "s3:object-lock-legal-hold",
    "s3:signatureversion",
    "s3:authtype",
    "aws:useragent",
    "aws:referer",
];

/// The other keys served (lowercase).
const OTHER_KEYS: &[&str] = &[
    "s3:prefix",
    "s3:requestobjecttagkeys",
    "s3:tlsversion",
    "aws:sourceip",
    "aws:securetransport",
    "aws:currenttime",
    "aws:epochtime",
    "aws:username",
    "aws:userid",
    "aws:principaltype",
    "aws:principalarn",
    "aws:sourcearn",
    "aws:requestedregion",
    "aws:multifactorauthpresent",
    "aws:multifactorauthage",
    "aws:viaawsservice",
];

/// The tag families: `<family><tag>`.
const TAG_FAMILIES: &[&str] = &[
    "s3:requestobjecttag/",
    "s3:existingobjecttag/",
    "aws:principaltag/",
];

/// Whether `k` (lowercase) is a condition key served.
pub fn known_key(k: &str) -> bool {
    HEADER_KEYS.contains(&k)
        || OTHER_KEYS.contains(&k)
        || TAG_FAMILIES
            .iter()
            .any(|f| k.strip_prefix(f).is_some_and(|t| !t.is_empty()))
        || claim_key(k).is_some()
}

/// A web identity claim key, `PROVIDER:CLAIM` (`auth.example.org:sub`):
/// the provider's name is a host, with a `.` or a port (not a service
/// prefix such as `ec2`).
pub fn claim_key(k: &str) -> Option<(&str, &str)> {
    let (provider, claim) = k.rsplit_once(':')?;
    let host_like = provider.contains(['.', '/']) && !provider.starts_with("aws:");
    (host_like && !claim.is_empty()).then_some((provider, claim))
}

/// The served keys, for error messages.
pub fn served_keys() -> String {
    let mut all: Vec<String> = OTHER_KEYS
        .iter()
        .chain(HEADER_KEYS)
        .map(|k| k.to_string())
        .collect();
    all.extend(TAG_FAMILIES.iter().map(|f| format!("{f}<tag>")));
    all.push("<OpenID Connect provider>:<claim>".into());
    all.join(", ")
}

/// Keys whose values say who the principal is: a statement limited by
/// one of them is not a grant to everyone.
pub const PRINCIPAL_KEYS: &[&str] = &[
    "aws:sourcearn",
    "aws:principalarn",
    "aws:userid",
    "aws:username",
];

impl Values<'_> {
    /// The values of key `k` (lowercase) for a request by `who`; `None`:
    /// the request has none.
    pub fn get(&self, who: &Principal, k: &str) -> Option<Vec<String>> {
        let one = |s: &str| Some(vec![s.to_string()]);
        match k {
            "s3:prefix" => self.prefix.and_then(one),
            "aws:sourceip" => self.source_ip.map(|ip| vec![ip.to_string()]),
            "aws:securetransport" => one(if self.secure { "true" } else { "false" }),
            "aws:currenttime" => {
                let ts = jiff::Timestamp::from_millisecond(self.now() as i64).ok()?;
                Some(vec![ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()])
            }
            "aws:epochtime" => Some(vec![(self.now() / 1000).to_string()]),
            "aws:username" => who.user.as_ref().map(|u| vec![u.name.clone()]),
            "aws:userid" => match (&who.user, &who.session, &who.key_id) {
                (Some(u), _, _) => one(&u.id),
                (None, Some(s), _) => Some(vec![format!("{}:{}", s.role_id, s.session_name)]),
                (None, None, Some(k)) => one(k),
                (None, None, None) => one("anonymous"),
            },
            "aws:principaltype" => one(match (&who.user, &who.session, &who.key_id) {
                (Some(_), _, _) => "User",
                (None, Some(_), _) => "AssumedRole",
                (None, None, None) => "Anonymous",
                (None, None, Some(_)) => "Account",
            }),
            "aws:principalarn" => match (&who.user, &who.session) {
                (Some(u), _) => one(&u.arn),
                (None, Some(s)) => one(&s.role_arn),
                (None, None) => None,
            },
            "aws:sourcearn" => self.source_arn.and_then(one),
            "aws:requestedregion" => self.region.and_then(one),
            "s3:requestobjecttagkeys" => {
                let keys: Vec<String> = self
                    .headers?
                    .keys()
                    .filter_map(|h| h.strip_prefix("s3:requestobjecttag/"))
                    .map(String::from)
                    .collect();
                (!keys.is_empty()).then_some(keys)
            }
            _ => {
                if let Some(tag) = k.strip_prefix("s3:existingobjecttag/") {
                    return find_tag(self.existing_tags?, tag);
                }
                if let Some(tag) = k.strip_prefix("aws:principaltag/") {
                    return find_tag(&who.user.as_ref()?.tags, tag);
                }
                if let Some((provider, claim)) = claim_key(k) {
                    let s = who.session.as_ref()?;
                    if !s
                        .provider
                        .as_deref()
                        .is_some_and(|p| p.eq_ignore_ascii_case(provider))
                    {
                        return None;
                    }
                    return find_tag(&s.claims, claim);
                }
                // The header keys; the keys no request of ours carries
                // (MFA, TLS, …) have no value.
                self.headers?.get(k).map(|v| vec![v.clone()])
            }
        }
    }

    fn now(&self) -> u64 {
        self.now_msec.unwrap_or_else(crate::policy::now_msec)
    }
}

fn find_tag(tags: &[(String, String)], tag: &str) -> Option<Vec<String>> {
    tags.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(tag))
        .map(|(_, v)| vec![v.clone()])
}

/// Replaces the policy variables (`${aws:username}`, any single-valued
/// key) of `text`; `None` when one has no value (the text then matches
/// nothing, as on AWS).
pub fn substitute(text: &str, values: &Values<'_>, who: &Principal) -> Option<String> {
    substitute_with(text, values, who, false)
}

/// [`substitute`] for a pattern (`*` and `?` are wildcards): a value
/// holding one of them makes the text match nothing, so that a user name,
/// a tag or a token's claim cannot widen the pattern (`${…:email}` = `*`).
pub fn substitute_pattern(text: &str, values: &Values<'_>, who: &Principal) -> Option<String> {
    substitute_with(text, values, who, true)
}

fn substitute_with(
    text: &str,
    values: &Values<'_>,
    who: &Principal,
    pattern: bool,
) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}')?;
        let key = after[..end].trim().to_ascii_lowercase();
        let v = values.get(who, &key)?;
        let v = v.first()?;
        if pattern && v.contains(['*', '?']) {
            return None;
        }
        out.push_str(v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// Checks the variables of `text` when a policy is put: each names a
/// served key; `${*}`, `${?}`, `${$}` and default values are refused.
pub fn check_variables(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{text:?}: a policy variable has no closing brace"))?;
        let key = after[..end].trim();
        if !known_key(&key.to_ascii_lowercase()) {
            return Err(format!(
                "policy variable ${{{key}}} in {text:?} is not served (a variable names a condition key: {})",
                served_keys()
            ));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}
