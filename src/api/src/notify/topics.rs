//! The SNS-compatible topic API on the S3 endpoint, as Ceph RGW serves it:
//! `POST /` with a form body (`Action=CreateTopic&Name=…`), signed with
//! SigV4 for the `sns` service, so that `aws sns create-topic
//! --endpoint-url …` works. Actions: CreateTopic (with `push-endpoint`
//! and the other attributes), ListTopics, GetTopicAttributes,
//! SetTopicAttributes, DeleteTopic. Any valid access key may list topics
//! and make new ones; only a topic's owner changes or deletes it. The
//! endpoint's password is never given back (`push-endpoint` is shown
//! with `****`).

use std::collections::BTreeMap;

use garage_model::key_table::Key;
use garage_model::notify::endpoint::{redact_url, Endpoint};
use garage_model::notify::topic_table::{
    check_topic_name, topic_arn, topic_of_arn, Topic, TopicConfig, TopicFilter,
};
use garage_table::EmptyKey;
use hyper::StatusCode;
use tracing::info;

use crate::ctx::Api;
use crate::query::{
    denied, elem, internal, invalid, text, xml_empty, xml_result, Call, QueryError as SnsError,
};

/// The XML namespace of SNS answers.
pub const XMLNS: &str = "http://sns.amazonaws.com/doc/2010-03-31/";

fn not_found(name: &str) -> SnsError {
    SnsError {
        code: "NotFound",
        status: StatusCode::NOT_FOUND,
        message: format!("Topic does not exist: {name}"),
    }
}

/// Serves one topic API call (see `crate::query`).
pub async fn handle(api: &Api, call: Call) -> Result<String, SnsError> {
    let action = call
        .get("Action")
        .ok_or_else(|| invalid("the form names no Action"))?
        .to_string();
    let region = api.garage.writer.notifier.region().to_string();
    // An IAM identity's policies must allow `sns:<Action>` on the topic
    // (keys of their own: any key may make topics, owners change them).
    if call.identity.is_some() {
        let topic = match (call.get("Name"), call.get("TopicArn")) {
            (Some(n), _) => topic_arn(&region, n),
            (None, Some(a)) => a.to_string(),
            (None, None) => topic_arn(&region, "*"),
        };
        let d = call.identity_decision(&format!("sns:{action}"), &topic, &region);
        if d != garage_model::policy::Decision::Allow {
            return Err(denied(format!(
                "not authorized to perform sns:{action} on {topic} (identity policies)"
            )));
        }
    }
    let Call {
        key,
        form,
        request_id,
        ..
    } = call;
    let request_id = request_id.as_str();
    let action = action.as_str();
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let result = match action {
        "CreateTopic" => {
            let name = get("Name").ok_or_else(|| invalid("CreateTopic needs Name"))?;
            create(api, &key, name, attributes(&form)?).await?;
            xml_result(XMLNS, action, request_id, |w| text(w, "TopicArn", &topic_arn(&region, name)))
        }
        "ListTopics" => {
            let names = list(api).await?;
            xml_result(XMLNS, action, request_id, |w| {
                elem(w, "Topics", None, |w| {
                    for n in &names {
                        elem(w, "member", None, |w| text(w, "TopicArn", &topic_arn(&region, n)));
                    }
                });
            })
        }
        "GetTopicAttributes" => {
            let name = arn_param(get("TopicArn"))?;
            let (t, c) = live(api, name).await?;
            let mut attrs: BTreeMap<String, String> = c.attributes.clone();
            attrs.insert("push-endpoint".into(), redact_url(&c.endpoint));
            attrs.insert("TopicArn".into(), topic_arn(&region, &t.name));
            attrs.insert("Owner".into(), c.owner.clone());
            attrs.insert("Name".into(), t.name.clone());
            let backlog = api.garage.writer.notifier.outbox.backlog();
            attrs.insert(
                "garage:QueuedEventsOnThisNode".into(),
                backlog.get(&t.name).map_or(0, |b| b.events).to_string(),
            );
            xml_result(XMLNS, action, request_id, |w| {
                elem(w, "Attributes", None, |w| {
                    for (k, v) in &attrs {
                        elem(w, "entry", None, |w| {
                            text(w, "key", k);
                            text(w, "value", v);
                        });
                    }
                });
            })
        }
        "SetTopicAttributes" => {
            let name = arn_param(get("TopicArn"))?;
            let attr = get("AttributeName").ok_or_else(|| invalid("SetTopicAttributes needs AttributeName"))?;
            let value = get("AttributeValue").unwrap_or("");
            set_attribute(api, &key, name, attr, value).await?;
            xml_empty(XMLNS, action, request_id)
        }
        "DeleteTopic" => {
            let name = arn_param(get("TopicArn"))?;
            delete(api, &key, name).await?;
            xml_empty(XMLNS, action, request_id)
        }
        other => {
            return Err(SnsError {
                code: "InvalidAction",
                status: StatusCode::BAD_REQUEST,
                message: format!(
                    "action {other:?} is not served (served: CreateTopic, ListTopics, GetTopicAttributes, SetTopicAttributes, DeleteTopic)"
                ),
            })
        }
    };
    Ok(result)
}

