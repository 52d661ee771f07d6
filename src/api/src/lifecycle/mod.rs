//! Get/Put/DeleteBucketLifecycleConfiguration: the rules are checked as S3
//! checks them and kept in the bucket entry (a last-writer-wins register,
//! like CORS). The lifecycle worker (`worker.rs`) applies them.
//! Supported: Status, ID, a filter on prefix, object size and tags,
//! Expiration (Days, Date or ExpiredObjectDeleteMarker),
//! NoncurrentVersionExpiration (NoncurrentDays, NewerNoncurrentVersions),
//! AbortIncompleteMultipartUpload and Transition to an erasure-coded class
//! of the layout (`transition.rs`), and NoncurrentVersionTransition to
//! one (once the cluster is finalized at v0.3.0: its feature gate).
//!
//! Lifecycle: the rules (this module); the workers that apply them, and
//! transitions to erasure-coded classes, are `garage_model::lifecycle`.

use std::collections::HashSet;
use std::sync::Arc;

use garage_model::bucket_table::{self as model, LifecycleExpiration, LifecycleFilter, DAY_MSEC};
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::request::{Ctx, Owned};

/// At most this many rules per configuration (S3's limit).
const MAX_RULES: usize = 1000;
/// Rule IDs are at most this long (S3's limit).
const MAX_ID_LEN: usize = 255;

impl Api {
    pub async fn get_bucket_lifecycle_configuration(
        self: Arc<Self>,
        _req: S3Request<GetBucketLifecycleConfigurationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let b = ctx.granted.bucket;
        let rules = b
            .params()
            .and_then(|p| p.lifecycle_config.get().clone())
            .ok_or(ApiError::NoSuchLifecycleConfiguration)?;
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
            rules: Some(rules.iter().map(rule_to_dto).collect()),
            ..Default::default()
        }))
    }

    pub async fn put_bucket_lifecycle_configuration(
        self: Arc<Self>,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let b = ctx.granted.bucket;
        let config = req.input.lifecycle_configuration.ok_or_else(|| {
            ApiError::MalformedXml("the lifecycle configuration is missing".into())
        })?;
        let rules = lifecycle_from_dto(config)?;
        self.check_lifecycle_gate(&rules)?;
        self.check_transition_classes(&rules)?;
        // A bucket pinned to some classes transitions only to them.
        let allowed = b
            .params()
            .and_then(|p| p.allowed_storage_classes.get().clone());
        if let Some(allowed) = allowed {
            let outside = rules
                .iter()
                .flat_map(|r| {
                    r.transitions
                        .iter()
                        .map(|t| &t.class)
                        .chain(r.noncurrent_transitions.iter().map(|t| &t.class))
                })
                .find(|c| !allowed.contains(c));
            if let Some(c) = outside {
                return Err(ApiError::InvalidStorageClass(format!(
                    "this bucket accepts only the storage classes {}: a transition to {c} is refused",
                    allowed.join(", ")
                )));
            }
        }
        self.update_bucket(b, |p| p.lifecycle_config.update(Some(rules)))
            .await?;
        Ok(S3Response::new(
            PutBucketLifecycleConfigurationOutput::default(),
        ))
    }

    pub async fn delete_bucket_lifecycle(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketLifecycleInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketLifecycleOutput>> {
        let b = ctx.granted.bucket;
        self.update_bucket(b, |p| p.lifecycle_config.update(None))
            .await?;
        let mut resp = S3Response::new(DeleteBucketLifecycleOutput::default());
        resp.status = Some(hyper::StatusCode::NO_CONTENT);
        Ok(resp)
    }
}

fn invalid(m: impl Into<String>) -> ApiError {
    ApiError::InvalidArgument(m.into())
}

fn size(what: &str, v: Option<i64>) -> ApiResult<Option<u64>> {
    v.map(|v| u64::try_from(v).map_err(|_| invalid(format!("'{what}' must not be negative"))))
        .transpose()
}

/// A filter's tags: each with a key and a value, checked as object tags
/// are.
fn tags_from_dto(tags: Vec<Tag>) -> ApiResult<Vec<(String, String)>> {
    let tags = tags
        .into_iter()
        .map(|t| match (t.key, t.value) {
            (Some(k), Some(v)) => Ok((k, v)),
            _ => Err(ApiError::MalformedXml(
                "a lifecycle filter Tag has a Key and a Value".into(),
            )),
        })
        .collect::<ApiResult<Vec<_>>>()?;
    crate::versions::tagging::check_tags(&tags, MAX_FILTER_TAGS)?;
    Ok(tags)
}

