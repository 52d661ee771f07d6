//! Bucket policies: the common subset of AWS's policy language, parsed
//! and checked when a policy is put, evaluated on each request to the
//! bucket. See doc/access-control.md.
//!
//! Served: `Effect` Allow / Deny; `Principal` `"*"` or `{"AWS": …}` with
//! `"*"` or access key ids, or `{"Service": "logging.s3.amazonaws.com"}`
//! (server access log delivery); `Action` (`s3:…`, with `*` and `?`);
//! `Resource` ARNs of the bucket and its objects (with `*` and `?`);
//! `Condition` with `IpAddress` / `NotIpAddress` on `aws:SourceIp`,
//! `Bool` on `aws:SecureTransport`, `StringEquals` / `StringNotEquals` /
//! `StringLike` / `StringNotLike` (each also `…IfExists`) on the keys of
//! [`STRING_KEYS`] and on `s3:RequestObjectTag/<tag>` and
//! `s3:ExistingObjectTag/<tag>`. Anything else is refused with
//! `MalformedPolicy` naming it: a condition that would be ignored could
//! turn a Deny into nothing.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;
use wildmatch::WildMatch;

/// AWS's limit on a bucket policy's size.
pub const MAX_POLICY_SIZE: usize = 20 * 1024;

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

#[derive(Debug)]
enum Principals {
    Anyone,
    /// Access key ids, and whether the log delivery service is named.
    Named {
        keys: Vec<String>,
        logging: bool,
    },
}

/// The service principal that delivers server access logs.
pub const LOGGING_SERVICE: &str = "logging.s3.amazonaws.com";

#[derive(Debug)]
enum Test {
    /// `IpAddress` (`negated`: `NotIpAddress`) on `aws:SourceIp`.
    SourceIp { nets: Vec<IpNet>, negated: bool },
    /// `Bool` on `aws:SecureTransport`.
    SecureTransport(bool),
    /// `StringEquals`/`StringLike` (`negated`: the `Not` forms) on a
    /// string key (lowercase); `if_exists`: holds when the request has no
    /// value for it.
    Str {
        key: String,
        patterns: Vec<StringTest>,
        negated: bool,
        if_exists: bool,
    },
}

/// A value of a string condition: equal to it, or like it (`*`, `?`).
#[derive(Debug)]
enum StringTest {
    Equals(String),
    Like(WildMatch),
}

impl StringTest {
    fn matches(&self, s: &str) -> bool {
        match self {
            StringTest::Equals(v) => v == s,
            StringTest::Like(w) => w.matches(s),
        }
    }
}

#[derive(Debug)]
struct Statement {
    effect: Effect,
    principals: Principals,
    actions: Vec<WildMatch>,
    /// Resource patterns relative to the bucket: `""` is the bucket,
    /// `"/…"` its objects (the bucket's name is cut off, so that the
    /// policy holds under every alias of the bucket).
    resources: Vec<WildMatch>,
    tests: Vec<Test>,
}

/// A parsed, checked bucket policy.
#[derive(Debug)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// What a policy is asked about.
pub struct Request<'a> {
    /// The values of the string condition keys the request has (by
    /// lowercase key, see [`STRING_KEYS`]; `s3:requestobjecttag/<tag>`).
    pub context: Option<&'a std::collections::HashMap<String, String>>,
    /// The current tags of the object acted on, when a statement tests
    /// `s3:ExistingObjectTag` (see [`Policy::tests_existing_tags`]).
    pub existing_tags: Option<&'a [(String, String)]>,
    /// The access key id that signed the request; `None`: anonymous.
    pub key_id: Option<&'a str>,
    /// `s3:GetObject`, …
    pub action: &'a str,
    /// The object key; `None` for a bucket action.
    pub object: Option<&'a str>,
    pub source_ip: Option<IpAddr>,
    pub secure: bool,
    /// `s3:prefix` (list requests: their `prefix`, `""` without one).
    pub prefix: Option<&'a str>,
}

/// The string condition keys served besides `s3:prefix`, and the tag
/// keys (lowercase, as compared).
pub const STRING_KEYS: &[&str] = &[
    "s3:delimiter",
    "s3:max-keys",
    "s3:versionid",
    "s3:x-amz-acl",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id",
    "s3:x-amz-storage-class",
    "s3:x-amz-content-sha256",
    "s3:x-amz-copy-source",
    "s3:x-amz-metadata-directive",
    "s3:signatureversion",
    "s3:authtype",
    "aws:useragent",
    "aws:referer",
];

