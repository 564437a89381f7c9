//! Generic header access and the small RFC 9110 field-syntax helpers shared by the policy
//! modules: list splitting (RFC 9110 5.6.1), OWS trimming (5.6.3), quoted-strings (5.6.4),
//! HTTP-dates (5.6.7) and delta-seconds (RFC 9111 1.2.2).

use std::time::{Duration, UNIX_EPOCH};

/// Read-only access to a header section, so the cache path can call the policy with its own
/// header storage.
///
/// `name` is always passed in lowercase ASCII; implementations compare names
/// case-insensitively (RFC 9110 5.1) and yield every field line with that name, in order.
pub trait HeaderLookup {
    /// Every field value received under `name`, in message order.
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a;

    /// The first field value under `name`.
    fn get_first<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.get_all(name).next()
    }

    /// Whether any field line with `name` is present.
    fn has(&self, name: &str) -> bool {
        self.get_all(name).next().is_some()
    }

    /// Every list member of every field line under `name` (RFC 9110 5.6.1), trimmed of OWS,
    /// empty members skipped. Commas inside quoted-strings do not split.
    fn list_members<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.get_all(name).flat_map(split_list)
    }
}

impl HeaderLookup for http::HeaderMap {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        http::HeaderMap::get_all(self, name).iter().map(http::HeaderValue::as_bytes)
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> HeaderLookup for [(N, V)] {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| n.as_ref().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_ref())
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> HeaderLookup for Vec<(N, V)> {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.as_slice().get_all(name)
    }
}

impl<T: HeaderLookup + ?Sized> HeaderLookup for &T {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        (**self).get_all(name)
    }
}

/// Optional whitespace (RFC 9110 5.6.3).
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Trims OWS from both ends.
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_ows(*first) { s = rest } else { break }
    }
    while let [rest @ .., last] = s {
        if is_ows(*last) { s = rest } else { break }
    }
    s
}

/// Splits one field value into its list members (RFC 9110 5.6.1), honouring quoted-strings
/// (5.6.4) so that `a="x, y", b` yields two members. Members are OWS-trimmed; empty ones
/// (`a,,b`) are skipped as 5.6.1 requires of recipients.
pub fn split_list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let mut in_quote = false;
            let mut escaped = false;
            let mut end = rest.len();
            for (i, &b) in rest.iter().enumerate() {
                if in_quote {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_quote = false;
                    }
                } else if b == b'"' {
                    in_quote = true;
                } else if b == b',' {
                    end = i;
                    break;
                }
            }
            let member = trim_ows(&rest[..end]);
            rest = if end < rest.len() { &rest[end + 1..] } else { &[] };
            if !member.is_empty() {
                return Some(member);
            }
        }
    })
}

/// `tchar` of RFC 9110 5.6.2.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether `s` is a non-empty `token` (RFC 9110 5.6.2).
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Unquotes a quoted-string (RFC 9110 5.6.4), resolving quoted-pairs. Returns `None` when
/// `s` is not a well-formed quoted-string.
pub(crate) fn unquote(s: &[u8]) -> Option<Vec<u8>> {
    let inner = s.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut it = inner.iter();
    while let Some(&b) = it.next() {
        match b {
            b'\\' => out.push(*it.next()?),
            b'"' => return None,
            _ => out.push(b),
        }
    }
    Some(out)
}

/// Parses `delta-seconds` (RFC 9111 1.2.2): 1*DIGIT. Values beyond 2^31 saturate to 2^31 as
/// the RFC requires; anything else (sign, fraction, empty) is invalid.
pub fn parse_delta_seconds(s: &[u8]) -> Option<u64> {
    const CAP: u64 = 1 << 31;
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in s {
        v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        if v > CAP {
            return Some(CAP);
        }
    }
    Some(v)
}

