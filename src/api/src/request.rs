//! What a handler is given about its request: who sent it
//! ([`Requester`]: its key, its peer, its policy condition values) and
//! what its operation's authorization rule granted ([`Ctx`]; the rules
//! are `access::step`'s). A base of every family: it imports none.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use garage_model::bucket_table::Bucket;
use garage_model::iam::identity::Identity;
use garage_model::key_table::Key;
use garage_model::policy::{Decision, Principal, Request as PolicyRequest, Resource, Values};
use garage_util::data::Uuid;

/// What a handler receives: who asked, and what its operation's rule
/// granted.
pub struct Ctx<G> {
    pub who: Requester,
    pub granted: G,
}

/// The TCP peer of a request, put in its extensions by the listener.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// The values of a request's policy condition keys taken from its
/// headers and query (see `garage_model::policy::values::HEADER_KEYS`),
/// put in its extensions by the listener.
#[derive(Clone, Debug, Default)]
pub struct ConditionValues(pub Arc<HashMap<String, String>>);

impl ConditionValues {
    /// The condition values of a request's headers and query string.
    pub fn of(headers: &hyper::HeaderMap, uri: &hyper::Uri) -> Self {
        let mut m = HashMap::new();
        let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        for (key, header) in [
            ("s3:x-amz-acl", "x-amz-acl"),
            (
                "s3:x-amz-server-side-encryption",
                "x-amz-server-side-encryption",
            ),
            (
                "s3:x-amz-server-side-encryption-aws-kms-key-id",
                "x-amz-server-side-encryption-aws-kms-key-id",
            ),
            ("s3:x-amz-storage-class", "x-amz-storage-class"),
            ("s3:x-amz-content-sha256", "x-amz-content-sha256"),
            ("s3:x-amz-copy-source", "x-amz-copy-source"),
            ("s3:x-amz-metadata-directive", "x-amz-metadata-directive"),
            (
                "s3:x-amz-server-side-encryption-customer-algorithm",
                "x-amz-server-side-encryption-customer-algorithm",
            ),
            (
                "s3:x-amz-website-redirect-location",
                "x-amz-website-redirect-location",
            ),
            ("s3:x-amz-grant-read", "x-amz-grant-read"),
            ("s3:x-amz-grant-write", "x-amz-grant-write"),
            ("s3:x-amz-grant-read-acp", "x-amz-grant-read-acp"),
            ("s3:x-amz-grant-write-acp", "x-amz-grant-write-acp"),
            ("s3:x-amz-grant-full-control", "x-amz-grant-full-control"),
            ("s3:object-lock-mode", "x-amz-object-lock-mode"),
            (
                "s3:object-lock-retain-until-date",
                "x-amz-object-lock-retain-until-date",
            ),
            ("s3:object-lock-legal-hold", "x-amz-object-lock-legal-hold"),
            ("aws:useragent", "user-agent"),
            ("aws:referer", "referer"),
        ] {
            if let Some(v) = h(header) {
                m.insert(key.to_string(), v.to_string());
            }
        }
        if let Some(tags) = h("x-amz-tagging") {
            for (k, v) in query_pairs(tags) {
                m.insert(format!("s3:requestobjecttag/{}", k.to_lowercase()), v);
            }
        }
        let mut presigned = false;
        if let Some(q) = uri.query() {
            for (k, v) in query_pairs(q) {
                match k.as_str() {
                    "delimiter" => m.insert("s3:delimiter".into(), v),
                    "max-keys" => m.insert("s3:max-keys".into(), v),
                    "versionId" => m.insert("s3:versionid".into(), v),
                    "X-Amz-Signature" => {
                        presigned = true;
                        None
                    }
                    _ => None,
                };
            }
        }
        if headers.contains_key(hyper::header::AUTHORIZATION) || presigned {
            m.insert("s3:signatureversion".into(), "AWS4-HMAC-SHA256".into());
            let auth = if presigned {
                "REST-QUERY-STRING"
            } else {
                "REST-HEADER"
            };
            m.insert("s3:authtype".into(), auth.into());
        }
        Self(Arc::new(m))
    }
}

