//! Storage classes: how an object's blocks are stored. `STANDARD` is
//! replication (the layout's replication factor, over distinct zones);
//! the other classes are erasure codes, `data` + `parity` shards per
//! block, with at most `parity` shards in any one zone, so losing a whole
//! zone (or any `parity` nodes) leaves enough shards to rebuild a block.
//!
//! Classes are cluster-wide: they are layout parameters, resolved to a
//! code in each layout version, and every code in use has its own shard
//! placement (see [`super::version::EcRing`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The replicated class, always offered.
pub const STANDARD: &str = "STANDARD";
/// The erasure-coded class offered by default on layouts of 3 zones or
/// more (under a name that rclone, restic and lifecycle rules know).
pub const DEFAULT_EC_CLASS: &str = "STANDARD_IA";
/// Storage class names S3 clients know; a cluster may define any of them
/// (but `STANDARD`) as an erasure-coded class.
pub const S3_CLASS_NAMES: &[&str] = &[
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "GLACIER_IR",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
];
/// Most shards per block (data + parity).
pub const MAX_SHARDS: usize = 32;
/// Most copies of a replicated placed class.
pub const MAX_COPIES: usize = 8;
/// Longest name of a placed class.
pub const MAX_CLASS_NAME: usize = 64;
/// Most shards an automatic code puts in one zone.
const AUTO_SHARDS_PER_ZONE: usize = 2;

/// An erasure code: each block is cut into `data` shards, and `parity`
/// more are computed; any `data` of the `data + parity` rebuild it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EcCode {
    pub data: u8,
    pub parity: u8,
}

impl EcCode {
    pub fn new(data: usize, parity: usize) -> Result<Self, String> {
        if data == 0 || parity == 0 {
            return Err(format!(
                "erasure code {data}+{parity}: both the data and the parity shard counts must be at least 1"
            ));
        }
        if data + parity > MAX_SHARDS {
            return Err(format!(
                "erasure code {data}+{parity}: at most {MAX_SHARDS} shards in all"
            ));
        }
        Ok(Self {
            data: data as u8,
            parity: parity as u8,
        })
    }

    pub fn data(&self) -> usize {
        self.data as usize
    }

    pub fn parity(&self) -> usize {
        self.parity as usize
    }

    pub fn shards(&self) -> usize {
        self.data() + self.parity()
    }

    /// Bytes on disk per byte stored (shard padding aside).
    pub fn overhead(&self) -> f64 {
        self.shards() as f64 / self.data() as f64
    }

    /// Replication as a code: one data shard (the block) and `copies - 1`
    /// parity shards, each of them the whole block, any one enough. One
    /// copy is a code without parity, which only a placed class with
    /// `allow_no_redundancy` uses.
    pub fn copies(copies: usize) -> Result<Self, String> {
        if !(1..=MAX_COPIES).contains(&copies) {
            return Err(format!(
                "replication {copies}: give 1 to {MAX_COPIES} copies"
            ));
        }
        Ok(Self {
            data: 1,
            parity: (copies - 1) as u8,
        })
    }

    /// Whether each shard is a whole copy of the block.
    pub fn is_replication(&self) -> bool {
        self.data == 1
    }

    /// `replication N` or `erasure D+P`, as `garage layout show` says it.
    pub fn describe(&self) -> String {
        if self.is_replication() {
            format!("replication {}", self.shards())
        } else {
            format!("erasure {self}")
        }
    }
}

impl std::fmt::Display for EcCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{}", self.data, self.parity)
    }
}

impl std::str::FromStr for EcCode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid erasure code {s:?}: write it as DATA+PARITY, e.g. 4+2");
        let (d, p) = s.split_once('+').ok_or_else(bad)?;
        let d: usize = d.trim().parse().map_err(|_| bad())?;
        let p: usize = p.trim().parse().map_err(|_| bad())?;
        EcCode::new(d, p)
    }
}

/// A class as configured (`garage layout config --storage-class`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ClassSpec {
    /// A code chosen for the layout's zones (see [`auto_code`]).
    Auto,
    Code(EcCode),
    /// Not offered.
    Off,
}

impl std::fmt::Display for ClassSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassSpec::Auto => f.write_str("auto"),
            ClassSpec::Code(c) => c.fmt(f),
            ClassSpec::Off => f.write_str("off"),
        }
    }
}

