//! `garage iam ACTION --param value …`: any IAM action
//! ([`garage_admin::ops::iam`], over the admin RPC), named as aws-cli
//! names it, with its parameters; the answer printed as JSON, as
//! `aws iam` prints it.

use std::collections::BTreeMap;

use anyhow::{bail, Context};

use super::Admin;
use garage_admin::ops::iam::IamCallRequest;
use garage_admin::ops::{AdminRequest, AdminResponse};

/// `create-user` → `CreateUser`; a name already in AWS's form stays.
fn pascal(s: &str) -> String {
    if !s.contains('-') && s.starts_with(|c: char| c.is_ascii_uppercase()) {
        return s.to_string();
    }
    s.split('-')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The parameters of `--name value` pairs; `file://PATH` values read.
fn params(args: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(name) = flag.strip_prefix("--") else {
            bail!("{flag:?}: expected a parameter --name followed by its value (`garage iam create-user --user-name alice`)");
        };
        let value = it
            .next()
            .with_context(|| format!("parameter --{name} has no value"))?;
        let value = match value.strip_prefix("file://") {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("--{name}: cannot read {path}"))?,
            None => value.clone(),
        };
        out.insert(pascal(name), value);
    }
    Ok(out)
}

pub async fn run(admin: &Admin, action: &str, args: &[String]) -> anyhow::Result<()> {
    let req = IamCallRequest {
        action: pascal(action),
        params: params(args)?,
    };
    let json = match admin.op(AdminRequest::Iam(req)).await? {
        AdminResponse::Iam(j) => j,
        other => bail!("unexpected answer from the node: {other:?}"),
    };
    let v: serde_json::Value = serde_json::from_str(&json).context("the node's answer")?;
    if !v.is_null() {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_aws_cli_gives_them() {
        assert_eq!(pascal("create-user"), "CreateUser");
        assert_eq!(pascal("CreateUser"), "CreateUser");
        assert_eq!(pascal("user-name"), "UserName");
        assert_eq!(pascal("Tags.member.1.Key"), "Tags.member.1.Key");
        let p = params(&["--user-name".into(), "alice".into()]).unwrap();
        assert_eq!(p["UserName"], "alice");
        assert!(params(&["alice".into()]).is_err());
        assert!(params(&["--user-name".into()]).is_err());
    }
}
