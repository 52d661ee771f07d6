//! Release versions, as nodes tell each other in the handshake (see
//! doc/upgrading.md and doc/net-protocol.md).
//!
//! Each node sends a [`VersionInfo`]: the release it runs, the oldest
//! release it talks to, and the cluster version it knows to be finalized.
//! Release v0.1.0 sends none: a peer that sends none runs v0.1.0
//! ([`VersionInfo::LEGACY`]). Two nodes talk only if each runs a release
//! the other accepts ([`VersionInfo::check_peer`]); the refusal names both
//! versions and says which node to upgrade.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A release version, `major.minor.patch`. Ordered as semantic versions
/// without pre-release tags. Serialized as its text (`"0.2.0"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

impl Version {
    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// The release this build is: the workspace's package version.
    pub fn current() -> Self {
        env!("CARGO_PKG_VERSION")
            .parse()
            .expect("the workspace version is major.minor.patch")
    }

    /// The release series this version belongs to (`major.minor.0`): what
    /// a cluster is finalized at. Patch releases change no format.
    pub fn series(self) -> Self {
        Version::new(self.major, self.minor, 0)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for Version {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a version of the form MAJOR.MINOR.PATCH (e.g. 0.2.0)");
        let t = s.trim().trim_start_matches('v');
        let mut parts = t.split('.').map(|p| p.parse::<u16>().map_err(|_| bad()));
        let v = Version::new(
            parts.next().ok_or_else(bad)??,
            parts.next().ok_or_else(bad)??,
            parts.next().ok_or_else(bad)??,
        );
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The first release, which sends no version in its handshake.
pub const V0_1_0: Version = Version::new(0, 1, 0);

/// The release of the upgrades (the first to send its version).
pub const V0_2_0: Version = Version::new(0, 2, 0);

/// The oldest release this build talks to: the previous release series.
/// Raised with each release (see doc/upgrading.md).
pub const OLDEST_PEER: Version = V0_2_0;

/// What a node tells its peers about its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The release the node runs.
    pub release: Version,
    /// The oldest release it talks to.
    pub oldest_peer: Version,
    /// The cluster version the node knows to be finalized: every node of
    /// the cluster runs at least this, and it can no longer be rolled back
    /// below it.
    pub cluster: Version,
}

/// The first byte of an encoded [`VersionInfo`]: the encoding's own
/// version, so that a later release can append fields.
const ENCODING: u8 = 1;
/// Encoded length of a [`VersionInfo`] of encoding 1.
pub(crate) const ENCODED_LEN: usize = 1 + 9 * 2;

impl VersionInfo {
    /// What a peer that sends no version runs: v0.1.0.
    pub const LEGACY: VersionInfo = VersionInfo {
        release: V0_1_0,
        oldest_peer: V0_1_0,
        cluster: V0_1_0,
    };

    /// This build, in a cluster finalized at `cluster`.
    pub fn this_build(cluster: Version) -> Self {
        VersionInfo {
            release: Version::current(),
            oldest_peer: OLDEST_PEER,
            cluster,
        }
    }

    pub(crate) fn encode(&self) -> [u8; ENCODED_LEN] {
        let mut out = [0u8; ENCODED_LEN];
        out[0] = ENCODING;
        let fields = [self.release, self.oldest_peer, self.cluster]
            .into_iter()
            .flat_map(|v| [v.major, v.minor, v.patch]);
        for (i, x) in fields.enumerate() {
            out[1 + 2 * i..3 + 2 * i].copy_from_slice(&x.to_be_bytes());
        }
        out
    }

    /// Decodes an encoded `VersionInfo`; bytes after the known fields
    /// (added by a later release) are ignored.
    pub(crate) fn decode(b: &[u8]) -> Result<Self, String> {
        if b.first() != Some(&ENCODING) || b.len() < ENCODED_LEN {
            return Err(format!(
                "malformed version information ({} bytes, encoding {:?})",
                b.len(),
                b.first()
            ));
        }
        let x = |i: usize| u16::from_be_bytes([b[1 + 2 * i], b[2 + 2 * i]]);
        let v = |i: usize| Version::new(x(3 * i), x(3 * i + 1), x(3 * i + 2));
        Ok(VersionInfo {
            release: v(0),
            oldest_peer: v(1),
            cluster: v(2),
        })
    }

    /// Whether this node (`self`) and a peer that sent `peer` may talk:
    /// each must run a release the other accepts, and neither may run a
    /// release below the cluster version the other knows to be finalized.
    /// The error names both versions and the node to upgrade.
    pub fn check_peer(&self, peer: &VersionInfo) -> Result<(), String> {
        let (me, them) = (self.release, peer.release);
        if them < self.oldest_peer {
            return Err(format!(
                "the peer runs garage v{them}, but this node runs v{me}, which talks to v{} and later only: upgrade the peer to v{} or later first",
                self.oldest_peer, self.oldest_peer
            ));
        }
        if me < peer.oldest_peer {
            return Err(format!(
                "this node runs garage v{me}, but the peer runs v{them}, which talks to v{} and later only: upgrade this node to v{} or later first",
                peer.oldest_peer, peer.oldest_peer
            ));
        }
        if them < self.cluster {
            return Err(format!(
                "the peer runs garage v{them}, but the cluster was finalized at v{} (this node runs v{me}): a finalized cluster cannot be rolled back; upgrade the peer to v{} or later",
                self.cluster, self.cluster
            ));
        }
        if me < peer.cluster {
            return Err(format!(
                "this node runs garage v{me}, but the peer (v{them}) says the cluster was finalized at v{}: upgrade this node to v{} or later",
                peer.cluster, peer.cluster
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    fn info(release: &str, oldest: &str, cluster: &str) -> VersionInfo {
        VersionInfo {
            release: v(release),
            oldest_peer: v(oldest),
            cluster: v(cluster),
        }
    }

    #[test]
    fn versions_parse_print_and_order() {
        assert_eq!(v("0.2.0"), Version::new(0, 2, 0));
        assert_eq!(v("v1.10.3").to_string(), "1.10.3");
        assert!(v("0.10.0") > v("0.9.9"));
        assert!(v("1.0.0") > v("0.99.0"));
        assert_eq!(v("0.2.7").series(), v("0.2.0"));
        for bad in ["", "1", "1.2", "1.2.3.4", "a.b.c", "1.2.-3", "1.2.70000"] {
            let e = bad.parse::<Version>().unwrap_err();
            assert!(e.contains("MAJOR.MINOR.PATCH"), "{bad}: {e}");
        }
        // Serialized as text.
        let b = rmp_serde::to_vec_named(&v("0.2.1")).unwrap();
        assert_eq!(rmp_serde::from_slice::<String>(&b).unwrap(), "0.2.1");
        assert_eq!(rmp_serde::from_slice::<Version>(&b).unwrap(), v("0.2.1"));
        // The workspace version is one.
        assert_eq!(Version::current().to_string(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn encoding_round_trips_and_tolerates_later_fields() {
        let i = info("0.2.0", "0.1.0", "0.1.0");
        let b = i.encode();
        assert_eq!(VersionInfo::decode(&b).unwrap(), i);
        let mut longer = b.to_vec();
        longer.extend_from_slice(&[9, 9, 9]);
        assert_eq!(VersionInfo::decode(&longer).unwrap(), i);
        assert!(VersionInfo::decode(&b[..ENCODED_LEN - 1]).is_err());
        assert!(VersionInfo::decode(&[]).is_err());
        let mut other = b;
        other[0] = 0;
        assert!(VersionInfo::decode(&other).is_err());
    }

    #[test]
    fn the_previous_release_is_accepted_in_both_directions() {
        let new = info("0.2.0", "0.1.0", "0.1.0");
        assert!(new.check_peer(&VersionInfo::LEGACY).is_ok());
        assert!(VersionInfo::LEGACY.check_peer(&new).is_ok());
        // Same release on both sides.
        assert!(new.check_peer(&new).is_ok());
        // A patch release of the finalized series is fine.
        let finalized = info("0.2.1", "0.1.0", "0.2.0");
        assert!(finalized
            .check_peer(&info("0.2.0", "0.1.0", "0.2.0"))
            .is_ok());
    }

    #[test]
    fn too_old_and_too_new_peers_are_refused_naming_both_versions() {
        let me = info("0.3.0", "0.2.0", "0.2.0");
        let e = me.check_peer(&VersionInfo::LEGACY).unwrap_err();
        assert!(e.contains("v0.1.0") && e.contains("v0.3.0"), "{e}");
        assert!(e.contains("upgrade the peer"), "{e}");
        // Seen from the old node (whose check accepts anything newer, but
        // the newer node's oldest_peer refuses it).
        let old = info("0.1.5", "0.1.0", "0.1.0");
        let e = old.check_peer(&me).unwrap_err();
        assert!(e.contains("upgrade this node to v0.2.0"), "{e}");
    }

    #[test]
    fn a_finalized_cluster_refuses_a_rolled_back_node() {
        let finalized = info("0.2.0", "0.1.0", "0.2.0");
        let e = finalized.check_peer(&VersionInfo::LEGACY).unwrap_err();
        assert!(
            e.contains("finalized at v0.2.0") && e.contains("v0.1.0"),
            "{e}"
        );
        assert!(e.contains("upgrade the peer"), "{e}");
        // The other way round, as a versioned old node would see it.
        let rolled_back = info("0.2.0", "0.1.0", "0.1.0");
        assert!(rolled_back
            .check_peer(&info("0.3.0", "0.2.0", "0.3.0"))
            .unwrap_err()
            .contains("upgrade this node to v0.3.0"));
        // Before finalization both directions are fine.
        let mixed = info("0.3.0", "0.2.0", "0.2.0");
        assert!(mixed.check_peer(&rolled_back).is_ok());
        assert!(rolled_back.check_peer(&mixed).is_ok());
    }
}
