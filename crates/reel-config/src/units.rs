//! Human-readable units used in the configuration: [`Duration`] ("500ms", "10s", "5m") and
//! [`ByteSize`] ("64KiB", "10GB", or a plain integer number of bytes).
//!
//! Both parse from strings so that the unit is always visible next to the number: a bare `10`
//! for a timeout could mean seconds or milliseconds, and guessing wrong is an outage. The only
//! bare integer accepted for a duration is `0`.

mod hint;

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a duration or size string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text is not `<integer><unit>`.
    #[error("invalid duration {text:?}: {reason}")]
    Duration {
        /// The rejected text.
        text: String,
        /// What is wrong with it, and what to write instead when that is known.
        reason: String,
    },
    /// The text is not `<integer><unit>` or a plain integer.
    #[error("invalid size {text:?}: {reason}")]
    Size {
        /// The rejected text.
        text: String,
        /// What is wrong with it, and what to write instead when that is known.
        reason: String,
    },
}

/// The duration units, as every duration message lists them.
pub(crate) const DURATION_UNITS: &str = "ns, us, ms, s, m, h or d";

/// The size units, as every size message lists them.
pub(crate) const SIZE_UNITS: &str = "B, KiB, MiB, GiB, TiB, kB, MB, GB or TB";

/// Splits `"64 KiB"` into `("64", "KiB")`; whitespace between number and unit is allowed.
fn split_number(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if end == 0 {
        return None;
    }
    Some((&text[..end], text[end..].trim_start()))
}

/// A span of time written with a unit: `"500ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`.
///
/// Grammar: a non-negative decimal integer, optional spaces, then one unit out of `ns`, `us`,
/// `ms`, `s`, `m` (minutes), `h`, `d` (24 hours). No fractions ("1.5s" is rejected: write
/// "1500ms"), no compound forms ("1h30m" is rejected: write "90m"). The string `"0"` and the
/// integer `0` mean zero; any other bare integer is rejected because its unit is ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(std::time::Duration);

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration(std::time::Duration::ZERO);

    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Self {
        Duration(std::time::Duration::from_millis(n))
    }

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Self {
        Duration(std::time::Duration::from_secs(n))
    }

    /// The value as a [`std::time::Duration`].
    pub const fn get(self) -> std::time::Duration {
        self.0
    }

    /// True for zero.
    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(d)
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

impl FromStr for Duration {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, UnitError> {
        let err = |reason: String| UnitError::Duration { text: text.to_owned(), reason };
        let (digits, unit) = split_number(text).ok_or_else(|| {
            err(format!("expected an integer followed by a unit ({DURATION_UNITS}), e.g. \"10s\""))
        })?;
        let n: u64 = digits.parse().map_err(|_| err("number too large".into()))?;
        // Nanoseconds per unit; the match is exhaustive over the documented units.
        let per: u64 = match unit {
            "" if n == 0 => 0,
            "" => return Err(err(format!("missing unit ({DURATION_UNITS}): write \"{n}s\""))),
            "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "d" => 86_400 * 1_000_000_000,
            u if u.starts_with('.') => {
                return Err(err(match hint::duration_fraction(text) {
                    Some(w) => format!("fractions are not supported: write \"{w}\""),
                    None => "fractions are not supported, use a smaller unit (\"1500ms\")".into(),
                }));
            }
            u => {
                return Err(err(if let Some(w) = hint::duration_compound(text) {
                    format!("compound durations are not supported: write \"{w}\"")
                } else if let Some(w) = hint::duration_word(digits, u) {
                    format!("units are written as symbols ({DURATION_UNITS}): write \"{w}\"")
                } else if let Some(w) = hint::duration_case(digits, u) {
                    format!("unknown unit (use {DURATION_UNITS}): write \"{w}\"")
                } else {
                    format!("unknown unit (use {DURATION_UNITS})")
                }));
            }
        };
        let nanos = n.checked_mul(per).ok_or_else(|| err("number too large".into()))?;
        Ok(Duration(std::time::Duration::from_nanos(nanos)))
    }
}

