//! Temporary credentials (issue 49) with real clients against real
//! `garage` processes and a real OpenID Connect provider (Ory Hydra,
//! built from its Go module): an ID token from Hydra's authorization code
//! flow exchanged with `aws sts assume-role-with-web-identity`, boto3's
//! web identity credential provider, AssumeRole by an IAM user with a
//! session policy; sessions refused without their token, once their role
//! or user is disabled, and once expired by the cluster's time; and a
//! node whose clock is an hour ahead still serving a live session.

use std::path::Path;
use std::process::{Command, Output};

use crate::common;
use crate::iam::{admin, garage_iam, refused, Key};

use common::brokers::{free_port, hydra, id_token};
use common::cluster::{libfaketime, Cluster};
use common::s3::{aws, aws_ok, endpoint};
use common::{stderr, stdout};

/// A session's credentials.
struct Creds {
    id: String,
    secret: String,
    token: String,
}

fn creds_of(c: &Cluster, out: &str) -> Creds {
    let v: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let cr = &v["Credentials"];
    let field = |f: &str| {
        cr[f]
            .as_str()
            .unwrap_or_else(|| panic!("no {f} in {v}"))
            .to_string()
    };
    let creds = Creds {
        id: field("AccessKeyId"),
        secret: field("SecretAccessKey"),
        token: field("SessionToken"),
    };
    assert!(creds.id.starts_with("ASIA"), "{v}");
    c.note_secret(&creds.secret);
    c.note_secret(&creds.token);
    creds
}

