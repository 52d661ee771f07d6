//! The policy language: bucket policies and identity policies (attached
//! to IAM users and groups), parsed and checked when they are put,
//! evaluated on each request. See doc/access-control.md and doc/iam.md.
//!
//! Served: `Effect` Allow / Deny; `Principal` / `NotPrincipal` (bucket
//! policies only) `"*"` or `{"AWS": …}` with `"*"`, access key ids or IAM
//! user ARNs, or `{"Service": "logging.s3.amazonaws.com"}` (server access
//! log delivery); `Action` / `NotAction` (`s3:…`, `iam:…`, `sts:…`, with
//! `*` and `?`); `Resource` / `NotResource` (a bucket policy's: ARNs of
//! its bucket and objects; an identity policy's: any ARN), with `*`, `?`
//! and policy variables (`${aws:username}`); `Condition` with every
//! operator of AWS's grammar on the keys of [`values::known_key`] (see
//! [`condition`]). Anything else is refused naming it: a condition that
//! would be ignored could turn a Deny into nothing.

pub mod condition;
pub mod values;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use garage_util::data::{blake2sum, Hash};
use serde_json::Value;
use wildmatch::WildMatch;

pub use values::{Principal, SessionPrincipal, UserPrincipal, Values};

/// AWS's limit on a bucket policy's size (identity policies: see
/// [`MAX_IDENTITY_POLICY_SIZE`]).
pub const MAX_POLICY_SIZE: usize = 20 * 1024;
/// AWS's limit on a managed policy's size.
pub const MAX_IDENTITY_POLICY_SIZE: usize = 6 * 1024;

/// Milliseconds since the epoch, by this node's clock.
pub(crate) fn now_msec() -> u64 {
    garage_util::time::now_msec()
}

/// The S3 actions a statement may name (besides wildcards). Those garage
/// decides on by policy are listed in doc/access-control.md; the others
/// are accepted, so that policies written for AWS load, and grant
/// nothing here.
const KNOWN_ACTIONS: &[&str] = &[
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
    "s3:ListMultipartUploadParts",
    "s3:AbortMultipartUpload",
    "s3:GetObjectTagging",
    "s3:GetObjectVersionTagging",
    "s3:PutObjectTagging",
    "s3:PutObjectVersionTagging",
    "s3:DeleteObjectTagging",
    "s3:DeleteObjectVersionTagging",
    "s3:GetObjectAcl",
    "s3:GetObjectVersionAcl",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl",
    "s3:GetObjectRetention",
    "s3:PutObjectRetention",
    "s3:GetObjectLegalHold",
    "s3:PutObjectLegalHold",
    "s3:BypassGovernanceRetention",
    "s3:GetBucketLocation",
    "s3:GetBucketAcl",
    "s3:PutBucketAcl",
    "s3:GetBucketPolicy",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:GetBucketPolicyStatus",
    "s3:GetBucketVersioning",
    "s3:PutBucketVersioning",
    "s3:GetBucketCORS",
    "s3:PutBucketCORS",
    "s3:GetBucketWebsite",
    "s3:PutBucketWebsite",
    "s3:DeleteBucketWebsite",
    "s3:GetLifecycleConfiguration",
    "s3:PutLifecycleConfiguration",
    "s3:GetBucketTagging",
    "s3:PutBucketTagging",
    "s3:GetEncryptionConfiguration",
    "s3:PutEncryptionConfiguration",
    "s3:GetBucketObjectLockConfiguration",
    "s3:PutBucketObjectLockConfiguration",
    "s3:GetBucketLogging",
    "s3:PutBucketLogging",
    "s3:GetBucketNotification",
    "s3:PutBucketNotification",
    "s3:GetReplicationConfiguration",
    "s3:PutReplicationConfiguration",
    "s3:GetObjectVersionForReplication",
    "s3:ReplicateObject",
    "s3:ReplicateDelete",
    "s3:GetBucketOwnershipControls",
    "s3:PutBucketOwnershipControls",
    "s3:GetBucketPublicAccessBlock",
    "s3:PutBucketPublicAccessBlock",
    "s3:DeleteBucket",
    "s3:ListAllMyBuckets",
    "s3:CreateBucket",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Allow,
    Deny,
}

