//! The standard and user metadata headers kept with an object version, as
//! (lower-case name, value) pairs.

use s3s::dto::{Metadata, Timestamp, TimestampFormat};

pub const CONTENT_TYPE: &str = "content-type";
pub const CACHE_CONTROL: &str = "cache-control";
pub const CONTENT_DISPOSITION: &str = "content-disposition";
pub const CONTENT_ENCODING: &str = "content-encoding";
pub const CONTENT_LANGUAGE: &str = "content-language";
pub const EXPIRES: &str = "expires";
pub const USER_PREFIX: &str = "x-amz-meta-";

/// The headers a PutObject or CreateMultipartUpload sets.
#[derive(Default)]
pub struct StdHeaders {
    pub content_type: Option<String>,
    pub cache_control: Option<String>,
    pub content_disposition: Option<String>,
    pub content_encoding: Option<String>,
    pub content_language: Option<String>,
    pub expires: Option<Timestamp>,
    pub metadata: Option<Metadata>,
}

/// The [`StdHeaders`] of an s3s input that has the standard header fields
/// (PutObject, CreateMultipartUpload, CopyObject); moves them out of it.
#[macro_export]
macro_rules! std_headers {
    ($i:expr) => {
        $crate::meta::StdHeaders {
            content_type: $i.content_type,
            cache_control: $i.cache_control,
            content_disposition: $i.content_disposition,
            content_encoding: $i.content_encoding,
            content_language: $i.content_language,
            expires: $i.expires,
            metadata: $i.metadata,
        }
    };
}

impl StdHeaders {
    pub fn into_pairs(self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in [
            (CONTENT_TYPE, self.content_type),
            (CACHE_CONTROL, self.cache_control),
            (CONTENT_DISPOSITION, self.content_disposition),
            (CONTENT_ENCODING, self.content_encoding),
            (CONTENT_LANGUAGE, self.content_language),
            (EXPIRES, self.expires.and_then(|t| http_date(&t))),
        ] {
            if let Some(v) = v {
                out.push((k.to_string(), v));
            }
        }
        let mut user: Vec<(String, String)> = self
            .metadata
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (format!("{USER_PREFIX}{}", k.to_ascii_lowercase()), v))
            .collect();
        user.sort();
        out.extend(user);
        out
    }
}

pub fn http_date(t: &Timestamp) -> Option<String> {
    let mut buf = Vec::new();
    t.format(TimestampFormat::HttpDate, &mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// Reads stored pairs back.
pub struct Stored<'a>(pub &'a [(String, String)]);

impl Stored<'_> {
    pub fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    pub fn expires(&self) -> Option<Timestamp> {
        Timestamp::parse(TimestampFormat::HttpDate, &self.get(EXPIRES)?).ok()
    }

    pub fn user(&self) -> Option<Metadata> {
        let m: Metadata = self
            .0
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(USER_PREFIX)
                    .map(|k| (k.to_string(), v.clone()))
            })
            .collect();
        (!m.is_empty()).then_some(m)
    }
}

/// An object version's time (ms since the epoch) as an S3 timestamp.
pub fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let mut m = Metadata::new();
        m.insert("Color".into(), "blue".into());
        let pairs = StdHeaders {
            content_type: Some("text/css".into()),
            expires: Some(timestamp(1_700_000_000_000)),
            metadata: Some(m),
            ..Default::default()
        }
        .into_pairs();
        let s = Stored(&pairs);
        assert_eq!(s.get(CONTENT_TYPE).as_deref(), Some("text/css"));
        assert_eq!(
            s.user().unwrap().get("color").map(String::as_str),
            Some("blue")
        );
        assert_eq!(s.expires().unwrap(), timestamp(1_700_000_000_000));
        assert_eq!(s.get(CACHE_CONTROL), None);
    }
}