/// The policy's answer: an explicit deny, an allow, or nothing said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Deny,
    Allow,
    NotApplicable,
}

fn bad(msg: impl Into<String>) -> String {
    msg.into()
}

/// A string or a list of strings (AWS allows both almost everywhere).
fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                _ => Err(bad(format!("{what}: expected strings"))),
            })
            .collect(),
        _ => Err(bad(format!(
            "{what}: expected a string or a list of strings"
        ))),
    }
}

fn parse_principal(v: Option<&Value>) -> Result<Principals, String> {
    let v = v.ok_or_else(|| bad("Missing required field Principal"))?;
    let (ids, services) = match v {
        Value::String(s) if s == "*" => return Ok(Principals::Anyone),
        Value::Object(m) => {
            if m.is_empty() || m.keys().any(|k| k != "AWS" && k != "Service") {
                return Err(bad(
                    "Invalid principal in policy: only \"*\", {\"AWS\": …} with \"*\" or access key ids, and {\"Service\": \"logging.s3.amazonaws.com\"} are served",
                ));
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
        _ => return Err(bad("Invalid principal in policy")),
    };
    if ids.iter().any(|i| i == "*") {
        return Ok(Principals::Anyone);
    }
    for id in &ids {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(bad(format!(
                "Invalid principal in policy: {id:?} is not an access key id (GK…) or \"*\""
            )));
        }
    }
    if let Some(s) = services.iter().find(|s| *s != LOGGING_SERVICE) {
        return Err(bad(format!(
            "Invalid principal in policy: service {s:?} (only {LOGGING_SERVICE} is served)"
        )));
    }
    Ok(Principals::Named {
        keys: ids,
        logging: !services.is_empty(),
    })
}

fn parse_action(a: &str) -> Result<WildMatch, String> {
    let known = a == "*"
        || (a.len() > 3 && a[..3].eq_ignore_ascii_case("s3:") && (a.contains(['*', '?'])))
        || KNOWN_ACTIONS.iter().any(|k| k.eq_ignore_ascii_case(a));
    if !known {
        return Err(bad(format!("Policy has invalid action: {a:?}")));
    }
    Ok(WildMatch::new_case_insensitive(a))
}

fn parse_resource(r: &str, bucket: Option<&str>) -> Result<WildMatch, String> {
    let invalid = || bad(format!("Policy has invalid resource: {r:?}"));
    let rest = r.strip_prefix("arn:aws:s3:::").ok_or_else(invalid)?;
    let (b, obj) = match rest.split_once('/') {
        Some((b, o)) => (b, Some(o)),
        None => (rest, None),
    };
    if let Some(bucket) = bucket {
        if !WildMatch::new(b).matches(bucket) {
            return Err(bad(format!(
                "Policy has invalid resource: {r:?} is not in bucket {bucket}"
            )));
        }
    }
    Ok(match obj {
        None => WildMatch::new(""),
        Some(o) => WildMatch::new(&format!("/{o}")),
    })
}

/// A string operator: (like, negated, if exists).
fn string_op(op: &str) -> Option<(bool, bool, bool)> {
    let (op, if_exists) = match op.strip_suffix("IfExists") {
        Some(o) => (o, true),
        None => (op, false),
    };
    Some(match op {
        "StringEquals" => (false, false, if_exists),
        "StringNotEquals" => (false, true, if_exists),
        "StringLike" => (true, false, if_exists),
        "StringNotLike" => (true, true, if_exists),
        _ => return None,
    })
}

/// Whether `k` (lowercase) is a served string condition key.
fn string_key(k: &str) -> bool {
    k == "s3:prefix"
        || STRING_KEYS.contains(&k)
        || k.strip_prefix("s3:requestobjecttag/")
            .or_else(|| k.strip_prefix("s3:existingobjecttag/"))
            .is_some_and(|t| !t.is_empty())
}

fn parse_conditions(v: Option<&Value>) -> Result<Vec<Test>, String> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let ops = v
        .as_object()
        .ok_or_else(|| bad("Condition: expected an object"))?;
    let mut tests = Vec::new();
    for (op, keys) in ops {
        let keys = keys
            .as_object()
            .ok_or_else(|| bad(format!("Condition {op}: expected an object")))?;
        for (key, values) in keys {
            let values = strings(values, &format!("Condition {op} {key}"))?;
            let k = key.to_ascii_lowercase();
            let test = match (op.as_str(), k.as_str()) {
                ("IpAddress" | "NotIpAddress", "aws:sourceip") => Test::SourceIp {
                    nets: values
                        .iter()
                        .map(|v| {
                            v.parse::<IpNet>()
                                .or_else(|_| v.parse::<IpAddr>().map(IpNet::from))
                                .map_err(|_| {
                                    bad(format!("Condition {op} {key}: {v:?} is not an IP range"))
                                })
                        })
                        .collect::<Result<_, _>>()?,
                    negated: op == "NotIpAddress",
                },
                ("Bool", "aws:securetransport") => match values.as_slice() {
                    [v] if v == "true" || v == "false" => Test::SecureTransport(v == "true"),
                    _ => {
                        return Err(bad(format!(
                            "Condition Bool {key}: expected \"true\" or \"false\""
                        )))
                    }
                },
                (op_name, k) if string_op(op_name).is_some() && string_key(k) => {
                    let (like, negated, if_exists) = string_op(op_name).expect("checked");
                    Test::Str {
                        key: k.to_string(),
                        patterns: values
                            .iter()
                            .map(|v| match like {
                                true => StringTest::Like(WildMatch::new(v)),
                                false => StringTest::Equals(v.clone()),
                            })
                            .collect(),
                        negated,
                        if_exists,
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "Condition {op} on {key} is not served: the served conditions are \
                         IpAddress/NotIpAddress on aws:SourceIp, Bool on aws:SecureTransport, \
                         and StringEquals/StringNotEquals/StringLike/StringNotLike (and their \
                         IfExists forms) on s3:prefix, {}, s3:RequestObjectTag/<tag> and \
                         s3:ExistingObjectTag/<tag>",
                        STRING_KEYS.join(", ")
                    )))
                }
            };
            tests.push(test);
        }
    }
    Ok(tests)
}