/// aws-cli with a session's credentials (`token`: with its session
/// token), its clock moved `skew_secs` ahead by libfaketime if not 0.
fn aws_session(
    s: &Creds,
    token: bool,
    ep: &str,
    d: &Path,
    skew_secs: i64,
    args: &[&str],
) -> Output {
    let mut c = Command::new("aws");
    c.current_dir(d)
        .env("AWS_ACCESS_KEY_ID", &s.id)
        .env("AWS_SECRET_ACCESS_KEY", &s.secret)
        .env("AWS_DEFAULT_REGION", "garage")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_MAX_ATTEMPTS", "1")
        .env_remove("AWS_SESSION_TOKEN");
    if token {
        c.env("AWS_SESSION_TOKEN", &s.token);
    }
    if skew_secs != 0 {
        c.env("LD_PRELOAD", libfaketime())
            .env("FAKETIME", format!("{skew_secs:+}"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    c.arg("--endpoint-url").arg(ep).args(args).output().unwrap()
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

fn fails_with(o: Output, code: &str, what: &str) -> String {
    let e = stderr(&o);
    assert!(
        !o.status.success() && e.contains(code),
        "{what} should fail with {code}:\n{}\n{e}",
        stdout(&o)
    );
    e
}

/// The issuer's provider name and the trust policy of a role for tokens
/// of client `garage-oidc` (and `extra` conditions).
fn web_trust(provider: &str, extra: &str) -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Federated":"arn:aws:iam:::oidc-provider/{provider}"}},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{{"StringEquals":{{"{provider}:aud":"garage-oidc"{extra}}}}}}}]}}"#
    )
}

fn assume_web(admin: &Key, ep: &str, d: &Path, role: &str, token: &str, duration: &str) -> Output {
    aws(
        admin,
        ep,
        d,
        &[
            "sts",
            "assume-role-with-web-identity",
            "--role-arn",
            &format!("arn:aws:iam:::role/{role}"),
            "--role-session-name",
            "alice-laptop",
            "--web-identity-token",
            token,
            "--duration-seconds",
            duration,
        ],
    )
}

#[test]
fn temporary_credentials_from_an_openid_connect_provider() {
    let mut c = Cluster::new(1, 1);
    c.fake_clock(0);
    c.start_all();
    c.apply_layout(&["dc1"], "1G");
    let ep = endpoint(&c, 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (public, adm) = (free_port(), free_port());
    let _hydra = hydra(public, adm, "1h");
    let provider = format!("127.0.0.1:{public}");

    // The operator's administrator sets up the provider, the bucket and
    // a role whose sessions own the folder of their user name.
    let admin = admin(&c);
    let iam = |args: &[&str]| aws_ok(&admin, &ep, d, args);
    iam(&["s3api", "create-bucket", "--bucket", "photos"]);
    let made = iam(&[
        "iam",
        "create-open-id-connect-provider",
        "--url",
        &format!("http://{provider}/"),
        "--client-id-list",
        "garage-oidc",
        "--thumbprint-list",
        "0000000000000000000000000000000000000000",
    ]);
    assert!(
        made.contains(&format!("oidc-provider/{provider}")),
        "{made}"
    );
    iam(&[
        "iam",
        "create-role",
        "--role-name",
        "photographer",
        "--assume-role-policy-document",
        &web_trust(&provider, ""),
    ]);
    let own = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],"Resource":"arn:aws:s3:::photos/${{{provider}:preferred_username}}/*"}}]}}"#
    );
    iam(&[
        "iam",
        "put-role-policy",
        "--role-name",
        "photographer",
        "--policy-name",
        "own",
        "--policy-document",
        &own,
    ]);
    iam(&[
        "iam",
        "create-role",
        "--role-name",
        "bob-only",
        "--assume-role-policy-document",
        &web_trust(&provider, &format!(r#","{provider}:sub":"bob""#)),
    ]);

    // Alice logs in at the provider; her ID token gets her a session.
    let token = id_token(public, adm, "alice");
    let out = ok(
        assume_web(&admin, &ep, d, "photographer", &token, "900"),
        "assume-role-with-web-identity",
    );
    assert!(
        out.contains("\"SubjectFromWebIdentityToken\": \"alice\""),
        "{out}"
    );
    let s = creds_of(&c, &out);
    std::fs::write(d.join("p.jpg"), b"a photo").unwrap();
    ok(
        aws_session(
            &s,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/alice/p.jpg"],
        ),
        "put in her folder",
    );
    fails_with(
        aws_session(
            &s,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/bob/p.jpg"],
        ),
        "AccessDenied",
        "put in bob's folder",
    );
    let me = ok(
        aws_session(&s, true, &ep, d, 0, &["sts", "get-caller-identity"]),
        "get-caller-identity",
    );
    assert!(
        me.contains("assumed-role/photographer/alice-laptop"),
        "{me}"
    );
    // The session's key without its token is refused.
    fails_with(
        aws_session(
            &s,
            false,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/alice/q.jpg"],
        ),
        "InvalidToken",
        "a session key without its token",
    );

    // The topic API refuses a session key without its token as well.
    fails_with(
        aws_session(&s, false, &ep, d, 0, &["sns", "list-topics"]),
        "InvalidClientTokenId",
        "the topic API with a session key without its token",
    );
    // A claim holding a wildcard does not widen the role's pattern: a
    // user named `*` owns no folder, not every folder.
    let o = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hydra/idtoken.py"))
        .args([
            "--public",
            &format!("http://127.0.0.1:{public}"),
            "--admin",
            &format!("http://127.0.0.1:{adm}"),
        ])
        .args(["--subject", "mallory", "--username", "*"])
        .output()
        .unwrap();
    let star_token = ok(o, "idtoken.py for a user named *").trim().to_string();
    let star = creds_of(
        &c,
        &ok(
            assume_web(&admin, &ep, d, "photographer", &star_token, "900"),
            "assume as *",
        ),
    );
    fails_with(
        aws_session(
            &star,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/alice/x.jpg"],
        ),
        "AccessDenied",
        "a wildcard claim",
    );
    // A role named by another spelling of its ARN is not assumed.
    fails_with(
        assume_web(&admin, &ep, d, "x/photographer", &token, "900"),
        "AccessDenied",
        "another path of the role's ARN",
    );
    // Refused: a trust policy whose conditions the token does not meet,
    // a token for another audience, a token that is not one.
    fails_with(
        assume_web(&admin, &ep, d, "bob-only", &token, "900"),
        "AccessDenied",
        "bob-only",
    );
    let o = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hydra/idtoken.py"))
        .args([
            "--public",
            &format!("http://127.0.0.1:{public}"),
            "--admin",
            &format!("http://127.0.0.1:{adm}"),
        ])
        .args(["--client-id", "another-app", "--subject", "alice"])
        .output()
        .unwrap();
    let other = ok(o, "idtoken.py for another client").trim().to_string();
    fails_with(
        assume_web(&admin, &ep, d, "photographer", &other, "900"),
        "InvalidIdentityToken",
        "another audience",
    );
    fails_with(
        assume_web(&admin, &ep, d, "photographer", "not.a.token", "900"),
        "InvalidIdentityToken",
        "garbage",
    );
    fails_with(
        assume_web(&admin, &ep, d, "photographer", &token, "7200"),
        "ValidationError",
        "longer than the role's MaxSessionDuration",
    );

    // boto3's web identity credential provider, as in a CI job: a token
    // file and a role, no keys.
    std::fs::write(d.join("token"), id_token(public, adm, "alice")).unwrap();
    let o = Command::new("python3")
        .current_dir(d)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_ROLE_ARN", "arn:aws:iam:::role/photographer")
        .env("AWS_ROLE_SESSION_NAME", "ci-job")
        .env("AWS_WEB_IDENTITY_TOKEN_FILE", d.join("token"))
        .env("AWS_ENDPOINT_URL", &ep)
        .env("AWS_DEFAULT_REGION", "garage")
        .args([
            "-c",
            "import boto3\n\
             s3 = boto3.client('s3')\n\
             s3.put_object(Bucket='photos', Key='alice/from-ci', Body=b'ci')\n\
             assert s3.get_object(Bucket='photos', Key='alice/from-ci')['Body'].read() == b'ci'\n\
             me = boto3.client('sts').get_caller_identity()\n\
             assert 'assumed-role/photographer/ci-job' in me['Arn'], me\n\
             print('done')",
        ])
        .output()
        .unwrap();
    assert!(ok(o, "boto3 with a web identity token file").contains("done"));

    // Revoked: the role disabled refuses its sessions at once; enabled
    // again, they work.
    garage_iam(
        &c,
        0,
        &[
            "set-role-enabled",
            "--role-name",
            "photographer",
            "--enabled",
            "false",
        ],
    );
    fails_with(
        aws_session(
            &s,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/alice/r.jpg"],
        ),
        "AccessDenied",
        "a disabled role's session",
    );
    fails_with(
        assume_web(&admin, &ep, d, "photographer", &token, "900"),
        "AccessDenied",
        "a disabled role",
    );
    garage_iam(
        &c,
        0,
        &[
            "set-role-enabled",
            "--role-name",
            "photographer",
            "--enabled",
            "true",
        ],
    );
    ok(
        aws_session(
            &s,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/alice/r.jpg"],
        ),
        "enabled again",
    );

    // AssumeRole by an IAM user, with a session policy narrowing the
    // role's: reads only; disabling the user ends it.
    iam(&["iam", "create-user", "--user-name", "carol"]);
    let assume = r#"{"Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Resource":"*"}]}"#;
    iam(&[
        "iam",
        "put-user-policy",
        "--user-name",
        "carol",
        "--policy-name",
        "assume",
        "--policy-document",
        assume,
    ]);
    let k: serde_json::Value =
        serde_json::from_str(&iam(&["iam", "create-access-key", "--user-name", "carol"])).unwrap();
    let carol = crate::iam::key_of(&c, &k);
    let trust = r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/carol"},"Action":"sts:AssumeRole"}]}"#;
    iam(&[
        "iam",
        "create-role",
        "--role-name",
        "editor",
        "--assume-role-policy-document",
        trust,
    ]);
    iam(&[
        "iam",
        "attach-role-policy",
        "--role-name",
        "editor",
        "--policy-arn",
        "arn:aws:iam::aws:policy/AmazonS3FullAccess",
    ]);
    refused(
        &admin,
        &ep,
        d,
        &[
            "sts",
            "assume-role",
            "--role-arn",
            "arn:aws:iam:::role/editor",
            "--role-session-name",
            "admin-edit",
        ],
        "AccessDenied",
    );
    let read_only = r#"{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;
    let out = aws_ok(
        &carol,
        &ep,
        d,
        &[
            "sts",
            "assume-role",
            "--role-arn",
            "arn:aws:iam:::role/editor",
            "--role-session-name",
            "carol-edit",
            "--policy",
            read_only,
        ],
    );
    let cs = creds_of(&c, &out);
    ok(
        aws_session(
            &cs,
            true,
            &ep,
            d,
            0,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "photos",
                "--key",
                "alice/p.jpg",
                "out",
            ],
        ),
        "read",
    );
    fails_with(
        aws_session(
            &cs,
            true,
            &ep,
            d,
            0,
            &["s3", "cp", "p.jpg", "s3://photos/carol.jpg"],
        ),
        "AccessDenied",
        "a write outside the session policy",
    );
    garage_iam(
        &c,
        0,
        &[
            "set-user-enabled",
            "--user-name",
            "carol",
            "--enabled",
            "false",
        ],
    );
    fails_with(
        aws_session(
            &cs,
            true,
            &ep,
            d,
            0,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "photos",
                "--key",
                "alice/p.jpg",
                "out",
            ],
        ),
        "AccessDenied",
        "the session of a disabled user",
    );

    // Expired by the cluster's time: the node's clock (a single node: the
    // cluster's) moved 16 minutes on, and the client's with it (its
    // requests are dated then), the 15-minute session is over.
    c.set_clock_offset(0, 960_000);
    common::cluster::wait_until(
        "the node's clock moved",
        std::time::Duration::from_secs(10),
        || {
            let o = aws_session(
                &s,
                true,
                &ep,
                d,
                960,
                &["s3", "cp", "p.jpg", "s3://photos/alice/late.jpg"],
            );
            !o.status.success() && stderr(&o).contains("ExpiredToken")
        },
    );
    c.set_clock_offset(0, 0);
    c.assert_no_secret_logged();
}

