//! `x-amz-checksum-*`: the additional checksum a client sends with a body,
//! as a header or as an aws-chunked trailer (`x-amz-trailer`). It is
//! computed while the body is written (on the blocking pool, with the MD5),
//! compared (a mismatch is BadDigest and the write is abandoned), stored
//! with the object version, and returned by GET and HEAD with
//! `x-amz-checksum-mode: ENABLED`.

use hyper::HeaderMap;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::Checksum as _;
use s3s::dto::Checksum;

use crate::error::{ApiError, ApiResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

pub const ALL: [Algo; 5] = [
    Algo::Crc32,
    Algo::Crc32c,
    Algo::Crc64Nvme,
    Algo::Sha1,
    Algo::Sha256,
];

impl Algo {
    /// The header (and stored metadata) name.
    pub fn header(self) -> &'static str {
        match self {
            Algo::Crc32 => "x-amz-checksum-crc32",
            Algo::Crc32c => "x-amz-checksum-crc32c",
            Algo::Crc64Nvme => "x-amz-checksum-crc64nvme",
            Algo::Sha1 => "x-amz-checksum-sha1",
            Algo::Sha256 => "x-amz-checksum-sha256",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Algo::Crc32 => "CRC32",
            Algo::Crc32c => "CRC32C",
            Algo::Crc64Nvme => "CRC64NVME",
            Algo::Sha1 => "SHA1",
            Algo::Sha256 => "SHA256",
        }
    }

    fn parse(s: &str) -> Option<Algo> {
        ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(s))
    }

    pub fn hasher(self) -> ChecksumHasher {
        let mut h = ChecksumHasher::default();
        match self {
            Algo::Crc32 => h.crc32 = Some(s3s::crypto::Crc32::new()),
            Algo::Crc32c => h.crc32c = Some(s3s::crypto::Crc32c::new()),
            Algo::Crc64Nvme => h.crc64nvme = Some(s3s::crypto::Crc64Nvme::new()),
            Algo::Sha1 => h.sha1 = Some(s3s::crypto::Sha1::new()),
            Algo::Sha256 => h.sha256 = Some(s3s::crypto::Sha256::new()),
        }
        h
    }

    pub fn value(self, c: &Checksum) -> Option<String> {
        match self {
            Algo::Crc32 => c.checksum_crc32.clone(),
            Algo::Crc32c => c.checksum_crc32c.clone(),
            Algo::Crc64Nvme => c.checksum_crc64nvme.clone(),
            Algo::Sha1 => c.checksum_sha1.clone(),
            Algo::Sha256 => c.checksum_sha256.clone(),
        }
    }
}

/// The checksum a request announced: its value, or `None` when the value
/// comes in the body's trailer.
#[derive(Clone, Debug)]
pub struct Expected {
    pub algo: Algo,
    pub value: Option<String>,
}