fn parse_statement(v: &Value, bucket: Option<&str>) -> Result<Statement, String> {
    let m = v
        .as_object()
        .ok_or_else(|| bad("Statement: expected an object"))?;
    for k in m.keys() {
        if !matches!(
            k.as_str(),
            "Sid" | "Effect" | "Principal" | "Action" | "Resource" | "Condition"
        ) {
            return Err(bad(format!(
                "Statement field {k} is not served (NotPrincipal, NotAction and NotResource are not)"
            )));
        }
    }
    let effect = match m.get("Effect").and_then(|e| e.as_str()) {
        Some("Allow") => Effect::Allow,
        Some("Deny") => Effect::Deny,
        _ => return Err(bad("Statement Effect must be \"Allow\" or \"Deny\"")),
    };
    let principals = parse_principal(m.get("Principal"))?;
    let actions = strings(
        m.get("Action")
            .ok_or_else(|| bad("Missing required field Action"))?,
        "Action",
    )?
    .iter()
    .map(|a| parse_action(a))
    .collect::<Result<_, _>>()?;
    let resources = strings(
        m.get("Resource")
            .ok_or_else(|| bad("Missing required field Resource"))?,
        "Resource",
    )?
    .iter()
    .map(|r| parse_resource(r, bucket))
    .collect::<Result<_, _>>()?;
    let tests = parse_conditions(m.get("Condition"))?;
    Ok(Statement {
        effect,
        principals,
        actions,
        resources,
        tests,
    })
}

