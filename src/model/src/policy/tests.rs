use std::collections::HashMap;

use super::*;

/// What `p` says of `action` on `object` of bucket `b` by key `key`
/// (anonymous: `None`) from 192.0.2.7, with `set` changing the values.
fn eval<'a>(
    p: &Policy,
    key: Option<&str>,
    action: &str,
    object: Option<&str>,
    set: impl FnOnce(&mut Values<'a>),
) -> Decision {
    let who = Principal {
        key_id: key.map(String::from),
        user: None,
        session: None,
    };
    let mut values = Values {
        source_ip: Some("192.0.2.7".parse().unwrap()),
        ..Values::default()
    };
    set(&mut values);
    p.evaluate(&Request {
        who: &who,
        action,
        resource: Resource::S3 {
            bucket: "b",
            object,
        },
        values,
    })
}

fn plain(p: &Policy, key: Option<&str>, action: &str, object: Option<&str>) -> Decision {
    eval(p, key, action, object, |_| ())
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
        plain(&p, None, "s3:GetObject", Some("a/b.html")),
        Decision::Allow
    );
    assert_eq!(
        plain(&p, None, "s3:PutObject", Some("a")),
        Decision::NotApplicable
    );
    assert_eq!(
        plain(&p, None, "s3:ListBucket", None),
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
        plain(&p, Some("GK2"), "s3:DeleteObject", Some("logs/1")),
        Decision::Deny
    );
    assert_eq!(
        plain(&p, Some("GK2"), "s3:DeleteObject", Some("data/1")),
        Decision::Allow
    );
    assert_eq!(
        plain(&p, Some("GK1"), "s3:deleteobject", Some("logs/1")),
        Decision::Allow
    );
    assert_eq!(
        plain(&p, Some("GK3"), "s3:GetObject", Some("x")),
        Decision::NotApplicable
    );
    assert_eq!(
        plain(&p, None, "s3:GetObject", Some("x")),
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
    assert_eq!(plain(&p, None, "s3:GetObject", Some("k")), Decision::Allow);
    let from = |ip: Option<&str>| {
        eval(&p, None, "s3:GetObject", Some("k"), |v| {
            v.source_ip = ip.map(|i| i.parse().unwrap())
        })
    };
    assert_eq!(from(Some("198.51.100.1")), Decision::NotApplicable);
    assert_eq!(from(None), Decision::NotApplicable);
    let list = |prefix| eval(&p, None, "s3:ListBucket", None, |v| v.prefix = Some(prefix));
    assert_eq!(list("public/img/"), Decision::Allow);
    assert_eq!(list(""), Decision::Allow);
    assert_eq!(list("private/"), Decision::NotApplicable);
    assert_eq!(
        plain(&p, Some("GK1"), "s3:PutObject", Some("k")),
        Decision::Deny
    );
    assert_eq!(
        eval(&p, Some("GK1"), "s3:PutObject", Some("k"), |v| v.secure =
            true),
        Decision::NotApplicable
    );
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
    let list = |prefix| eval(&p, None, "s3:ListBucket", None, |v| v.prefix = Some(prefix));
    assert_eq!(list("abc"), Decision::NotApplicable);
    assert_eq!(list("a*"), Decision::Allow);
}

fn ctx(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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
    let put = |c: &HashMap<String, String>| {
        eval(&p, None, "s3:PutObject", Some("k"), |v| v.headers = Some(c))
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
        eval(&p, None, "s3:DeleteObject", Some("k"), |v| {
            v.headers = Some(&ua);
            v.existing_tags = tags;
        })
    };
    let keep = vec![("keep".to_string(), "yes".to_string())];
    let other = vec![("keep".to_string(), "no".to_string())];
    assert_eq!(del(Some(&keep)), Decision::Deny);
    assert_eq!(del(Some(&other)), Decision::Allow);
    assert_eq!(del(None), Decision::Allow);
}

