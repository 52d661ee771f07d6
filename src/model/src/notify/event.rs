//! Event types and the records sent for them: AWS's event message
//! structure (`Records[]`, version 2.2), with Ceph's `eventId` and
//! `opaqueData`.

use serde_json::json;

/// One event type (AWS's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventName {
    ObjectCreatedPut,
    ObjectCreatedPost,
    ObjectCreatedCopy,
    ObjectCreatedCompleteMultipartUpload,
    ObjectRemovedDelete,
    ObjectRemovedDeleteMarkerCreated,
    LifecycleExpirationDelete,
    LifecycleExpirationDeleteMarkerCreated,
    LifecycleTransition,
    ObjectTaggingPut,
    ObjectTaggingDelete,
    ObjectAclPut,
}

impl EventName {
    pub const ALL: [EventName; 12] = [
        EventName::ObjectCreatedPut,
        EventName::ObjectCreatedPost,
        EventName::ObjectCreatedCopy,
        EventName::ObjectCreatedCompleteMultipartUpload,
        EventName::ObjectRemovedDelete,
        EventName::ObjectRemovedDeleteMarkerCreated,
        EventName::LifecycleExpirationDelete,
        EventName::LifecycleExpirationDeleteMarkerCreated,
        EventName::LifecycleTransition,
        EventName::ObjectTaggingPut,
        EventName::ObjectTaggingDelete,
        EventName::ObjectAclPut,
    ];

    /// The name in a record's `eventName` (`ObjectCreated:Put`).
    pub fn record_name(self) -> &'static str {
        match self {
            EventName::ObjectCreatedPut => "ObjectCreated:Put",
            EventName::ObjectCreatedPost => "ObjectCreated:Post",
            EventName::ObjectCreatedCopy => "ObjectCreated:Copy",
            EventName::ObjectCreatedCompleteMultipartUpload => {
                "ObjectCreated:CompleteMultipartUpload"
            }
            EventName::ObjectRemovedDelete => "ObjectRemoved:Delete",
            EventName::ObjectRemovedDeleteMarkerCreated => "ObjectRemoved:DeleteMarkerCreated",
            EventName::LifecycleExpirationDelete => "LifecycleExpiration:Delete",
            EventName::LifecycleExpirationDeleteMarkerCreated => {
                "LifecycleExpiration:DeleteMarkerCreated"
            }
            EventName::LifecycleTransition => "LifecycleTransition",
            EventName::ObjectTaggingPut => "ObjectTagging:Put",
            EventName::ObjectTaggingDelete => "ObjectTagging:Delete",
            EventName::ObjectAclPut => "ObjectAcl:Put",
        }
    }

    /// The name in a configuration (`s3:ObjectCreated:Put`).
    pub fn s3_name(self) -> String {
        format!("s3:{}", self.record_name())
    }

    /// The part before the colon (`ObjectCreated`), which `s3:…:*` names.
    pub fn family(self) -> &'static str {
        let n = self.record_name();
        n.split(':').next().unwrap_or(n)
    }
}

/// Who made a request, as an event record tells it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFacts {
    /// The access key id (empty: anonymous, or the node itself).
    pub principal: String,
    pub source_ip: String,
    pub request_id: String,
}

/// What one record says of its object.
pub struct RecordObject<'a> {
    pub key: &'a str,
    pub size: u64,
    pub etag: &'a str,
    /// `None`: the bucket is not versioned.
    pub version_id: Option<String>,
    /// Orders the events of one key: the stamp of the write.
    pub sequencer: u64,
}

/// What one record says of its bucket and rule.
pub struct RecordContext<'a> {
    pub region: &'a str,
    pub bucket: &'a str,
    pub bucket_owner: &'a str,
    pub configuration_id: &'a str,
    pub opaque_data: &'a str,
    pub event_id: &'a str,
    pub time_ms: u64,
}

/// One record (an element of `Records`), as JSON.
pub fn record(
    name: EventName,
    ctx: &RecordContext<'_>,
    obj: &RecordObject<'_>,
    req: &RequestFacts,
) -> serde_json::Value {
    // URL-encoded as a form value (a space is `+`), slashes kept, as
    // S3's records have it.
    let key: String = obj
        .key
        .split('/')
        .map(|part| form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>())
        .collect::<Vec<_>>()
        .join("/");
    let mut object = json!({
        "key": key,
        "size": obj.size,
        "eTag": obj.etag,
        "sequencer": format!("{:016X}", obj.sequencer),
    });
    if let Some(v) = &obj.version_id {
        object["versionId"] = json!(v);
    }
    json!({
        "eventVersion": "2.2",
        "eventSource": "aws:s3",
        "awsRegion": ctx.region,
        "eventTime": event_time(ctx.time_ms),
        "eventName": name.record_name(),
        "userIdentity": { "principalId": req.principal },
        "requestParameters": { "sourceIPAddress": req.source_ip },
        "responseElements": {
            "x-amz-request-id": req.request_id,
            "x-amz-id-2": req.request_id,
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": ctx.configuration_id,
            "bucket": {
                "name": ctx.bucket,
                "ownerIdentity": { "principalId": ctx.bucket_owner },
                "arn": format!("arn:aws:s3:::{}", ctx.bucket),
            },
            "object": object,
        },
        "eventId": ctx.event_id,
        "opaqueData": ctx.opaque_data,
    })
}

/// `2026-11-30T10:00:00.123Z`.
fn event_time(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| format!("{t:.3}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_has_aws_fields() {
        let r = record(
            EventName::ObjectCreatedPut,
            &RecordContext {
                region: "garage",
                bucket: "photos",
                bucket_owner: "GKowner",
                configuration_id: "rule-1",
                opaque_data: "od",
                event_id: "e1",
                time_ms: 1_700_000_000_123,
            },
            &RecordObject {
                key: "a b/é+.jpg",
                size: 42,
                etag: "abc",
                version_id: Some("v1".into()),
                sequencer: 0x1234,
            },
            &RequestFacts {
                principal: "GKwriter".into(),
                source_ip: "127.0.0.1".into(),
                request_id: "req".into(),
            },
        );
        assert_eq!(r["eventName"], "ObjectCreated:Put");
        assert_eq!(r["eventTime"], "2023-11-14T22:13:20.123Z");
        assert_eq!(r["s3"]["object"]["key"], "a+b/%C3%A9%2B.jpg");
        assert_eq!(r["s3"]["object"]["sequencer"], "0000000000001234");
        assert_eq!(r["s3"]["object"]["versionId"], "v1");
        assert_eq!(r["s3"]["bucket"]["arn"], "arn:aws:s3:::photos");
        assert_eq!(r["s3"]["configurationId"], "rule-1");
        assert_eq!(r["userIdentity"]["principalId"], "GKwriter");
        assert_eq!(r["opaqueData"], "od");
    }

    #[test]
    fn names_and_families() {
        assert_eq!(
            EventName::ObjectRemovedDeleteMarkerCreated.s3_name(),
            "s3:ObjectRemoved:DeleteMarkerCreated"
        );
        assert_eq!(
            EventName::LifecycleTransition.family(),
            "LifecycleTransition"
        );
        assert_eq!(EventName::ObjectAclPut.family(), "ObjectAcl");
    }
}
