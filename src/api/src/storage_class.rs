//! Storage classes at the S3 edge: `x-amz-storage-class` on a write names
//! `STANDARD` (replicated) or an erasure-coded class of the cluster layout
//! (`garage_rpc::layout::classes`); anything else is `InvalidStorageClass`.
//! A write that names none takes the bucket's default class (`garage bucket
//! set-storage-class`), `STANDARD` unless set.
//! The class is kept with the object (its entry's metadata) and reported by
//! GET, HEAD and the listings; each block records its own code, which is
//! the class's code when it was written (or none: a block written while a
//! node of its shards was down is replicated).

use garage_rpc::layout::{classes, Placement};

use crate::ctx::Api;
use crate::error::{ApiError, ApiResult};

/// The class of a write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageChoice {
    /// `None` for `STANDARD`.
    pub name: Option<String>,
    /// The class's code now; `None` for `STANDARD`.
    pub code: Option<Placement>,
}

/// The class as S3 reports it.
pub fn reported(name: Option<&str>) -> &str {
    name.unwrap_or(classes::STANDARD)
}

impl Api {
    /// The class `requested` names (`STANDARD` when absent).
    pub fn storage_choice(&self, requested: Option<&str>) -> ApiResult<StorageChoice> {
        let Some(name) = requested.filter(|n| *n != classes::STANDARD) else {
            return Ok(StorageChoice::default());
        };
        let layout = self.blocks.system.layout();
        match layout.current().class_placement(name) {
            Some(code) => Ok(StorageChoice {
                name: Some(name.to_string()),
                code: Some(code),
            }),
            None => {
                let offered: Vec<&str> = std::iter::once(classes::STANDARD)
                    .chain(layout.current().classes.keys().map(|s| s.as_str()))
                    .chain(layout.current().placed.keys().map(|s| s.as_str()))
                    .collect();
                Err(ApiError::InvalidStorageClass(format!(
                    "storage class {name:?} is not offered by this cluster (offered: {})",
                    offered.join(", ")
                )))
            }
        }
    }

    /// The class of a write: the one `requested` names, else the bucket's
    /// default (`STANDARD` if the layout no longer offers it: a write is
    /// never refused for a class it did not name). A bucket that accepts
    /// only some classes (`allowed`, `garage bucket set-placement`)
    /// refuses any other, named or by default, and never falls back to
    /// `STANDARD`: its data stays where its classes put it.
    pub fn write_class(
        &self,
        requested: Option<&str>,
        bucket_default: Option<&str>,
        allowed: Option<&[String]>,
    ) -> ApiResult<StorageChoice> {
        let Some(allowed) = allowed else {
            return match requested {
                Some(_) => self.storage_choice(requested),
                None => Ok(self.storage_choice(bucket_default).unwrap_or_default()),
            };
        };
        let name = requested.or(bucket_default).unwrap_or(classes::STANDARD);
        if !allowed.iter().any(|a| a == name) {
            return Err(ApiError::InvalidStorageClass(format!(
                "this bucket accepts only the storage classes {} ({}), not {name}",
                allowed.join(", "),
                if requested.is_some() {
                    "give one of them in x-amz-storage-class"
                } else {
                    "its default class is not among them: `garage bucket set-placement` sets both"
                }
            )));
        }
        self.storage_choice(Some(name))
            .map_err(|e| match (requested, e) {
                (None, ApiError::InvalidStorageClass(m)) => ApiError::InvalidStorageClass(format!(
                    "this bucket's default storage class {name} cannot be written now: {m}"
                )),
                (_, e) => e,
            })
    }

    /// The code blocks of class `name` are written with now (a class's
    /// code may change between the parts of an upload).
    pub fn class_code(&self, name: Option<&str>) -> Option<Placement> {
        name.and_then(|n| self.blocks.system.layout().current().class_placement(n))
    }
}