#[test]
fn the_log_delivery_service_is_a_principal() {
    let p = Policy::parse(
        r#"{"Statement":[
            {"Effect":"Allow","Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/logs/*",
             "Condition":{"ArnLike":{"aws:SourceArn":"arn:aws:s3:::photos*"}}},
            {"Effect":"Deny","Principal":{"Service":["logging.s3.amazonaws.com"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/logs/secret/*"}]}"#,
        Some("b"),
    )
    .unwrap();
    let src = "arn:aws:s3:::photos";
    assert!(p.allows_log_delivery("b", "logs/2026-11-27-00-00-00-x", src));
    assert!(
        !p.allows_log_delivery("b", "logs/2026-11-27-00-00-00-x", "arn:aws:s3:::other"),
        "ArnLike on aws:SourceArn limits the source"
    );
    assert!(
        !p.allows_log_delivery("b", "logs/secret/x", src),
        "an explicit deny wins"
    );
    assert!(!p.allows_log_delivery("b", "other/x", src));
    // It grants nothing to keys or to anonymous requests.
    assert_eq!(
        plain(&p, Some("GK1"), "s3:PutObject", Some("logs/x")),
        Decision::NotApplicable
    );
    assert_eq!(
        plain(&p, None, "s3:PutObject", Some("logs/x")),
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
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"iam:*","Resource":"arn:aws:s3:::b/*"}}"#).contains("invalid action"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}}"#).contains("invalid resource"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("principal"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"kms:ViaService":"x"}}}}"#).contains("kms:ViaService"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/":"x"}}}}"#).contains("not served"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","NotPrincipal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("both"));
    assert!(err(
        r#"{"Statement":{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#
    )
    .contains("Principal"));
    assert!(err(r#"{"Statement":{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#).contains("Effect"));
    assert!(err(r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/${aws:nope}"}}"#).contains("aws:nope"));
    assert!(err(&" ".repeat(MAX_POLICY_SIZE + 1)).contains("at most"));
}

#[test]
fn not_action_not_resource_not_principal() {
    let p = Policy::parse(
        r#"{"Statement":[
            {"Effect":"Allow","Principal":"*","NotAction":"s3:Delete*","Resource":"arn:aws:s3:::b/*"},
            {"Effect":"Deny","NotPrincipal":{"AWS":"GK1"},"Action":"s3:GetObject","NotResource":"arn:aws:s3:::b/public/*"}]}"#,
        Some("b"),
    )
    .unwrap();
    assert_eq!(
        plain(&p, None, "s3:PutObject", Some("public/x")),
        Decision::Allow
    );
    assert_eq!(
        plain(&p, None, "s3:DeleteObject", Some("public/x")),
        Decision::NotApplicable
    );
    assert_eq!(
        plain(&p, None, "s3:GetObject", Some("public/x")),
        Decision::Allow
    );
    assert_eq!(
        plain(&p, Some("GK2"), "s3:GetObject", Some("private/x")),
        Decision::Deny
    );
    assert_eq!(
        plain(&p, Some("GK1"), "s3:GetObject", Some("private/x")),
        Decision::Allow
    );
}

fn alice() -> Principal {
    Principal {
        key_id: Some("GKA".into()),
        user: Some(UserPrincipal {
            name: "alice".into(),
            id: "AIDAALICE".into(),
            arn: "arn:aws:iam:::user/alice".into(),
            tags: vec![],
        }),
        session: None,
    }
}

#[test]
fn identity_policies_name_any_resource_and_take_variables() {
    let p = Policy::parse_identity(
        r#"{"Version":"2012-10-17","Statement":[
            {"Effect":"Allow","Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::photos/${aws:username}/*"},
            {"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::photos",
             "Condition":{"StringLike":{"s3:prefix":"${aws:username}/*"}}},
            {"Effect":"Allow","Action":"iam:GetUser","Resource":"arn:aws:iam::*:user/${aws:username}"},
            {"Effect":"Deny","Action":"s3:*","Resource":"*","Condition":{"Bool":{"aws:MultiFactorAuthPresent":"true"}}}]}"#,
    )
    .unwrap();
    let who = alice();
    let ask = |action: &str, resource: Resource<'_>, prefix: Option<&str>| {
        p.evaluate(&Request {
            who: &who,
            action,
            resource,
            values: Values {
                prefix,
                ..Values::default()
            },
        })
    };
    let obj = |b, o| Resource::S3 {
        bucket: b,
        object: Some(o),
    };
    assert_eq!(
        ask("s3:PutObject", obj("photos", "alice/1.jpg"), None),
        Decision::Allow
    );
    assert_eq!(
        ask("s3:PutObject", obj("photos", "bob/1.jpg"), None),
        Decision::NotApplicable
    );
    assert_eq!(
        ask("s3:PutObject", obj("other", "alice/1.jpg"), None),
        Decision::NotApplicable
    );
    let bucket = Resource::S3 {
        bucket: "photos",
        object: None,
    };
    assert_eq!(
        ask("s3:ListBucket", bucket, Some("alice/")),
        Decision::Allow
    );
    assert_eq!(
        ask("s3:ListBucket", bucket, Some("bob/")),
        Decision::NotApplicable
    );
    assert_eq!(
        ask(
            "iam:GetUser",
            Resource::Arn("arn:aws:iam:::user/alice"),
            None
        ),
        Decision::Allow
    );
    assert_eq!(
        ask("iam:GetUser", Resource::Arn("arn:aws:iam:::user/bob"), None),
        Decision::NotApplicable
    );
    // Without a user name (a key of its own), the variable matches nothing.
    let key = Principal {
        key_id: Some("GK1".into()),
        user: None,
        session: None,
    };
    let r = Request {
        who: &key,
        action: "s3:PutObject",
        resource: obj("photos", "/1.jpg"),
        values: Values::default(),
    };
    assert_eq!(p.evaluate(&r), Decision::NotApplicable);
    let err = |t: &str| Policy::parse_identity(t).unwrap_err();
    assert!(err(
        r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*"}}"#
    )
    .contains("Principal"));
    assert!(
        err(r#"{"Statement":{"Effect":"Allow","Action":"s3:*","Resource":"photos/*"}}"#)
            .contains("invalid resource")
    );
    assert!(Policy::parse_identity(
        r#"{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}"#
    )
    .is_ok());
}

#[test]
fn a_user_arn_is_a_principal() {
    let p = Policy::parse(
        r#"{"Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/alice"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#,
        Some("b"),
    )
    .unwrap();
    let who = alice();
    let r = Request {
        who: &who,
        action: "s3:GetObject",
        resource: Resource::S3 {
            bucket: "b",
            object: Some("x"),
        },
        values: Values::default(),
    };
    assert_eq!(p.evaluate(&r), Decision::Allow);
    assert_eq!(
        plain(&p, Some("GKA"), "s3:GetObject", Some("x")),
        Decision::NotApplicable
    );
    assert_eq!(
        user_of_arn("arn:aws:iam::123456789012:user/team/alice"),
        Some("alice")
    );
    assert_eq!(user_of_arn("arn:aws:iam:::role/alice"), None);
}
