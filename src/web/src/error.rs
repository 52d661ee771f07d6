//! The website endpoint's errors, and the small HTML pages that answer
//! them (when the bucket has no error document for them).

use garage_api::error::ApiError;
use hyper::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// No bucket with website access under this host name (the bucket is
    /// missing, has no website configuration, or is denied).
    #[error("There is no website at {0}")]
    NoSuchWebsite(String),
    #[error("The request has no Host header")]
    NoHost,
    #[error("The path is not valid UTF-8 once decoded")]
    BadPath,
    #[error("The method {0} is not allowed on a website (GET, HEAD and OPTIONS are)")]
    MethodNotAllowed(String),
    #[error("{0}")]
    BadRequest(String),
    /// A CORS preflight that no rule of the bucket allows.
    #[error("This CORS request is not allowed by the bucket's CORS rules")]
    CorsNotAllowed,
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<garage_model::helper::HelperError> for WebError {
    fn from(e: garage_model::helper::HelperError) -> Self {
        WebError::Api(e.into())
    }
}

impl From<garage_table::Error> for WebError {
    fn from(e: garage_table::Error) -> Self {
        WebError::Api(e.into())
    }
}

impl WebError {
    pub fn status(&self) -> StatusCode {
        match self {
            WebError::NoSuchWebsite(_) => StatusCode::NOT_FOUND,
            WebError::NoHost | WebError::BadPath | WebError::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            WebError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            WebError::CorsNotAllowed => StatusCode::FORBIDDEN,
            WebError::Api(e) => api_status(e),
        }
    }

    /// Whether this is the server's fault (logged as a warning).
    pub fn is_server_error(&self) -> bool {
        self.status().is_server_error()
    }

    /// What the page says: the error, except for server errors, whose
    /// details (node ids, quorums) are for the log, not for visitors.
    pub fn public_message(&self) -> String {
        if self.is_server_error() {
            "The server could not answer this request; please try again later.".into()
        } else {
            self.to_string()
        }
    }
}

/// The HTTP status of an error of the object read path.
pub fn api_status(e: &ApiError) -> StatusCode {
    match e {
        ApiError::NoSuchKey(_) | ApiError::NoSuchBucket(_) | ApiError::InvalidBucketName(_) => {
            StatusCode::NOT_FOUND
        }
        ApiError::NotModified => StatusCode::NOT_MODIFIED,
        ApiError::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        ApiError::InvalidRange => StatusCode::RANGE_NOT_SATISFIABLE,
        ApiError::AccessDenied(_) => StatusCode::FORBIDDEN,
        ApiError::InvalidRequest(_) | ApiError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `s` with HTML's special characters escaped.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A small HTML page for an error status.
pub fn error_page(status: StatusCode, message: &str) -> String {
    let title = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error")
    );
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body><h1>{title}</h1>\n<p>{}</p>\n<hr><p>garage</p></body></html>\n",
        escape_html(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_and_hide_server_details() {
        let p = error_page(StatusCode::NOT_FOUND, "<script>x</script> & 'y'");
        assert!(p.contains("<title>404 Not Found</title>"));
        assert!(p.contains("&lt;script&gt;x&lt;/script&gt; &amp; &#39;y&#39;"));
        assert!(!p.contains("<script>"));
        let e = WebError::Api(ApiError::Unavailable("quorum 1/2 on node abc".into()));
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!e.public_message().contains("abc"));
        let e = WebError::NoSuchWebsite("x.example".into());
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert!(e.public_message().contains("x.example"));
        assert_eq!(
            WebError::Api(ApiError::NotModified).status(),
            StatusCode::NOT_MODIFIED
        );
    }
}
