//! Bucket notifications at the S3 edge: Put/GetBucketNotificationConfiguration
//! ([`Api::put_bucket_notification_configuration`]), and the SNS-compatible
//! topic API on the S3 endpoint ([`topics`]: CreateTopic, ListTopics,
//! GetTopicAttributes, SetTopicAttributes, DeleteTopic). The events and
//! their outbox are the model's (`garage_model::notify`); their delivery
//! is `garage_notify`'s.

pub mod topics;

use std::sync::Arc;

use garage_model::notify::config::{known_event_type, NotificationConfig, NotificationRule};
use garage_model::notify::topic_table::topic_of_arn;
use garage_rpc::system::versions::BUCKET_NOTIFICATIONS;
use garage_table::EmptyKey;
use s3s::dto::*;
use s3s::{S3Request, S3Response};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};
use crate::request::{Ctx, Owned};

/// Rules a bucket may have at most (S3 has no documented limit; this one
/// bounds the work of every write).
pub const MAX_RULES: usize = 100;

impl Api {
    /// Refused until the cluster is finalized at the release that brought
    /// notifications (older nodes cannot read them).
    pub(crate) fn check_notifications_gate(&self) -> ApiResult<()> {
        let gate = &BUCKET_NOTIFICATIONS;
        if !self.blocks.system.feature_allowed(gate) {
            return Err(ApiError::NotImplemented(format!(
                "bucket notifications need the cluster finalized at v{} or later (it is at v{}): upgrade every node, then run `garage upgrade finalize`",
                gate.since,
                self.blocks.system.active_version()
            )));
        }
        Ok(())
    }