/// Tags one filter may name.
const MAX_FILTER_TAGS: usize = 10;

fn filter_from_dto(f: LifecycleRuleFilter) -> ApiResult<LifecycleFilter> {
    let given = [
        f.prefix.is_some(),
        f.object_size_greater_than.is_some(),
        f.object_size_less_than.is_some(),
        f.tag.is_some(),
        f.and.is_some(),
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(ApiError::MalformedXml(
            "a lifecycle Filter has one of Prefix, ObjectSizeGreaterThan, ObjectSizeLessThan, Tag or And".into(),
        ));
    }
    let (prefix, gt, lt, tags) = match f.and {
        Some(a) => (
            a.prefix,
            a.object_size_greater_than,
            a.object_size_less_than,
            a.tags.unwrap_or_default(),
        ),
        None => (
            f.prefix,
            f.object_size_greater_than,
            f.object_size_less_than,
            f.tag.into_iter().collect(),
        ),
    };
    let out = LifecycleFilter {
        prefix: prefix.filter(|p| !p.is_empty()),
        size_gt: size("ObjectSizeGreaterThan", gt)?,
        size_lt: size("ObjectSizeLessThan", lt)?,
        tags: tags_from_dto(tags)?,
    };
    if let (Some(g), Some(l)) = (out.size_gt, out.size_lt) {
        if g >= l {
            return Err(invalid(
                "ObjectSizeGreaterThan must be less than ObjectSizeLessThan",
            ));
        }
    }
    Ok(out)
}

/// An Expiration: Days or Date (`Some`), or ExpiredObjectDeleteMarker
/// alone (`None`, with `true`).
fn expiration_from_dto(e: S3Expiration) -> ApiResult<(Option<LifecycleExpiration>, bool)> {
    if let Some(m) = e.expired_object_delete_marker {
        if e.days.is_some() || e.date.is_some() {
            return Err(invalid(
                "ExpiredObjectDeleteMarker cannot be specified with Days or Date in a Lifecycle Expiration Policy",
            ));
        }
        return Ok((None, m));
    }
    expiration_time(e).map(|t| (Some(t), false))
}

fn expiration_time(e: S3Expiration) -> ApiResult<LifecycleExpiration> {
    match (e.days, e.date) {
        (Some(d), None) => {
            if d <= 0 {
                return Err(invalid(
                    "'Days' for Expiration action must be a positive integer",
                ));
            }
            Ok(LifecycleExpiration::AfterDays(d as u32))
        }
        (None, Some(date)) => {
            let t = time::OffsetDateTime::from(date);
            let ms = t.unix_timestamp_nanos() / 1_000_000;
            if ms < 0 || ms % DAY_MSEC as i128 != 0 || t.nanosecond() != 0 {
                return Err(invalid("'Date' must be at midnight GMT"));
            }
            Ok(LifecycleExpiration::AtDate(ms as u64))
        }
        _ => Err(ApiError::MalformedXml(
            "a lifecycle Expiration has exactly one of Days and Date".into(),
        )),
    }
}

type S3Expiration = s3s::dto::LifecycleExpiration;

