//! What to write instead of a rejected duration or size: the same value in the form the
//! parser accepts (`"2.5h"` → `"150m"`, `"1h30m"` → `"90m"`, `"1.5MiB"` → `"1536KiB"`),
//! found by computing the value exactly and printing it in the largest unit of the same
//! family that holds it as an integer.

/// Duration units and their length in nanoseconds, largest first.
pub(super) const DURATION: [(&str, u128); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Binary size units, largest first.
const BINARY: [(&str, u128); 5] =
    [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];

/// Decimal size units, largest first.
const DECIMAL: [(&str, u128); 5] =
    [("TB", 1_000_000_000_000), ("GB", 1_000_000_000), ("MB", 1_000_000), ("kB", 1_000), ("B", 1)];

/// `n` in the largest unit of `units` (largest first) that divides it.
fn largest(n: u128, units: &[(&str, u128)]) -> String {
    let smallest = units.last().map_or("", |(u, _)| *u);
    if n == 0 {
        return format!("0{smallest}");
    }
    match units.iter().find(|(_, per)| *per > 0 && n.is_multiple_of(*per)) {
        Some((u, per)) => format!("{}{u}", n / per),
        None => format!("{n}{smallest}"),
    }
}

/// `"2.5"` times `per`, when that is a whole number.
fn decimal_times(number: &str, per: u128) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        || frac.len() > 30
    {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let scale = 10u128.checked_pow(frac.len() as u32)?;
    let frac: u128 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    let part = frac.checked_mul(per)?;
    (part % scale == 0).then(|| int.checked_mul(per)?.checked_add(part / scale))?
}

/// Splits `"2.5 h"` into `("2.5", "h")`.
fn split_decimal(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

fn duration_unit(u: &str) -> Option<u128> {
    DURATION.iter().find(|(name, _)| *name == u).map(|(_, per)| *per)
}

/// A fractional duration such as `"2.5h"`, written with an integer: `"150m"`.
pub(super) fn duration_fraction(text: &str) -> Option<String> {
    let (number, unit) = split_decimal(text);
    Some(largest(decimal_times(number, duration_unit(unit)?)?, &DURATION))
}

/// A compound duration such as `"1h30m"` or `"1m 30s"`, written with one unit: `"90m"`.
pub(super) fn duration_compound(text: &str) -> Option<String> {
    let mut rest = text.trim();
    let mut total: u128 = 0;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u128 = rest[..digits].parse().ok()?;
        let after = rest[digits..].trim_start();
        let unit_len = after.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after.len());
        let per = duration_unit(&after[..unit_len])?;
        total = total.checked_add(n.checked_mul(per)?)?;
        rest = after[unit_len..].trim_start();
        parts += 1;
    }
    (parts > 1).then(|| largest(total, &DURATION))
}

/// A duration unit in the wrong case (`"10S"`, `"5MS"`): the text with it in lower case.
pub(super) fn duration_case(number: &str, unit: &str) -> Option<String> {
    let lower = unit.to_ascii_lowercase();
    (lower != unit && duration_unit(&lower).is_some()).then(|| format!("{number}{lower}"))
}

/// A duration unit spelt out (`"60 seconds"`, `"1 day"`, `"5 mins"`): the text with the
/// unit's symbol (`"60s"`, `"1d"`, `"5m"`).
pub(super) fn duration_word(number: &str, unit: &str) -> Option<String> {
    let lower = unit.to_ascii_lowercase();
    let word = lower.strip_suffix('s').filter(|w| w.len() > 1).unwrap_or(&lower);
    let symbol = match word {
        "nanosecond" | "nano" | "nsec" => "ns",
        "microsecond" | "micro" | "usec" | "µ" => "us",
        "millisecond" | "milli" | "msec" | "millis" => "ms",
        "second" | "sec" => "s",
        "minute" | "min" => "m",
        "hour" | "hr" => "h",
        "day" => "d",
        "week" | "wk" => return week(number),
        _ => return None,
    };
    Some(format!("{number}{symbol}"))
}

