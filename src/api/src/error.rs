//! The API's errors, mapped to S3 error codes and HTTP statuses here, at
//! the edge, and nowhere else.

use s3s::{S3Error, S3ErrorCode};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("The specified bucket does not exist")]
    NoSuchBucket(String),
    #[error("The specified key does not exist")]
    NoSuchKey(String),
    #[error("The specified multipart upload does not exist")]
    NoSuchUpload(String),
    #[error("Access denied: {0}")]
    AccessDenied(String),
    /// A session's credentials, past their expiry.
    #[error("{0}")]
    ExpiredToken(String),
    /// A session's key without its token, or with another.
    #[error("{0}")]
    InvalidToken(String),
    #[error("The bucket you tried to delete is not empty")]
    BucketNotEmpty(String),
    #[error("The requested bucket name is not available")]
    BucketAlreadyExists(String),
    #[error("Your previous request to create the named bucket succeeded and you already own it")]
    BucketAlreadyOwnedByYou(String),
    #[error("The specified bucket is not valid: {0}")]
    InvalidBucketName(String),
    #[error("The {given} location constraint is not this server's region ({region})")]
    InvalidLocationConstraint { given: String, region: String },
    #[error("At least one of the preconditions you specified did not hold")]
    PreconditionFailed,
    #[error("A conflicting conditional operation is in progress against this resource: {0}")]
    ConditionalRequestConflict(String),
    #[error("Not modified")]
    NotModified,
    #[error("The Content-MD5 you specified did not match what we received")]
    BadDigest,
    #[error("The {0} you specified did not match the calculated checksum")]
    BadDigestOf(&'static str),
    #[error("The Content-MD5 you specified is not valid")]
    InvalidDigest,
    #[error("The requested range is not satisfiable")]
    InvalidRange,
    #[error("The requested partnumber is not satisfiable (part {0})")]
    InvalidPartNumber(i32),
    #[error("One or more of the specified parts could not be found: {0}")]
    InvalidPart(String),
    #[error("The list of parts was not in ascending order")]
    InvalidPartOrder,
    #[error("Your proposed upload is smaller than the minimum allowed size (part {0})")]
    EntityTooSmall(i32),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("The storage class you specified is not valid: {0}")]
    InvalidStorageClass(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("The XML you provided was not well-formed or did not validate: {0}")]
    MalformedXml(String),
    #[error("The CORS configuration does not exist")]
    NoSuchCorsConfiguration,
    /// A CORS preflight no rule of the bucket allows (or the bucket has
    /// no CORS configuration): S3's words.
    #[error("CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")]
    CorsNotAllowed,
    #[error("The specified bucket does not have a website configuration")]
    NoSuchWebsiteConfiguration,
    #[error("The lifecycle configuration does not exist")]
    NoSuchLifecycleConfiguration,
    #[error("The replication configuration was not found")]
    NoSuchReplicationConfiguration,
    #[error("{0}")]
    NotImplemented(String),
    /// A tag set S3 refuses: a key or value too long, a key twice, a
    /// reserved `aws:` key.
    #[error("{0}")]
    InvalidTag(String),
    /// More tags than S3 allows on an object (10) or a bucket (50).
    #[error("{0}")]
    TooManyTags(String),
    #[error("The TagSet does not exist")]
    NoSuchTagSet,
    #[error("The specified version does not exist")]
    NoSuchVersion(String),
    #[error("{0}")]
    InvalidBucketState(String),
    #[error("Object Lock configuration does not exist for this bucket")]
    ObjectLockConfigurationNotFound(String),
    #[error("The specified object does not have a ObjectLock configuration")]
    NoSuchObjectLockConfiguration,
    #[error("The server side encryption configuration was not found")]
    NoSuchEncryptionConfiguration,
    #[error("The bucket does not allow ACLs")]
    AccessControlListNotSupported,
    #[error("Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting: make the bucket ACL private first")]
    InvalidBucketAclWithObjectOwnership,
    #[error("The XML you provided was not well-formed or did not validate against our published schema: {0}")]
    MalformedAcl(String),
    #[error("{0}")]
    MalformedPolicy(String),
    #[error("{0}")]
    InvalidTargetBucketForLogging(String),
    #[error("The bucket policy does not exist")]
    NoSuchBucketPolicy,
    #[error("The bucket ownership controls were not found")]
    OwnershipControlsNotFound,
    #[error("The public access block configuration was not found")]
    NoSuchPublicAccessBlockConfiguration,
    /// A read reached a delete marker: the current version (404
    /// NoSuchKey) or one named by its id (405 MethodNotAllowed), with
    /// `x-amz-delete-marker` and the marker's version id.
    #[error("{}", if *by_id { "The specified method is not allowed against this resource." } else { "The specified key does not exist." })]
    DeleteMarker {
        key: String,
        version_id: String,
        last_modified: u64,
        by_id: bool,
    },
    #[error("Your key is too long (at most 1024 bytes)")]
    KeyTooLong,
    #[error("You did not provide the number of bytes specified by the Content-Length header")]
    IncompleteBody,
    #[error("The bucket's quota does not allow this upload: {0}")]
    QuotaExceeded(String),
    #[error("Cannot read the request body: {0}")]
    Body(String),
    #[error("Service unavailable: {0}")]
    Unavailable(String),
    #[error("Internal error: {0}")]
    Internal(String),
    /// A KMS key that does not exist, is disabled, or does not open a
    /// data key.
    #[error("{0}")]
    Kms(garage_model::kms::KmsError),
    /// Credentials of a kind or a region this server does not accept
    /// (`access::auth_scope` says which, and with which code).
    #[error("{message}")]
    Refused { code: S3ErrorCode, message: String },
}

