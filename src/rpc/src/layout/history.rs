//! The layout as a node keeps it: the applied versions, and the role and
//! parameter changes staged for the next one. Nodes exchange it by gossip
//! and merge what they receive, so every node converges to the newest
//! version and the union of staged changes.

use std::collections::BTreeMap;
use std::path::Path;

use garage_util::crdt::{Crdt, Lww, LwwMap};
use serde::{Deserialize, Serialize};

use super::version::{ChangeReport, LayoutParameters, LayoutVersion, NodeRole};
use super::{LayoutError, NodeId};

/// How many applied versions are kept for `garage layout history`.
pub const VERSIONS_KEPT: usize = 16;

/// Changes waiting for `garage layout apply`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutStaging {
    /// New role for a node, or `None` to remove it from the layout.
    pub roles: LwwMap<NodeId, Option<NodeRole>>,
    pub parameters: Lww<LayoutParameters>,
}

impl LayoutStaging {
    fn for_version(current: &LayoutVersion) -> Self {
        Self {
            roles: LwwMap::new(),
            // Timestamp 0: any explicit `layout config` wins over it.
            parameters: Lww::raw(0, current.parameters.clone()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutHistory {
    /// Applied versions, oldest first; never empty.
    pub versions: Vec<LayoutVersion>,
    /// Changes staged on top of the newest version.
    pub staging: LayoutStaging,
}

/// The on-disk and on-the-wire form, versioned from the start.
#[derive(Serialize, Deserialize)]
enum Persisted {
    V1(LayoutHistory),
}

impl LayoutHistory {
    pub fn new(replication_factor: usize) -> Self {
        let v0 = LayoutVersion::initial(replication_factor);
        Self {
            staging: LayoutStaging::for_version(&v0),
            versions: vec![v0],
        }
    }

    pub fn current(&self) -> &LayoutVersion {
        self.versions
            .last()
            .expect("a layout history is never empty")
    }

    /// Roles as they would be after applying the staged changes.
    pub fn staged_roles(&self) -> BTreeMap<NodeId, NodeRole> {
        let mut roles = self.current().roles.clone();
        for (id, _, role) in self.staging.roles.items() {
            match role {
                Some(r) => roles.insert(*id, r.clone()),
                None => roles.remove(id),
            };
        }
        roles
    }

    pub fn has_staged_changes(&self) -> bool {
        let current = self.current();
        self.staging
            .roles
            .items()
            .any(|(id, _, role)| current.roles.get(id) != role.as_ref())
            || *self.staging.parameters.get() != current.parameters
    }

    pub fn stage_role(&mut self, node: NodeId, role: Option<NodeRole>) {
        self.staging.roles.update(node, role);
    }

    pub fn stage_parameters(&mut self, parameters: LayoutParameters) {
        self.staging.parameters.update(parameters);
    }

    /// Drops every staged change.
    pub fn revert(&mut self) {
        self.staging = LayoutStaging::for_version(self.current());
    }

    /// What applying the staged changes would give, without applying them.
    pub fn preview(&self) -> Result<(LayoutVersion, ChangeReport), LayoutError> {
        self.current()
            .next(self.staged_roles(), self.staging.parameters.get().clone())
    }

    /// Applies the staged changes as `version`, which must be the current
    /// version plus one (so that an operator applies what they reviewed).
    pub fn apply(&mut self, version: u64) -> Result<ChangeReport, LayoutError> {
        let expected = self.current().version + 1;
        if version != expected {
            return Err(LayoutError::WrongVersion {
                given: version,
                expected,
            });
        }
        if !self.has_staged_changes() {
            return Err(LayoutError::NothingStaged);
        }
        let (next, report) = self.preview()?;
        self.staging = LayoutStaging::for_version(&next);
        self.versions.push(next);
        if self.versions.len() > VERSIONS_KEPT {
            let excess = self.versions.len() - VERSIONS_KEPT;
            self.versions.drain(..excess);
        }
        Ok(report)
    }

    /// Merges a layout received from another node; returns whether ours
    /// changed. The newer version wins; on the same version, staged changes
    /// are merged. Two different versions with the same number (applied
    /// concurrently on two nodes) are resolved deterministically by their
    /// encoding, so all nodes pick the same one.
    pub fn merge(&mut self, other: &LayoutHistory) -> bool {
        let before = self.clone();
        let (mine, theirs) = (self.current(), other.current());
        if theirs.version > mine.version
            || (theirs.version == mine.version && theirs != mine && encode(theirs) > encode(mine))
        {
            *self = other.clone();
        } else if theirs == mine {
            self.staging.roles.merge(&other.staging.roles);
            self.staging.parameters.merge(&other.staging.parameters);
            // Older versions only serve `layout history`: keep the longest.
            if other.versions.len() > self.versions.len() {
                self.versions = other.versions.clone();
            }
        }
        *self != before
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(&Persisted::V1(self.clone())).expect("a layout always serializes")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LayoutError> {
        match rmp_serde::from_slice(bytes) {
            Ok(Persisted::V1(h)) => Ok(h),
            Err(e) => Err(LayoutError::Decode(e.to_string())),
        }
    }

    /// Reads the layout saved at `path`, if any.
    pub fn load(path: &Path) -> Result<Option<Self>, LayoutError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_bytes(&bytes).map(Some).map_err(|e| match e {
                LayoutError::Decode(m) => LayoutError::Decode(format!("{}: {m}", path.display())),
                e => e,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LayoutError::Io(format!("{}: {e}", path.display()))),
        }
    }

    /// Saves durably: temporary file, fsync, rename, fsync of the directory.
    pub fn save(&self, path: &Path) -> Result<(), LayoutError> {
        use std::io::Write;
        let io = |e: std::io::Error| LayoutError::Io(format!("{}: {e}", path.display()));
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&self.to_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

fn encode(v: &LayoutVersion) -> Vec<u8> {
    rmp_serde::to_vec_named(v).expect("a layout always serializes")
}
