//! The `Date` header value (RFC 9110 section 6.6.1), formatted at most once per second
//! per worker thread instead of once per response.

use std::cell::RefCell;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) const DATE_LEN: usize = 29;

struct Cache {
    secs: u64,
    text: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache { secs: u64::MAX, text: [b' '; DATE_LEN] }) };
}

/// Appends the current date in IMF-fixdate form to `out`.
pub(crate) fn append_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.secs != secs {
            let when = UNIX_EPOCH + Duration::from_secs(secs);
            let mut buf = [b' '; DATE_LEN];
            // IMF-fixdate is always exactly DATE_LEN bytes for years 1000..=9999; a
            // failed write keeps the previous text rather than emitting garbage.
            if (&mut buf[..]).write_fmt(format_args!("{}", httpdate::HttpDate::from(when))).is_ok()
            {
                c.text = buf;
                c.secs = secs;
            }
        }
        out.extend_from_slice(&c.text);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_is_imf_fixdate_and_parses_back() {
        let mut out = Vec::new();
        append_date(&mut out);
        assert_eq!(out.len(), DATE_LEN);
        let s = std::str::from_utf8(&out).unwrap();
        assert!(s.ends_with(" GMT"), "{s}");
        let parsed = httpdate::parse_http_date(s).unwrap();
        let delta = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(delta < Duration::from_secs(120));
    }
}