/// Parses an HTTP-date (RFC 9110 5.6.7) into unix seconds: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Day and
/// month names and `GMT` compare case-insensitively (5.6.7: "HTTP-date is case
/// sensitive" applies to senders; recipients are asked to be robust, and origins in the wild
/// send `gmt` and `NOV`). A two-digit RFC 850 year that would lie more than 50 years in the
/// future is read as the most recent past year with those digits, as 5.6.7 requires.
/// Each format is matched with its exact field widths and its own weekday form (short in
/// IMF-fixdate and asctime, full in RFC 850): a mixture such as `Thu, 18-Aug-2050 02:01:18
/// GMT` or a one-digit hour is not an HTTP-date. Dates before the epoch, impossible dates
/// and garbage yield `None` (an invalid `Expires` is then already expired, RFC 9111 5.3).
///
/// `now` (unix seconds) is the clock the century rule reads: the time the field was
/// received, which the caller knows (a response's receipt, a request's arrival). The
/// policy layer reads no clock of its own.
pub fn parse_http_date(s: &[u8], now: u64) -> Option<u64> {
    // A clock past the last HTTP-date (a stored blob's) reads as that date.
    let now = now.min(MAX_HTTP_DATE);
    const DAYS_SHORT: [&[u8]; 7] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"];
    const DAYS_LONG: [&[u8]; 7] =
        [b"monday", b"tuesday", b"wednesday", b"thursday", b"friday", b"saturday", b"sunday"];
    let s = trim_ows(s);
    let comma = s.iter().position(|&b| b == b',');
    let is_day =
        |name: &[u8], table: &[&[u8]; 7]| table.iter().any(|d| d.eq_ignore_ascii_case(name));
    let (day, month, year, time) = match comma {
        Some(c) if is_day(&s[..c], &DAYS_SHORT) => {
            // IMF-fixdate: ", " 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
            let rest = s[c + 1..].strip_prefix(b" ")?;
            let mut it = rest.split(|&b| b == b' ');
            let day = digits(it.next()?, 2)?;
            let month = month_index(it.next()?)?;
            let year = digits(it.next()?, 4)?;
            let time = it.next()?;
            if !it.next()?.eq_ignore_ascii_case(b"gmt") || it.next().is_some() {
                return None;
            }
            (day, month, year, time)
        }
        Some(c) if is_day(&s[..c], &DAYS_LONG) => {
            // rfc850-date: ", " 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
            let rest = s[c + 1..].strip_prefix(b" ")?;
            let mut it = rest.split(|&b| b == b' ');
            let date = it.next()?;
            let time = it.next()?;
            if !it.next()?.eq_ignore_ascii_case(b"gmt") || it.next().is_some() {
                return None;
            }
            let mut d = date.split(|&b| b == b'-');
            let day = digits(d.next()?, 2)?;
            let month = month_index(d.next()?)?;
            let yy = digits(d.next()?, 2)?;
            if d.next().is_some() {
                return None;
            }
            (day, month, rfc850_year(yy, now), time)
        }
        Some(_) => return None,
        None => {
            // asctime-date: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time SP 4DIGIT
            if s.len() != 24 || !is_day(&s[..3], &DAYS_SHORT) || s[3] != b' ' || s[7] != b' ' {
                return None;
            }
            let month = month_index(&s[4..7])?;
            let day = match s[8] {
                b' ' => digits(&s[9..10], 1)?,
                _ => digits(&s[8..10], 2)?,
            };
            if s[10] != b' ' || s[19] != b' ' {
                return None;
            }
            (day, month, digits(&s[20..24], 4)?, &s[11..19])
        }
    };
    let (hh, mm, ss) = time_of_day(time)?;
    // A leap second at the end of 9999 is in year 10000: no HTTP-date.
    unix_seconds(year, month, day, hh, mm, ss).filter(|&t| t <= MAX_HTTP_DATE)
}

/// The last instant an HTTP-date can name: Fri, 31 Dec 9999 23:59:59 GMT (four-digit
/// years).
pub const MAX_HTTP_DATE: u64 = 253_402_300_799;

/// `n` ASCII digits exactly.
fn digits(s: &[u8], n: usize) -> Option<u64> {
    if s.len() != n || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0, |v, &d| v * 10 + u64::from(d - b'0')))
}