/// Whom a bucket policy's statement names.
#[derive(Debug)]
enum Principals {
    Anyone,
    Named {
        /// Access key ids.
        keys: Vec<String>,
        /// IAM user names (from their ARNs).
        users: Vec<String>,
        /// The log delivery service.
        logging: bool,
        /// OpenID Connect providers, by name (trust policies).
        federated: Vec<String>,
    },
}

/// The service principal that delivers server access logs.
pub const LOGGING_SERVICE: &str = "logging.s3.amazonaws.com";

/// Where a policy is put, which decides what its statements hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A bucket policy: each statement names its principals; resources
    /// are its bucket's.
    Bucket,
    /// An identity policy (of a user, a group, a role, or managed): no
    /// principal (it is whoever the policy is attached to); any resource.
    Identity,
    /// A role's trust policy: who may assume it (principals: users, `*`,
    /// OpenID Connect providers as `Federated`); `sts:` actions; no
    /// resource (it is the role).
    Trust,
}

/// A resource pattern: relative to the bucket for a bucket policy (`""`
/// the bucket, `"/…"` its objects: the bucket's name is cut off, so that
/// the policy holds under every alias of the bucket), a whole ARN for an
/// identity policy. Compiled once unless it holds policy variables.
#[derive(Debug)]
struct Pattern {
    text: String,
    compiled: Option<WildMatch>,
}

impl Pattern {
    fn new(text: String) -> Result<Self, String> {
        values::check_variables(&text)?;
        let compiled = (!text.contains("${")).then(|| WildMatch::new(&text));
        Ok(Self { text, compiled })
    }

    fn matches(&self, s: &str, r: &Request<'_>) -> bool {
        match &self.compiled {
            Some(w) => w.matches(s),
            None => values::substitute_pattern(&self.text, &r.values, r.who)
                .is_some_and(|t| WildMatch::new(&t).matches(s)),
        }
    }
}

#[derive(Debug)]
struct Statement {
    effect: Effect,
    /// `None` in an identity policy.
    principals: Option<Principals>,
    /// `NotPrincipal`: everyone but them.
    not_principal: bool,
    actions: Vec<WildMatch>,
    not_action: bool,
    resources: Vec<Pattern>,
    not_resource: bool,
    tests: Vec<condition::Test>,
}

/// A parsed, checked policy.
#[derive(Debug)]
pub struct Policy {
    kind: Kind,
    statements: Vec<Statement>,
}

/// What a policy is asked about.
#[derive(Clone, Copy)]
pub enum Resource<'a> {
    /// A bucket (`object`: `None`) or an object of it, by the name the
    /// request used.
    S3 {
        bucket: &'a str,
        object: Option<&'a str>,
    },
    /// Another ARN (an IAM user, group or policy).
    Arn(&'a str),
}

/// A request, as policies see it.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub who: &'a Principal,
    /// `s3:GetObject`, `iam:CreateUser`, …
    pub action: &'a str,
    pub resource: Resource<'a>,
    pub values: Values<'a>,
}

/// The policy's answer: an explicit deny, an allow, or nothing said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Deny,
    Allow,
    NotApplicable,
}

impl Decision {
    /// Several policies' answers together: a deny wins, then an allow.
    pub fn combine(self, other: Decision) -> Decision {
        match (self, other) {
            (Decision::Deny, _) | (_, Decision::Deny) => Decision::Deny,
            (Decision::Allow, _) | (_, Decision::Allow) => Decision::Allow,
            _ => Decision::NotApplicable,
        }
    }
}

/// A string or a list of strings (AWS allows both almost everywhere).
fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                _ => Err(format!("{what}: expected strings")),
            })
            .collect(),
        _ => Err(format!("{what}: expected a string or a list of strings")),
    }
}