/// A session made through one node is served by the others at once, and
/// by a node whose clock is an hour ahead: expiry is judged by the
/// cluster's time (that node's clock corrected by its measured offset),
/// not by that node's wall clock, which would have ended it.
#[test]
fn a_session_outlives_a_node_clock_an_hour_ahead() {
    let mut c = Cluster::new(3, 3);
    c.fake_clock(2);
    c.start_all();
    common::cluster::wait_until(
        "nodes see each other",
        std::time::Duration::from_secs(60),
        || c.health(0).0.len() == 3,
    );
    c.apply_layout(&["dc1", "dc2", "dc3"], "1G");
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
    let trust = r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/admin"},"Action":"sts:AssumeRole"}]}"#;
    aws_ok(
        &admin,
        &ep0,
        d,
        &[
            "iam",
            "create-role",
            "--role-name",
            "writer",
            "--assume-role-policy-document",
            trust,
        ],
    );
    aws_ok(
        &admin,
        &ep0,
        d,
        &[
            "iam",
            "attach-role-policy",
            "--role-name",
            "writer",
            "--policy-arn",
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        ],
    );
    let out = aws_ok(
        &admin,
        &ep0,
        d,
        &[
            "sts",
            "assume-role",
            "--role-arn",
            "arn:aws:iam:::role/writer",
            "--role-session-name",
            "job",
            "--duration-seconds",
            "900",
        ],
    );
    let s = creds_of(&c, &out);
    std::fs::write(d.join("f"), b"x").unwrap();
    for i in 0..3 {
        let ep = endpoint(&c, i);
        ok(
            aws_session(
                &s,
                true,
                &ep,
                d,
                0,
                &["s3", "cp", "f", &format!("s3://shared/n{i}")],
            ),
            "through every node",
        );
    }
    c.set_clock_offset(2, 3_600_000);
    crate::clocks::wait_offset(&c, 2, 3_600_000);
    let ep2 = endpoint(&c, 2);
    ok(
        aws_session(
            &s,
            true,
            &ep2,
            d,
            0,
            &["s3", "cp", "f", "s3://shared/ahead"],
        ),
        "through the node an hour ahead",
    );
    c.set_clock_offset(2, 0);
    c.assert_no_secret_logged();
}