impl fmt::Display for Duration {
    /// Prints the largest unit that represents the value exactly, so that parsing the output
    /// gives the same value back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        const UNITS: [(u128, &str); 7] = [
            (86_400_000_000_000, "d"),
            (3_600_000_000_000, "h"),
            (60_000_000_000, "m"),
            (1_000_000_000, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        for (per, unit) in UNITS {
            if nanos.is_multiple_of(per) {
                return write!(f, "{}{unit}", nanos / per);
            }
        }
        write!(f, "{nanos}ns")
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration string such as \"500ms\", \"10s\", \"5m\", \"1h\" or \"1d\"",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                if v == 0 {
                    Ok(Duration::ZERO)
                } else {
                    Err(E::custom(format!(
                        "invalid duration {v}: missing unit ({DURATION_UNITS}): write a string \
                         such as \"{v}s\" or \"{v}ms\""
                    )))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
        d.deserialize_any(V)
    }
}

/// A number of bytes: a plain non-negative integer (bytes) or a string with a unit.
///
/// Units: `B`; binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024); decimal `kB`/`KB`, `MB`,
/// `GB`, `TB` (powers of 1000). Units are case-sensitive because `Mb` (megabit) and `MB`
/// differ; `K`, `M`, `G` alone are rejected as ambiguous. Integers only ("1.5GiB" is rejected:
/// write "1536MiB").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// One KiB (1024 bytes).
    pub const KIB: u64 = 1 << 10;
    /// One MiB.
    pub const MIB: u64 = 1 << 20;
    /// One GiB.
    pub const GIB: u64 = 1 << 30;
    /// One TiB.
    pub const TIB: u64 = 1 << 40;

    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        ByteSize(n * Self::KIB)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n * Self::MIB)
    }

    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        ByteSize(n * Self::GIB)
    }

    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, UnitError> {
        let err = |reason: String| UnitError::Size { text: text.to_owned(), reason };
        let (digits, unit) = split_number(text).ok_or_else(|| {
            err(format!("expected an integer optionally followed by a unit ({SIZE_UNITS})"))
        })?;
        let n: u64 = digits.parse().map_err(|_| err("number too large".into()))?;
        let per: u64 = match unit {
            "" | "B" => 1,
            "KiB" => Self::KIB,
            "MiB" => Self::MIB,
            "GiB" => Self::GIB,
            "TiB" => Self::TIB,
            "kB" | "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            u if u.starts_with('.') => {
                return Err(err(match hint::size_fraction(text) {
                    Some(w) => format!("fractions are not supported: write \"{w}\""),
                    None => "fractions are not supported, use a smaller unit (\"1536MiB\")".into(),
                }));
            }
            u => {
                return Err(err(match hint::size_case(digits, u) {
                    Some(w) => format!("unknown unit (use {SIZE_UNITS}): write {w}"),
                    None => format!("unknown unit (use {SIZE_UNITS})"),
                }));
            }
        };
        n.checked_mul(per).map(ByteSize).ok_or_else(|| err("number too large".into()))
    }
}

