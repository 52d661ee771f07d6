//! `x-amz-checksum-*`: the additional checksum a client sends with a body,
//! as a header or as an aws-chunked trailer (`x-amz-trailer`). It is
//! computed while the body is written (on the blocking pool, with the MD5),
//! compared (a mismatch is BadDigest and the write is abandoned), stored
//! with the object version, and returned by GET and HEAD with
//! `x-amz-checksum-mode: ENABLED`.
//!
//! A multipart upload created with `x-amz-checksum-algorithm` keeps each
//! part's checksum; its object's checksum is computed at completion from
//! them ([`multipart`]): COMPOSITE, the checksum of the parts' binary
//! checksums with a `-N` suffix, or FULL_OBJECT (CRCs only), the CRC of the
//! whole object obtained by combining the parts' CRCs with their lengths.

use base64::Engine as _;
use hyper::HeaderMap;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::Checksum as _;
use s3s::dto::{Checksum, ChecksumType};

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

    pub fn name(self) -> &'static str {
        match self {
            Algo::Crc32 => "CRC32",
            Algo::Crc32c => "CRC32C",
            Algo::Crc64Nvme => "CRC64NVME",
            Algo::Sha1 => "SHA1",
            Algo::Sha256 => "SHA256",
        }
    }

    pub fn parse(s: &str) -> Option<Algo> {
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

/// The stored checksum type of an object (`x-amz-checksum-type`, kept with
/// a multipart object's checksum).
pub const TYPE_HEADER: &str = "x-amz-checksum-type";
/// The parts' checksums of a multipart object (`N:value,…`), for
/// GetObjectAttributes; never sent as a header.
pub const PARTS_HEADER: &str = "x-garage-part-checksums";

impl Algo {
    /// The crc-fast algorithm of a CRC, which can be combined.
    fn crc(self) -> Option<(crc_fast::CrcAlgorithm, usize)> {
        match self {
            Algo::Crc32 => Some((crc_fast::CrcAlgorithm::Crc32IsoHdlc, 4)),
            Algo::Crc32c => Some((crc_fast::CrcAlgorithm::Crc32Iscsi, 4)),
            Algo::Crc64Nvme => Some((crc_fast::CrcAlgorithm::Crc64Nvme, 8)),
            Algo::Sha1 | Algo::Sha256 => None,
        }
    }

    /// The checksum type an upload gets when CreateMultipartUpload names
    /// `self` and maybe a type: `true` for FULL_OBJECT.
    pub fn upload_type(self, asked: Option<&str>) -> ApiResult<bool> {
        let lower = self.name().to_ascii_lowercase();
        match asked.map(str::to_ascii_uppercase).as_deref() {
            None => Ok(self == Algo::Crc64Nvme),
            Some("COMPOSITE") if self == Algo::Crc64Nvme => Err(ApiError::InvalidRequest(format!(
                "The COMPOSITE checksum type cannot be used with the {lower} checksum algorithm."
            ))),
            Some("COMPOSITE") => Ok(false),
            Some("FULL_OBJECT") if self.crc().is_none() => Err(ApiError::InvalidRequest(format!(
                "The FULL_OBJECT checksum type cannot be used with the {lower} checksum algorithm."
            ))),
            Some("FULL_OBJECT") => Ok(true),
            Some(t) => Err(ApiError::InvalidRequest(format!(
                "Value for x-amz-checksum-type header is invalid: {t}"
            ))),
        }
    }
}

/// The name of a checksum type.
pub fn type_name(full_object: bool) -> &'static str {
    if full_object {
        "FULL_OBJECT"
    } else {
        "COMPOSITE"
    }
}