/// Weeks, which have no unit of their own: the same in days.
fn week(number: &str) -> Option<String> {
    let n: u64 = number.parse().ok()?;
    Some(format!("{}d", n.checked_mul(7)?))
}

fn size_unit(u: &str) -> Option<(u128, &'static [(&'static str, u128)])> {
    let find = |units: &'static [(&'static str, u128)]| {
        units.iter().find(|(name, _)| *name == u).map(|(_, per)| (*per, units))
    };
    match u {
        "" | "B" => Some((1, &BINARY[..])),
        "KB" => Some((1_000, &DECIMAL[..])),
        _ => find(&BINARY).or_else(|| find(&DECIMAL)),
    }
}

/// A fractional size such as `"1.5MiB"`, written with an integer: `"1536KiB"` (in the
/// unit family of the text: `"1.5MB"` → `"1500kB"`).
pub(super) fn size_fraction(text: &str) -> Option<String> {
    let (number, unit) = split_decimal(text);
    let (per, family) = size_unit(unit)?;
    Some(largest(decimal_times(number, per)?, family))
}

/// A size unit that is ambiguous or in the wrong case (`"64K"`, `"64kib"`, `"1gb"`): what
/// it may have meant, binary and decimal.
pub(super) fn size_case(number: &str, unit: &str) -> Option<String> {
    let lower = unit.to_ascii_lowercase();
    let prefix = lower.chars().next()?;
    if !matches!(
        lower.as_str(),
        "k" | "m" | "g" | "t" | "kb" | "mb" | "gb" | "tb" | "kib" | "mib" | "gib" | "tib"
    ) {
        return None;
    }
    let p = prefix.to_ascii_uppercase();
    let binary = format!("{number}{p}iB");
    let decimal = if prefix == 'k' { format!("{number}kB") } else { format!("{number}{p}B") };
    Some(if lower.ends_with("ib") {
        format!("\"{binary}\"")
    } else {
        format!("\"{binary}\" (powers of 1024) or \"{decimal}\" (powers of 1000)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_keep_the_value() {
        assert_eq!(duration_fraction("2.5h").as_deref(), Some("150m"));
        assert_eq!(duration_fraction("1.5s").as_deref(), Some("1500ms"));
        assert_eq!(duration_fraction("0.25d").as_deref(), Some("6h"));
        assert_eq!(duration_fraction("1.x5s"), None);
        assert_eq!(duration_compound("1h30m").as_deref(), Some("90m"));
        assert_eq!(duration_compound("1m 30s").as_deref(), Some("90s"));
        assert_eq!(duration_compound("2d12h").as_deref(), Some("60h"));
        assert_eq!(duration_compound("10s"), None);
        assert_eq!(duration_compound("1h30x"), None);
        assert_eq!(duration_case("10", "S").as_deref(), Some("10s"));
        assert_eq!(duration_case("10", "x"), None);
        assert_eq!(duration_word("60", "seconds").as_deref(), Some("60s"));
        assert_eq!(duration_word("1", "day").as_deref(), Some("1d"));
        assert_eq!(duration_word("5", "Mins").as_deref(), Some("5m"));
        assert_eq!(duration_word("2", "weeks").as_deref(), Some("14d"));
        assert_eq!(duration_word("2", "ms"), None);
        assert_eq!(duration_word("2", "x"), None);
        assert_eq!(size_fraction("1.5MiB").as_deref(), Some("1536KiB"));
        assert_eq!(size_fraction("1.5GiB").as_deref(), Some("1536MiB"));
        assert_eq!(size_fraction("1.5MB").as_deref(), Some("1500kB"));
        assert_eq!(size_fraction("0.5B"), None);
        assert_eq!(size_case("64", "kib").as_deref(), Some("\"64KiB\""));
        assert!(size_case("64", "K").unwrap().contains("\"64KiB\" (powers of 1024) or \"64kB\""));
        assert_eq!(size_case("64", "x"), None);
    }
}
