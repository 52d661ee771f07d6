//! A statement's `Condition` block: every operator of AWS's grammar
//! (String*, Numeric*, Date*, Bool, BinaryEquals, IpAddress /
//! NotIpAddress, Arn*, Null), each but Null also `…IfExists`, and the set
//! qualifiers `ForAnyValue:` / `ForAllValues:`; on the keys of
//! [`super::values::known_key`]. Values are checked for their operator
//! when the policy is put.
//!
//! Evaluation, as AWS documents it: a key the request has no value for
//! makes a positive operator false and a negated one (`…Not…`) true;
//! `…IfExists` makes it true; `ForAllValues` holds on no value and
//! `ForAnyValue` does not. A negated operator holds when no value of the
//! request matches any of the condition's.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;
use wildmatch::WildMatch;

use super::values::{
    check_variables, known_key, served_keys, substitute, substitute_pattern, Principal, Values,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// An operator family, with the condition's values parsed for it.
#[derive(Debug)]
enum Op {
    /// `StringEquals` (`ci`: `…IgnoreCase`); values may hold variables.
    StringEquals {
        ci: bool,
        values: Vec<String>,
    },
    /// `StringLike`: `*` and `?`; values may hold variables.
    StringLike(Vec<String>),
    Numeric(Cmp, Vec<f64>),
    /// Milliseconds since the epoch.
    Date(Cmp, Vec<i64>),
    Bool(Vec<bool>),
    Binary(Vec<String>),
    Ip(Vec<IpNet>),
    /// `ArnEquals` and `ArnLike` (the same on AWS: each of the six
    /// colon-separated parts compared with `*` and `?`).
    Arn(Vec<String>),
    /// `Null`: `true` holds when the key has no value.
    Null(Vec<bool>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Set {
    /// A single-valued operator.
    Single,
    ForAnyValue,
    ForAllValues,
}

/// One key tested by one operator.
#[derive(Debug)]
pub struct Test {
    /// The key, lowercase.
    pub key: String,
    op: Op,
    negated: bool,
    if_exists: bool,
    set: Set,
}

/// Parses an operator's name: its family and values' parser, whether it
/// is negated, `…IfExists`, and its set qualifier.
fn parse_op(name: &str, values: &[String]) -> Result<(Op, bool, bool, Set), String> {
    let (set, rest) = if let Some(r) = name.strip_prefix("ForAnyValue:") {
        (Set::ForAnyValue, r)
    } else if let Some(r) = name.strip_prefix("ForAllValues:") {
        (Set::ForAllValues, r)
    } else {
        (Set::Single, name)
    };
    let (base, if_exists) = match rest.strip_suffix("IfExists") {
        Some(b) => (b, true),
        None => (rest, false),
    };
    let bad_value = |v: &str, what: &str| format!("Condition {name}: {v:?} is not {what}");
    let nums = || {
        values
            .iter()
            .map(|v| v.parse::<f64>().map_err(|_| bad_value(v, "a number")))
            .collect::<Result<Vec<_>, _>>()
    };
    let dates = || {
        values
            .iter()
            .map(|v| {
                parse_date(v)
                    .ok_or_else(|| bad_value(v, "a date (ISO 8601 or seconds since the epoch)"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let bools = || {
        values
            .iter()
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad_value(v, "\"true\" or \"false\"")),
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let strings = || -> Result<Vec<String>, String> {
        for v in values {
            check_variables(v)?;
        }
        Ok(values.to_vec())
    };
    let (op, negated) = match base {
        "StringEquals" => (Op::StringEquals { ci: false, values: strings()? }, false),
        "StringNotEquals" => (Op::StringEquals { ci: false, values: strings()? }, true),
        "StringEqualsIgnoreCase" => (Op::StringEquals { ci: true, values: strings()? }, false),
        "StringNotEqualsIgnoreCase" => (Op::StringEquals { ci: true, values: strings()? }, true),
        "StringLike" => (Op::StringLike(strings()?), false),
        "StringNotLike" => (Op::StringLike(strings()?), true),
        "NumericEquals" => (Op::Numeric(Cmp::Eq, nums()?), false),
        "NumericNotEquals" => (Op::Numeric(Cmp::Eq, nums()?), true),
        "NumericLessThan" => (Op::Numeric(Cmp::Lt, nums()?), false),
        "NumericLessThanEquals" => (Op::Numeric(Cmp::Le, nums()?), false),
        "NumericGreaterThan" => (Op::Numeric(Cmp::Gt, nums()?), false),
        "NumericGreaterThanEquals" => (Op::Numeric(Cmp::Ge, nums()?), false),
        "DateEquals" => (Op::Date(Cmp::Eq, dates()?), false),
        "DateNotEquals" => (Op::Date(Cmp::Eq, dates()?), true),
        "DateLessThan" => (Op::Date(Cmp::Lt, dates()?), false),
        "DateLessThanEquals" => (Op::Date(Cmp::Le, dates()?), false),
        "DateGreaterThan" => (Op::Date(Cmp::Gt, dates()?), false),
        "DateGreaterThanEquals" => (Op::Date(Cmp::Ge, dates()?), false),
        "Bool" => (Op::Bool(bools()?), false),
        "BinaryEquals" => (Op::Binary(values.to_vec()), false),
        "IpAddress" | "NotIpAddress" => (
            Op::Ip(
                values
                    .iter()
                    .map(|v| {
                        v.parse::<IpNet>()
                            .or_else(|_| v.parse::<IpAddr>().map(IpNet::from))
                            .map_err(|_| bad_value(v, "an IP address or range"))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            base == "NotIpAddress",
        ),
        "ArnEquals" | "ArnLike" => (Op::Arn(strings()?), false),
        "ArnNotEquals" | "ArnNotLike" => (Op::Arn(strings()?), true),
        "Null" if !if_exists => (Op::Null(bools()?), false),
        _ => {
            return Err(format!(
                "Condition operator {name} is not served: the operators are String(Not)Equals(IgnoreCase), \
                 String(Not)Like, Numeric(Not)Equals, NumericLessThan(Equals), NumericGreaterThan(Equals), \
                 Date(Not)Equals, DateLessThan(Equals), DateGreaterThan(Equals), Bool, BinaryEquals, \
                 (Not)IpAddress, Arn(Not)Equals, Arn(Not)Like and Null; each but Null also …IfExists, \
                 and prefixed ForAnyValue: or ForAllValues:"
            ))
        }
    };
    if set != Set::Single && matches!(op, Op::Null(_)) {
        return Err(format!(
            "Condition operator {name}: Null takes no set qualifier"
        ));
    }
    Ok((op, negated, if_exists, set))
}

/// A date of a condition: ISO 8601 (a time with its offset, or a day),
/// or seconds since the epoch; in milliseconds since the epoch.
fn parse_date(s: &str) -> Option<i64> {
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        return d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_millisecond());
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        return dt
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_millisecond());
    }
    s.parse::<i64>().ok().map(|secs| secs.saturating_mul(1000))
}

/// A string or a list of strings (numbers and booleans taken as their
/// text, as AWS does).
fn value_strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    let one = |x: &Value| match x {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("{what}: expected strings")),
    };
    match v {
        Value::Array(a) if !a.is_empty() => a.iter().map(one).collect(),
        Value::Array(_) => Err(format!("{what}: an empty list")),
        x => Ok(vec![one(x)?]),
    }
}

/// Parses a statement's `Condition` block.
pub fn parse(v: Option<&Value>) -> Result<Vec<Test>, String> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let ops = v
        .as_object()
        .ok_or_else(|| "Condition: expected an object".to_string())?;
    let mut tests = Vec::new();
    for (op_name, keys) in ops {
        let keys = keys
            .as_object()
            .ok_or_else(|| format!("Condition {op_name}: expected an object"))?;
        for (key, values) in keys {
            let k = key.to_ascii_lowercase();
            if !known_key(&k) {
                return Err(format!(
                    "Condition key {key} (in {op_name}) is not served: the served keys are {}",
                    served_keys()
                ));
            }
            let values = value_strings(values, &format!("Condition {op_name} {key}"))?;
            let (op, negated, if_exists, set) = parse_op(op_name, &values)?;
            tests.push(Test {
                key: k,
                op,
                negated,
                if_exists,
                set,
            });
        }
    }
    Ok(tests)
}

impl Test {
    /// Whether it holds for a request by `who` with `values`.
    pub fn holds(&self, values: &Values<'_>, who: &Principal) -> bool {
        let got = values.get(who, &self.key).filter(|v| !v.is_empty());
        if let Op::Null(want) = &self.op {
            return want.iter().any(|w| *w == got.is_none());
        }
        let Some(got) = got else {
            return match self.set {
                Set::ForAllValues => true,
                Set::ForAnyValue => false,
                Set::Single => self.if_exists || self.negated,
            };
        };
        let matches = |v: &String| self.matches(v, values, who);
        match self.set {
            Set::Single => got.iter().any(matches) != self.negated,
            Set::ForAnyValue => got.iter().any(|v| matches(v) != self.negated),
            Set::ForAllValues => got.iter().all(|v| matches(v) != self.negated),
        }
    }

    /// Whether one value of the request matches one of the condition's.
    fn matches(&self, v: &str, values: &Values<'_>, who: &Principal) -> bool {
        let subst = |c: &String| substitute(c, values, who);
        let subst_pattern = |c: &String| substitute_pattern(c, values, who);
        match &self.op {
            Op::StringEquals { ci, values: cs } => cs.iter().filter_map(subst).any(|c| match ci {
                true => c.eq_ignore_ascii_case(v),
                false => c == v,
            }),
            Op::StringLike(cs) => cs
                .iter()
                .filter_map(subst_pattern)
                .any(|c| WildMatch::new(&c).matches(v)),
            Op::Numeric(cmp, cs) => v
                .parse::<f64>()
                .is_ok_and(|n| cs.iter().any(|c| cmp.holds(n, *c))),
            Op::Date(cmp, cs) => parse_date(v).is_some_and(|d| cs.iter().any(|c| cmp.holds(d, *c))),
            Op::Bool(cs) => {
                let b = v.eq_ignore_ascii_case("true");
                cs.contains(&b)
            }
            Op::Binary(cs) => cs.iter().any(|c| c == v),
            Op::Ip(nets) => v
                .parse::<IpAddr>()
                .is_ok_and(|ip| nets.iter().any(|n| n.contains(&ip))),
            Op::Arn(cs) => cs.iter().filter_map(subst_pattern).any(|c| arn_like(&c, v)),
            Op::Null(_) => false,
        }
    }

    /// Whether it limits a statement to some source addresses (an
    /// `IpAddress` on `aws:SourceIp` with no range of length 0) or to
    /// named principals: such a statement is not a grant to everyone.
    pub fn narrows_principal(&self) -> bool {
        if self.negated || self.if_exists || self.set != Set::Single {
            return false;
        }
        match (&self.op, self.key.as_str()) {
            (Op::Ip(nets), "aws:sourceip") => nets.iter().all(|n| n.prefix_len() > 0),
            (Op::StringEquals { values, .. } | Op::Arn(values), k)
            | (Op::StringLike(values), k)
                if super::values::PRINCIPAL_KEYS.contains(&k) =>
            {
                values.iter().all(|v| !v.contains(['*', '?']))
            }
            _ => false,
        }
    }
}

/// `ArnLike`: the six colon-separated parts of `pattern` and `arn`
/// compared one by one, the last (the resource) taking the rest of the
/// text, colons included.
pub fn arn_like(pattern: &str, arn: &str) -> bool {
    let p: Vec<&str> = pattern.splitn(6, ':').collect();
    let a: Vec<&str> = arn.splitn(6, ':').collect();
    if p.len() != 6 || a.len() != 6 {
        return pattern == arn || (pattern == "*");
    }
    p.iter()
        .zip(a.iter())
        .all(|(p, a)| WildMatch::new(p).matches(a))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn test(json: &str) -> Test {
        let v: Value = serde_json::from_str(json).unwrap();
        let mut t = parse(Some(&v)).unwrap();
        assert_eq!(t.len(), 1);
        t.pop().unwrap()
    }

    fn holds(t: &Test, headers: &[(&str, &str)]) -> bool {
        let h: HashMap<String, String> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let values = Values {
            headers: Some(&h),
            ..Values::default()
        };
        t.holds(&values, &Principal::default())
    }

    #[test]
    fn missing_values_as_aws_documents() {
        let k = "s3:x-amz-storage-class";
        let pos = test(r#"{"StringEquals":{"s3:x-amz-storage-class":"STANDARD"}}"#);
        let neg = test(r#"{"StringNotEquals":{"s3:x-amz-storage-class":"STANDARD"}}"#);
        let ife = test(r#"{"StringEqualsIfExists":{"s3:x-amz-storage-class":"STANDARD"}}"#);
        let any = test(r#"{"ForAnyValue:StringEquals":{"s3:x-amz-storage-class":"STANDARD"}}"#);
        let all = test(r#"{"ForAllValues:StringEquals":{"s3:x-amz-storage-class":"STANDARD"}}"#);
        let null = test(r#"{"Null":{"s3:x-amz-storage-class":"true"}}"#);
        let not_null = test(r#"{"Null":{"s3:x-amz-storage-class":"false"}}"#);
        for (t, absent, std, other) in [
            (&pos, false, true, false),
            (&neg, true, false, true),
            (&ife, true, true, false),
            (&any, false, true, false),
            (&all, true, true, false),
            (&null, true, false, false),
            (&not_null, false, true, true),
        ] {
            assert_eq!(holds(t, &[]), absent, "{t:?} without a value");
            assert_eq!(holds(t, &[(k, "STANDARD")]), std, "{t:?} STANDARD");
            assert_eq!(holds(t, &[(k, "GLACIER")]), other, "{t:?} GLACIER");
        }
    }

    #[test]
    fn operator_families() {
        let n = test(r#"{"NumericLessThanEquals":{"s3:max-keys":"10"}}"#);
        assert!(holds(&n, &[("s3:max-keys", "10")]));
        assert!(!holds(&n, &[("s3:max-keys", "11")]));
        assert!(!holds(&n, &[("s3:max-keys", "ten")]));
        let ne = test(r#"{"NumericNotEquals":{"s3:max-keys":[5, 6]}}"#);
        assert!(holds(&ne, &[("s3:max-keys", "7")]));
        assert!(!holds(&ne, &[("s3:max-keys", "6")]));
        let d =
            test(r#"{"DateLessThan":{"s3:object-lock-retain-until-date":"2030-01-01T00:00:00Z"}}"#);
        assert!(holds(
            &d,
            &[("s3:object-lock-retain-until-date", "2029-12-31T23:59:59Z")]
        ));
        assert!(!holds(
            &d,
            &[("s3:object-lock-retain-until-date", "2030-01-02")]
        ));
        let ci = test(r#"{"StringEqualsIgnoreCase":{"s3:x-amz-acl":"PRIVATE"}}"#);
        assert!(holds(&ci, &[("s3:x-amz-acl", "private")]));
        let like = test(r#"{"StringNotLike":{"aws:useragent":["aws-cli/*","Boto3/*"]}}"#);
        assert!(!holds(&like, &[("aws:useragent", "aws-cli/2.1")]));
        assert!(holds(&like, &[("aws:useragent", "curl/8")]));
        let b = test(r#"{"Bool":{"aws:SecureTransport":false}}"#);
        assert!(b.holds(&Values::default(), &Principal::default()));
        let arn = test(r#"{"ArnLike":{"aws:SourceArn":"arn:aws:s3:::logs-*"}}"#);
        let with_arn = |a| Values {
            source_arn: Some(a),
            ..Values::default()
        };
        assert!(arn.holds(&with_arn("arn:aws:s3:::logs-2026"), &Principal::default()));
        assert!(!arn.holds(&with_arn("arn:aws:s3:::photos"), &Principal::default()));
        assert!(!arn.holds(&with_arn("arn:aws:iam:::logs-x"), &Principal::default()));
        let ip = test(r#"{"NotIpAddress":{"aws:SourceIp":["10.0.0.0/8","::1"]}}"#);
        let from = |a: &str| Values {
            source_ip: Some(a.parse().unwrap()),
            ..Values::default()
        };
        assert!(!ip.holds(&from("10.1.2.3"), &Principal::default()));
        assert!(!ip.holds(&from("::1"), &Principal::default()));
        assert!(ip.holds(&from("192.0.2.1"), &Principal::default()));
    }

    #[test]
    fn set_qualifiers_on_many_values() {
        let tags = [
            ("s3:requestobjecttag/a", "1"),
            ("s3:requestobjecttag/b", "2"),
        ];
        let all =
            test(r#"{"ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["a","b","c"]}}"#);
        assert!(holds(&all, &tags));
        assert!(!holds(&all, &[("s3:requestobjecttag/z", "1")]));
        assert!(holds(&all, &[]), "ForAllValues holds on no value");
        let any = test(r#"{"ForAnyValue:StringEquals":{"s3:RequestObjectTagKeys":"b"}}"#);
        assert!(holds(&any, &tags));
        assert!(!holds(&any, &[("s3:requestobjecttag/a", "1")]));
        assert!(!holds(&any, &[]));
        let any_not = test(r#"{"ForAnyValue:StringNotEquals":{"s3:RequestObjectTagKeys":"a"}}"#);
        assert!(holds(&any_not, &tags));
        assert!(!holds(&any_not, &[("s3:requestobjecttag/a", "1")]));
    }

    #[test]
    fn variables_take_the_principal() {
        let t = test(r#"{"StringLike":{"s3:prefix":["home/${aws:username}/*"]}}"#);
        let alice = Principal {
            key_id: Some("GK1".into()),
            user: Some(super::super::values::UserPrincipal {
                name: "alice".into(),
                id: "AIDA1".into(),
                arn: "arn:aws:iam:::user/alice".into(),
                tags: vec![("team".into(), "blue".into())],
            }),
            session: None,
        };
        let at = |p| Values {
            prefix: Some(p),
            ..Values::default()
        };
        assert!(t.holds(&at("home/alice/x"), &alice));
        assert!(!t.holds(&at("home/bob/x"), &alice));
        assert!(
            !t.holds(&at("home//x"), &Principal::default()),
            "no user name: the value matches nothing"
        );
        // A value with a wildcard cannot widen the pattern.
        let mut star = alice.clone();
        star.user.as_mut().unwrap().name = "*".into();
        assert!(!t.holds(&at("home/bob/x"), &star));
        let tag = test(r#"{"StringEquals":{"aws:PrincipalTag/team":"blue"}}"#);
        assert!(tag.holds(&Values::default(), &alice));
        assert!(!tag.holds(&Values::default(), &Principal::default()));
    }

    #[test]
    fn what_is_refused_names_itself() {
        let err = |j: &str| parse(Some(&serde_json::from_str(j).unwrap())).unwrap_err();
        assert!(err(r#"{"StringEquals":{"ec2:Vpc":"x"}}"#).contains("ec2:Vpc"));
        assert!(err(r#"{"StringSounds":{"s3:prefix":"x"}}"#).contains("StringSounds"));
        assert!(err(r#"{"NullIfExists":{"s3:prefix":"true"}}"#).contains("NullIfExists"));
        assert!(
            err(r#"{"NumericEquals":{"s3:max-keys":"many"}}"#).contains("\"many\" is not a number")
        );
        assert!(err(r#"{"DateEquals":{"aws:CurrentTime":"soon"}}"#).contains("not a date"));
        assert!(err(r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/99"}}"#).contains("IP"));
        assert!(err(r#"{"StringEquals":{"s3:prefix":"${aws:nothing}"}}"#).contains("aws:nothing"));
        assert!(err(r#"{"StringEquals":{"s3:existingobjecttag/":"x"}}"#).contains("not served"));
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01T00:00:10Z"), Some(10_000));
        assert_eq!(parse_date("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_date("20"), Some(20_000));
        assert_eq!(parse_date("x"), None);
    }
}