impl std::str::FromStr for ClassSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ClassSpec::Auto),
            "off" | "none" => Ok(ClassSpec::Off),
            c => c
                .parse()
                .map(ClassSpec::Code)
                .map_err(|e| format!("{e}; or \"auto\" (a code chosen for the zones) or \"off\"")),
        }
    }
}

/// Parses `NAME=SPEC` (e.g. `STANDARD_IA=4+2`), checking the name.
pub fn parse_class_setting(s: &str) -> Result<(String, ClassSpec), String> {
    let (name, spec) = s.split_once('=').ok_or_else(|| {
        format!("invalid storage class setting {s:?}: write it as NAME=DATA+PARITY, NAME=auto or NAME=off, e.g. STANDARD_IA=4+2")
    })?;
    check_class_name(name)?;
    Ok((name.to_string(), spec.parse()?))
}

/// Whether `name` can name an erasure-coded class.
pub fn check_class_name(name: &str) -> Result<(), String> {
    if name == STANDARD {
        return Err(format!(
            "{STANDARD} is the replicated class and cannot be erasure-coded; choose another S3 class name, e.g. {DEFAULT_EC_CLASS}"
        ));
    }
    if !S3_CLASS_NAMES.contains(&name) {
        return Err(format!(
            "unknown storage class {name:?}: S3 clients know {}",
            S3_CLASS_NAMES[1..].join(", ")
        ));
    }
    Ok(())
}

/// How a placed class keeps each block: copies, or an erasure code (`auto`:
/// chosen for the class's zones as [`auto_code`] does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RedundancySpec {
    Copies(u8),
    Auto,
    Code(EcCode),
}

impl std::fmt::Display for RedundancySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedundancySpec::Copies(n) => write!(f, "replication {n}"),
            RedundancySpec::Auto => f.write_str("erasure auto"),
            RedundancySpec::Code(c) => write!(f, "erasure {c}"),
        }
    }
}

/// A storage class with a place (`garage layout class`): its redundancy
/// and the zones it may use. Its blocks have a placement of their own
/// ([`Placement`] with the class's scope), recomputed with each layout
/// version like the layout's own, so that changing the class's zones moves
/// its blocks as a layout change moves partitions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClassDef {
    pub redundancy: RedundancySpec,
    /// The zones the class's blocks may go to; empty: every zone.
    #[serde(default)]
    pub zones: BTreeSet<String>,
    /// Accepted although one node's loss loses its blocks (one copy).
    #[serde(default)]
    pub allow_no_redundancy: bool,
}

impl ClassDef {
    /// Checks the definition on its own (the layout's zones aside).
    pub fn check(&self, name: &str) -> Result<(), String> {
        check_placed_class_name(name)?;
        match self.redundancy {
            RedundancySpec::Copies(n) => {
                EcCode::copies(n as usize).map_err(|e| format!("storage class {name}: {e}"))?;
                if n == 1 && !self.allow_no_redundancy {
                    return Err(format!(
                        "storage class {name}: one copy does not survive the loss of the node that holds it; give 2 copies or more, or accept it with --allow-no-redundancy"
                    ));
                }
            }
            RedundancySpec::Code(c) => {
                EcCode::new(c.data(), c.parity())
                    .map_err(|e| format!("storage class {name}: {e}"))?;
            }
            RedundancySpec::Auto => (),
        }
        if let Some(z) = self.zones.iter().find(|z| z.is_empty()) {
            return Err(format!("storage class {name}: empty zone name {z:?}"));
        }
        Ok(())
    }
}