fn arn_param(arn: Option<&str>) -> Result<&str, SnsError> {
    let arn = arn.ok_or_else(|| invalid("TopicArn is missing"))?;
    topic_of_arn(arn).ok_or_else(|| invalid(format!("{arn:?} is not a topic's ARN")))
}

/// The `Attributes.entry.N.key` / `.value` pairs of a form.
fn attributes(form: &[(String, String)]) -> Result<BTreeMap<String, String>, SnsError> {
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in form {
        if let Some(rest) = k.strip_prefix("Attributes.entry.") {
            if let Some(n) = rest.strip_suffix(".key") {
                keys.insert(n.to_string(), v.clone());
            } else if let Some(n) = rest.strip_suffix(".value") {
                values.insert(n.to_string(), v.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    for (n, k) in keys {
        let v = values
            .remove(&n)
            .ok_or_else(|| invalid(format!("attribute {k:?} has no value")))?;
        out.insert(k, v);
    }
    Ok(out)
}

async fn create(
    api: &Api,
    key: &Key,
    name: &str,
    mut attrs: BTreeMap<String, String>,
) -> Result<(), SnsError> {
    check_topic_name(name).map_err(invalid)?;
    api.check_notifications_gate().map_err(|e| SnsError {
        code: "InvalidParameter",
        status: StatusCode::BAD_REQUEST,
        message: e.to_string(),
    })?;
    let endpoint = attrs.remove("push-endpoint").ok_or_else(|| {
        invalid("CreateTopic needs the attribute push-endpoint (the URL events are sent to)")
    })?;
    let parsed = Endpoint::parse(&endpoint, &attrs).map_err(invalid)?;
    let existing = api
        .garage
        .topic_table
        .get(&EmptyKey, &name.to_string())
        .await
        .map_err(internal)?;
    if let Some(c) = existing.as_ref().and_then(|t| t.live()) {
        if c.owner != key.key_id {
            return Err(denied(format!(
                "topic {name} belongs to another access key"
            )));
        }
    }
    let config = TopicConfig {
        owner: key.key_id.clone(),
        endpoint,
        attributes: attrs,
    };
    let t = match existing {
        Some(mut t) => {
            t.config.update(Some(config));
            t
        }
        None => Topic::new(name.to_string(), config, garage_util::time::now_msec()),
    };
    api.garage.topic_table.insert(&t).await.map_err(internal)?;
    info!(
        topic = name,
        kind = parsed.kind(),
        owner = %key.key_id,
        "notification topic created"
    );
    Ok(())
}

async fn list(api: &Api) -> Result<Vec<String>, SnsError> {
    let all = api
        .garage
        .topic_table
        .get_range(&EmptyKey, None, Some(TopicFilter::Live), 10_000, false)
        .await
        .map_err(internal)?;
    Ok(all.into_iter().map(|t| t.name).collect())
}

async fn live(api: &Api, name: &str) -> Result<(Topic, TopicConfig), SnsError> {
    let t = api
        .garage
        .topic_table
        .get(&EmptyKey, &name.to_string())
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(name))?;
    let c = t.live().cloned().ok_or_else(|| not_found(name))?;
    Ok((t, c))
}

fn check_owner(key: &Key, c: &TopicConfig, name: &str) -> Result<(), SnsError> {
    match c.owner == key.key_id {
        true => Ok(()),
        false => Err(denied(format!(
            "topic {name} belongs to another access key"
        ))),
    }
}

async fn set_attribute(
    api: &Api,
    key: &Key,
    name: &str,
    attr: &str,
    value: &str,
) -> Result<(), SnsError> {
    let (mut t, mut c) = live(api, name).await?;
    check_owner(key, &c, name)?;
    match attr {
        "push-endpoint" => c.endpoint = value.to_string(),
        _ => {
            c.attributes.insert(attr.to_string(), value.to_string());
        }
    }
    Endpoint::parse(&c.endpoint, &c.attributes).map_err(invalid)?;
    t.config.update(Some(c));
    api.garage.topic_table.insert(&t).await.map_err(internal)
}

async fn delete(api: &Api, key: &Key, name: &str) -> Result<(), SnsError> {
    let (mut t, c) = live(api, name).await?;
    check_owner(key, &c, name)?;
    t.config.update(None);
    api.garage.topic_table.insert(&t).await.map_err(internal)?;
    info!(topic = name, "notification topic deleted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_pair_keys_and_values() {
        let form = vec![
            (
                "Attributes.entry.1.key".to_string(),
                "push-endpoint".to_string(),
            ),
            (
                "Attributes.entry.1.value".to_string(),
                "http://h/".to_string(),
            ),
            (
                "Attributes.entry.2.key".to_string(),
                "OpaqueData".to_string(),
            ),
            ("Attributes.entry.2.value".to_string(), "x".to_string()),
        ];
        let a = attributes(&form).unwrap();
        assert_eq!(a["push-endpoint"], "http://h/");
        assert_eq!(a["OpaqueData"], "x");
        let bad = vec![("Attributes.entry.1.key".to_string(), "k".to_string())];
        assert!(attributes(&bad).is_err());
    }
}
