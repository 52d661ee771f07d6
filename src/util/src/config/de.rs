//! Deserializers for the value types of `garage.toml`. Each rejects bad input
//! during parsing, so that the TOML error names the line of the bad value.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A byte size: a TOML integer (bytes) or a string with a unit, as in
/// `"10GiB"` (binary) or `"10G"` (decimal: 10^9), parsed by `bytesize`.
pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a size in bytes, or a string such as \"1MiB\", \"512K\" or \"10GiB\"")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom("a size cannot be negative"))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            parse_size(v).map_err(E::custom)
        }
    }
    d.deserialize_any(V)
}

pub fn parse_size(v: &str) -> Result<u64, String> {
    bytesize::ByteSize::from_str(v.trim())
        .map(|b| b.as_u64())
        .map_err(|e| {
            format!("invalid size {v:?} ({e}); write e.g. \"1MiB\", \"512K\" or \"10GiB\"")
        })
}

pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    size(d).map(Some)
}

/// A duration such as `"6h"`, `"1 day"`, `"30min"` or `"1h 30m"`.
pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map(Some).map_err(de::Error::custom)
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = |e: &dyn fmt::Display| {
        format!("invalid duration {s:?} ({e}); write e.g. \"6h\", \"1 day\" or \"90min\"")
    };
    let span = jiff::Span::from_str(s.trim()).map_err(|e| bad(&e))?;
    let signed = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|e| bad(&e))?;
    Duration::try_from(signed).map_err(|_| bad(&"negative durations are not allowed"))
}

/// `compression_level`: an integer zstd level, or `"none"`.
pub fn compression<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Option<i32>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a zstd level from -99 to 22, or \"none\"")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            if (-99..=22).contains(&v) {
                Ok(Some(v as i32))
            } else {
                Err(E::custom(format!(
                    "compression level {v} is out of range: use -99 to 22, or \"none\""
                )))
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if v.eq_ignore_ascii_case("none") {
                Ok(None)
            } else {
                Err(E::custom(format!(
                    "invalid compression level {v:?}: use an integer from -99 to 22, or \"none\""
                )))
            }
        }
    }
    d.deserialize_any(V)
}

/// `db_engine`: `"lmdb"` or `"sqlite"`.
pub fn db_engine<'de, D: Deserializer<'de>>(d: D) -> Result<crate::db_engine::Engine, D::Error> {
    let s = String::deserialize(d)?;
    if s == "sled" {
        return Err(de::Error::custom(
            "the sled engine is no longer supported: use \"lmdb\" or \"sqlite\" (convert an old database with `garage convert-db`)",
        ));
    }
    crate::db_engine::Engine::from_str(&s).map_err(de::Error::custom)
}

/// `replication_factor`: at least 1.
pub fn replication_factor<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let n = usize::deserialize(d)?;
    if n == 0 {
        return Err(de::Error::custom(
            "replication_factor must be at least 1 (1 for a single node, 3 for a cluster over 3 zones)",
        ));
    }
    Ok(n)
}

/// A hex-encoded 32-byte secret, such as `rpc_secret`.
pub fn check_rpc_secret(s: &str) -> Result<(), String> {
    match hex::decode(s.trim()) {
        Ok(b) if b.len() == 32 => Ok(()),
        _ => Err(
            "must be 32 bytes written as 64 hexadecimal characters; generate one with `openssl rand -hex 32`"
                .to_string(),
        ),
    }
}

pub fn opt_rpc_secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    check_rpc_secret(&s).map_err(|e| de::Error::custom(format!("rpc_secret {e}")))?;
    Ok(Some(s.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1M").unwrap(), 1_000_000);
        assert_eq!(parse_size("10GiB").unwrap(), 10 << 30);
        assert_eq!(parse_size("512 KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("ten megs").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("6h").unwrap(), Duration::from_secs(6 * 3600));
        assert_eq!(parse_duration("1 day").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse_duration("90min").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1h").is_err());
    }

    #[test]
    fn secrets() {
        assert!(check_rpc_secret(&"ab".repeat(32)).is_ok());
        assert!(check_rpc_secret(&"ab".repeat(31)).is_err());
        assert!(check_rpc_secret(&"zz".repeat(32)).is_err());
    }
}