    pub async fn put_bucket_notification_configuration(
        self: Arc<Self>,
        req: S3Request<PutBucketNotificationConfigurationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<PutBucketNotificationConfigurationOutput>> {
        let c = req.input.notification_configuration;
        if c.lambda_function_configurations
            .as_ref()
            .is_some_and(|l| !l.is_empty())
        {
            return Err(ApiError::NotImplemented(
                "CloudFunctionConfiguration (Lambda) targets are not served: use a topic \
                 (TopicConfiguration) with a webhook, NATS, AMQP, Kafka or MQTT endpoint"
                    .into(),
            ));
        }
        if c.event_bridge_configuration.is_some() {
            return Err(ApiError::NotImplemented(
                "EventBridgeConfiguration is not served: use a topic (TopicConfiguration)".into(),
            ));
        }
        let mut rules = Vec::new();
        for t in c.topic_configurations.into_iter().flatten() {
            rules.push(
                self.rule(t.id, &t.topic_arn, t.events, t.filter, false)
                    .await?,
            );
        }
        for q in c.queue_configurations.into_iter().flatten() {
            rules.push(
                self.rule(q.id, &q.queue_arn, q.events, q.filter, true)
                    .await?,
            );
        }
        if rules.len() > MAX_RULES {
            return Err(ApiError::InvalidArgument(format!(
                "a bucket has at most {MAX_RULES} notification rules; {} given",
                rules.len()
            )));
        }
        let mut ids = std::collections::HashSet::new();
        if let Some(r) = rules.iter().find(|r| !ids.insert(r.id.clone())) {
            return Err(ApiError::InvalidArgument(format!(
                "two notification rules have the Id {:?}",
                r.id
            )));
        }
        let config = match rules.is_empty() {
            true => None,
            false => {
                self.check_notifications_gate()?;
                Some(NotificationConfig { rules })
            }
        };
        let b = ctx.granted.bucket;
        let unset = b
            .params()
            .is_some_and(|p| p.notifications.get().is_none() && p.notifications.timestamp() == 0);
        if config.is_none() && unset {
            // Nothing to clear: leave the entry in the bytes older nodes
            // read.
            return Ok(S3Response::new(
                PutBucketNotificationConfigurationOutput::default(),
            ));
        }
        self.update_bucket(b, |p| p.notifications.update(config))
            .await?;
        Ok(S3Response::new(
            PutBucketNotificationConfigurationOutput::default(),
        ))
    }

    /// A rule, checked: known event types, one prefix and one suffix at
    /// most, an existing topic.
    async fn rule(
        &self,
        id: Option<String>,
        arn: &str,
        events: Vec<Event>,
        filter: Option<NotificationConfigurationFilter>,
        queue: bool,
    ) -> ApiResult<NotificationRule> {
        let what = if queue { "QueueArn" } else { "TopicArn" };
        let topic = topic_of_arn(arn).ok_or_else(|| {
            ApiError::InvalidArgument(format!(
                "{what} {arn:?} is not a topic's ARN (arn:aws:sns:REGION::NAME, as CreateTopic gives)"
            ))
        })?;
        match self.garage.topic_table.get(&EmptyKey, &topic.to_string()).await? {
            Some(t) if t.live().is_some() => {}
            _ => {
                return Err(ApiError::InvalidArgument(format!(
                    "Unable to validate the following destination configurations: topic {topic} does not exist (create it with CreateTopic or `garage topic create`)"
                )))
            }
        }
        if events.is_empty() {
            return Err(ApiError::InvalidArgument(format!(
                "the rule for {arn} names no Event"
            )));
        }
        let events: Vec<String> = events.iter().map(|e| e.as_ref().to_string()).collect();
        if let Some(e) = events.iter().find(|e| !known_event_type(e)) {
            return Err(ApiError::InvalidArgument(format!(
                "event type {e:?} is not served (served: s3:ObjectCreated:*, s3:ObjectRemoved:*, s3:LifecycleExpiration:*, s3:LifecycleTransition, s3:ObjectTagging:*, s3:ObjectAcl:Put and their members)"
            )));
        }
        let (mut prefix, mut suffix) = (None, None);
        for f in filter
            .and_then(|f| f.key)
            .and_then(|k| k.filter_rules)
            .into_iter()
            .flatten()
        {
            let name = f.name.as_ref().map(|n| n.as_str().to_ascii_lowercase());
            let slot = match name.as_deref() {
                Some("prefix") => &mut prefix,
                Some("suffix") => &mut suffix,
                other => {
                    return Err(ApiError::InvalidArgument(format!(
                        "filter rule name {other:?}: prefix or suffix"
                    )))
                }
            };
            if slot.is_some() {
                return Err(ApiError::InvalidArgument(
                    "Cannot specify more than one prefix rule (or suffix rule) in a filter.".into(),
                ));
            }
            *slot = Some(f.value.unwrap_or_default());
        }
        Ok(NotificationRule {
            id: id.unwrap_or_else(|| hex::encode(&garage_util::data::gen_uuid().as_slice()[..8])),
            topic: topic.to_string(),
            arn: arn.to_string(),
            queue,
            events,
            prefix,
            suffix,
        })
    }

    pub async fn get_bucket_notification_configuration(
        self: Arc<Self>,
        _req: S3Request<GetBucketNotificationConfigurationInput>,
        ctx: Ctx<Owned>,
    ) -> ApiResult<S3Response<GetBucketNotificationConfigurationOutput>> {
        let config = ctx
            .granted
            .bucket
            .params()
            .and_then(|p| p.notifications.get().clone())
            .unwrap_or_default();
        let filter = |r: &NotificationRule| {
            let mut rules = Vec::new();
            if let Some(p) = &r.prefix {
                rules.push(FilterRule {
                    name: Some(FilterRuleName::from_static(FilterRuleName::PREFIX)),
                    value: Some(p.clone()),
                });
            }
            if let Some(s) = &r.suffix {
                rules.push(FilterRule {
                    name: Some(FilterRuleName::from_static(FilterRuleName::SUFFIX)),
                    value: Some(s.clone()),
                });
            }
            (!rules.is_empty()).then_some(NotificationConfigurationFilter {
                key: Some(S3KeyFilter {
                    filter_rules: Some(rules),
                }),
            })
        };
        let events = |r: &NotificationRule| r.events.iter().cloned().map(Event::from).collect();
        let topics: Vec<TopicConfiguration> = config
            .rules
            .iter()
            .filter(|r| !r.queue)
            .map(|r| TopicConfiguration {
                events: events(r),
                filter: filter(r),
                id: Some(r.id.clone()),
                topic_arn: r.arn.clone(),
            })
            .collect();
        let queues: Vec<QueueConfiguration> = config
            .rules
            .iter()
            .filter(|r| r.queue)
            .map(|r| QueueConfiguration {
                events: events(r),
                filter: filter(r),
                id: Some(r.id.clone()),
                queue_arn: r.arn.clone(),
            })
            .collect();
        Ok(S3Response::new(GetBucketNotificationConfigurationOutput {
            topic_configurations: (!topics.is_empty()).then_some(topics),
            queue_configurations: (!queues.is_empty()).then_some(queues),
            ..Default::default()
        }))
    }
}