/// The name in an IAM user's ARN (`arn:aws:iam::ACCOUNT:user/PATH/NAME`).
pub fn user_of_arn(arn: &str) -> Option<&str> {
    let rest = arn.strip_prefix("arn:aws:iam::")?;
    let (_account, res) = rest.split_once(':')?;
    let path = res.strip_prefix("user/")?;
    let name = path.rsplit('/').next()?;
    (!name.is_empty()).then_some(name)
}

/// The provider name of a `Federated` principal: its IAM ARN
/// (`arn:aws:iam::ACCOUNT:oidc-provider/NAME`) or its name.
pub fn provider_of_principal(p: &str) -> &str {
    match p.strip_prefix("arn:aws:iam::") {
        Some(rest) => rest
            .split_once(":oidc-provider/")
            .map(|(_, n)| n)
            .unwrap_or(p),
        None => p,
    }
}

fn parse_principal(v: &Value, kind: Kind) -> Result<Principals, String> {
    let federated =
        match v.get("Federated") {
            Some(f) if kind == Kind::Trust => strings(f, "Principal.Federated")?
                .iter()
                .map(|p| provider_of_principal(p).trim_end_matches('/').to_string())
                .collect(),
            Some(_) => return Err(
                "Invalid principal in policy: Federated principals are for a role's trust policy"
                    .into(),
            ),
            None => Vec::new(),
        };
    let (ids, services) = match v {
        Value::String(s) if s == "*" => return Ok(Principals::Anyone),
        Value::Object(m) => {
            if m.is_empty()
                || m.keys()
                    .any(|k| k != "AWS" && k != "Service" && k != "Federated")
            {
                return Err(
                    "Invalid principal in policy: only \"*\", {\"AWS\": …} with \"*\", access key ids or IAM user ARNs, {\"Service\": \"logging.s3.amazonaws.com\"} and, in a trust policy, {\"Federated\": …} are served".into(),
                );
            }
            let ids = match m.get("AWS") {
                Some(v) => strings(v, "Principal.AWS")?,
                None => Vec::new(),
            };
            let services = match m.get("Service") {
                Some(v) => strings(v, "Principal.Service")?,
                None => Vec::new(),
            };
            (ids, services)
        }
        _ => return Err("Invalid principal in policy".into()),
    };
    if ids.iter().any(|i| i == "*") {
        return Ok(Principals::Anyone);
    }
    let (mut keys, mut users) = (Vec::new(), Vec::new());
    for id in &ids {
        if let Some(u) = user_of_arn(id) {
            users.push(u.to_string());
        } else if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()) {
            keys.push(id.clone());
        } else {
            return Err(format!(
                "Invalid principal in policy: {id:?} is not an access key id (GK…), an IAM user's ARN (arn:aws:iam:::user/NAME) or \"*\""
            ));
        }
    }
    if let Some(s) = services.iter().find(|s| *s != LOGGING_SERVICE) {
        return Err(format!(
            "Invalid principal in policy: service {s:?} (only {LOGGING_SERVICE} is served)"
        ));
    }
    Ok(Principals::Named {
        keys,
        users,
        logging: !services.is_empty(),
        federated,
    })
}

fn parse_action(a: &str, kind: Kind) -> Result<WildMatch, String> {
    let invalid = || format!("Policy has invalid action: {a:?}");
    let known = a == "*"
        || KNOWN_ACTIONS.iter().any(|k| k.eq_ignore_ascii_case(a))
        || match a.split_once(':') {
            Some((svc, name)) if !name.is_empty() => {
                let svc = svc.to_ascii_lowercase();
                (svc == "s3" && name.contains(['*', '?']))
                    || (kind == Kind::Identity && matches!(svc.as_str(), "iam" | "sts" | "sns"))
                    || (kind == Kind::Trust && svc == "sts")
            }
            _ => false,
        };
    if !known {
        return Err(invalid());
    }
    Ok(WildMatch::new_case_insensitive(a))
}