fn rule_from_dto(r: LifecycleRule) -> ApiResult<model::LifecycleRule> {
    let noncurrent_transitions = r
        .noncurrent_version_transitions
        .unwrap_or_default()
        .into_iter()
        .map(noncurrent_transition_from_dto)
        .collect::<ApiResult<Vec<_>>>()?;
    check_noncurrent_transitions(
        &noncurrent_transitions,
        noncurrent_expiration_days(&r.noncurrent_version_expiration),
    )?;
    let transitions = r
        .transitions
        .unwrap_or_default()
        .into_iter()
        .map(transition_from_dto)
        .collect::<ApiResult<Vec<_>>>()?;
    let noncurrent_expiration = match r.noncurrent_version_expiration {
        None => None,
        Some(n) => {
            let days = match n.noncurrent_days {
                Some(d) if d > 0 => d as u32,
                _ => {
                    return Err(invalid(
                        "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer",
                    ))
                }
            };
            let keep = newer_noncurrent_versions(n.newer_noncurrent_versions)?;
            Some(model::NoncurrentExpiration { days, keep })
        }
    };
    let enabled = match r.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        s => {
            return Err(ApiError::MalformedXml(format!(
                "lifecycle rule Status is Enabled or Disabled, not {s:?}"
            )))
        }
    };
    if r.id.as_ref().is_some_and(|id| id.len() > MAX_ID_LEN) {
        return Err(invalid(format!(
            "ID length should not exceed allowed limit of {MAX_ID_LEN}"
        )));
    }
    let filter = match (r.filter, r.prefix) {
        (Some(_), Some(_)) => {
            return Err(ApiError::MalformedXml(
                "a lifecycle rule has a Filter or a Prefix, not both".into(),
            ))
        }
        (Some(f), None) => filter_from_dto(f)?,
        (None, p) => LifecycleFilter {
            prefix: p.filter(|p| !p.is_empty()),
            ..Default::default()
        },
    };
    let (expiration, expired_delete_marker) = match r.expiration {
        Some(e) => expiration_from_dto(e)?,
        None => (None, false),
    };
    let abort_incomplete_mpu_days = match r.abort_incomplete_multipart_upload {
        None => None,
        Some(a) => match a.days_after_initiation {
            None => {
                return Err(ApiError::MalformedXml(
                    "AbortIncompleteMultipartUpload needs DaysAfterInitiation".into(),
                ))
            }
            Some(d) if d <= 0 => {
                return Err(invalid(
                    "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer",
                ))
            }
            Some(d) => Some(d as u32),
        },
    };
    if abort_incomplete_mpu_days.is_some() && (filter.size_gt.is_some() || filter.size_lt.is_some())
    {
        return Err(invalid(
            "AbortIncompleteMultipartUpload cannot be specified with an object size filter (an upload has no size yet)",
        ));
    }
    if abort_incomplete_mpu_days.is_some() && !filter.tags.is_empty() {
        return Err(invalid(
            "AbortIncompleteMultipartUpload cannot be specified with Tags.",
        ));
    }
    if expired_delete_marker && !filter.tags.is_empty() {
        return Err(invalid(
            "ExpiredObjectDeleteMarker cannot be specified with Tags.",
        ));
    }
    check_transitions(&transitions, expiration)?;
    if expiration.is_none()
        && abort_incomplete_mpu_days.is_none()
        && noncurrent_expiration.is_none()
        && !expired_delete_marker
        && transitions.is_empty()
        && noncurrent_transitions.is_empty()
    {
        return Err(invalid(
            "At least one action needs to be specified in a rule",
        ));
    }
    Ok(model::LifecycleRule {
        id: r.id,
        enabled,
        filter,
        expiration,
        abort_incomplete_mpu_days,
        noncurrent_expiration,
        expired_delete_marker,
        transitions,
        noncurrent_transitions,
    })
}

/// The NoncurrentDays of a rule's NoncurrentVersionExpiration, if any (for
/// the order of its transitions; checked on its own later).
fn noncurrent_expiration_days(e: &Option<NoncurrentVersionExpiration>) -> Option<i32> {
    e.as_ref().and_then(|e| e.noncurrent_days)
}

/// A NoncurrentVersionTransition: NoncurrentDays (0 or more, as for a
/// Transition), NewerNoncurrentVersions (1 to 100) and a storage class
/// (checked against the layout by [`Api::check_transition_classes`]).
fn noncurrent_transition_from_dto(
    t: NoncurrentVersionTransition,
) -> ApiResult<model::NoncurrentTransition> {
    let class = t
        .storage_class
        .map(|c| c.as_str().to_string())
        .ok_or_else(|| {
            ApiError::MalformedXml("a NoncurrentVersionTransition needs a StorageClass".into())
        })?;
    let days = match t.noncurrent_days {
        Some(d) if d >= 0 => d as u32,
        _ => {
            return Err(invalid(
                "'NoncurrentDays' for NoncurrentVersionTransition action must be a non-negative integer",
            ))
        }
    };
    let keep = newer_noncurrent_versions(t.newer_noncurrent_versions)?;
    Ok(model::NoncurrentTransition { days, keep, class })
}

/// NewerNoncurrentVersions, of a noncurrent expiration or transition: 1 to
/// 100 when given.
fn newer_noncurrent_versions(k: Option<i32>) -> ApiResult<Option<u32>> {
    match k {
        None => Ok(None),
        Some(k) if (1..=100).contains(&k) => Ok(Some(k as u32)),
        Some(_) => Err(invalid(
            "'NewerNoncurrentVersions' must be between 1 and 100",
        )),
    }
}