/// What the request asks to be checked: a checksum header, or a trailer
/// announced by `x-amz-trailer`. At most one algorithm.
pub fn expected(headers: &HeaderMap) -> ApiResult<Option<Expected>> {
    let mut found = Vec::new();
    for a in ALL {
        if let Some(v) = headers.get(a.header()) {
            let v = v.to_str().map_err(|_| {
                ApiError::InvalidArgument(format!("{} is not valid text", a.header()))
            })?;
            found.push(Expected {
                algo: a,
                value: Some(v.to_string()),
            });
        }
    }
    if let Some(t) = headers.get("x-amz-trailer").and_then(|t| t.to_str().ok()) {
        for name in t.split(',').map(str::trim) {
            if let Some(a) = ALL
                .into_iter()
                .find(|a| a.header() == name.to_ascii_lowercase())
            {
                found.push(Expected {
                    algo: a,
                    value: None,
                });
            }
        }
    }
    if found.is_empty() {
        // An SDK may name the algorithm without sending a value: compute
        // it, to store and return it.
        if let Some(a) = headers
            .get("x-amz-sdk-checksum-algorithm")
            .and_then(|v| v.to_str().ok())
            .and_then(Algo::parse)
        {
            return Ok(Some(Expected {
                algo: a,
                value: Some(String::new()),
            }));
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(ApiError::InvalidRequest(
            "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
                .into(),
        )),
    }
}

/// Compares what was computed with what the request gave (in a header, or
/// in `trailers` once the body is read); returns the (header, value) to
/// store.
pub fn verify(
    e: &Expected,
    computed: &Checksum,
    trailers: Option<&s3s::TrailingHeaders>,
) -> ApiResult<(String, String)> {
    let got = e.algo.value(computed).unwrap_or_default();
    let given = match &e.value {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(v.clone()),
        None => {
            let t = trailers
                .and_then(|t| {
                    t.read(|h| {
                        h.get(e.algo.header())
                            .and_then(|v| v.to_str().ok().map(str::to_string))
                    })
                })
                .flatten();
            Some(t.ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "the {} trailer announced by x-amz-trailer was not sent",
                    e.algo.header()
                ))
            })?)
        }
    };
    if let Some(given) = given {
        if given != got {
            return Err(ApiError::BadDigestOf(e.algo.name()));
        }
    }
    Ok((e.algo.header().to_string(), got))
}

/// Copies a [`Checksum`]'s fields into an s3s output that has the same
/// `checksum_*` fields (PutObject, GetObject, HeadObject).
#[macro_export]
macro_rules! set_checksums {
    ($out:expr, $c:expr) => {{
        let c = $c;
        $out.checksum_crc32 = c.checksum_crc32;
        $out.checksum_crc32c = c.checksum_crc32c;
        $out.checksum_crc64nvme = c.checksum_crc64nvme;
        $out.checksum_sha1 = c.checksum_sha1;
        $out.checksum_sha256 = c.checksum_sha256;
    }};
}

/// The stored checksum, in the fields of an s3s output.
pub fn stored(headers: &[(String, String)]) -> Checksum {
    let mut c = Checksum::default();
    for (k, v) in headers {
        let v = Some(v.clone());
        match ALL.into_iter().find(|a| a.header() == k) {
            Some(Algo::Crc32) => c.checksum_crc32 = v,
            Some(Algo::Crc32c) => c.checksum_crc32c = v,
            Some(Algo::Crc64Nvme) => c.checksum_crc64nvme = v,
            Some(Algo::Sha1) => c.checksum_sha1 = v,
            Some(Algo::Sha256) => c.checksum_sha256 = v,
            None => (),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: Algo, data: &[u8]) -> Checksum {
        let mut h = a.hasher();
        h.update(data);
        h.finalize()
    }

    #[test]
    fn a_header_checksum_is_verified() {
        let c = sum(Algo::Crc32, b"hello");
        let good = c.checksum_crc32.clone().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-amz-checksum-crc32", good.parse().unwrap());
        let e = expected(&h).unwrap().unwrap();
        assert_eq!(
            verify(&e, &c, None).unwrap(),
            ("x-amz-checksum-crc32".into(), good)
        );
        let other = sum(Algo::Crc32, b"hellp");
        assert!(matches!(
            verify(&e, &other, None),
            Err(ApiError::BadDigestOf("CRC32"))
        ));
        h.insert("x-amz-checksum-sha256", "x".parse().unwrap());
        assert!(expected(&h).is_err());
    }

    #[test]
    fn a_missing_trailer_is_an_error_and_none_asked_is_none() {
        let mut h = HeaderMap::new();
        assert!(expected(&h).unwrap().is_none());
        h.insert("x-amz-trailer", "x-amz-checksum-crc32c".parse().unwrap());
        let e = expected(&h).unwrap().unwrap();
        assert_eq!(e.algo, Algo::Crc32c);
        assert!(verify(&e, &sum(Algo::Crc32c, b"x"), None).is_err());
    }
}
