//! The OpenAPI document's frame (title, security scheme) and the endpoints
//! served without a token. The operations themselves are added by the
//! routers of each module, from their `#[utoipa::path]` annotations.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "garage admin API",
        description = "Administration of a garage cluster: the v2 admin API of the reference \
                       system (Garage). Every endpoint but /health, /check, /v2/GetClusterHealth and \
                       /v2/openapi.json needs `Authorization: Bearer <admin_token>`."
    ),
    paths(super::cluster::get_cluster_health, super::cluster::health, super::cluster::check, openapi_json),
    modifiers(&BearerAuth),
    security(("bearerAuth" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerAuth",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

static DOC: OnceLock<Vec<u8>> = OnceLock::new();

/// This document (no token needed).
#[utoipa::path(get, path = "/v2/openapi.json", tag = "Special", security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document of the admin API",
        content_type = "application/json")))]
pub async fn openapi_json() -> impl IntoResponse {
    let doc = DOC.get_or_init(|| {
        serde_json::to_vec_pretty(&super::openapi_document())
            .expect("the OpenAPI document serialises to JSON")
    });
    ([(header::CONTENT_TYPE, "application/json")], doc.as_slice())
}

#[cfg(test)]
mod tests {
    use utoipa::openapi::path::HttpMethod;

    /// The reference system's v2 endpoints this version serves, with
    /// their methods.
    const EXPECTED: &[(&str, &str)] = &[
        ("GET", "/health"),
        ("GET", "/check"),
        ("GET", "/v2/openapi.json"),
        ("GET", "/v2/GetClusterStatus"),
        ("GET", "/v2/GetClusterHealth"),
        ("POST", "/v2/ConnectClusterNodes"),
        ("GET", "/v2/GetClusterLayout"),
        ("GET", "/v2/GetClusterLayoutHistory"),
        ("POST", "/v2/UpdateClusterLayout"),
        ("POST", "/v2/ApplyClusterLayout"),
        ("POST", "/v2/RevertClusterLayout"),
        ("GET", "/v2/ListKeys"),
        ("GET", "/v2/GetKeyInfo"),
        ("POST", "/v2/CreateKey"),
        ("POST", "/v2/ImportKey"),
        ("POST", "/v2/UpdateKey"),
        ("POST", "/v2/DeleteKey"),
        ("GET", "/v2/ListBuckets"),
        ("GET", "/v2/GetBucketInfo"),
        ("POST", "/v2/CreateBucket"),
        ("POST", "/v2/UpdateBucket"),
        ("POST", "/v2/DeleteBucket"),
        ("POST", "/v2/AddBucketAlias"),
        ("POST", "/v2/RemoveBucketAlias"),
        ("POST", "/v2/AllowBucketKey"),
        ("POST", "/v2/DenyBucketKey"),
        ("GET", "/v2/GetNodeInfo"),
        ("GET", "/v2/GetNodeStatistics"),
        ("POST", "/v2/LaunchRepairOperation"),
        ("POST", "/v2/ListWorkers"),
        ("POST", "/v2/GetWorkerInfo"),
        ("GET", "/v2/ListBlockErrors"),
        ("POST", "/v2/GetBlockInfo"),
        ("POST", "/v2/RetryBlockResync"),
        ("POST", "/v2/PurgeBlocks"),
        ("GET", "/v2/GetClusterStatistics"),
        ("POST", "/v2/PreviewClusterLayoutChanges"),
        ("POST", "/v2/ClusterLayoutSkipDeadNodes"),
        ("GET", "/v2/InspectObject"),
        ("POST", "/v2/CleanupIncompleteUploads"),
        ("POST", "/v2/GetWorkerVariable"),
        ("POST", "/v2/SetWorkerVariable"),
        ("POST", "/v2/CreateMetadataSnapshot"),
        ("GET", "/v2/ListAdminTokens"),
        ("GET", "/v2/GetAdminTokenInfo"),
        ("POST", "/v2/CreateAdminToken"),
        ("POST", "/v2/UpdateAdminToken"),
        ("POST", "/v2/DeleteAdminToken"),
        ("GET", "/v2/ListKmsKeys"),
        ("GET", "/v2/GetKmsKeyInfo"),
        ("POST", "/v2/CreateKmsKey"),
        ("POST", "/v2/UpdateKmsKey"),
        ("POST", "/v2/FinalizeUpgrade"),
        ("POST", "/v2/RotateKmsKey"),
        ("POST", "/v2/PresignS3Request"),
        ("GET", "/v2/GetNodeMetricsHistory"),
        ("GET", "/v2/GetNodeStorage"),
        ("GET", "/v2/ListTopics"),
        ("GET", "/v2/GetTopicInfo"),
        ("POST", "/v2/CreateTopic"),
        ("POST", "/v2/DeleteTopic"),
        ("GET", "/v2/GetNotificationBacklog"),
        ("GET", "/v2/ListRemotes"),
        ("GET", "/v2/GetRemoteInfo"),
        ("POST", "/v2/AddRemote"),
        ("POST", "/v2/DeleteRemote"),
        ("POST", "/v2/ResyncBucketReplication"),
        ("GET", "/v2/GetReplicationBacklog"),
        ("POST", "/v2/IamCall"),
    ];

    fn method(m: &HttpMethod) -> &'static str {
        match m {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            _ => "OTHER",
        }
    }

    /// Every (method, path) of the document.
    fn documented() -> Vec<(String, String)> {
        let doc = super::super::openapi_document();
        let mut out = Vec::new();
        for (path, item) in doc.paths.paths.iter() {
            for (m, op) in [
                (HttpMethod::Get, &item.get),
                (HttpMethod::Post, &item.post),
                (HttpMethod::Put, &item.put),
                (HttpMethod::Delete, &item.delete),
            ] {
                if op.is_some() {
                    out.push((method(&m).to_string(), path.clone()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn document_lists_exactly_the_served_routes() {
        let mut expected: Vec<(String, String)> = EXPECTED
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        expected.sort();
        assert_eq!(documented(), expected);
        // The router serves what the document lists: both come from the
        // same annotations, and the routes outside them are documented too.
        let served = super::super::served_routes();
        let mut served: Vec<(String, String)> = served
            .into_iter()
            .map(|(m, p)| (m.to_string(), p))
            .collect();
        served.sort();
        assert_eq!(served, expected);
    }

    #[test]
    fn document_is_valid_json_with_schemas_and_security() {
        let doc = super::super::openapi_document();
        let json: serde_json::Value = serde_json::to_value(&doc).expect("the document serialises");
        assert!(json["openapi"].as_str().unwrap().starts_with("3."));
        let schemas = json["components"]["schemas"].as_object().unwrap();
        for s in [
            "GetClusterStatusResponse",
            "GetClusterLayoutResponse",
            "GetKeyInfoResponse",
            "GetBucketInfoResponse",
            "RemoteInfo",
            "AddRemoteRequest",
            "ReplicationBacklog",
            "ErrorBody",
        ] {
            assert!(schemas.contains_key(s), "schema {s} missing");
        }
        assert_eq!(
            json["components"]["securitySchemes"]["bearerAuth"]["scheme"],
            "bearer"
        );
        // Token-free endpoints say so.
        let health = &json["paths"]["/v2/GetClusterHealth"]["get"]["security"];
        assert_eq!(health, &serde_json::json!([{}]));
    }
}