/// S3's rules between a rule's noncurrent actions: one transition per
/// class, and the expiration after every transition.
fn check_noncurrent_transitions(
    ts: &[model::NoncurrentTransition],
    expiration_days: Option<i32>,
) -> ApiResult<()> {
    let mut classes = HashSet::new();
    for t in ts {
        if !classes.insert(t.class.as_str()) {
            return Err(invalid(format!(
                "'StorageClass' must be different for 'NoncurrentVersionTransition' actions in the same rule ({})",
                t.class
            )));
        }
        if expiration_days.is_some_and(|e| e <= t.days as i32) {
            return Err(invalid(format!(
                "'NoncurrentDays' in the NoncurrentVersionExpiration action must be greater than 'NoncurrentDays' in the NoncurrentVersionTransition action for StorageClass {}",
                t.class
            )));
        }
    }
    Ok(())
}

/// A Transition: Days (0 or more: S3's 30-day minimum for `STANDARD_IA`
/// is a billing rule, not one of ours) or Date, and a storage class
/// (checked against the layout by [`Api::check_transition_classes`]).
fn transition_from_dto(t: Transition) -> ApiResult<model::LifecycleTransition> {
    let class = t
        .storage_class
        .map(|c| c.as_str().to_string())
        .ok_or_else(|| ApiError::MalformedXml("a Transition needs a StorageClass".into()))?;
    let when = match (t.days, t.date) {
        (Some(d), None) if d >= 0 => LifecycleExpiration::AfterDays(d as u32),
        (Some(_), None) => {
            return Err(invalid(
                "'Days' for Transition action must be a non-negative integer",
            ))
        }
        (None, Some(date)) => expiration_time(S3Expiration {
            date: Some(date),
            ..Default::default()
        })?,
        _ => {
            return Err(ApiError::MalformedXml(
                "a lifecycle Transition has exactly one of Days and Date".into(),
            ))
        }
    };
    Ok(model::LifecycleTransition { when, class })
}

/// S3's rules between the actions of one rule: one transition per class,
/// Days or Date throughout, and an expiration after every transition.
fn check_transitions(
    ts: &[model::LifecycleTransition],
    expiration: Option<LifecycleExpiration>,
) -> ApiResult<()> {
    let mut classes = HashSet::new();
    for t in ts {
        if !classes.insert(t.class.as_str()) {
            return Err(invalid(format!(
                "'StorageClass' must be different for 'Transition' actions in the same rule ({})",
                t.class
            )));
        }
        match (t.when, expiration) {
            (LifecycleExpiration::AfterDays(a), Some(LifecycleExpiration::AfterDays(e)))
                if e <= a =>
            {
                return Err(invalid(format!(
                    "'Days' in the Expiration action must be greater than 'Days' in the Transition action for StorageClass {}",
                    t.class
                )))
            }
            (LifecycleExpiration::AtDate(a), Some(LifecycleExpiration::AtDate(e))) if e <= a => {
                return Err(invalid(format!(
                    "'Date' in the Expiration action must be later than 'Date' in the Transition action for StorageClass {}",
                    t.class
                )))
            }
            (LifecycleExpiration::AfterDays(_), Some(LifecycleExpiration::AtDate(_)))
            | (LifecycleExpiration::AtDate(_), Some(LifecycleExpiration::AfterDays(_))) => {
                return Err(invalid(
                    "Found mixed 'Date' and 'Days' based Expiration and Transition actions in lifecycle rule",
                ))
            }
            _ => (),
        }
    }
    let days = ts
        .iter()
        .filter(|t| matches!(t.when, LifecycleExpiration::AfterDays(_)))
        .count();
    if days != 0 && days != ts.len() {
        return Err(invalid(
            "Found mixed 'Date' and 'Days' based Transition actions in lifecycle rule",
        ));
    }
    Ok(())
}

impl Api {
    /// Every class a rule transitions to is an erasure-coded class of the
    /// layout: `STANDARD` is refused (S3 has no transition to it), an
    /// unknown class is `InvalidStorageClass`.
    fn check_transition_classes(&self, rules: &[model::LifecycleRule]) -> ApiResult<()> {
        let current = rules
            .iter()
            .flat_map(|r| r.transitions.iter())
            .map(|t| ("Transition", &t.class));
        let noncurrent = rules
            .iter()
            .flat_map(|r| r.noncurrent_transitions.iter())
            .map(|t| ("NoncurrentVersionTransition", &t.class));
        for (what, class) in current.chain(noncurrent) {
            if self.storage_choice(Some(class))?.code.is_none() {
                return Err(invalid(format!(
                    "'StorageClass' of a {what} cannot be {class}"
                )));
            }
        }
        Ok(())
    }