/// Whether `name` can name a placed class: S3's class names (but
/// `STANDARD`, the layout's own replication) or a name of the operator's
/// (`EU`, `ARCHIVE`): capital letters, digits, `_` and `-`, a letter
/// first, at most [`MAX_CLASS_NAME`] characters.
pub fn check_placed_class_name(name: &str) -> Result<(), String> {
    if name == STANDARD {
        return Err(format!(
            "{STANDARD} is the layout's own replication (see `garage layout config -r`); give the class another name"
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= MAX_CLASS_NAME
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        return Err(format!(
            "invalid storage class name {name:?}: use capital letters, digits, '_' and '-', a letter first, at most {MAX_CLASS_NAME} characters (e.g. EU, ARCHIVE, LOCAL_SCRATCH)"
        ));
    }
    Ok(())
}

/// Which placement a block follows: its code, and the scope of the class
/// that placed it (0 for the classes of `garage layout config
/// --storage-class`, which use every zone and share one placement per
/// code; else [`scope_of`] the placed class's name). A block's address is
/// derived from its content and its placement. Encoded as its code is,
/// with `scope` only when it is not 0: what stores an [`EcCode`] (a
/// version's block list, a shard's header, a reference count) stores a
/// placement of scope 0 in the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub data: u8,
    pub parity: u8,
    #[serde(default, skip_serializing_if = "scope_is_zero")]
    pub scope: u32,
}

fn scope_is_zero(s: &u32) -> bool {
    *s == 0
}

impl Placement {
    pub fn new(code: EcCode, scope: u32) -> Self {
        Placement {
            data: code.data,
            parity: code.parity,
            scope,
        }
    }

    pub fn code(&self) -> EcCode {
        EcCode {
            data: self.data,
            parity: self.parity,
        }
    }

    pub fn data(&self) -> usize {
        self.code().data()
    }

    pub fn parity(&self) -> usize {
        self.code().parity()
    }

    pub fn shards(&self) -> usize {
        self.code().shards()
    }

    pub fn overhead(&self) -> f64 {
        self.code().overhead()
    }

    pub fn is_replication(&self) -> bool {
        self.code().is_replication()
    }

    pub fn describe(&self) -> String {
        self.code().describe()
    }
}

impl From<EcCode> for Placement {
    fn from(code: EcCode) -> Self {
        Placement::new(code, 0)
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.scope == 0 {
            self.code().fmt(f)
        } else {
            write!(f, "{}@{:08x}", self.code(), self.scope)
        }
    }
}

/// The scope of placed class `name`: a hash of the name (never 0), so that
/// every node derives the same one and the class keeps it while its zones
/// or nodes change.
pub fn scope_of(name: &str) -> u32 {
    let h = garage_util::data::blake2sum(format!("garage storage class {name}").as_bytes());
    let s = u32::from_be_bytes([
        h.as_slice()[0],
        h.as_slice()[1],
        h.as_slice()[2],
        h.as_slice()[3],
    ]);
    s.max(1)
}

/// How many of a block's `shards` a placed class puts in one zone, for
/// zones of `zone_sizes` storage nodes: as few as the zones allow (spread
/// evenly), `None` when the zones have fewer nodes than shards. The class
/// survives a zone's loss when that many are at most its parity.
pub fn spread(shards: usize, zone_sizes: &[usize]) -> Option<usize> {
    if zone_sizes.is_empty() || zone_sizes.iter().sum::<usize>() < shards {
        return None;
    }
    (shards.div_ceil(zone_sizes.len())..=shards)
        .find(|&m| zone_sizes.iter().map(|n| (*n).min(m)).sum::<usize>() >= shards)
}

/// What a placement survives, for `garage layout show` and the checks at
/// definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Survival {
    /// Any this many storage nodes may be lost.
    pub nodes: usize,
    /// Any one zone may be lost.
    pub zone: bool,
}

impl Survival {
    pub fn of(code: EcCode, per_zone: usize, zones: usize) -> Self {
        Survival {
            nodes: code.parity(),
            zone: zones >= 2 && per_zone <= code.parity(),
        }
    }
}

impl std::fmt::Display for Survival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.nodes, self.zone) {
            (0, _) => f.write_str("no node loss"),
            (n, true) => write!(f, "any {n} node(s) or a zone"),
            (n, false) => write!(f, "any {n} node(s), not a zone"),
        }
    }
}

/// The code chosen for a layout whose zones have `zone_sizes` storage
/// nodes: as many shards per zone as the smallest zone has nodes, up to
/// [`AUTO_SHARDS_PER_ZONE`], that many of them parity, so that losing one
/// zone loses exactly the parity. 3 zones of 1 node: 2+1; of 2 nodes or
/// more: 4+2; 4 zones of 2 nodes: 6+2. None under 3 zones, where a code
/// that survives a zone's loss is no cheaper than replication.
pub fn auto_code(zone_sizes: &[usize]) -> Option<EcCode> {
    let zones = zone_sizes.len();
    if zones < 3 {
        return None;
    }
    let per_zone = (*zone_sizes.iter().min()?).min(AUTO_SHARDS_PER_ZONE);
    // Many zones: fewer shards per zone, so that the total stays bounded.
    let per_zone = per_zone.min(MAX_SHARDS / zones).max(1);
    let zones = zones.min(MAX_SHARDS);
    EcCode::new((zones - 1) * per_zone, per_zone).ok()
}