impl fmt::Display for ByteSize {
    /// Prints the largest binary unit that represents the value exactly (decimal inputs such
    /// as "10GB" print as plain bytes), so that parsing the output gives the same value back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            return f.write_str("0B");
        }
        for (per, unit) in
            [(Self::TIB, "TiB"), (Self::GIB, "GiB"), (Self::MIB, "MiB"), (Self::KIB, "KiB")]
        {
            if n.is_multiple_of(per) {
                return write!(f, "{}{unit}", n / per);
            }
        }
        write!(f, "{n}B")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: an integer number of bytes or a string such as \"64KiB\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("invalid size {v}: must not be negative")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_table() {
        let ok: &[(&str, u128)] = &[
            ("0", 0),
            ("0s", 0),
            ("500ms", 500_000_000),
            ("10s", 10_000_000_000),
            ("5m", 300_000_000_000),
            ("1h", 3_600_000_000_000),
            ("1d", 86_400_000_000_000),
            ("250us", 250_000),
            ("7ns", 7),
            (" 10 s ", 10_000_000_000),
        ];
        for (text, nanos) in ok {
            let d: Duration = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(d.get().as_nanos(), *nanos, "{text}");
        }
        let bad: &[(&str, &str)] = &[
            ("1x", "unknown unit"),
            ("", "expected an integer"),
            ("s", "expected an integer"),
            ("10", "missing unit"),
            ("1.5s", "fractions"),
            ("-1s", "expected an integer"),
            ("1S", "unknown unit"),
            ("1h30m", "compound durations are not supported: write \"90m\""),
            ("2.5h", "fractions are not supported: write \"150m\""),
            ("1S", "write \"1s\""),
            ("99999999999999999999s", "too large"),
            ("999999999999d", "too large"),
        ];
        for (text, why) in bad {
            let e = text.parse::<Duration>().expect_err(text).to_string();
            assert!(e.starts_with(&format!("invalid duration {text:?}")), "{e}");
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn sizes_table() {
        let ok: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("64KiB", 64 << 10),
            ("256MiB", 256 << 20),
            ("10GiB", 10 << 30),
            ("2TiB", 2 << 40),
            ("10GB", 10_000_000_000),
            ("5MB", 5_000_000),
            ("3kB", 3_000),
            ("3KB", 3_000),
            ("1 GiB", 1 << 30),
        ];
        for (text, bytes) in ok {
            let s: ByteSize = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.bytes(), *bytes, "{text}");
        }
        for (text, why) in [
            ("1x", "unknown unit"),
            ("64K", "unknown unit"),
            ("64kib", "unknown unit"),
            ("1.5GiB", "fractions"),
            ("1.5MiB", "write \"1536KiB\""),
            ("64K", "write \"64KiB\" (powers of 1024) or \"64kB\""),
            ("GiB", "expected an integer"),
            ("-1", "expected an integer"),
            ("20000000TiB", "too large"),
        ] {
            let e = text.parse::<ByteSize>().expect_err(text).to_string();
            assert!(e.starts_with(&format!("invalid size {text:?}")), "{e}");
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["0s", "500ms", "10s", "5m", "1h", "1d", "90m", "1500ms", "3us", "9ns"] {
            let d: Duration = text.parse().expect(text);
            assert_eq!(d.to_string(), text);
        }
        for text in ["0B", "1B", "64KiB", "256MiB", "10GiB", "2TiB", "1000B"] {
            let s: ByteSize = text.parse().expect(text);
            assert_eq!(s.to_string(), text);
        }
        assert_eq!("10GB".parse::<ByteSize>().map(|s| s.to_string()), Ok("9765625KiB".into()));
    }

    #[derive(Deserialize, Debug)]
    struct Both {
        d: Duration,
        s: ByteSize,
    }

    #[test]
    fn serde_accepts_strings_and_integers() {
        let v: Both = toml::from_str("d = \"2s\"\ns = 4096").expect("parse");
        assert_eq!((v.d, v.s), (Duration::from_secs(2), ByteSize(4096)));
        let v: Both = toml::from_str("d = 0\ns = \"1MiB\"").expect("parse");
        assert_eq!((v.d, v.s), (Duration::ZERO, ByteSize::mib(1)));
        let e = toml::from_str::<Both>("d = 10\ns = 1").expect_err("bare int");
        assert!(e.message().contains("missing unit"), "{e}");
        let e = toml::from_str::<Both>("d = \"1s\"\ns = -5").expect_err("negative");
        assert!(e.message().contains("must not be negative"), "{e}");
        let e = toml::from_str::<Both>("d = true\ns = 1").expect_err("bool");
        assert!(e.message().contains("a duration string"), "{e}");
    }
}