    /// NoncurrentVersionTransition is stored in a form v0.2.0 cannot read:
    /// refused until the cluster is finalized at the release that
    /// brought it (see doc/upgrading.md).
    fn check_lifecycle_gate(&self, rules: &[model::LifecycleRule]) -> ApiResult<()> {
        let gate = &garage_rpc::system::versions::NONCURRENT_VERSION_TRANSITION;
        if rules.iter().any(|r| !r.noncurrent_transitions.is_empty())
            && !self.blocks.system.feature_allowed(gate)
        {
            return Err(ApiError::NotImplemented(format!(
                "NoncurrentVersionTransition needs the cluster finalized at v{} or later (it is at v{}): upgrade every node, then run `garage upgrade finalize`",
                gate.since,
                self.blocks.system.active_version()
            )));
        }
        Ok(())
    }
}

/// Checks a lifecycle configuration as S3 does, and converts it to the
/// model's rules.
/// The `x-amz-expiration` of an object (key, size, tags, creation
/// time): the earliest Expiration among the enabled rules matching it,
/// `expiry-date="<HTTP date>", rule-id="<id>"`.
pub fn expiration_of(
    rules: &[model::LifecycleRule],
    key: &str,
    size: u64,
    tags: &[(String, String)],
    created: u64,
) -> Option<String> {
    let (at, rule) = rules
        .iter()
        .filter(|r| r.enabled && r.filter.matches(key, size, tags))
        .filter_map(|r| {
            let at = match r.expiration? {
                model::LifecycleExpiration::AfterDays(d) => model::days_after(created, d),
                model::LifecycleExpiration::AtDate(t) => t,
            };
            Some((at, r))
        })
        .min_by_key(|(at, _)| *at)?;
    let date = crate::meta::http_date(&crate::meta::timestamp(at))?;
    Some(format!(
        "expiry-date=\"{date}\", rule-id=\"{}\"",
        rule.id.as_deref().unwrap_or("")
    ))
}

pub fn lifecycle_from_dto(c: BucketLifecycleConfiguration) -> ApiResult<Vec<model::LifecycleRule>> {
    if c.rules.is_empty() {
        return Err(ApiError::MalformedXml(
            "a lifecycle configuration has at least one rule".into(),
        ));
    }
    if c.rules.len() > MAX_RULES {
        return Err(invalid(format!(
            "a lifecycle configuration has at most {MAX_RULES} rules"
        )));
    }
    let mut ids = HashSet::new();
    let mut out = Vec::new();
    for r in c.rules {
        if let Some(id) = &r.id {
            if !ids.insert(id.clone()) {
                return Err(invalid(
                    "Rule ID must be unique. Found same ID for more than one rule",
                ));
            }
        }
        out.push(rule_from_dto(r)?);
    }
    Ok(out)
}