impl From<garage_table::Error> for ApiError {
    fn from(e: garage_table::Error) -> Self {
        match e {
            garage_table::Error::CasConflict { .. } => {
                ApiError::ConditionalRequestConflict(e.to_string())
            }
            garage_table::Error::Quorum(_)
            | garage_table::Error::NoNodes
            | garage_table::Error::Net { .. } => ApiError::Unavailable(e.to_string()),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<garage_model::object_write::WriteError> for ApiError {
    fn from(e: garage_model::object_write::WriteError) -> Self {
        use garage_model::object_write::WriteError as W;
        match e {
            W::Table(t) => t.into(),
            W::Overtaken => ApiError::Unavailable(e.to_string()),
            W::Locked(l) => l.into(),
            W::NoBlockList => ApiError::Internal(e.to_string()),
        }
    }
}

/// A version its object lock protects: AccessDenied, or 503 when this
/// node's clock is too far off to decide whether the lock has expired.
impl From<garage_model::object_lock::Locked> for ApiError {
    fn from(l: garage_model::object_lock::Locked) -> Self {
        if let garage_model::object_lock::Locked::Clock(c) = l {
            return ApiError::Unavailable(format!(
                "cannot decide whether the object lock has expired: {c}"
            ));
        }
        ApiError::AccessDenied(format!(
            "Access Denied because object protected by object lock: {l}"
        ))
    }
}

impl From<garage_model::kms::KmsError> for ApiError {
    fn from(e: garage_model::kms::KmsError) -> Self {
        match e {
            garage_model::kms::KmsError::Table(t) => t.into(),
            e => ApiError::Kms(e),
        }
    }
}

impl From<garage_block::manager::Error> for ApiError {
    fn from(e: garage_block::manager::Error) -> Self {
        use garage_block::manager::Error as E;
        match e {
            E::Quorum { .. } | E::Unavailable { .. } | E::NoNodes | E::NoPlacement(_) => {
                ApiError::Unavailable(e.to_string())
            }
            e => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<garage_model::helper::HelperError> for ApiError {
    fn from(e: garage_model::helper::HelperError) -> Self {
        use garage_model::helper::HelperError as H;
        match e {
            H::Table(t) => t.into(),
            H::BadName(n) => ApiError::InvalidBucketName(n),
            H::NoSuchBucket(b) => ApiError::NoSuchBucket(b),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

impl ApiError {
    pub fn code(&self) -> S3ErrorCode {
        use ApiError::*;
        match self {
            NoSuchBucket(_) => S3ErrorCode::NoSuchBucket,
            NoSuchKey(_) => S3ErrorCode::NoSuchKey,
            NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
            AccessDenied(_) | CorsNotAllowed => S3ErrorCode::AccessDenied,
            ExpiredToken(_) => S3ErrorCode::ExpiredToken,
            InvalidToken(_) => S3ErrorCode::InvalidToken,
            BucketNotEmpty(_) => S3ErrorCode::BucketNotEmpty,
            BucketAlreadyExists(_) => S3ErrorCode::BucketAlreadyExists,
            BucketAlreadyOwnedByYou(_) => S3ErrorCode::BucketAlreadyOwnedByYou,
            InvalidBucketName(_) => S3ErrorCode::InvalidBucketName,
            InvalidLocationConstraint { .. } => S3ErrorCode::InvalidLocationConstraint,
            PreconditionFailed => S3ErrorCode::PreconditionFailed,
            ConditionalRequestConflict(_) => S3ErrorCode::ConditionalRequestConflict,
            NotModified => S3ErrorCode::NotModified,
            BadDigest | BadDigestOf(_) => S3ErrorCode::BadDigest,
            InvalidDigest => S3ErrorCode::InvalidDigest,
            InvalidRange => S3ErrorCode::InvalidRange,
            InvalidPartNumber(_) => S3ErrorCode::Custom("InvalidPartNumber".into()),
            InvalidPart(_) => S3ErrorCode::InvalidPart,
            InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
            EntityTooSmall(_) => S3ErrorCode::EntityTooSmall,
            InvalidArgument(_) => S3ErrorCode::InvalidArgument,
            InvalidStorageClass(_) => S3ErrorCode::InvalidStorageClass,
            InvalidRequest(_) => S3ErrorCode::InvalidRequest,
            MalformedXml(_) => S3ErrorCode::MalformedXML,
            NoSuchCorsConfiguration => S3ErrorCode::NoSuchCORSConfiguration,
            NoSuchWebsiteConfiguration => S3ErrorCode::NoSuchWebsiteConfiguration,
            NoSuchLifecycleConfiguration => S3ErrorCode::NoSuchLifecycleConfiguration,
            NoSuchReplicationConfiguration => S3ErrorCode::ReplicationConfigurationNotFoundError,
            NotImplemented(_) => S3ErrorCode::NotImplemented,
            InvalidTag(_) => S3ErrorCode::InvalidTag,
            TooManyTags(_) => S3ErrorCode::Custom("BadRequest".into()),
            NoSuchTagSet => S3ErrorCode::NoSuchTagSet,
            NoSuchVersion(_) => S3ErrorCode::NoSuchVersion,
            InvalidBucketState(_) => S3ErrorCode::InvalidBucketState,
            ObjectLockConfigurationNotFound(_) => S3ErrorCode::ObjectLockConfigurationNotFoundError,
            NoSuchObjectLockConfiguration => S3ErrorCode::NoSuchObjectLockConfiguration,
            NoSuchEncryptionConfiguration => {
                S3ErrorCode::ServerSideEncryptionConfigurationNotFoundError
            }
            AccessControlListNotSupported => S3ErrorCode::AccessControlListNotSupported,
            MalformedAcl(_) => S3ErrorCode::MalformedACLError,
            InvalidBucketAclWithObjectOwnership => {
                S3ErrorCode::Custom("InvalidBucketAclWithObjectOwnership".into())
            }
            MalformedPolicy(_) => S3ErrorCode::MalformedPolicy,
            InvalidTargetBucketForLogging(_) => S3ErrorCode::InvalidTargetBucketForLogging,
            NoSuchBucketPolicy => S3ErrorCode::NoSuchBucketPolicy,
            OwnershipControlsNotFound => S3ErrorCode::OwnershipControlsNotFoundError,
            NoSuchPublicAccessBlockConfiguration => {
                S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into())
            }
            DeleteMarker { by_id: false, .. } => S3ErrorCode::NoSuchKey,
            DeleteMarker { by_id: true, .. } => S3ErrorCode::MethodNotAllowed,
            KeyTooLong => S3ErrorCode::KeyTooLongError,
            IncompleteBody => S3ErrorCode::IncompleteBody,
            QuotaExceeded(_) => S3ErrorCode::Custom("QuotaExceeded".into()),
            Body(_) => S3ErrorCode::IncompleteBody,
            Unavailable(_) => S3ErrorCode::ServiceUnavailable,
            Internal(_) => S3ErrorCode::InternalError,
            Refused { code, .. } => code.clone(),
            Kms(k) => {
                use garage_model::kms::KmsError as K;
                match k {
                    K::NotFound(_) => S3ErrorCode::Custom("KMS.NotFoundException".into()),
                    K::Disabled(_) => S3ErrorCode::Custom("KMS.DisabledException".into()),
                    K::Invalid(_) | K::AlreadyExists(_) => S3ErrorCode::InvalidArgument,
                    K::InvalidCiphertext(_) | K::Internal(_) | K::Table(_) => {
                        S3ErrorCode::InternalError
                    }
                }
            }
        }
    }
}

impl From<ApiError> for S3Error {
    fn from(e: ApiError) -> Self {
        let code = e.code();
        let status = match &e {
            ApiError::QuotaExceeded(_) => Some(hyper::StatusCode::FORBIDDEN),
            ApiError::NotModified => Some(hyper::StatusCode::NOT_MODIFIED),
            ApiError::TooManyTags(_) => Some(hyper::StatusCode::BAD_REQUEST),
            ApiError::ExpiredToken(_) | ApiError::InvalidToken(_) => {
                Some(hyper::StatusCode::BAD_REQUEST)
            }
            ApiError::InvalidPartNumber(_) => Some(hyper::StatusCode::RANGE_NOT_SATISFIABLE),
            ApiError::NoSuchEncryptionConfiguration
            | ApiError::NoSuchPublicAccessBlockConfiguration => Some(hyper::StatusCode::NOT_FOUND),
            ApiError::MalformedAcl(_)
            | ApiError::InvalidBucketAclWithObjectOwnership
            | ApiError::InvalidTargetBucketForLogging(_) => Some(hyper::StatusCode::BAD_REQUEST),
            ApiError::Kms(
                garage_model::kms::KmsError::NotFound(_) | garage_model::kms::KmsError::Disabled(_),
            ) => Some(hyper::StatusCode::BAD_REQUEST),
            _ => None,
        };
        let mut err = S3Error::with_message(code, e.to_string());
        if let Some(s) = status {
            err.set_status_code(s);
        }
        if let ApiError::DeleteMarker {
            version_id,
            last_modified,
            ..
        } = &e
        {
            let mut h = hyper::HeaderMap::new();
            h.insert(
                "x-amz-delete-marker",
                hyper::header::HeaderValue::from_static("true"),
            );
            if let Ok(v) = hyper::header::HeaderValue::from_str(version_id) {
                h.insert("x-amz-version-id", v);
            }
            let date = crate::meta::http_date(&crate::meta::timestamp(*last_modified));
            if let Some(v) = date.and_then(|d| hyper::header::HeaderValue::from_str(&d).ok()) {
                h.insert(hyper::header::LAST_MODIFIED, v);
            }
            err.set_headers(h);
        }
        if matches!(e, ApiError::Internal(_) | ApiError::Unavailable(_))
            || matches!(e.code(), S3ErrorCode::InternalError)
        {
            tracing::warn!("S3 request failed: {e}");
        }
        err
    }
}

impl ApiError {
    /// The error as the HTTP response s3s would make of it.
    pub fn into_http_response(self) -> Result<s3s::HttpResponse, s3s::HttpError> {
        S3Error::from(self)
            .to_http_response()
            .map_err(|e| s3s::HttpError::new(Box::new(e)))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
