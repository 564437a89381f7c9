//! AWS Signature Version 4 for S3 and S3-compatible stores (MinIO, Ceph, R2, GCS
//! interoperability): the canonical request, the string to sign, the signing key of the day
//! and the `Authorization` field, on ring's HMAC-SHA256 and SHA-256.
//!
//! The signed fields are `host`, `x-amz-content-sha256` (`UNSIGNED-PAYLOAD`) and
//! `x-amz-date` (and `x-amz-security-token` with temporary credentials): S3 accepts other
//! fields unsigned, so `Range`, `If-None-Match` and the rest travel as the viewer sent them.
//! S3 does not normalise or double-encode the path: the request is sent in the encoded form
//! the signature covers ([`s3_target`]), which is what S3 rebuilds from the key it decodes.
//!
//! The signing key depends only on the secret, the day, the region and the service: each
//! worker thread keeps it for the day (`KEYS`), so a request costs two HMACs and a hash.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use http::uri::PathAndQuery;
use http::{HeaderValue, Method};
use ring::{digest, hmac};

use crate::spec::S3Auth;

/// The payload hash S3 accepts instead of hashing the body.
pub(crate) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// Signers made so far: each gets its own number for the per-thread key cache.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Per worker thread: (signer, day since the epoch, signing key of that day).
    static KEYS: RefCell<Vec<(u64, u64, hmac::Key)>> = const { RefCell::new(Vec::new()) };
}

/// The fields one signed request carries.
pub(crate) struct Signed {
    /// `x-amz-date`.
    pub(crate) date: HeaderValue,
    /// `Authorization`.
    pub(crate) authorization: HeaderValue,
}

/// Signs requests with one set of credentials.
pub(crate) struct Signer {
    id: u64,
    region: String,
    access_key: String,
    secret_key: String,
    /// `x-amz-security-token`, marked sensitive.
    pub(crate) token: Option<HeaderValue>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("region", &self.region).finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer for `auth`; `None` when the session token cannot be a field value.
    pub(crate) fn new(auth: &S3Auth) -> Option<Self> {
        let token = match &auth.session_token {
            Some(t) => {
                let mut v = HeaderValue::from_str(t.expose()).ok()?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        Some(Signer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            region: auth.region.clone(),
            access_key: auth.access_key.expose().to_owned(),
            secret_key: auth.secret_key.expose().to_owned(),
            token,
        })
    }

    /// The signature fields of `method pq` sent with `Host: host` at `now`; `pq` is already
    /// in [`s3_target`] form.
    pub(crate) fn sign(
        &self,
        method: &Method,
        pq: &PathAndQuery,
        host: &[u8],
        now: SystemTime,
    ) -> Signed {
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let date = amz_date(secs);
        let day = &date[..8];
        let token = self.token.as_ref().map(HeaderValue::as_bytes);
        let mut fields: Vec<(&str, &[u8])> = vec![
            ("host", host),
            ("x-amz-content-sha256", UNSIGNED_PAYLOAD.as_bytes()),
            ("x-amz-date", date.as_bytes()),
        ];
        if let Some(t) = token {
            fields.push(("x-amz-security-token", t));
        }
        let query = canonical_query(pq.query().unwrap_or(""));
        let creq = canonical_request(method.as_str(), pq.path(), &query, &fields, UNSIGNED_PAYLOAD);
        let scope = format!("{day}/{}/s3/aws4_request", self.region);
        let to_sign = string_to_sign(&date, &scope, &creq);
        let key = self.day_key(secs / 86_400, day);
        let signature = hex(hmac::sign(&key, to_sign.as_bytes()).as_ref());
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={}, Signature={signature}",
            self.access_key,
            names.join(";")
        );
        // Both are ASCII built from validated parts; a failure would be a bug, and then
        // the origin refuses the unsigned request rather than reel panicking.
        let mut authorization =
            HeaderValue::from_str(&auth).unwrap_or_else(|_| HeaderValue::from_static(""));
        authorization.set_sensitive(true);
        Signed {
            date: HeaderValue::from_str(&date).unwrap_or_else(|_| HeaderValue::from_static("")),
            authorization,
        }
    }

    /// The signing key of `day` (`yyyymmdd`, day number `n`), from this thread's cache.
    fn day_key(&self, n: u64, day: &str) -> hmac::Key {
        KEYS.with(|k| {
            let mut keys = k.borrow_mut();
            if let Some((_, _, key)) = keys.iter().find(|(id, d, _)| *id == self.id && *d == n) {
                return key.clone();
            }
            let key = signing_key(&self.secret_key, day, &self.region);
            keys.retain(|(id, _, _)| *id != self.id);
            if keys.len() >= 16 {
                // Signers of configurations reloaded away.
                keys.remove(0);
            }
            keys.push((self.id, n, key.clone()));
            key
        })
    }
}

/// `kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), "s3"), "aws4_request")`.
pub(crate) fn signing_key(secret: &str, day: &str, region: &str) -> hmac::Key {
    let step = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes()).as_ref().to_vec()
    };
    let k = step(format!("AWS4{secret}").as_bytes(), day);
    let k = step(&k, region);
    let k = step(&k, "s3");
    let k = step(&k, "aws4_request");
    hmac::Key::new(hmac::HMAC_SHA256, &k)
}

/// The canonical request: `fields` are lowercase names in order with their values (trimmed,
/// inner runs of spaces kept as sent: reel's own values have none).
pub(crate) fn canonical_request(
    method: &str,
    path: &str,
    query: &str,
    fields: &[(&str, &[u8])],
    payload: &str,
) -> String {
    let mut out = String::with_capacity(256);
    out.push_str(method);
    out.push('\n');
    out.push_str(if path.is_empty() { "/" } else { path });
    out.push('\n');
    out.push_str(query);
    out.push('\n');
    for (name, value) in fields {
        out.push_str(name);
        out.push(':');
        out.push_str(String::from_utf8_lossy(value).trim());
        out.push('\n');
    }
    out.push('\n');
    let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    out.push_str(&names.join(";"));
    out.push('\n');
    out.push_str(payload);
    out
}