/// The checksum of a multipart object from its parts' checksums (base64)
/// and sizes, in part order: COMPOSITE (`base64(H(c1 || c2 || …))-N`) or
/// FULL_OBJECT (the parts' CRCs combined, a CRC of the whole object).
pub fn multipart(algo: Algo, full_object: bool, parts: &[(&str, u64)]) -> ApiResult<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let decode = |v: &str| {
        b64.decode(v)
            .map_err(|_| ApiError::Internal(format!("stored part checksum {v} is not base64")))
    };
    if !full_object {
        let mut h = algo.hasher();
        for (v, _) in parts {
            h.update(&decode(v)?);
        }
        let sum = algo.value(&h.finalize()).unwrap_or_default();
        return Ok(format!("{sum}-{}", parts.len()));
    }
    let (crc, width) = algo.crc().ok_or_else(|| {
        ApiError::Internal(format!("{} has no full-object checksum", algo.name()))
    })?;
    let mut acc: Option<u64> = None;
    for (v, len) in parts {
        let bytes = decode(v)?;
        if bytes.len() != width {
            return Err(ApiError::Internal(format!(
                "stored part checksum {v} is not {width} bytes"
            )));
        }
        let c = bytes.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b));
        acc = Some(match acc {
            None => c,
            Some(a) => crc_fast::checksum_combine(crc, a, c, *len),
        });
    }
    // No part: the CRC of nothing.
    let total = acc.unwrap_or_else(|| crc_fast::checksum(crc, &[]));
    Ok(b64.encode(&total.to_be_bytes()[8 - width..]))
}

/// The given checksums of a request or part (any struct with the five
/// `checksum_*` fields), as a [`Checksum`].
#[macro_export]
macro_rules! given_checksums {
    ($x:expr) => {{
        let x = &$x;
        s3s::dto::Checksum {
            checksum_crc32: x.checksum_crc32.clone(),
            checksum_crc32c: x.checksum_crc32c.clone(),
            checksum_crc64nvme: x.checksum_crc64nvme.clone(),
            checksum_sha1: x.checksum_sha1.clone(),
            checksum_sha256: x.checksum_sha256.clone(),
            ..Default::default()
        }
    }};
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
    ($out:expr, $c:expr, with_type) => {{
        let c = $c;
        $out.checksum_type = c.checksum_type.clone();
        $crate::set_checksums!($out, c);
    }};
}

/// The stored checksum, in the fields of an s3s output, with its type
/// (FULL_OBJECT but for a composite multipart checksum).
pub fn stored(headers: &[(String, String)]) -> Checksum {
    let mut c = Checksum::default();
    let mut ty = None;
    for (k, v) in headers {
        if k == TYPE_HEADER {
            ty = Some(v.clone());
            continue;
        }
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
    if c != Checksum::default() {
        c.checksum_type = Some(ChecksumType::from(
            ty.unwrap_or_else(|| "FULL_OBJECT".to_string()),
        ));
    }
    c
}

/// The algorithm and type of an object's stored checksum, as listings
/// report them (`ChecksumAlgorithm`, `ChecksumType`); none without one.
pub fn listed(headers: &[(String, String)]) -> Option<(s3s::dto::ChecksumAlgorithm, ChecksumType)> {
    let algo = headers
        .iter()
        .find_map(|(k, _)| ALL.into_iter().find(|a| a.header() == k))?;
    let ty = headers
        .iter()
        .find(|(k, _)| k == TYPE_HEADER)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "FULL_OBJECT".to_string());
    Some((
        s3s::dto::ChecksumAlgorithm::from(algo.name().to_string()),
        ChecksumType::from(ty),
    ))
}

