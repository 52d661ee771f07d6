//! Bucket replication at the S3 edge: Put/Get/DeleteBucketReplication
//! (this module) and the worker that sends this node's queue of versions to their
//! destinations ([`worker`], [`send`]). The versions another cluster's
//! replication writes here (PutObject and DeleteObject with the replica
//! headers) are the objects family's (`crate::objects::replica`). The rules, the queue and each
//! version's state are the model's (`garage_model::replication`).

pub mod send;
pub mod worker;

use std::collections::HashSet;
use std::sync::Arc;

use garage_model::bucket_table::Versioning;
use garage_model::replication::config::{
    parse_destination_arn, Destination as ModelDestination, ReplicationConfig as Config,
    ReplicationRule as Rule,
};
use garage_rpc::system::versions::BUCKET_REPLICATION;
use garage_table::EmptyKey;
use s3s::dto::*;
use s3s::{S3Request, S3Response};
use tracing::{info, warn};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

/// At most this many rules per configuration (S3's limit).
const MAX_RULES: usize = 1000;

impl Api {
    /// Refused until the cluster is finalized at the release that brought
    /// replication (older nodes cannot read its rules and states).
    pub(crate) fn check_replication_gate(&self) -> ApiResult<()> {
        let gate = &BUCKET_REPLICATION;
        if !self.blocks.system.feature_allowed(gate) {
            return Err(ApiError::NotImplemented(format!(
                "bucket replication needs the cluster finalized at v{} or later (it is at v{}): upgrade every node, then run `garage upgrade finalize`",
                gate.since,
                self.blocks.system.active_version()
            )));
        }
        Ok(())
    }