/// Who sent a request, and from where.
pub struct Requester {
    /// The key that signed it; `None`: anonymous.
    pub key: Option<Key>,
    /// Its key's IAM user and identity policies (a key made by IAM).
    pub identity: Option<Identity>,
    /// Who it is, as policies see it.
    pub principal: Principal,
    pub source_ip: Option<IpAddr>,
    /// Its values of the policy condition keys.
    pub conditions: ConditionValues,
    /// The policy action of its operation (`s3:PutBucketPolicy`, …).
    pub action: &'static str,
    /// The cluster's region (`aws:RequestedRegion`).
    pub region: Arc<str>,
}

impl Requester {
    /// The values of its condition keys (`prefix`: a listing's
    /// `s3:prefix`; `existing_tags`: the object's, when read).
    pub fn values<'a>(
        &'a self,
        prefix: Option<&'a str>,
        existing_tags: Option<&'a [(String, String)]>,
    ) -> Values<'a> {
        Values {
            headers: Some(&self.conditions.0),
            existing_tags,
            source_ip: self.source_ip,
            secure: false,
            prefix,
            source_arn: None,
            region: Some(&self.region),
            now_msec: None,
        }
    }

    /// What its identity policies say of `action` on `bucket` (and
    /// `object`): nothing for a key not made by IAM, whose permissions
    /// are its per-bucket flags.
    pub fn identity_decision(
        &self,
        action: &str,
        bucket: &str,
        object: Option<&str>,
        values: Values<'_>,
    ) -> Decision {
        let Some(id) = &self.identity else {
            return Decision::NotApplicable;
        };
        id.decision(&PolicyRequest {
            who: &self.principal,
            action,
            resource: Resource::S3 { bucket, object },
            values,
        })
    }

    /// [`Requester::identity_decision`] under each of `names` (a
    /// bucket's names): a deny under any of them denies, an allow under
    /// any allows.
    pub fn identity_decision_names(
        &self,
        action: &str,
        names: &[String],
        object: Option<&str>,
        values: Values<'_>,
    ) -> Decision {
        names.iter().fold(Decision::NotApplicable, |d, n| {
            d.combine(self.identity_decision(action, n, object, values))
        })
    }

    /// Its IAM identity, for messages (`user alice`, a role's session).
    pub fn user_name(&self) -> Option<String> {
        self.identity.as_ref().map(|i| i.describe())
    }

    /// Its canonical ids, which object ACL grants name: its key's id and
    /// its IAM user's id (none when anonymous).
    pub fn canonical_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.key.iter().map(|k| k.key_id.clone()).collect();
        if let Some(u) = self.identity.as_ref().and_then(|i| i.user.as_ref()) {
            ids.push(u.id.clone());
        }
        ids
    }

    /// The owner shown in listings: the key that asked (none when
    /// anonymous).
    pub fn owner(&self) -> Option<s3s::dto::Owner> {
        self.key.as_ref().map(|k| s3s::dto::Owner {
            id: Some(k.key_id.clone()),
            display_name: Some(k.name().to_string()),
        })
    }
}

/// What the rule `ByKey` grants: the key and the bucket's id.
pub struct KeyBucket {
    pub key: Key,
    pub bucket: Uuid,
}

/// What the rule `Owner` grants: the key, the bucket's id and its entry (this
/// node's copy; updates read it again from a quorum, see
/// `Api::update_bucket`).
pub struct Owned {
    pub key: Key,
    pub id: Uuid,
    pub bucket: Bucket,
}

/// The decoded pairs of a query string or of a form-encoded value
/// (`+` is a space, `%XX` a byte; invalid UTF-8 replaced).
pub fn query_pairs(s: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(s.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// A request's id (`x-amz-request-id`), put in its extensions by the
/// listener.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// What led to an object write, for its bucket notification event: `op`,
/// asked by `who` in the request of `extensions`.
pub fn cause(
    extensions: &hyper::http::Extensions,
    who: &Requester,
    op: garage_model::notify::Op,
) -> garage_model::notify::Cause {
    let facts = garage_model::notify::event::RequestFacts {
        principal: who
            .key
            .as_ref()
            .map(|k| k.key_id.clone())
            .unwrap_or_default(),
        source_ip: who.source_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        request_id: extensions
            .get::<RequestId>()
            .map(|r| r.0.clone())
            .unwrap_or_default(),
    };
    garage_model::notify::Cause::new(op, Some(Arc::new(facts)))
}