/// A stored rule as GetBucketLifecycleConfiguration returns it.
pub fn rule_to_dto(r: &model::LifecycleRule) -> LifecycleRule {
    let f = &r.filter;
    let n = [f.prefix.is_some(), f.size_gt.is_some(), f.size_lt.is_some()]
        .iter()
        .filter(|g| **g)
        .count()
        + f.tags.len();
    let tag = |(k, v): &(String, String)| Tag {
        key: Some(k.clone()),
        value: Some(v.clone()),
    };
    let filter = if n > 1 {
        LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                prefix: f.prefix.clone(),
                object_size_greater_than: f.size_gt.map(|s| s as i64),
                object_size_less_than: f.size_lt.map(|s| s as i64),
                tags: (!f.tags.is_empty()).then(|| f.tags.iter().map(tag).collect()),
            }),
            ..Default::default()
        }
    } else {
        LifecycleRuleFilter {
            prefix: f.prefix.clone().or_else(|| (n == 0).then(String::new)),
            object_size_greater_than: f.size_gt.map(|s| s as i64),
            object_size_less_than: f.size_lt.map(|s| s as i64),
            tag: f.tags.first().map(tag),
            ..Default::default()
        }
    };
    LifecycleRule {
        id: r.id.clone(),
        status: ExpirationStatus::from_static(if r.enabled {
            ExpirationStatus::ENABLED
        } else {
            ExpirationStatus::DISABLED
        }),
        filter: Some(filter),
        expiration: match (r.expiration, r.expired_delete_marker) {
            (Some(LifecycleExpiration::AfterDays(d)), _) => Some(S3Expiration {
                days: Some(d as i32),
                ..Default::default()
            }),
            (Some(LifecycleExpiration::AtDate(ms)), _) => Some(S3Expiration {
                date: Some(meta::timestamp(ms)),
                ..Default::default()
            }),
            (None, true) => Some(S3Expiration {
                expired_object_delete_marker: Some(true),
                ..Default::default()
            }),
            (None, false) => None,
        },
        abort_incomplete_multipart_upload: r.abort_incomplete_mpu_days.map(|d| {
            AbortIncompleteMultipartUpload {
                days_after_initiation: Some(d as i32),
            }
        }),
        noncurrent_version_expiration: r.noncurrent_expiration.map(|n| {
            NoncurrentVersionExpiration {
                noncurrent_days: Some(n.days as i32),
                newer_noncurrent_versions: n.keep.map(|k| k as i32),
            }
        }),
        noncurrent_version_transitions: (!r.noncurrent_transitions.is_empty()).then(|| {
            r.noncurrent_transitions
                .iter()
                .map(|t| NoncurrentVersionTransition {
                    noncurrent_days: Some(t.days as i32),
                    newer_noncurrent_versions: t.keep.map(|k| k as i32),
                    storage_class: Some(TransitionStorageClass::from(t.class.clone())),
                })
                .collect()
        }),
        prefix: None,
        transitions: (!r.transitions.is_empty()).then(|| {
            r.transitions
                .iter()
                .map(|t| {
                    let (days, date) = match t.when {
                        LifecycleExpiration::AfterDays(d) => (Some(d as i32), None),
                        LifecycleExpiration::AtDate(ms) => (None, Some(meta::timestamp(ms))),
                    };
                    Transition {
                        days,
                        date,
                        storage_class: Some(TransitionStorageClass::from(t.class.clone())),
                    }
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expiration_header_names_the_earliest_matching_rule() {
        let r = |id: &str, prefix: &str, exp| model::LifecycleRule {
            id: Some(id.into()),
            enabled: true,
            filter: LifecycleFilter {
                prefix: Some(prefix.into()),
                ..Default::default()
            },
            expiration: Some(exp),
            abort_incomplete_mpu_days: None,
            noncurrent_expiration: None,
            expired_delete_marker: false,
            transitions: vec![],
            noncurrent_transitions: vec![],
        };
        // 2026-11-27T10:00:00Z
        let created = 1_795_773_600_000;
        let rules = vec![
            r("late", "", LifecycleExpiration::AfterDays(30)),
            r("soon", "logs/", LifecycleExpiration::AfterDays(1)),
        ];
        assert_eq!(
            expiration_of(&rules, "logs/a", 5, &[], created).as_deref(),
            Some(r#"expiry-date="Sun, 29 Nov 2026 00:00:00 GMT", rule-id="soon""#)
        );
        assert!(expiration_of(&rules, "other", 5, &[], created)
            .unwrap()
            .ends_with(r#"rule-id="late""#));
        let mut off = rules.clone();
        for x in off.iter_mut() {
            x.enabled = false;
        }
        assert_eq!(expiration_of(&off, "logs/a", 5, &[], created), None);
    }

    fn rule(expiration: Option<S3Expiration>) -> LifecycleRule {
        LifecycleRule {
            id: Some("r1".into()),
            status: ExpirationStatus::from_static(ExpirationStatus::ENABLED),
            filter: Some(LifecycleRuleFilter {
                prefix: Some("logs/".into()),
                ..Default::default()
            }),
            expiration,
            abort_incomplete_multipart_upload: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
            transitions: None,
        }
    }

    fn days(d: i32) -> Option<S3Expiration> {
        Some(S3Expiration {
            days: Some(d),
            ..Default::default()
        })
    }

    fn check(rules: Vec<LifecycleRule>) -> ApiResult<Vec<model::LifecycleRule>> {
        lifecycle_from_dto(BucketLifecycleConfiguration { rules })
    }

    fn code(r: ApiResult<Vec<model::LifecycleRule>>) -> String {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(e) => e.code().as_str().to_string(),
        }
    }

    #[test]
    fn rules_round_trip() {
        let mut and = rule(None);
        and.id = Some("r2".into());
        and.filter = Some(LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                prefix: Some("big/".into()),
                object_size_greater_than: Some(100),
                object_size_less_than: Some(1000),
                tags: None,
            }),
            ..Default::default()
        });
        let midnight = meta::timestamp(20_000 * DAY_MSEC);
        and.expiration = Some(S3Expiration {
            date: Some(midnight.clone()),
            ..Default::default()
        });
        let mut mpu = rule(None);
        mpu.id = Some("r3".into());
        mpu.status = ExpirationStatus::from_static(ExpirationStatus::DISABLED);
        mpu.abort_incomplete_multipart_upload = Some(AbortIncompleteMultipartUpload {
            days_after_initiation: Some(7),
        });
        let input = vec![rule(days(30)), and, mpu];
        let stored = check(input.clone()).unwrap();
        assert_eq!(
            stored[0].expiration,
            Some(LifecycleExpiration::AfterDays(30))
        );
        assert_eq!(
            stored[1].expiration,
            Some(LifecycleExpiration::AtDate(20_000 * DAY_MSEC))
        );
        assert_eq!(stored[1].filter.size_gt, Some(100));
        assert!(!stored[2].enabled);
        assert_eq!(stored[2].abort_incomplete_mpu_days, Some(7));
        let back: Vec<LifecycleRule> = stored.iter().map(rule_to_dto).collect();
        assert_eq!(back, input);
    }

    #[test]
    fn bad_rules_get_s3_codes() {
        assert_eq!(code(check(vec![])), "MalformedXML");
        assert_eq!(code(check(vec![rule(days(0))])), "InvalidArgument");
        assert_eq!(code(check(vec![rule(days(-3))])), "InvalidArgument");
        // An Expiration with neither Days nor Date, or both.
        assert_eq!(
            code(check(vec![rule(Some(S3Expiration::default()))])),
            "MalformedXML"
        );
        let not_midnight = meta::timestamp(20_000 * DAY_MSEC + 3_600_000);
        assert_eq!(
            code(check(vec![rule(Some(S3Expiration {
                date: Some(not_midnight),
                ..Default::default()
            }))])),
            "InvalidArgument"
        );
        assert_eq!(
            code(check(vec![rule(Some(S3Expiration {
                days: Some(1),
                date: Some(meta::timestamp(0)),
                ..Default::default()
            }))])),
            "MalformedXML"
        );
        // No action at all.
        assert_eq!(code(check(vec![rule(None)])), "InvalidArgument");
        // Same ID twice.
        assert_eq!(
            code(check(vec![rule(days(1)), rule(days(2))])),
            "InvalidArgument"
        );
        let mut bad_status = rule(days(1));
        bad_status.status = ExpirationStatus::from("enabled".to_string());
        assert_eq!(code(check(vec![bad_status])), "MalformedXML");
        // Transitions: a class and Days or Date; before the expiration;
        // Days and Date not mixed; round trips.
        let tr = |days: Option<i32>, class: &str| Transition {
            days,
            date: None,
            storage_class: Some(TransitionStorageClass::from(class.to_string())),
        };
        let mut t = rule(days(1));
        t.transitions = Some(vec![Transition::default()]);
        assert_eq!(code(check(vec![t.clone()])), "MalformedXML");
        t.transitions = Some(vec![tr(Some(-1), "STANDARD_IA")]);
        assert_eq!(code(check(vec![t.clone()])), "InvalidArgument");
        t.transitions = Some(vec![tr(Some(1), "STANDARD_IA")]);
        assert_eq!(code(check(vec![t.clone()])), "InvalidArgument");
        t.transitions = Some(vec![tr(Some(0), "STANDARD_IA"), tr(Some(0), "STANDARD_IA")]);
        t.expiration = days(2);
        assert_eq!(code(check(vec![t.clone()])), "InvalidArgument");
        t.transitions = Some(vec![tr(Some(0), "STANDARD_IA")]);
        let stored = check(vec![t.clone()]).unwrap();
        assert_eq!(
            stored[0].transitions,
            vec![model::LifecycleTransition {
                when: LifecycleExpiration::AfterDays(0),
                class: "STANDARD_IA".into()
            }]
        );
        assert_eq!(rule_to_dto(&stored[0]).transitions, t.transitions);
        t.expiration = Some(S3Expiration {
            date: Some(meta::timestamp(0)),
            ..Default::default()
        });
        assert_eq!(code(check(vec![t.clone()])), "InvalidArgument");
        // A transition alone is an action.
        t.expiration = None;
        assert!(check(vec![t]).is_ok());
        // NoncurrentVersionTransition: a class, NoncurrentDays 0 or more,
        // 1 to 100 newer versions kept, one per class, before the
        // noncurrent expiration; alone an action; round trips.
        let ntr = |days: Option<i32>, keep: Option<i32>, class: &str| NoncurrentVersionTransition {
            noncurrent_days: days,
            newer_noncurrent_versions: keep,
            storage_class: Some(TransitionStorageClass::from(class.to_string())),
        };
        let mut nt = rule(None);
        nt.noncurrent_version_transitions = Some(vec![NoncurrentVersionTransition::default()]);
        assert_eq!(code(check(vec![nt.clone()])), "MalformedXML");
        for bad in [
            vec![ntr(None, None, "STANDARD_IA")],
            vec![ntr(Some(-1), None, "STANDARD_IA")],
            vec![ntr(Some(1), Some(0), "STANDARD_IA")],
            vec![ntr(Some(1), Some(101), "STANDARD_IA")],
            vec![
                ntr(Some(1), None, "STANDARD_IA"),
                ntr(Some(2), None, "STANDARD_IA"),
            ],
        ] {
            nt.noncurrent_version_transitions = Some(bad.clone());
            assert_eq!(code(check(vec![nt.clone()])), "InvalidArgument", "{bad:?}");
        }
        nt.noncurrent_version_transitions = Some(vec![ntr(Some(5), Some(2), "STANDARD_IA")]);
        nt.noncurrent_version_expiration = Some(NoncurrentVersionExpiration {
            noncurrent_days: Some(5),
            newer_noncurrent_versions: None,
        });
        assert_eq!(code(check(vec![nt.clone()])), "InvalidArgument");
        nt.noncurrent_version_expiration = None;
        let stored = check(vec![nt.clone()]).unwrap();
        assert_eq!(
            stored[0].noncurrent_transitions,
            vec![model::NoncurrentTransition {
                days: 5,
                keep: Some(2),
                class: "STANDARD_IA".into()
            }]
        );
        assert_eq!(
            rule_to_dto(&stored[0]).noncurrent_version_transitions,
            nt.noncurrent_version_transitions
        );
        // NoncurrentVersionExpiration: NoncurrentDays > 0, and 1 to 100
        // newer versions kept; round trips.
        let mut nc = rule(None);
        nc.noncurrent_version_expiration = Some(NoncurrentVersionExpiration::default());
        assert_eq!(code(check(vec![nc.clone()])), "InvalidArgument");
        nc.noncurrent_version_expiration = Some(NoncurrentVersionExpiration {
            noncurrent_days: Some(3),
            newer_noncurrent_versions: Some(101),
        });
        assert_eq!(code(check(vec![nc.clone()])), "InvalidArgument");
        nc.noncurrent_version_expiration = Some(NoncurrentVersionExpiration {
            noncurrent_days: Some(3),
            newer_noncurrent_versions: Some(2),
        });
        let stored = check(vec![nc.clone()]).unwrap();
        assert_eq!(
            stored[0].noncurrent_expiration,
            Some(model::NoncurrentExpiration {
                days: 3,
                keep: Some(2)
            })
        );
        assert_eq!(
            rule_to_dto(&stored[0]).noncurrent_version_expiration,
            nc.noncurrent_version_expiration
        );
        // ExpiredObjectDeleteMarker alone is an action; with Days, refused.
        let em = rule(Some(S3Expiration {
            expired_object_delete_marker: Some(true),
            ..Default::default()
        }));
        let stored = check(vec![em]).unwrap();
        assert!(stored[0].expired_delete_marker && stored[0].expiration.is_none());
        assert_eq!(
            code(check(vec![rule(Some(S3Expiration {
                expired_object_delete_marker: Some(true),
                days: Some(1),
                ..Default::default()
            }))])),
            "InvalidArgument"
        );
        let mut two = rule(days(1));
        two.filter = Some(LifecycleRuleFilter {
            prefix: Some("a".into()),
            object_size_greater_than: Some(1),
            ..Default::default()
        });
        assert_eq!(code(check(vec![two])), "MalformedXML");
        let mut sizes = rule(days(1));
        sizes.filter = Some(LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                object_size_greater_than: Some(10),
                object_size_less_than: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(code(check(vec![sizes])), "InvalidArgument");
        let mut both = rule(days(1));
        both.prefix = Some("x".into());
        assert_eq!(code(check(vec![both])), "MalformedXML");
        let mut abort0 = rule(None);
        abort0.abort_incomplete_multipart_upload = Some(AbortIncompleteMultipartUpload {
            days_after_initiation: Some(0),
        });
        assert_eq!(code(check(vec![abort0])), "InvalidArgument");
        let mut long = rule(days(1));
        long.id = Some("x".repeat(256));
        assert_eq!(code(check(vec![long])), "InvalidArgument");
    }
}