/// `AWS4-HMAC-SHA256`, the time, the scope and the canonical request's SHA-256.
pub(crate) fn string_to_sign(date: &str, scope: &str, canonical_request: &str) -> String {
    let hash = hex(digest::digest(&digest::SHA256, canonical_request.as_bytes()).as_ref());
    format!("AWS4-HMAC-SHA256\n{date}\n{scope}\n{hash}")
}

/// The query's parameters (already in [`s3_target`] form) sorted by name, then value, each
/// as `name=value`.
pub(crate) fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_unstable();
    let mut out = String::with_capacity(query.len() + 4);
    for (i, (n, v)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(n);
        out.push('=');
        out.push_str(v);
    }
    out
}

/// The request target in the form S3 signs: the path's and each parameter's bytes
/// percent-decoded, then every byte but the unreserved ones (and `/` in the path)
/// percent-encoded with uppercase hex; a parameter without `=` gets one. S3 decodes the path
/// into the object key, so this names the same object.
pub(crate) fn s3_target(pq: &PathAndQuery) -> PathAndQuery {
    let mut out = String::with_capacity(pq.as_str().len() + 8);
    if !pq.path().starts_with('/') {
        out.push('/');
    }
    encode_into(&mut out, pq.path(), true);
    if let Some(q) = pq.query() {
        let mut first = true;
        for p in q.split('&').filter(|p| !p.is_empty()) {
            out.push(if first { '?' } else { '&' });
            first = false;
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            encode_into(&mut out, n, false);
            out.push('=');
            encode_into(&mut out, v, false);
        }
    }
    // Only unreserved bytes, `/`, `?`, `&`, `=` and escapes: always a valid target.
    PathAndQuery::try_from(out).unwrap_or_else(|_| pq.clone())
}

fn encode_into(out: &mut String, s: &str, path: bool) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let mut byte = b[i];
        if byte == b'%'
            && let (Some(h), Some(l)) =
                (b.get(i + 1).and_then(hex_val), b.get(i + 2).and_then(hex_val))
        {
            byte = (h << 4) | l;
            i += 2;
        }
        i += 1;
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else if path && byte == b'/' {
            out.push('/');
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

fn hex_val(b: &u8) -> Option<u8> {
    char::from(*b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `yyyymmddThhmmssZ` (UTC) of `secs` since the epoch.
pub(crate) fn amz_date(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Proleptic Gregorian date of day `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(amz_date(951_782_400 + 3661), "20000229T010101Z");
        assert_eq!(amz_date(4_102_444_799), "20991231T235959Z");
    }

    /// AWS's own example (S3 API reference, "Signature Calculations for the Authorization
    /// Header", GET Object with a Range field).
    #[test]
    fn the_aws_get_object_example() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let fields: [(&str, &[u8]); 4] = [
            ("host", b"examplebucket.s3.amazonaws.com"),
            ("range", b"bytes=0-9"),
            ("x-amz-content-sha256", empty.as_bytes()),
            ("x-amz-date", b"20130524T000000Z"),
        ];
        let creq = canonical_request("GET", "/test.txt", "", &fields, empty);
        let scope = "20130524/us-east-1/s3/aws4_request";
        let sts = string_to_sign("20130524T000000Z", scope, &creq);
        assert!(
            sts.ends_with("7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"),
            "{sts}"
        );
        let key = signing_key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524", "us-east-1");
        assert_eq!(
            hex(hmac::sign(&key, sts.as_bytes()).as_ref()),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn targets_in_s3_form() {
        let t = |s: &str| s3_target(&PathAndQuery::try_from(s).unwrap()).as_str().to_owned();
        assert_eq!(t("/a/b.ts"), "/a/b.ts");
        assert_eq!(t("/caf%C3%A9/a%20b!$,+.ts"), "/caf%C3%A9/a%20b%21%24%2C%2B.ts");
        assert_eq!(t("/%7euser/%41"), "/~user/A");
        assert_eq!(t("/a%2Fb"), "/a/b");
        assert_eq!(t("/x?b=2&a=%2f&flag&&c=a+b"), "/x?b=2&a=%2F&flag=&c=a%2Bb");
        assert_eq!(t("/bad%zz"), "/bad%25zz");
        assert_eq!(canonical_query("b=2&a=%2F&flag=&a=1"), "a=%2F&a=1&b=2&flag=");
    }

    #[test]
    fn signing_is_stable_and_keyed() {
        let auth = |secret: &str| S3Auth {
            region: "us-east-1".into(),
            access_key: crate::spec::Secret::new("AKID"),
            secret_key: crate::spec::Secret::new(secret),
            session_token: Some(crate::spec::Secret::new("tok")),
        };
        let s = Signer::new(&auth("s3cr3t")).unwrap();
        let pq = PathAndQuery::from_static("/bucket/a.ts");
        let at = UNIX_EPOCH + std::time::Duration::from_secs(1_369_353_600);
        let a = s.sign(&Method::GET, &pq, b"h", at);
        let b = s.sign(&Method::GET, &pq, b"h", at);
        assert_eq!(a.authorization, b.authorization, "the cached day key is the same key");
        let text = a.authorization.to_str().unwrap();
        assert!(text.starts_with("AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature="), "{text}");
        assert!(a.authorization.is_sensitive());
        let other = Signer::new(&auth("other")).unwrap().sign(&Method::GET, &pq, b"h", at);
        assert_ne!(a.authorization, other.authorization);
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }
}