/// The stored parts' checksums of a multipart object: part number ->
/// value.
pub fn stored_parts(headers: &[(String, String)]) -> Vec<(u64, String)> {
    headers
        .iter()
        .filter(|(k, _)| k == PARTS_HEADER)
        .flat_map(|(_, v)| v.split(','))
        .filter_map(|p| {
            let (n, v) = p.split_once(':')?;
            Some((n.parse().ok()?, v.to_string()))
        })
        .collect()
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

    fn b64(a: Algo, data: &[u8]) -> String {
        a.value(&sum(a, data)).unwrap()
    }

    /// FULL_OBJECT: the combined parts' CRCs are the CRC of the whole
    /// object, computed here in one go.
    #[test]
    fn full_object_crcs_combine() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let cuts = [
            (0, 7_000),
            (7_000, 14_000),
            (14_000, 14_000),
            (14_000, 20_000),
        ];
        for a in [Algo::Crc32, Algo::Crc32c, Algo::Crc64Nvme] {
            let parts: Vec<(String, u64)> = cuts
                .iter()
                .map(|&(s, e)| (b64(a, &data[s..e]), (e - s) as u64))
                .collect();
            let refs: Vec<(&str, u64)> = parts.iter().map(|(v, l)| (v.as_str(), *l)).collect();
            assert_eq!(multipart(a, true, &refs).unwrap(), b64(a, &data), "{a:?}");
            assert_eq!(
                multipart(a, true, &refs[..1]).unwrap(),
                b64(a, &data[..7_000])
            );
        }
        // A known vector: CRC32 of "123456789" is 0xcbf43926.
        let p1 = b64(Algo::Crc32, b"1234");
        let p2 = b64(Algo::Crc32, b"56789");
        let b64e = base64::engine::general_purpose::STANDARD;
        assert_eq!(
            multipart(Algo::Crc32, true, &[(&p1, 4), (&p2, 5)]).unwrap(),
            b64e.encode(0xcbf43926u32.to_be_bytes())
        );
        assert!(multipart(Algo::Sha256, true, &[(&p1, 4)]).is_err());
    }

    /// COMPOSITE: the checksum of the concatenated binary part checksums,
    /// then `-N`.
    #[test]
    fn composite_checksums() {
        let b64e = base64::engine::general_purpose::STANDARD;
        let parts = [&b"hello "[..], b"world", b"!"];
        for a in ALL {
            let vals: Vec<String> = parts.iter().map(|p| b64(a, p)).collect();
            let refs: Vec<(&str, u64)> = vals.iter().map(|v| (v.as_str(), 1)).collect();
            let mut cat = Vec::new();
            for v in &vals {
                cat.extend(b64e.decode(v).unwrap());
            }
            assert_eq!(
                multipart(a, false, &refs).unwrap(),
                format!("{}-3", b64(a, &cat)),
                "{a:?}"
            );
        }
        // Independently: CRC32 (zlib's) of the big-endian part CRCs, computed
        // with Python's zlib.
        let crcs: Vec<u32> = [b"abc".as_slice(), b"defg"]
            .iter()
            .map(|p| crc_fast::crc32_iso_hdlc(p))
            .collect();
        // Python: zlib.crc32 of struct.pack(">II", crc32(b"abc"), crc32(b"defg")).
        let want = "FL6Gyw==-2";
        let vals: Vec<String> = crcs.iter().map(|c| b64e.encode(c.to_be_bytes())).collect();
        assert_eq!(
            multipart(Algo::Crc32, false, &[(&vals[0], 3), (&vals[1], 4)]).unwrap(),
            want
        );
    }

    #[test]
    fn upload_types() {
        assert!(Algo::Crc64Nvme.upload_type(None).unwrap());
        assert!(!Algo::Crc32.upload_type(None).unwrap());
        assert!(Algo::Crc32c.upload_type(Some("FULL_OBJECT")).unwrap());
        assert!(Algo::Sha1.upload_type(Some("FULL_OBJECT")).is_err());
        assert!(Algo::Crc64Nvme.upload_type(Some("COMPOSITE")).is_err());
        assert!(Algo::Crc32.upload_type(Some("OTHER")).is_err());
    }

    #[test]
    fn stored_types_and_parts() {
        let h = vec![
            ("x-amz-checksum-crc32".to_string(), "AAAAAA==-2".to_string()),
            (TYPE_HEADER.to_string(), "COMPOSITE".to_string()),
            (
                PARTS_HEADER.to_string(),
                "1:AAAAAA==,2:AAAAAQ==".to_string(),
            ),
        ];
        let c = stored(&h);
        assert_eq!(c.checksum_crc32.as_deref(), Some("AAAAAA==-2"));
        assert_eq!(c.checksum_type.unwrap().as_str(), "COMPOSITE");
        assert_eq!(
            stored_parts(&h),
            vec![(1, "AAAAAA==".to_string()), (2, "AAAAAQ==".to_string())]
        );
        assert_eq!(
            stored(&h[..1]).checksum_type.unwrap().as_str(),
            "FULL_OBJECT"
        );
        assert_eq!(stored(&[]).checksum_type, None);
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
