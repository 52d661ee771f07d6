//! The managed policies every cluster has, under AWS's ARNs, so that
//! setups written for AWS attach them unchanged
//! (`arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess`). They are constants,
//! not entries: they cannot be changed or deleted.

use super::tables::PolicyConfig;

pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    pub document: &'static str,
}

pub const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "AdministratorAccess",
        description: "Everything: S3, IAM and STS",
        document: r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#,
    },
    Builtin {
        name: "AmazonS3FullAccess",
        description: "Every S3 action on every bucket",
        document: r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#,
    },
    Builtin {
        name: "AmazonS3ReadOnlyAccess",
        description: "Reading and listing every bucket",
        document: r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:Get*","s3:List*"],"Resource":"*"}]}"#,
    },
    Builtin {
        name: "IAMFullAccess",
        description: "Every IAM action",
        document: r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"iam:*","Resource":"*"}]}"#,
    },
    Builtin {
        name: "IAMReadOnlyAccess",
        description: "Reading IAM users, groups and policies",
        document: r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["iam:Get*","iam:List*"],"Resource":"*"}]}"#,
    },
];

/// The ARN prefix of the built-in policies.
pub const ARN_PREFIX: &str = "arn:aws:iam::aws:policy/";

impl Builtin {
    pub fn arn(&self) -> String {
        format!("{ARN_PREFIX}{}", self.name)
    }

    pub fn config(&self) -> PolicyConfig {
        PolicyConfig {
            id: format!("ANPAGARAGEBUILTIN{}", self.name.len()),
            path: "/".into(),
            description: self.description.into(),
            document: self.document.into(),
        }
    }
}

/// The built-in policy `arn` names, if any.
pub fn by_arn(arn: &str) -> Option<&'static Builtin> {
    let name = arn.strip_prefix(ARN_PREFIX)?;
    BUILTIN.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for b in BUILTIN {
            crate::policy::Policy::parse_identity(b.document).unwrap();
            assert_eq!(by_arn(&b.arn()).map(|x| x.name), Some(b.name));
        }
        assert!(by_arn("arn:aws:iam::aws:policy/Nothing").is_none());
    }
}