    pub async fn put_bucket_replication(
        self: Arc<Self>,
        req: S3Request<PutBucketReplicationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketReplicationOutput>> {
        self.check_replication_gate()?;
        let b = ctx.granted.bucket;
        let versioning = b.params().map(|p| *p.versioning.get());
        if versioning != Some(Versioning::Enabled) {
            return Err(ApiError::InvalidRequest(
                "Versioning must be 'Enabled' on the bucket to apply a replication configuration"
                    .into(),
            ));
        }
        let config = config_from_dto(req.input.replication_configuration)?;
        for r in &config.rules {
            let d = &r.destination;
            match self.garage.remote_table.get(&EmptyKey, &d.remote).await? {
                Some(rm) if rm.live().is_some() => {}
                _ => {
                    return Err(ApiError::InvalidRequest(format!(
                        "Destination bucket {} of rule {:?}: there is no remote {:?} (add it with `garage remote add {}`)",
                        d.arn(),
                        r.id,
                        d.remote,
                        d.remote
                    )))
                }
            }
        }
        let existing = config.existing_objects().count() > 0;
        let id = b.id;
        self.update_bucket(b, |p| p.replication.update(Some(config)))
            .await?;
        if existing {
            // Versions written before the rules: queued here, now (the
            // rules are in this node's copy of the bucket already).
            let api = self.clone();
            tokio::spawn(async move {
                match api
                    .garage
                    .writer
                    .replicator
                    .resync(&api.history, id, false)
                    .await
                {
                    Ok(r) => info!(
                        bucket = %id.short(),
                        "existing objects queued for replication: {} (version, destination) pairs of {} versions",
                        r.queued,
                        r.versions
                    ),
                    Err(e) => warn!(
                        bucket = %id.short(),
                        "cannot queue the existing objects for replication (run `garage bucket replication resync`): {e}"
                    ),
                }
            });
        }
        Ok(S3Response::new(PutBucketReplicationOutput::default()))
    }

    pub async fn get_bucket_replication(
        self: Arc<Self>,
        _req: S3Request<GetBucketReplicationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketReplicationOutput>> {
        let config = ctx
            .granted
            .bucket
            .params()
            .and_then(|p| p.replication.get().clone())
            .ok_or(ApiError::NoSuchReplicationConfiguration)?;
        Ok(S3Response::new(GetBucketReplicationOutput {
            replication_configuration: Some(config_to_dto(&config)),
        }))
    }

    pub async fn delete_bucket_replication(
        self: Arc<Self>,
        _req: S3Request<DeleteBucketReplicationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<DeleteBucketReplicationOutput>> {
        let b = ctx.granted.bucket;
        if b.params().is_some_and(|p| p.replication.get().is_some()) {
            self.update_bucket(b, |p| p.replication.update(None))
                .await?;
        }
        Ok(S3Response::new(DeleteBucketReplicationOutput::default()))
    }
}

/// A configuration as S3 checks it.
fn config_from_dto(c: ReplicationConfiguration) -> ApiResult<Config> {
    if c.rules.is_empty() {
        return Err(ApiError::MalformedXml(
            "a replication configuration has at least one Rule".into(),
        ));
    }
    if c.rules.len() > MAX_RULES {
        return Err(ApiError::InvalidRequest(format!(
            "a replication configuration has at most {MAX_RULES} rules; {} given",
            c.rules.len()
        )));
    }
    let mut rules = Vec::with_capacity(c.rules.len());
    for (n, r) in c.rules.into_iter().enumerate() {
        rules.push(rule_from_dto(n, r)?);
    }
    let mut ids = HashSet::new();
    if let Some(r) = rules.iter().find(|r| !ids.insert(r.id.clone())) {
        return Err(ApiError::InvalidRequest(format!(
            "two replication rules have the ID {:?}",
            r.id
        )));
    }
    let mut prios = HashSet::new();
    if let Some(r) = rules.iter().find(|r| !prios.insert(r.priority)) {
        return Err(ApiError::InvalidRequest(format!(
            "Found duplicate priority {}: each rule has a priority of its own",
            r.priority
        )));
    }
    Ok(Config {
        role: c.role,
        rules,
    })
}

fn rule_from_dto(n: usize, r: ReplicationRule) -> ApiResult<Rule> {
    let id = r.id.unwrap_or_else(|| format!("rule-{}", n + 1));
    if id.len() > 255 {
        return Err(ApiError::InvalidArgument(
            "a rule's ID has at most 255 characters".into(),
        ));
    }
    if r.source_selection_criteria.is_some() {
        warn!(rule = %id, "SourceSelectionCriteria ignored (no SSE-KMS filter here)");
    }
    let d = r.destination;
    if d.replication_time.is_some() || d.metrics.is_some() {
        return Err(ApiError::NotImplemented(format!(
            "rule {id:?}: ReplicationTime and Metrics (S3 RTC) are not served; the backlog and lag are in /metrics"
        )));
    }
    if d.access_control_translation.is_some() || d.encryption_configuration.is_some() {
        return Err(ApiError::NotImplemented(format!(
            "rule {id:?}: AccessControlTranslation and EncryptionConfiguration are not served"
        )));
    }
    let (remote, bucket) = parse_destination_arn(&d.bucket).ok_or_else(|| {
        ApiError::InvalidArgument(format!(
            "rule {id:?}: Destination.Bucket {:?} is not a remote bucket's ARN (arn:garage:s3:::REMOTE/BUCKET, as `garage remote add` prints it)",
            d.bucket
        ))
    })?;
    let (prefix, tags) = match (r.filter, r.prefix) {
        (Some(f), None) => filter_from_dto(&id, f)?,
        (None, p) => (p.filter(|p| !p.is_empty()), Vec::new()),
        (Some(_), Some(_)) => {
            return Err(ApiError::MalformedXml(format!(
                "rule {id:?} has both a Filter and a Prefix"
            )))
        }
    };
    let delete_markers = r
        .delete_marker_replication
        .and_then(|d| d.status)
        .is_some_and(|s| s.as_str() == DeleteMarkerReplicationStatus::ENABLED);
    if delete_markers && !tags.is_empty() {
        return Err(ApiError::InvalidRequest(format!(
            "rule {id:?}: Delete marker replication is not supported if any Tag filter is specified"
        )));
    }
    let existing_objects = r
        .existing_object_replication
        .is_some_and(|e| e.status.as_str() == ExistingObjectReplicationStatus::ENABLED);
    let enabled = match r.status.as_str() {
        ReplicationRuleStatus::ENABLED => true,
        ReplicationRuleStatus::DISABLED => false,
        other => {
            return Err(ApiError::MalformedXml(format!(
                "rule {id:?}: Status is Enabled or Disabled, not {other:?}"
            )))
        }
    };
    Ok(Rule {
        id,
        priority: r.priority.unwrap_or(0),
        enabled,
        prefix,
        tags,
        destination: ModelDestination {
            remote: remote.to_string(),
            bucket: bucket.to_string(),
            storage_class: d.storage_class.map(|c| c.as_str().to_string()),
        },
        delete_markers,
        existing_objects,
    })
}

type Filter = (Option<String>, Vec<(String, String)>);

fn filter_from_dto(id: &str, f: ReplicationRuleFilter) -> ApiResult<Filter> {
    let tag = |t: Tag| -> ApiResult<(String, String)> {
        match (t.key, t.value) {
            (Some(k), Some(v)) => Ok((k, v)),
            _ => Err(ApiError::MalformedXml(format!(
                "rule {id:?}: a Tag has a Key and a Value"
            ))),
        }
    };
    let given = [f.prefix.is_some(), f.tag.is_some(), f.and.is_some()]
        .iter()
        .filter(|x| **x)
        .count();
    if given > 1 {
        return Err(ApiError::MalformedXml(format!(
            "rule {id:?}: a Filter has one of Prefix, Tag or And"
        )));
    }
    if let Some(a) = f.and {
        let tags = a
            .tags
            .into_iter()
            .flatten()
            .map(tag)
            .collect::<ApiResult<Vec<_>>>()?;
        return Ok((a.prefix.filter(|p| !p.is_empty()), tags));
    }
    if let Some(t) = f.tag {
        return Ok((None, vec![tag(t)?]));
    }
    Ok((f.prefix.filter(|p| !p.is_empty()), Vec::new()))
}

fn config_to_dto(c: &Config) -> ReplicationConfiguration {
    ReplicationConfiguration {
        role: c.role.clone(),
        rules: c.rules.iter().map(rule_to_dto).collect(),
    }
}

fn rule_to_dto(r: &Rule) -> ReplicationRule {
    let tag = |(k, v): &(String, String)| Tag {
        key: Some(k.clone()),
        value: Some(v.clone()),
    };
    let filter = match (r.prefix.as_ref(), r.tags.as_slice()) {
        (p, []) => ReplicationRuleFilter {
            prefix: Some(p.cloned().unwrap_or_default()),
            ..Default::default()
        },
        (None, [t]) => ReplicationRuleFilter {
            tag: Some(tag(t)),
            ..Default::default()
        },
        (p, ts) => ReplicationRuleFilter {
            and: Some(ReplicationRuleAndOperator {
                prefix: p.cloned(),
                tags: Some(ts.iter().map(tag).collect()),
            }),
            ..Default::default()
        },
    };
    let status = |on: bool| match on {
        true => "Enabled",
        false => "Disabled",
    };
    ReplicationRule {
        id: Some(r.id.clone()),
        priority: Some(r.priority),
        status: ReplicationRuleStatus::from(status(r.enabled).to_string()),
        filter: Some(filter),
        delete_marker_replication: Some(DeleteMarkerReplication {
            status: Some(DeleteMarkerReplicationStatus::from(
                status(r.delete_markers).to_string(),
            )),
        }),
        existing_object_replication: r.existing_objects.then(|| ExistingObjectReplication {
            status: ExistingObjectReplicationStatus::from("Enabled".to_string()),
        }),
        destination: Destination {
            bucket: r.destination.arn(),
            storage_class: r.destination.storage_class.clone().map(StorageClass::from),
            ..Default::default()
        },
        prefix: None,
        source_selection_criteria: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dto_rule(id: &str, prio: i32, arn: &str) -> ReplicationRule {
        ReplicationRule {
            id: Some(id.into()),
            priority: Some(prio),
            status: ReplicationRuleStatus::from("Enabled".to_string()),
            filter: Some(ReplicationRuleFilter {
                prefix: Some("photos/".into()),
                ..Default::default()
            }),
            delete_marker_replication: Some(DeleteMarkerReplication {
                status: Some(DeleteMarkerReplicationStatus::from("Enabled".to_string())),
            }),
            existing_object_replication: None,
            destination: Destination {
                bucket: arn.into(),
                ..Default::default()
            },
            prefix: None,
            source_selection_criteria: None,
        }
    }

    #[test]
    fn a_configuration_round_trips_and_bad_ones_are_refused() {
        let c = ReplicationConfiguration {
            role: "arn:aws:iam::1:role/r".into(),
            rules: vec![dto_rule("a", 1, "arn:garage:s3:::dr/photos")],
        };
        let m = config_from_dto(c.clone()).unwrap();
        assert_eq!(m.rules[0].destination.remote, "dr");
        assert_eq!(m.rules[0].prefix.as_deref(), Some("photos/"));
        assert!(m.rules[0].delete_markers);
        assert_eq!(config_from_dto(config_to_dto(&m)).unwrap(), m);
        // An AWS bucket ARN names no remote.
        let bad = ReplicationConfiguration {
            role: String::new(),
            rules: vec![dto_rule("a", 1, "arn:aws:s3:::photos")],
        };
        assert!(matches!(
            config_from_dto(bad),
            Err(ApiError::InvalidArgument(_))
        ));
        // Two rules with one priority.
        let dup = ReplicationConfiguration {
            role: String::new(),
            rules: vec![
                dto_rule("a", 1, "arn:garage:s3:::dr/x"),
                dto_rule("b", 1, "arn:garage:s3:::dr/y"),
            ],
        };
        assert!(matches!(
            config_from_dto(dup),
            Err(ApiError::InvalidRequest(_))
        ));
        // Tags with delete markers.
        let mut t = dto_rule("a", 1, "arn:garage:s3:::dr/x");
        t.filter = Some(ReplicationRuleFilter {
            tag: Some(Tag {
                key: Some("k".into()),
                value: Some("v".into()),
            }),
            ..Default::default()
        });
        let tagged = ReplicationConfiguration {
            role: String::new(),
            rules: vec![t],
        };
        assert!(config_from_dto(tagged).is_err());
    }
}
