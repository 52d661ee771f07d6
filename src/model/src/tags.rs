//! Object tags as stored: a version's tags given at write time are kept
//! among its headers under [`TAGGING_HEADER`] (URL-encoded, as the
//! request header carries them); later changes (PutObjectTagging) live in
//! the object entry's per-version tag sets (see [`crate::object_table`]).
//! The S3 API checks and parses them (`garage_api::versions::tagging`);
//! the lifecycle worker reads them for its tag filters.

use crate::object_table::{Object, ObjectVersion, ObjectVersionData, ObjectVersionState};

/// Where an object version's tags given at write time are kept, among its
/// headers.
pub const TAGGING_HEADER: &str = "x-amz-tagging";

/// A tag set: (key, value) pairs, in their order.
pub type Tags = Vec<(String, String)>;

/// The tags a version was written with (from its headers).
pub fn written_tags(headers: &[(String, String)]) -> Tags {
    headers
        .iter()
        .find(|(k, _)| k == TAGGING_HEADER)
        .map(|(_, v)| {
            form_urlencoded::parse(v.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The current tags of version `v` of `obj`.
pub fn version_tags(obj: &Object, v: &ObjectVersion) -> Tags {
    if let Some(t) = obj.updated_tags(&v.uuid) {
        return t.clone();
    }
    stored_tags(v)
}

/// The tags version `v` was written with.
pub fn stored_tags(v: &ObjectVersion) -> Tags {
    match &v.state {
        ObjectVersionState::Complete(
            ObjectVersionData::Inline(m, _) | ObjectVersionData::FirstBlock(m, _),
        ) => written_tags(&m.headers),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_tags_are_read_back_from_the_header() {
        let h = vec![
            ("content-type".to_string(), "text/plain".to_string()),
            (TAGGING_HEADER.to_string(), "a=1&b%20c=d%26e".to_string()),
        ];
        assert_eq!(
            written_tags(&h),
            vec![("a".into(), "1".into()), ("b c".into(), "d&e".into())]
        );
        assert!(written_tags(&h[..1]).is_empty());
    }
}