fn parse_resource(r: &str, kind: Kind, bucket: Option<&str>) -> Result<Pattern, String> {
    let invalid = || format!("Policy has invalid resource: {r:?}");
    if kind != Kind::Bucket {
        if r != "*" && !r.starts_with("arn:") {
            return Err(invalid());
        }
        return Pattern::new(r.to_string());
    }
    let rest = r.strip_prefix("arn:aws:s3:::").ok_or_else(invalid)?;
    let (b, obj) = match rest.split_once('/') {
        Some((b, o)) => (b, Some(o)),
        None => (rest, None),
    };
    if let Some(bucket) = bucket {
        if !WildMatch::new(b).matches(bucket) {
            return Err(format!(
                "Policy has invalid resource: {r:?} is not in bucket {bucket}"
            ));
        }
    }
    Pattern::new(match obj {
        None => String::new(),
        Some(o) => format!("/{o}"),
    })
}

/// One of a field and its `Not…` form: its value and whether it is the
/// negated one; an error when both or neither are there (`required`).
fn one_of<'v>(
    m: &'v serde_json::Map<String, Value>,
    field: &str,
    required: bool,
) -> Result<Option<(&'v Value, bool)>, String> {
    let not = format!("Not{field}");
    match (m.get(field), m.get(&not)) {
        (Some(_), Some(_)) => Err(format!("a statement has both {field} and {not}")),
        (Some(v), None) => Ok(Some((v, false))),
        (None, Some(v)) => Ok(Some((v, true))),
        (None, None) if required => Err(format!("Missing required field {field}")),
        (None, None) => Ok(None),
    }
}

fn parse_statement(v: &Value, kind: Kind, bucket: Option<&str>) -> Result<Statement, String> {
    let m = v
        .as_object()
        .ok_or_else(|| "Statement: expected an object".to_string())?;
    for k in m.keys() {
        if !matches!(
            k.as_str(),
            "Sid"
                | "Effect"
                | "Principal"
                | "NotPrincipal"
                | "Action"
                | "NotAction"
                | "Resource"
                | "NotResource"
                | "Condition"
        ) {
            return Err(format!("Statement field {k} is not served"));
        }
    }
    let effect = match m.get("Effect").and_then(|e| e.as_str()) {
        Some("Allow") => Effect::Allow,
        Some("Deny") => Effect::Deny,
        _ => return Err("Statement Effect must be \"Allow\" or \"Deny\"".into()),
    };
    let (principals, not_principal) = match (kind, one_of(m, "Principal", false)?) {
        (Kind::Bucket | Kind::Trust, Some((v, not))) => (Some(parse_principal(v, kind)?), not),
        (Kind::Bucket | Kind::Trust, None) => return Err("Missing required field Principal".into()),
        (Kind::Identity, Some(_)) => {
            return Err(
                "an identity policy names no Principal (it applies to whoever it is attached to)"
                    .into(),
            )
        }
        (Kind::Identity, None) => (None, false),
    };
    let (actions, not_action) = one_of(m, "Action", true)?.expect("required");
    let actions = strings(actions, "Action")?
        .iter()
        .map(|a| parse_action(a, kind))
        .collect::<Result<_, _>>()?;
    let (resources, not_resource) = match one_of(m, "Resource", kind != Kind::Trust)? {
        Some(r) => r,
        // A trust policy's statements are about the role itself.
        None => (&Value::String("*".into()), false),
    };
    let resources = strings(resources, "Resource")?
        .iter()
        .map(|r| parse_resource(r, kind, bucket))
        .collect::<Result<_, _>>()?;
    let tests = condition::parse(m.get("Condition"))?;
    Ok(Statement {
        effect,
        principals,
        not_principal,
        actions,
        not_action,
        resources,
        not_resource,
        tests,
    })
}

/// How many parsed documents [`cached`] keeps.
const MAX_CACHED: usize = 4096;

