//! What an access key may do on a bucket.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketKeyPerm {
    pub allow_read: bool,
    pub allow_write: bool,
    pub allow_owner: bool,
}

impl BucketKeyPerm {
    pub const NONE: Self = Self {
        allow_read: false,
        allow_write: false,
        allow_owner: false,
    };
    pub const ALL: Self = Self {
        allow_read: true,
        allow_write: true,
        allow_owner: true,
    };

    pub fn is_any(&self) -> bool {
        self.allow_read || self.allow_write || self.allow_owner
    }

    /// `RWO` letters as `garage bucket info` and `key info` print them.
    pub fn letters(&self) -> String {
        format!(
            "{}{}{}",
            if self.allow_read { "R" } else { " " },
            if self.allow_write { "W" } else { " " },
            if self.allow_owner { "O" } else { " " }
        )
    }
}