/// 1..=12 for a case-insensitive three-letter month name.
fn month_index(s: &[u8]) -> Option<u64> {
    const MONTHS: [&[u8]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    MONTHS.iter().position(|m| m.eq_ignore_ascii_case(s)).map(|i| i as u64 + 1)
}

/// `HH:MM:SS`; a leap second (60) is accepted as RFC 9110 5.6.7 allows.
fn time_of_day(s: &[u8]) -> Option<(u64, u64, u64)> {
    if s.len() != 8 || s[2] != b':' || s[5] != b':' {
        return None;
    }
    let (h, m, sec) = (digits(&s[0..2], 2)?, digits(&s[3..5], 2)?, digits(&s[6..8], 2)?);
    (h < 24 && m < 60 && sec <= 60).then_some((h, m, sec))
}

/// The full year of a two-digit RFC 850 year: the century that puts it at most 50 years
/// after `now` (RFC 9110 5.6.7).
fn rfc850_year(yy: u64, now: u64) -> u64 {
    let this_year = civil_year(now);
    let mut year = this_year / 100 * 100 + yy;
    if year > this_year + 50 {
        year -= 100;
    }
    year
}

/// The Gregorian year of a unix time.
fn civil_year(unix: u64) -> u64 {
    let mut year = 1970;
    let mut days = unix / 86_400;
    loop {
        let len = if is_leap(year) { 366 } else { 365 };
        if days < len {
            return year;
        }
        days -= len;
        year += 1;
    }
}

fn is_leap(y: u64) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

/// Unix seconds of a UTC civil time; `None` for impossible dates or years before 1970.
fn unix_seconds(year: u64, month: u64, day: u64, h: u64, m: u64, s: u64) -> Option<u64> {
    const DAYS_IN: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1970..=9999).contains(&year) || day == 0 {
        return None;
    }
    let month_len = DAYS_IN[(month - 1) as usize] + u64::from(month == 2 && is_leap(year));
    if day > month_len {
        return None;
    }
    let mut days: u64 = (1970..year).map(|y| if is_leap(y) { 366 } else { 365 }).sum();
    days += DAYS_IN[..(month - 1) as usize].iter().sum::<u64>();
    days += u64::from(month > 2 && is_leap(year));
    days += day - 1;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// The `Age` of a response (RFC 9111 5.1): the first member of the first field line; a list
/// (`Age: 5, 10`) or repeated lines keep only the first; an invalid first member (negative,
/// fractional, empty) means the field is ignored (`None`).
pub fn parse_age<H: HeaderLookup + ?Sized>(headers: &H) -> Option<u64> {
    let first = headers.get_first("age")?;
    let member = split_list(first).next()?;
    parse_delta_seconds(member)
}

/// Formats unix seconds as an IMF-fixdate (RFC 9110 5.6.7); a time past
/// [`MAX_HTTP_DATE`] (a clock read from a stored blob) as that date.
pub fn format_http_date(unix_secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix_secs.min(MAX_HTTP_DATE)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-23, the clock of the date tests.
    const NOW: u64 = 1_795_392_000;

    #[test]
    fn split_list_table() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"", &[]),
            (b"a", &[b"a"]),
            (b"a,b", &[b"a", b"b"]),
            (b" a , b ", &[b"a", b"b"]),
            (b"a,,b,", &[b"a", b"b"]),
            (b",,,", &[]),
            (b"a=\"x, y\", b", &[b"a=\"x, y\"", b"b"]),
            (b"a=\"x\\\", y\", b", &[b"a=\"x\\\", y\"", b"b"]),
            (b"a=\"unterminated, b", &[b"a=\"unterminated, b"]),
            (b"\t a \t", &[b"a"]),
        ];
        for (input, want) in cases {
            let got: Vec<&[u8]> = split_list(input).collect();
            assert_eq!(&got, want, "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn delta_seconds_table() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"60", Some(60)),
            (b"007", Some(7)),
            (b"2147483648", Some(1 << 31)),
            (b"99999999999999999999999999", Some(1 << 31)),
            (b"", None),
            (b"-1", None),
            (b"1.5", None),
            (b" 1", None),
            (b"1a", None),
            (b"+5", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_delta_seconds(input), *want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn http_dates() {
        let t = 784111777;
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT", NOW), Some(t));
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT", NOW), Some(t));
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994", NOW), Some(t));
        assert_eq!(parse_http_date(b" Sun, 06 Nov 1994 08:49:37 GMT ", NOW), Some(t));
        assert_eq!(parse_http_date(b"0", NOW), None);
        assert_eq!(parse_http_date(b"\xff\xfe", NOW), None);
        assert_eq!(parse_http_date(b"", NOW), None);
        assert_eq!(format_http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn http_dates_are_case_insensitive_in_all_three_formats() {
        let t = 784111777;
        assert_eq!(parse_http_date(b"sun, 06 nov 1994 08:49:37 gmt", NOW), Some(t));
        assert_eq!(parse_http_date(b"SUN, 06 NOV 1994 08:49:37 GMT", NOW), Some(t));
        assert_eq!(parse_http_date(b"SUNDAY, 06-nov-94 08:49:37 Gmt", NOW), Some(t));
        assert_eq!(parse_http_date(b"sun nov  6 08:49:37 1994", NOW), Some(t));
        assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT", NOW), Some(0));
        assert_eq!(parse_http_date(b"Tue, 29 Feb 2000 12:00:00 GMT", NOW), Some(951_825_600));
        assert_eq!(parse_http_date(b"Fri, 31 Dec 9999 23:59:59 GMT", NOW), Some(253_402_300_799));
    }

    /// Fuzzing (`crates/reel-fuzz`, target `http_date`): a leap second at the end of 9999
    /// parsed into year 10000, which no HTTP-date can say, and formatting it panicked; a
    /// stored blob's clock near 2^64 kept the RFC 850 century rule counting years for hours.
    #[test]
    fn every_parsed_date_formats_and_any_clock_reads_one() {
        assert_eq!(parse_http_date(b"Fri, 31 Dec 9999 23:59:60 GMT", NOW), None);
        assert_eq!(parse_http_date(b"Fri Dec 31 23:59:60 9999", NOW), None);
        for t in [0, NOW, 253_402_300_799, 253_402_300_800, u64::MAX] {
            let s = format_http_date(t);
            assert_eq!(parse_http_date(s.as_bytes(), NOW), Some(t.min(253_402_300_799)), "{s}");
        }
        let rfc850 = b"Sunday, 06-Nov-94 08:49:37 GMT";
        assert_eq!(parse_http_date(rfc850, u64::MAX), Some(253_239_727_777));
    }

    #[test]
    fn malformed_http_dates_are_refused() {
        for bad in [
            &b"Sun, 6 Nov 1994 08:49:37 GMT"[..],
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 06 Nov 1994 08:49:37",
            b"Sun, 06 Nov 1994 8:49:37 GMT",
            b"Sun, 06 Foo 1994 08:49:37 GMT",
            b"Sun, 31 Feb 1994 08:49:37 GMT",
            b"Mon, 29 Feb 2100 00:00:00 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"Sun, 06 Nov 1969 08:49:37 GMT",
            b"Sunday, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06-Nov-94 08:49:37 GMT",
            b"Sun Nov 6 08:49:37 1994",
            b"Sun, 06 Nov 1994 08:49:37 GMT extra",
            b"Xyz, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad, NOW), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn dates_in_none_of_the_three_formats_are_invalid() {
        // RFC 9110 5.6.7: IMF-fixdate, rfc850-date (full weekday, two-digit year) and
        // asctime-date only, each with its exact field widths.
        for bad in [
            "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thursday, 18-Aug-2050 02:01:18 GMT",
            "Thu, 18-Aug-50 02:01:18 GMT",
            "Thu, 01 Jan 2099 2:00:00 GMT",
            "Thu, 01 Jan 2099 02:0:00 GMT",
            "Thu, 01 Jan 2099 02:00:0 GMT",
            "Thu, 01 Jan 2099 002:00:00 GMT",
            "Thu, 1 Jan 2099 02:00:00 GMT",
            "Thu, 001 Jan 2099 02:00:00 GMT",
            "Thu, 01 Jan 99 02:00:00 GMT",
            "Thu, 01 Jan 02099 02:00:00 GMT",
            "Thu, 01 January 2099 02:00:00 GMT",
            "Thu,  01 Jan 2099 02:00:00 GMT",
            "Thu, 01 Jan 2099 02:00:00  GMT",
            "Thu,01 Jan 2099 02:00:00 GMT",
            "Thursday, 1-Jan-99 02:00:00 GMT",
            "Thursday, 01-Jan-99 2:00:00 GMT",
            "Thursday, 01-Jan-099 02:00:00 GMT",
            "Thursday, 01 Jan 99 02:00:00 GMT",
            "Thu Jan 1 02:00:00 2099",
            "Thu Jan  1 2:00:00 2099",
            "Thu Jan  1 02:00:00 99",
            "Thu Jan  1 02:00:00 2099 GMT",
            "Thursday Jan  1 02:00:00 2099",
            "Thu Jan   1 02:00:00 2099",
        ] {
            assert_eq!(parse_http_date(bad.as_bytes(), NOW), None, "{bad:?}");
        }
    }

    #[test]
    fn dates_in_each_of_the_three_formats_are_valid() {
        let (aug, jan) = (2_544_400_878, 4_070_916_000);
        for (good, want) in [
            ("Thu, 18 Aug 2050 02:01:18 GMT", aug),
            ("Thursday, 18-Aug-50 02:01:18 GMT", aug),
            ("Thu Aug 18 02:01:18 2050", aug),
            ("Thu, 01 Jan 2099 02:00:00 GMT", jan),
            ("Thu Jan  1 02:00:00 2099", jan),
            ("Thu Jan 01 02:00:00 2099", jan),
        ] {
            assert_eq!(parse_http_date(good.as_bytes(), NOW), Some(want), "{good:?}");
        }
    }

    #[test]
    fn rfc850_two_digit_years_pick_the_century_within_fifty_years() {
        // Now: 2026-11-23. "94" is 1994; "70" would be 2070 (44 years ahead: allowed);
        // "80" would be 2080 (54 ahead): 1980 instead.
        let now = 1_795_392_000;
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT", now), Some(784_111_777));
        let y2070 = parse_http_date(b"Tuesday, 01-Jan-70 00:00:00 GMT", now).unwrap();
        assert_eq!(civil_year(y2070), 2070);
        let y1980 = parse_http_date(b"Tuesday, 01-Jan-80 00:00:00 GMT", now).unwrap();
        assert_eq!(civil_year(y1980), 1980);
    }

    #[test]
    fn age_takes_the_first_member_and_ignores_invalid_values() {
        let h = |v: &[&str]| -> Vec<(Vec<u8>, Vec<u8>)> {
            v.iter().map(|v| (b"age".to_vec(), v.as_bytes().to_vec())).collect()
        };
        assert_eq!(parse_age(&h(&["5"])), Some(5));
        assert_eq!(parse_age(&h(&["5, 10"])), Some(5));
        assert_eq!(parse_age(&h(&["7", "10"])), Some(7));
        assert_eq!(parse_age(&h(&["-1"])), None);
        assert_eq!(parse_age(&h(&["1.5"])), None);
        assert_eq!(parse_age(&h(&["abc, 5"])), None);
        assert_eq!(parse_age(&h(&[])), None);
    }

    #[test]
    fn lookup_impls_agree() {
        let slice: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"Cache-Control".to_vec(), b"max-age=1".to_vec()),
            (b"x".to_vec(), b"y".to_vec()),
            (b"cache-control".to_vec(), b"public, no-transform".to_vec()),
        ];
        let mut map = http::HeaderMap::new();
        map.append("cache-control", http::HeaderValue::from_static("max-age=1"));
        map.append("x", http::HeaderValue::from_static("y"));
        map.append("cache-control", http::HeaderValue::from_static("public, no-transform"));
        let a: Vec<&[u8]> = slice.list_members("cache-control").collect();
        let b: Vec<&[u8]> = map.list_members("cache-control").collect();
        assert_eq!(a, b);
        assert_eq!(a, vec![&b"max-age=1"[..], b"public", b"no-transform"]);
        assert!(slice.has("x") && map.has("x"));
        assert!(!slice.has("z") && !map.has("z"));
        assert_eq!(slice.get_first("X"), Some(&b"y"[..]), "names compare case-insensitively");
    }

    #[test]
    fn unquote_table() {
        assert_eq!(unquote(b"\"abc\""), Some(b"abc".to_vec()));
        assert_eq!(unquote(b"\"a\\\"b\""), Some(b"a\"b".to_vec()));
        assert_eq!(unquote(b"\"a\"b\""), None);
        assert_eq!(unquote(b"\"abc"), None);
        assert_eq!(unquote(b"abc"), None);
        assert_eq!(unquote(b"\"\\\""), None);
    }
}