/// A stored document of kind `kind`, parsed once per process: every
/// request reads its bucket's policy and its identity's policies, and
/// parsing them each time cost 0.15–0.3 ms a request. Keyed by the
/// text's digest: a document's text decides its parse, so an entry is
/// never stale (a changed policy is another text). Emptied when full.
fn cached(text: &str, kind: Kind, max: usize) -> Result<Arc<Policy>, String> {
    type Cache = Mutex<HashMap<(u8, Hash), Arc<Policy>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let tag = match kind {
        Kind::Bucket => 0,
        Kind::Identity => 1,
        Kind::Trust => 2,
    };
    let key = (tag, blake2sum(text.as_bytes()));
    if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(Policy::parse_kind(text, kind, None, max)?);
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= MAX_CACHED {
        c.clear();
    }
    c.insert(key, p.clone());
    Ok(p)
}

impl Policy {
    /// Parses and checks a bucket policy put on bucket `bucket` (the name
    /// the request used; `None`: a stored policy, whose resources were
    /// checked when it was put); the error is the `MalformedPolicy`
    /// message.
    pub fn parse(text: &str, bucket: Option<&str>) -> Result<Self, String> {
        Self::parse_kind(text, Kind::Bucket, bucket, MAX_POLICY_SIZE)
    }

    /// Parses and checks an identity policy (of a user, a group, or a
    /// managed one); the error is the `MalformedPolicyDocument` message.
    pub fn parse_identity(text: &str) -> Result<Self, String> {
        Self::parse_kind(text, Kind::Identity, None, MAX_IDENTITY_POLICY_SIZE)
    }

    /// A stored bucket policy, parsed once per process ([`cached`]).
    pub fn parse_stored(text: &str) -> Result<Arc<Self>, String> {
        cached(text, Kind::Bucket, MAX_POLICY_SIZE)
    }

    /// A stored identity policy, parsed once per process ([`cached`]).
    pub fn parse_identity_stored(text: &str) -> Result<Arc<Self>, String> {
        cached(text, Kind::Identity, MAX_IDENTITY_POLICY_SIZE)
    }

    /// Parses and checks a role's trust policy.
    pub fn parse_trust(text: &str) -> Result<Self, String> {
        Self::parse_kind(text, Kind::Trust, None, MAX_IDENTITY_POLICY_SIZE)
    }

