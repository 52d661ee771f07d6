//! Identities (issue 49) with real clients against real `garage`
//! processes: the operator makes a first IAM user with `garage iam`;
//! that user's key makes groups, policies, users and keys with
//! `aws iam`; the users' keys are decided by their identity policies
//! (with `${aws:username}` resources, an explicit deny winning) and by
//! bucket policies using the whole condition grammar; a key made
//! inactive or deleted through one node is refused by every node.

use std::path::Path;
use std::time::Duration;

use crate::common;

use common::cluster::{wait_until, Cluster};
use common::s3::{aws, aws_ok, endpoint, make_key};
use common::{stderr, stdout};

pub(crate) type Key = (String, String);

/// `garage iam ACTION ARGS…` on node `i`, its JSON answer.
pub(crate) fn garage_iam(c: &Cluster, i: usize, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["iam"];
    all.extend_from_slice(args);
    let out = c.garage_ok(i, &all);
    match out.trim() {
        "" => serde_json::Value::Null,
        s => serde_json::from_str(s).unwrap_or_else(|e| panic!("garage iam {args:?}: {e}: {s}")),
    }
}

/// The key of an `AccessKey` answer (`garage iam` or `aws iam`).
pub(crate) fn key_of(c: &Cluster, v: &serde_json::Value) -> Key {
    let k = &v["AccessKey"];
    let id = k["AccessKeyId"].as_str().unwrap_or_else(|| panic!("{v}"));
    let secret = k["SecretAccessKey"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"));
    assert!(id.starts_with("AKIA"), "{v}");
    c.note_secret(secret);
    (id.to_string(), secret.to_string())
}

/// The operator's first IAM user, with AWS's AdministratorAccess.
pub(crate) fn admin(c: &Cluster) -> Key {
    garage_iam(c, 0, &["create-user", "--user-name", "admin"]);
    garage_iam(
        c,
        0,
        &[
            "attach-user-policy",
            "--user-name",
            "admin",
            "--policy-arn",
            "arn:aws:iam::aws:policy/AdministratorAccess",
        ],
    );
    let k = garage_iam(c, 0, &["create-access-key", "--user-name", "admin"]);
    key_of(c, &k)
}

pub(crate) fn refused(key: &Key, ep: &str, d: &Path, args: &[&str], code: &str) -> String {
    let o = aws(key, ep, d, args);
    let err = stderr(&o);
    assert!(
        !o.status.success() && err.contains(code),
        "aws {args:?} should be refused with {code}:\n{}\n{err}",
        stdout(&o)
    );
    err
}

const OWN_FOLDER: &str = r#"{"Version":"2012-10-17","Statement":[
  {"Effect":"Allow","Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],"Resource":"arn:aws:s3:::photos/${aws:username}/*"},
  {"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::photos","Condition":{"StringLike":{"s3:prefix":["${aws:username}/*"]}}}]}"#;

#[test]
fn users_groups_and_policies_with_aws_cli() {
    let mut c = Cluster::new(1, 1);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // A key of its own (`garage key create`) may not call IAM.
    let legacy = make_key(&c, "legacy");
    let err = refused(&legacy, &ep, d, &["iam", "list-users"], "AccessDenied");
    assert!(err.contains("garage iam"), "{err}");

    let admin = admin(&c);
    let iam = |args: &[&str]| aws_ok(&admin, &ep, d, args);
    iam(&["s3api", "create-bucket", "--bucket", "photos"]);
    iam(&["iam", "create-group", "--group-name", "photographers"]);
    std::fs::write(d.join("own.json"), OWN_FOLDER).unwrap();
    let p: serde_json::Value = serde_json::from_str(&iam(&[
        "iam",
        "create-policy",
        "--policy-name",
        "own-folder",
        "--policy-document",
        "file://own.json",
    ]))
    .unwrap();
    let policy_arn = p["Policy"]["Arn"].as_str().unwrap().to_string();
    assert_eq!(policy_arn, "arn:aws:iam:::policy/own-folder");
    iam(&[
        "iam",
        "attach-group-policy",
        "--group-name",
        "photographers",
        "--policy-arn",
        &policy_arn,
    ]);
    let mut keys = Vec::new();
    for u in ["alice", "bob"] {
        let made = iam(&["iam", "create-user", "--user-name", u]);
        assert!(made.contains(&format!("arn:aws:iam:::user/{u}")), "{made}");
        iam(&[
            "iam",
            "add-user-to-group",
            "--group-name",
            "photographers",
            "--user-name",
            u,
        ]);
        let k: serde_json::Value =
            serde_json::from_str(&iam(&["iam", "create-access-key", "--user-name", u])).unwrap();
        keys.push(key_of(&c, &k));
    }
    let (alice, bob) = (&keys[0], &keys[1]);
    let group = iam(&["iam", "get-group", "--group-name", "photographers"]);
    assert!(group.contains("alice") && group.contains("bob"), "{group}");
    let users = iam(&["iam", "list-users"]);
    assert!(
        users.contains("\"admin\"") && users.contains("\"alice\""),
        "{users}"
    );

    // Each user writes, reads and lists under its own name only.
    std::fs::write(d.join("a.jpg"), b"alice's photo").unwrap();
    aws_ok(
        alice,
        &ep,
        d,
        &["s3", "cp", "a.jpg", "s3://photos/alice/a.jpg"],
    );
    aws_ok(bob, &ep, d, &["s3", "cp", "a.jpg", "s3://photos/bob/b.jpg"]);
    refused(
        alice,
        &ep,
        d,
        &["s3", "cp", "a.jpg", "s3://photos/bob/x.jpg"],
        "AccessDenied",
    );
    refused(
        bob,
        &ep,
        d,
        &[
            "s3api",
            "get-object",
            "--bucket",
            "photos",
            "--key",
            "alice/a.jpg",
            "out",
        ],
        "AccessDenied",
    );
    aws_ok(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "get-object",
            "--bucket",
            "photos",
            "--key",
            "alice/a.jpg",
            "out",
        ],
    );
    assert_eq!(std::fs::read(d.join("out")).unwrap(), b"alice's photo");
    let listed = aws_ok(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "list-objects-v2",
            "--bucket",
            "photos",
            "--prefix",
            "alice/",
        ],
    );
    assert!(
        listed.contains("alice/a.jpg") && !listed.contains("bob/"),
        "{listed}"
    );
    refused(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "list-objects-v2",
            "--bucket",
            "photos",
            "--prefix",
            "bob/",
        ],
        "AccessDenied",
    );
    refused(
        alice,
        &ep,
        d,
        &["s3api", "create-bucket", "--bucket", "alices"],
        "AccessDenied",
    );
    refused(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "put-bucket-policy",
            "--bucket",
            "photos",
            "--policy",
            "{}",
        ],
        "AccessDenied",
    );
    refused(alice, &ep, d, &["iam", "list-users"], "AccessDenied");

    // An object's ACL grants to a user by its id, for every key of the
    // user (the bucket keeps ACLs, asked for at creation).
    iam(&[
        "s3api",
        "create-bucket",
        "--bucket",
        "shared",
        "--object-ownership",
        "ObjectWriter",
    ]);
    iam(&["s3", "cp", "a.jpg", "s3://shared/for-bob.jpg"]);
    let get_shared = [
        "s3api",
        "get-object",
        "--bucket",
        "shared",
        "--key",
        "for-bob.jpg",
        "got.jpg",
    ];
    refused(bob, &ep, d, &get_shared, "AccessDenied");
    let u: serde_json::Value =
        serde_json::from_str(&iam(&["iam", "get-user", "--user-name", "bob"])).unwrap();
    let bob_id = u["User"]["UserId"].as_str().unwrap().to_string();
    assert!(bob_id.starts_with("AIDA"), "{u}");
    iam(&[
        "s3api",
        "put-object-acl",
        "--bucket",
        "shared",
        "--key",
        "for-bob.jpg",
        "--grant-read",
        &format!("id={bob_id}"),
    ]);
    aws_ok(bob, &ep, d, &get_shared);
    assert_eq!(std::fs::read(d.join("got.jpg")).unwrap(), b"alice's photo");
    refused(alice, &ep, d, &get_shared, "AccessDenied");
    let acl: serde_json::Value = serde_json::from_str(&iam(&[
        "s3api",
        "get-object-acl",
        "--bucket",
        "shared",
        "--key",
        "for-bob.jpg",
    ]))
    .unwrap();
    assert!(
        acl["Grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["Grantee"]["ID"] == bob_id.as_str()
                && g["Grantee"]["DisplayName"] == "bob"
                && g["Permission"] == "READ"),
        "{acl}"
    );
    refused(
        &admin,
        &ep,
        d,
        &[
            "s3api",
            "put-object-acl",
            "--bucket",
            "shared",
            "--key",
            "for-bob.jpg",
            "--grant-read",
            "id=AIDANOSUCHUSER0000000",
        ],
        "InvalidArgument",
    );

    // An explicit deny in an inline policy wins over the group's allow.
    let deny = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Action":"s3:DeleteObject","Resource":"*"}]}"#;
    iam(&[
        "iam",
        "put-user-policy",
        "--user-name",
        "alice",
        "--policy-name",
        "no-delete",
        "--policy-document",
        deny,
    ]);
    let got = iam(&[
        "iam",
        "get-user-policy",
        "--user-name",
        "alice",
        "--policy-name",
        "no-delete",
    ]);
    assert!(
        got.contains("\"Effect\": \"Deny\""),
        "aws-cli decodes the document: {got}"
    );
    let err = refused(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "delete-object",
            "--bucket",
            "photos",
            "--key",
            "alice/a.jpg",
        ],
        "AccessDenied",
    );
    assert!(err.contains("explicitly denied"), "{err}");
    aws_ok(
        bob,
        &ep,
        d,
        &[
            "s3api",
            "delete-object",
            "--bucket",
            "photos",
            "--key",
            "bob/b.jpg",
        ],
    );

    // A condition not served is refused with its name, in identity
    // policies and in bucket policies; the ones the issue found refused
    // are served.
    let bad = r#"{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*","Condition":{"StringEquals":{"ec2:Vpc":"vpc-1"}}}]}"#;
    let err = refused(
        &admin,
        &ep,
        d,
        &[
            "iam",
            "put-user-policy",
            "--user-name",
            "bob",
            "--policy-name",
            "x",
            "--policy-document",
            bad,
        ],
        "MalformedPolicyDocument",
    );
    assert!(err.contains("ec2:Vpc"), "{err}");
    let bucket_bad = r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::photos/*","Condition":{"StringEquals":{"aws:SourceVpce":"v"}}}]}"#;
    let err = refused(
        &admin,
        &ep,
        d,
        &[
            "s3api",
            "put-bucket-policy",
            "--bucket",
            "photos",
            "--policy",
            bucket_bad,
        ],
        "MalformedPolicy",
    );
    assert!(err.contains("aws:SourceVpce"), "{err}");
    let served = r#"{"Version":"2012-10-17","Statement":[
      {"Effect":"Allow","Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::photos/logs/*","Condition":{"ArnLike":{"aws:SourceArn":"arn:aws:s3:::*"}}},
      {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::photos/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"false"},"StringNotEqualsIfExists":{"s3:x-amz-server-side-encryption":"AES256"}}},
      {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::photos/*","Condition":{"ForAnyValue:StringEquals":{"s3:RequestObjectTagKeys":["secret"]}}},
      {"Effect":"Deny","Principal":{"AWS":"arn:aws:iam:::user/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::photos/*","Condition":{"NumericLessThan":{"aws:EpochTime":"4102444800"},"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}}}]}"#;
    iam(&[
        "s3api",
        "put-bucket-policy",
        "--bucket",
        "photos",
        "--policy",
        served,
    ]);
    // The bucket policy's deny for bob (a user ARN as principal) wins
    // over his identity policy; alice is not named.
    aws_ok(bob, &ep, d, &["s3", "cp", "a.jpg", "s3://photos/bob/c.jpg"]);
    refused(
        bob,
        &ep,
        d,
        &[
            "s3api",
            "get-object",
            "--bucket",
            "photos",
            "--key",
            "bob/c.jpg",
            "out",
        ],
        "AccessDenied",
    );
    aws_ok(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "get-object",
            "--bucket",
            "photos",
            "--key",
            "alice/a.jpg",
            "out",
        ],
    );
    // SSE other than AES256 and a tag named `secret` are denied.
    refused(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "photos",
            "--key",
            "alice/t",
            "--body",
            "a.jpg",
            "--tagging",
            "secret=1",
        ],
        "AccessDenied",
    );
    aws_ok(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "photos",
            "--key",
            "alice/t",
            "--body",
            "a.jpg",
            "--tagging",
            "plain=1",
        ],
    );
    aws_ok(
        alice,
        &ep,
        d,
        &[
            "s3api",
            "put-object",
            "--bucket",
            "photos",
            "--key",
            "alice/s",
            "--body",
            "a.jpg",
            "--server-side-encryption",
            "AES256",
        ],
    );

    // Deleting a user with keys, policies or groups left is refused, as
    // on AWS; a deleted user's key is refused.
    let err = refused(
        &admin,
        &ep,
        d,
        &["iam", "delete-user", "--user-name", "bob"],
        "DeleteConflict",
    );
    assert!(err.contains("access keys"), "{err}");
    iam(&[
        "iam",
        "delete-access-key",
        "--user-name",
        "bob",
        "--access-key-id",
        &bob.0,
    ]);
    iam(&[
        "iam",
        "remove-user-from-group",
        "--group-name",
        "photographers",
        "--user-name",
        "bob",
    ]);
    iam(&["iam", "delete-user", "--user-name", "bob"]);
    refused(
        bob,
        &ep,
        d,
        &["s3", "ls", "s3://photos/bob/"],
        "InvalidAccessKeyId",
    );
    refused(
        &admin,
        &ep,
        d,
        &["iam", "get-user", "--user-name", "bob"],
        "NoSuchEntity",
    );
    let me = iam(&["iam", "get-user"]);
    assert!(
        me.contains("\"UserName\": \"admin\""),
        "GetUser without a name: the caller: {me}"
    );
    let err = refused(
        &admin,
        &ep,
        d,
        &["iam", "delete-policy", "--policy-arn", &policy_arn],
        "DeleteConflict",
    );
    assert!(err.contains("attached"), "{err}");
    // Only a policy's own ARN names it: another account or path does not
    // reach it (a policy denying its own ARN would not see that one).
    refused(
        &admin,
        &ep,
        d,
        &[
            "iam",
            "delete-policy",
            "--policy-arn",
            "arn:aws:iam::1:policy/x/own-folder",
        ],
        "NoSuchEntity",
    );
    iam(&["iam", "get-policy", "--policy-arn", &policy_arn]);
    // An identity policy's allow does not pass the bucket policy's
    // explicit deny, bucket configuration included.
    iam(&["iam", "create-user", "--user-name", "ops"]);
    iam(&[
        "iam",
        "attach-user-policy",
        "--user-name",
        "ops",
        "--policy-arn",
        "arn:aws:iam::aws:policy/AmazonS3FullAccess",
    ]);
    let k: serde_json::Value =
        serde_json::from_str(&iam(&["iam", "create-access-key", "--user-name", "ops"])).unwrap();
    let ops = key_of(&c, &k);
    aws_ok(
        &ops,
        &ep,
        d,
        &[
            "s3api",
            "put-bucket-tagging",
            "--bucket",
            "photos",
            "--tagging",
            "TagSet=[{Key=k,Value=v}]",
        ],
    );
    let deny_ops = r#"{"Statement":[{"Effect":"Deny","Principal":{"AWS":"arn:aws:iam:::user/ops"},"Action":"s3:*","Resource":["arn:aws:s3:::photos","arn:aws:s3:::photos/*"]}]}"#;
    iam(&[
        "s3api",
        "put-bucket-policy",
        "--bucket",
        "photos",
        "--policy",
        deny_ops,
    ]);
    refused(
        &ops,
        &ep,
        d,
        &[
            "s3api",
            "put-bucket-tagging",
            "--bucket",
            "photos",
            "--tagging",
            "TagSet=[{Key=k,Value=w}]",
        ],
        "AccessDenied",
    );
    refused(
        &ops,
        &ep,
        d,
        &["s3api", "delete-bucket-policy", "--bucket", "photos"],
        "AccessDenied",
    );
    refused(
        &ops,
        &ep,
        d,
        &[
            "s3api",
            "get-object",
            "--bucket",
            "photos",
            "--key",
            "alice/a.jpg",
            "out",
        ],
        "AccessDenied",
    );
    // A disabled user's key is refused by the topic API too.
    garage_iam(
        &c,
        0,
        &[
            "set-user-enabled",
            "--user-name",
            "ops",
            "--enabled",
            "false",
        ],
    );
    refused(&ops, &ep, d, &["sns", "list-topics"], "AccessDenied");
    // Every action the model lists is dispatched (without its parameters,
    // each names what it lacks or what is missing; none is "not served").
    for action in garage_model::iam::actions::ACTIONS {
        let out = c.garage(0, &["iam", action]);
        let e = stderr(&out);
        assert!(
            out.status.success() || e.contains("is required"),
            "garage iam {action} without parameters: {e}"
        );
    }
    let listed = garage_iam(
        &c,
        0,
        &[
            "list-attached-group-policies",
            "--group-name",
            "photographers",
        ],
    );
    assert_eq!(
        listed["AttachedPolicies"][0]["PolicyName"], "own-folder",
        "{listed}"
    );
}

#[test]
fn a_revoked_key_is_refused_on_every_node() {
    let c = Cluster::three_zones();
    let admin = admin(&c);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ep0 = endpoint(&c, 0);
    aws_ok(
        &admin,
        &ep0,
        d,
        &["s3api", "create-bucket", "--bucket", "shared"],
    );
    aws_ok(
        &admin,
        &ep0,
        d,
        &["iam", "create-user", "--user-name", "carol"],
    );
    aws_ok(
        &admin,
        &ep0,
        d,
        &[
            "iam",
            "attach-user-policy",
            "--user-name",
            "carol",
            "--policy-arn",
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        ],
    );
    let k: serde_json::Value = serde_json::from_str(&aws_ok(
        &admin,
        &ep0,
        d,
        &["iam", "create-access-key", "--user-name", "carol"],
    ))
    .unwrap();
    let carol = key_of(&c, &k);
    std::fs::write(d.join("f"), b"x").unwrap();
    // Made through node 0, the key works through every node at once.
    for i in 0..3 {
        let ep = endpoint(&c, i);
        aws_ok(
            &carol,
            &ep,
            d,
            &["s3", "cp", "f", &format!("s3://shared/n{i}")],
        );
    }
    let refused_everywhere = |code: &str| {
        for i in 0..3 {
            let ep = endpoint(&c, i);
            let took = wait_until(
                &format!("node {i} refuses the revoked key"),
                Duration::from_secs(20),
                || {
                    let o = aws(&carol, &ep, d, &["s3", "cp", "f", "s3://shared/again"]);
                    !o.status.success() && stderr(&o).contains(code)
                },
            );
            eprintln!("node {i} refused the revoked key after {took:?}");
        }
    };
    // Made inactive through node 1: refused by all three.
    aws_ok(
        &admin,
        &endpoint(&c, 1),
        d,
        &[
            "iam",
            "update-access-key",
            "--user-name",
            "carol",
            "--access-key-id",
            &carol.0,
            "--status",
            "Inactive",
        ],
    );
    refused_everywhere("AccessDenied");
    let keys = aws_ok(
        &admin,
        &ep0,
        d,
        &["iam", "list-access-keys", "--user-name", "carol"],
    );
    assert!(keys.contains("Inactive"), "{keys}");
    aws_ok(
        &admin,
        &endpoint(&c, 2),
        d,
        &[
            "iam",
            "update-access-key",
            "--user-name",
            "carol",
            "--access-key-id",
            &carol.0,
            "--status",
            "Active",
        ],
    );
    for i in 0..3 {
        let ep = endpoint(&c, i);
        wait_until(
            &format!("node {i} takes the key again"),
            Duration::from_secs(20),
            || {
                aws(&carol, &ep, d, &["s3", "cp", "f", "s3://shared/again"])
                    .status
                    .success()
            },
        );
    }
    // Deleted through node 2 (garage iam): refused by all three.
    garage_iam(
        &c,
        2,
        &[
            "delete-access-key",
            "--user-name",
            "carol",
            "--access-key-id",
            &carol.0,
        ],
    );
    refused_everywhere("InvalidAccessKeyId");
}

/// A node that was down while keys were revoked refuses them from its
/// first request once back, not only once anti-entropy reaches it: after a
/// start, its copies of the fully replicated tables (keys, IAM) answer
/// only once caught up with a quorum, and reads ask a quorum until then.
/// An IAM user's key made inactive and a key of its own (`garage key
/// create`) deleted through node 0 while node 2 was down; node 2
/// restarted; 100 requests with each key through it at once, none
/// accepted.
#[test]
fn a_node_down_during_a_revocation_refuses_the_key_when_back() {
    use common::s3::sdk_client;
    let mut c = Cluster::three_zones();
    let admin = admin(&c);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ep0 = endpoint(&c, 0);
    aws_ok(
        &admin,
        &ep0,
        d,
        &["s3api", "create-bucket", "--bucket", "shared"],
    );
    garage_iam(&c, 0, &["create-user", "--user-name", "dave"]);
    garage_iam(
        &c,
        0,
        &[
            "attach-user-policy",
            "--user-name",
            "dave",
            "--policy-arn",
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        ],
    );
    let dave = key_of(
        &c,
        &garage_iam(&c, 0, &["create-access-key", "--user-name", "dave"]),
    );
    let legacy = make_key(&c, "legacy");
    c.garage_ok(
        0,
        &[
            "bucket", "allow", "--read", "--write", "shared", "--key", &legacy.0,
        ],
    );
    std::fs::write(d.join("f"), b"x").unwrap();
    for k in [&dave, &legacy] {
        wait_until("node 2 takes the key", Duration::from_secs(20), || {
            aws(
                k,
                &endpoint(&c, 2),
                d,
                &["s3", "cp", "f", "s3://shared/before"],
            )
            .status
            .success()
        });
    }

    c.kill(2);
    garage_iam(
        &c,
        0,
        &[
            "update-access-key",
            "--user-name",
            "dave",
            "--access-key-id",
            &dave.0,
            "--status",
            "Inactive",
        ],
    );
    c.garage_ok(0, &["key", "delete", "--yes", &legacy.0]);
    c.start(2);

    // As fast as one client goes, from the moment node 2 listens: every
    // answer a refusal (bounded: 100 requests per key).
    for (k, what) in [
        (&dave, "the inactive IAM key"),
        (&legacy, "the deleted key"),
    ] {
        let cl = sdk_client(&c, 2, k);
        let answers = common::run(async {
            let mut out = Vec::new();
            let start = std::time::Instant::now();
            for i in 0..100 {
                let r = cl
                    .put_object()
                    .bucket("shared")
                    .key(format!("after-{i}"))
                    .body(b"x".to_vec().into())
                    .send()
                    .await;
                out.push((start.elapsed(), r.map_err(|e| format!("{e:?}"))));
            }
            out
        });
        let accepted: Vec<_> = answers.iter().filter(|(_, r)| r.is_ok()).collect();
        assert!(
            accepted.is_empty(),
            "node 2 accepted {what} {} times after its restart, at {:?}",
            accepted.len(),
            accepted.iter().map(|(t, _)| *t).collect::<Vec<_>>()
        );
        let (last, r) = answers.last().unwrap();
        let e = r.as_ref().unwrap_err();
        assert!(
            e.contains("AccessDenied") || e.contains("InvalidAccessKeyId"),
            "{what}: {e}"
        );
        eprintln!("{what}: 100 requests through node 2 refused, over {last:?}");
    }
}