/// Whether zones of `zone_sizes` nodes can hold `code`'s shards with at
/// most `parity` in a zone (capacities aside).
pub fn fits(code: EcCode, zone_sizes: &[usize]) -> bool {
    zone_sizes
        .iter()
        .map(|n| (*n).min(code.parity()))
        .sum::<usize>()
        >= code.shards()
}

/// The classes a layout offers: the configured ones with the default
/// (`STANDARD_IA` = auto) under them, resolved for `zone_sizes`. An `auto`
/// class keeps the code it had in `previous` while that code still fits:
/// its blocks stay under one code, and a layout change does not leave a
/// code behind that later changes could not place.
pub fn resolve(
    settings: &BTreeMap<String, ClassSpec>,
    zone_sizes: &[usize],
    previous: &BTreeMap<String, EcCode>,
) -> BTreeMap<String, EcCode> {
    let mut specs = settings.clone();
    specs
        .entry(DEFAULT_EC_CLASS.to_string())
        .or_insert(ClassSpec::Auto);
    specs
        .into_iter()
        .filter_map(|(name, spec)| match spec {
            ClassSpec::Auto if zone_sizes.len() < 3 => None,
            ClassSpec::Auto => match previous.get(&name) {
                Some(c) if fits(*c, zone_sizes) => Some((name, *c)),
                _ => auto_code(zone_sizes).map(|c| (name, c)),
            },
            ClassSpec::Code(c) => Some((name, c)),
            ClassSpec::Off => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_settings_parse_with_clear_errors() {
        assert_eq!("4+2".parse::<EcCode>().unwrap(), EcCode::new(4, 2).unwrap());
        assert!("4-2".parse::<EcCode>().unwrap_err().contains("DATA+PARITY"));
        assert!("0+2".parse::<EcCode>().is_err());
        assert!("30+3".parse::<EcCode>().unwrap_err().contains("at most 32"));
        assert_eq!(
            parse_class_setting("GLACIER=off").unwrap(),
            ("GLACIER".into(), ClassSpec::Off)
        );
        assert!(parse_class_setting("STANDARD=4+2")
            .unwrap_err()
            .contains("replicated"));
        assert!(parse_class_setting("COLD=4+2")
            .unwrap_err()
            .contains("unknown storage class"));
        assert!(parse_class_setting("STANDARD_IA").is_err());
    }

    #[test]
    fn the_automatic_code_loses_only_its_parity_with_a_zone() {
        let code = |z: &[usize]| auto_code(z).map(|c| c.to_string());
        assert_eq!(code(&[1, 1]), None);
        assert_eq!(code(&[1, 1, 1]), Some("2+1".into()));
        assert_eq!(code(&[2, 2, 2]), Some("4+2".into()));
        assert_eq!(code(&[2, 5, 3]), Some("4+2".into()));
        assert_eq!(code(&[1, 3, 3]), Some("2+1".into()));
        assert_eq!(code(&[2, 2, 2, 2]), Some("6+2".into()));
        let many = auto_code(&[3; 20]).unwrap();
        assert!(many.shards() <= MAX_SHARDS);
        let off: BTreeMap<String, ClassSpec> = [("STANDARD_IA".to_string(), ClassSpec::Off)].into();
        let none: BTreeMap<String, EcCode> = BTreeMap::new();
        assert!(resolve(&off, &[2, 2, 2], &none).is_empty());
        let set: BTreeMap<String, ClassSpec> = [(
            "GLACIER".to_string(),
            ClassSpec::Code(EcCode::new(2, 1).unwrap()),
        )]
        .into();
        let r = resolve(&set, &[2, 2, 2], &none);
        assert_eq!(r["GLACIER"].to_string(), "2+1");
        assert_eq!(r["STANDARD_IA"].to_string(), "4+2");
        // An automatic code sticks while it fits.
        let auto = BTreeMap::new();
        let grown = resolve(&auto, &[2, 2, 2, 1], &r);
        assert_eq!(grown["STANDARD_IA"].to_string(), "4+2");
        let shrunk = resolve(&auto, &[2, 1, 1], &r);
        assert_eq!(shrunk["STANDARD_IA"].to_string(), "2+1");
        assert!(fits(r["GLACIER"], &[1, 1, 1]) && !fits(r["STANDARD_IA"], &[2, 1, 1]));
    }
}