    fn parse_kind(
        text: &str,
        kind: Kind,
        bucket: Option<&str>,
        max: usize,
    ) -> Result<Self, String> {
        if text.len() > max {
            return Err(format!(
                "Policies must be at most {max} bytes; this one is {}",
                text.len()
            ));
        }
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("Policies must be valid JSON: {e}"))?;
        let m = v
            .as_object()
            .ok_or_else(|| "Policies must be a JSON object".to_string())?;
        if let Some(ver) = m.get("Version") {
            if !matches!(ver.as_str(), Some("2012-10-17") | Some("2008-10-17")) {
                return Err("The policy must contain a valid version string".into());
            }
        }
        for k in m.keys() {
            if !matches!(k.as_str(), "Version" | "Id" | "Statement") {
                return Err(format!("Unknown field {k}"));
            }
        }
        let statements = match m.get("Statement") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|s| parse_statement(s, kind, bucket))
                .collect::<Result<_, _>>()?,
            Some(s @ Value::Object(_)) => vec![parse_statement(s, kind, bucket)?],
            _ => return Err("Missing required field Statement".into()),
        };
        Ok(Self { kind, statements })
    }

    /// What the policy says of `r`: an explicit deny wins over any allow.
    pub fn evaluate(&self, r: &Request<'_>) -> Decision {
        let mut allowed = false;
        for s in self.statements.iter().filter(|s| s.applies(self.kind, r)) {
            match s.effect {
                Effect::Deny => return Decision::Deny,
                Effect::Allow => allowed = true,
            }
        }
        match allowed {
            true => Decision::Allow,
            false => Decision::NotApplicable,
        }
    }

    /// Whether it grants anything to everyone (AWS's "public" policy):
    /// an Allow for `"*"` not limited to source IP ranges or to named
    /// principals by a condition.
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| {
            s.effect == Effect::Allow
                && (s.not_principal || matches!(s.principals, Some(Principals::Anyone)))
                && !s.tests.iter().any(|t| t.narrows_principal())
        })
    }

    /// Whether a statement tests `s3:ExistingObjectTag` (the object's
    /// tags must then be read before deciding).
    pub fn tests_existing_tags(&self) -> bool {
        self.statements.iter().any(|s| {
            s.tests
                .iter()
                .any(|t| t.key.starts_with("s3:existingobjecttag/"))
        })
    }

    /// Whether it names `key_id` as a principal (an allow for a key
    /// given by id is not a public grant).
    pub fn names_key(&self, key_id: &str) -> bool {
        self.statements.iter().any(|s| {
            matches!(&s.principals, Some(Principals::Named { keys, .. }) if keys.iter().any(|k| k == key_id))
        })
    }

    /// Whether the log delivery service may write object `key` of
    /// `bucket` for the logged bucket `source_arn` (an Allow naming it
    /// for `s3:PutObject` on the key, and no Deny).
    pub fn allows_log_delivery(&self, bucket: &str, key: &str, source_arn: &str) -> bool {
        let who = Principal::default();
        let r = Request {
            who: &who,
            action: "s3:PutObject",
            resource: Resource::S3 {
                bucket,
                object: Some(key),
            },
            values: Values {
                secure: true,
                source_arn: Some(source_arn),
                ..Values::default()
            },
        };
        let mut allowed = false;
        for s in self.statements.iter() {
            let named = match &s.principals {
                Some(Principals::Anyone) => true,
                Some(Principals::Named { logging, .. }) => *logging,
                None => false,
            };
            if named != s.not_principal && s.matches_action_and_resource(self.kind, &r) {
                match s.effect {
                    Effect::Deny => return false,
                    Effect::Allow => allowed = true,
                }
            }
        }
        allowed
    }
}

impl Statement {
    fn applies(&self, kind: Kind, r: &Request<'_>) -> bool {
        let named = match &self.principals {
            None => true,
            Some(Principals::Anyone) => true,
            Some(Principals::Named {
                keys,
                users,
                federated,
                ..
            }) => {
                r.who
                    .key_id
                    .as_ref()
                    .is_some_and(|k| keys.iter().any(|i| i == k))
                    || r.who.user.as_ref().is_some_and(|u| users.contains(&u.name))
                    || r.who
                        .session
                        .as_ref()
                        .and_then(|s| s.provider.as_ref())
                        .is_some_and(|p| federated.iter().any(|f| f.eq_ignore_ascii_case(p)))
            }
        };
        named != self.not_principal && self.matches_action_and_resource(kind, r)
    }

    fn matches_action_and_resource(&self, kind: Kind, r: &Request<'_>) -> bool {
        let action = self.actions.iter().any(|a| a.matches(r.action)) != self.not_action;
        if !action {
            return false;
        }
        let resource: String = match (kind, r.resource) {
            (Kind::Bucket, Resource::S3 { object: None, .. }) => String::new(),
            (
                Kind::Bucket,
                Resource::S3 {
                    object: Some(o), ..
                },
            ) => format!("/{o}"),
            (Kind::Bucket, Resource::Arn(_)) => return false,
            (_, Resource::S3 { bucket, object }) => match object {
                None => format!("arn:aws:s3:::{bucket}"),
                Some(o) => format!("arn:aws:s3:::{bucket}/{o}"),
            },
            (_, Resource::Arn(a)) => a.to_string(),
        };
        let in_resources = self.resources.iter().any(|p| p.matches(&resource, r));
        in_resources != self.not_resource && self.tests.iter().all(|t| t.holds(&r.values, r.who))
    }
}

#[cfg(test)]
mod tests;