impl Policy {
    /// Parses and checks a policy put on bucket `bucket` (the name the
    /// request used; `None`: a stored policy, whose resources were
    /// checked when it was put); the error is the `MalformedPolicy`
    /// message.
    pub fn parse(text: &str, bucket: Option<&str>) -> Result<Self, String> {
        if text.len() > MAX_POLICY_SIZE {
            return Err(bad(format!(
                "Policies must be at most {MAX_POLICY_SIZE} bytes; this one is {}",
                text.len()
            )));
        }
        let v: Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("Policies must be valid JSON: {e}")))?;
        let m = v
            .as_object()
            .ok_or_else(|| bad("Policies must be a JSON object"))?;
        if let Some(ver) = m.get("Version") {
            if !matches!(ver.as_str(), Some("2012-10-17") | Some("2008-10-17")) {
                return Err(bad("The policy must contain a valid version string"));
            }
        }
        for k in m.keys() {
            if !matches!(k.as_str(), "Version" | "Id" | "Statement") {
                return Err(bad(format!("Unknown field {k}")));
            }
        }
        let statements = match m.get("Statement") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|s| parse_statement(s, bucket))
                .collect::<Result<_, _>>()?,
            Some(s @ Value::Object(_)) => vec![parse_statement(s, bucket)?],
            _ => return Err(bad("Missing required field Statement")),
        };
        Ok(Self { statements })
    }

    /// What the policy says of `r`: an explicit deny wins over any allow.
    pub fn evaluate(&self, r: &Request<'_>) -> Decision {
        let mut allowed = false;
        for s in self.statements.iter().filter(|s| s.applies(r)) {
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
    /// an Allow for `"*"` not limited to source IP ranges.
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| {
            s.effect == Effect::Allow
                && matches!(s.principals, Principals::Anyone)
                && !s.tests.iter().any(|t| match t {
                    Test::SourceIp { nets, negated } => {
                        !negated && nets.iter().all(|n| n.prefix_len() > 0)
                    }
                    _ => false,
                })
        })
    }

    /// Whether a statement tests `s3:ExistingObjectTag` (the object's
    /// tags must then be read before deciding).
    pub fn tests_existing_tags(&self) -> bool {
        self.statements.iter().any(|s| {
            s.tests.iter().any(
                |t| matches!(t, Test::Str { key, .. } if key.starts_with("s3:existingobjecttag/")),
            )
        })
    }

    /// Whether it names `key_id` as a principal (an allow for a key
    /// given by id is not a public grant).
    pub fn names_key(&self, key_id: &str) -> bool {
        self.statements
            .iter()
            .any(|s| matches!(&s.principals, Principals::Named { keys, .. } if keys.iter().any(|k| k == key_id)))
    }

    /// Whether the log delivery service may write object `key` (an
    /// Allow naming it for `s3:PutObject` on the key, and no Deny).
    pub fn allows_log_delivery(&self, key: &str) -> bool {
        let r = Request {
            context: None,
            existing_tags: None,
            key_id: None,
            action: "s3:PutObject",
            object: Some(key),
            source_ip: None,
            secure: true,
            prefix: None,
        };
        let mut allowed = false;
        for s in self.statements.iter() {
            let named = match &s.principals {
                Principals::Anyone => true,
                Principals::Named { logging, .. } => *logging,
            };
            if named && s.matches_action_and_resource(&r) {
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
    fn applies(&self, r: &Request<'_>) -> bool {
        let principal = match &self.principals {
            Principals::Anyone => true,
            Principals::Named { keys, .. } => r.key_id.is_some_and(|k| keys.iter().any(|i| i == k)),
        };
        principal && self.matches_action_and_resource(r)
    }

    fn matches_action_and_resource(&self, r: &Request<'_>) -> bool {
        let resource = match r.object {
            None => String::new(),
            Some(o) => format!("/{o}"),
        };
        self.actions.iter().any(|a| a.matches(r.action))
            && self.resources.iter().any(|p| p.matches(&resource))
            && self.tests.iter().all(|t| t.holds(r))
    }
}

impl Test {
    fn holds(&self, r: &Request<'_>) -> bool {
        match self {
            // A missing key matches no value: the positive forms fail,
            // the negated ones hold (as on AWS).
            Test::SourceIp { nets, negated } => {
                let hit = r
                    .source_ip
                    .is_some_and(|ip| nets.iter().any(|n| n.contains(&ip)));
                hit != *negated
            }
            Test::SecureTransport(want) => r.secure == *want,
            Test::Str {
                key,
                patterns,
                negated,
                if_exists,
            } => {
                let value: Option<&str> = if key == "s3:prefix" {
                    r.prefix
                } else if let Some(tag) = key.strip_prefix("s3:existingobjecttag/") {
                    r.existing_tags.and_then(|t| {
                        t.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(tag))
                            .map(|(_, v)| v.as_str())
                    })
                } else {
                    r.context.and_then(|c| c.get(key)).map(|v| v.as_str())
                };
                match value {
                    None if *if_exists => true,
                    None => *negated,
                    Some(v) => patterns.iter().any(|w| w.matches(v)) != *negated,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(key: Option<&'a str>, action: &'a str, object: Option<&'a str>) -> Request<'a> {
        Request {
            context: None,
            existing_tags: None,
            key_id: key,
            action,
            object,
            source_ip: Some("192.0.2.7".parse().unwrap()),
            secure: false,
            prefix: None,
        }
    }

    #[test]
    fn public_read_policy() {
        let p = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Allow",
                "Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::site/*"]}]}"#,
            Some("site"),
        )
        .unwrap();
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", Some("a/b.html"))),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:PutObject", Some("a"))),
            Decision::NotApplicable
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:ListBucket", None)),
            Decision::NotApplicable
        );
        assert!(p.is_public());
    }

    #[test]
    fn explicit_deny_wins_and_wildcards_match() {
        let p = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Allow","Principal":{"AWS":["GK1","GK2"]},"Action":"s3:*","Resource":"arn:aws:s3:::b*/*"},
                {"Effect":"Deny","Principal":{"AWS":"GK2"},"Action":"s3:Delete*","Resource":"arn:aws:s3:::bkt/logs/*"}]}"#,
            Some("bkt"),
        )
        .unwrap();
        assert_eq!(
            p.evaluate(&req(Some("GK2"), "s3:DeleteObject", Some("logs/1"))),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&req(Some("GK2"), "s3:DeleteObject", Some("data/1"))),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(Some("GK1"), "s3:deleteobject", Some("logs/1"))),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(Some("GK3"), "s3:GetObject", Some("x"))),
            Decision::NotApplicable
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", Some("x"))),
            Decision::NotApplicable
        );
        assert!(!p.is_public());
        assert!(p.names_key("GK2"));
    }

    #[test]
    fn conditions() {
        let p = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"IpAddress":{"aws:SourceIp":["192.0.2.0/24","2001:db8::/32"]}}},
                {"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
                 "Condition":{"StringLike":{"s3:prefix":["public/*",""]}}},
                {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}"#,
            Some("b"),
        )
        .unwrap();
        let mut r = req(None, "s3:GetObject", Some("k"));
        assert_eq!(p.evaluate(&r), Decision::Allow);
        r.source_ip = Some("198.51.100.1".parse().unwrap());
        assert_eq!(p.evaluate(&r), Decision::NotApplicable);
        r.source_ip = None;
        assert_eq!(p.evaluate(&r), Decision::NotApplicable);
        let mut l = req(None, "s3:ListBucket", None);
        l.prefix = Some("public/img/");
        assert_eq!(p.evaluate(&l), Decision::Allow);
        l.prefix = Some("");
        assert_eq!(p.evaluate(&l), Decision::Allow);
        l.prefix = Some("private/");
        assert_eq!(p.evaluate(&l), Decision::NotApplicable);
        let mut w = req(Some("GK1"), "s3:PutObject", Some("k"));
        assert_eq!(p.evaluate(&w), Decision::Deny);
        w.secure = true;
        assert_eq!(p.evaluate(&w), Decision::NotApplicable);
        // Limited to IP ranges: the GetObject grant is not public; the
        // ListBucket one is.
        assert!(p.is_public());
    }

    #[test]
    fn string_equals_is_not_a_pattern() {
        let p = Policy::parse(
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
                 "Condition":{"StringEquals":{"s3:prefix":"a*"}}}}"#,
            Some("b"),
        )
        .unwrap();
        let mut l = req(None, "s3:ListBucket", None);
        l.prefix = Some("abc");
        assert_eq!(p.evaluate(&l), Decision::NotApplicable);
        l.prefix = Some("a*");
        assert_eq!(p.evaluate(&l), Decision::Allow);
    }

    #[test]
    fn conditions_on_headers_and_tags() {
        let p = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"},
                {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}}},
                {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"StringEquals":{"s3:x-amz-acl":["public-read","public-read-write"]}}},
                {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"StringEquals":{"s3:RequestObjectTag/class":"secret"}}},
                {"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"StringEquals":{"s3:ExistingObjectTag/keep":"yes"}}},
                {"Effect":"Allow","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*",
                 "Condition":{"StringLike":{"aws:UserAgent":"backup-*"}}}]}"#,
            Some("b"),
        )
        .unwrap();
        assert!(p.tests_existing_tags());
        let ctx = |pairs: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let put = |c: &std::collections::HashMap<String, String>| {
            let mut r = req(None, "s3:PutObject", Some("k"));
            r.context = Some(c);
            p.evaluate(&r)
        };
        assert_eq!(put(&ctx(&[])), Decision::Deny, "no encryption header");
        let sse = ctx(&[("s3:x-amz-server-side-encryption", "AES256")]);
        assert_eq!(put(&sse), Decision::Allow);
        let public = ctx(&[
            ("s3:x-amz-server-side-encryption", "AES256"),
            ("s3:x-amz-acl", "public-read"),
        ]);
        assert_eq!(put(&public), Decision::Deny);
        let secret = ctx(&[
            ("s3:x-amz-server-side-encryption", "AES256"),
            ("s3:requestobjecttag/class", "secret"),
        ]);
        assert_eq!(put(&secret), Decision::Deny);
        let ua = ctx(&[("aws:useragent", "backup-tool/1")]);
        let del = |tags: Option<&[(String, String)]>| {
            let mut r = req(None, "s3:DeleteObject", Some("k"));
            r.context = Some(&ua);
            r.existing_tags = tags;
            p.evaluate(&r)
        };
        let keep = vec![("keep".to_string(), "yes".to_string())];
        let other = vec![("keep".to_string(), "no".to_string())];
        assert_eq!(del(Some(&keep)), Decision::Deny);
        assert_eq!(del(Some(&other)), Decision::Allow);
        assert_eq!(del(None), Decision::Allow);
        // IfExists: a missing key satisfies the condition.
        let p = Policy::parse(
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
                "Condition":{"StringEqualsIfExists":{"s3:x-amz-storage-class":"STANDARD"}}}}"#,
            Some("b"),
        )
        .unwrap();
        let class = |c: &std::collections::HashMap<String, String>| {
            let mut r = req(None, "s3:PutObject", Some("k"));
            r.context = Some(c);
            p.evaluate(&r)
        };
        assert_eq!(class(&ctx(&[])), Decision::Allow);
        assert_eq!(
            class(&ctx(&[("s3:x-amz-storage-class", "STANDARD")])),
            Decision::Allow
        );
        assert_eq!(
            class(&ctx(&[("s3:x-amz-storage-class", "GLACIER")])),
            Decision::NotApplicable
        );
        let err = |t: &str| Policy::parse(t, Some("b")).unwrap_err();
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/":"x"}}}}"#).contains("not served"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"NumericLessThan":{"s3:max-keys":"10"}}}}"#).contains("not served"));
    }

    #[test]
    fn the_log_delivery_service_is_a_principal() {
        let p = Policy::parse(
            r#"{"Statement":[
                {"Effect":"Allow","Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/logs/*"},
                {"Effect":"Deny","Principal":{"Service":["logging.s3.amazonaws.com"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/logs/secret/*"}]}"#,
            Some("b"),
        )
        .unwrap();
        assert!(p.allows_log_delivery("logs/2026-11-27-00-00-00-x"));
        assert!(
            !p.allows_log_delivery("logs/secret/x"),
            "an explicit deny wins"
        );
        assert!(!p.allows_log_delivery("other/x"));
        // It grants nothing to keys or to anonymous requests.
        assert_eq!(
            p.evaluate(&req(Some("GK1"), "s3:PutObject", Some("logs/x"))),
            Decision::NotApplicable
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:PutObject", Some("logs/x"))),
            Decision::NotApplicable
        );
        assert!(!p.is_public());
    }

    #[test]
    fn malformed_policies_name_what_is_wrong() {
        let err = |t: &str| Policy::parse(t, Some("b")).unwrap_err();
        assert!(err("not json").contains("valid JSON"));
        assert!(err(r#"{"Statement":[]}"#).contains("Statement"));
        assert!(err(r#"{"Version":"2020-01-01","Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("version"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:Fly","Resource":"arn:aws:s3:::b/*"}}"#).contains("invalid action"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"arn:aws:s3:::b/*"}}"#).contains("invalid action"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}}"#).contains("invalid resource"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("principal"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:PrincipalTag/team":"x"}}}}"#).contains("not served"));
        assert!(err(r#"{"Statement":{"Effect":"Allow","NotPrincipal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("NotPrincipal"));
        assert!(err(r#"{"Statement":{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("Effect"));
        assert!(err(&" ".repeat(MAX_POLICY_SIZE + 1)).contains("at most"));
    }
}
