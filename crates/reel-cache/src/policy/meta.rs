//! [`StoredMeta`]: what the cache keeps next to a stored body, and its compact, versioned
//! binary encoding for the store's opaque metadata blob.
//!
//! The targeted field (RFC 9213) whose directives governed the response, if any, is recorded
//! by name so that the directives decoded later are the ones the response was stored under.
//!
//! Stored headers exclude `Set-Cookie` and `Set-Cookie2` (a stored response is shared: one
//! viewer's cookie must never reach another), hop-by-hop fields (RFC 9110 7.6.1: `Connection`, the fields it
//! names, `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`; RFC 9111
//! 3.1), `Age` (recomputed on every hit, RFC 9111 4.2.3 / 5.1; its received value is kept
//! separately for the age calculation), and fields named by a qualified `no-cache` or
//! `private` (RFC 9111 5.2.2.4, 5.2.2.7: we never send them without revalidation by never
//! storing them). A missing `Date` is added from the response time (RFC 9110 6.6.1).
//!
//! Encoding (version 1, little-endian):
//!
//! ```text
//! "RM" u8:version u8:flags(1=invalidated 2=has_body_len 4=vary_star 8=targeted)
//! u16:status u64:request_time u64:response_time u64:lifetime_secs u64:age_value
//! [u64:body_len] [u16:name_len name]
//! u32:n_headers { u16:name_len name u32:value_len value }*
//! u16:n_vary    { u16:name_len name u8:present [u32:value_len value] }*
//! ```
//!
//! Decoding checks every length against the remaining input before allocating, validates
//! names and values as it would accept them from the network, and rejects trailing bytes.

use std::time::Duration;

use super::cache_control::{ResponseCacheControl, targeted};
use super::freshness::{PolicyConfig, SET_COOKIE_FIELDS, current_age, freshness_lifetime};
use super::headers::{HeaderLookup, format_http_date, is_token, parse_age, parse_http_date};
use super::rules::TtlRule;
use super::vary::VaryKey;

const MAGIC: &[u8; 2] = b"RM";
const VERSION: u8 = 1;
const F_INVALIDATED: u8 = 1;
const F_BODY_LEN: u8 = 2;
const F_VARY_STAR: u8 = 4;
const F_TARGETED: u8 = 8;

/// Why a metadata blob could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// The blob ended early.
    #[error("metadata truncated")]
    Truncated,
    /// The blob does not start with the magic bytes.
    #[error("not a reel metadata blob")]
    BadMagic,
    /// The blob was written by an unknown format version.
    #[error("unsupported metadata version {0}")]
    UnsupportedVersion(u8),
    /// A field has an impossible value.
    #[error("invalid metadata: {0}")]
    Invalid(&'static str),
    /// Bytes follow the last field.
    #[error("trailing bytes after metadata")]
    TrailingBytes,
}

/// When the request that produced a response was sent and when its header arrived (RFC
/// 9111 4.2.3 `request_time` / `response_time`), unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseTimes {
    /// When the cache sent the request to the origin.
    pub request_time: u64,
    /// When the cache received the response header.
    pub response_time: u64,
}

/// Metadata of one stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMeta {
    status: u16,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    request_time: u64,
    response_time: u64,
    lifetime: u64,
    age_value: u64,
    body_len: Option<u64>,
    invalidated: bool,
    vary: VaryKey,
    /// The RFC 9213 field whose directives apply instead of `Cache-Control`.
    targeted: Option<String>,
    // Derived from `headers` / times; not encoded.
    cc: ResponseCacheControl,
    date: u64,
}

/// Hop-by-hop and connection-management fields never stored (RFC 9110 7.6.1, RFC 9111 3.1),
/// `Age`, recomputed on output, `Alt-Svc`, which names the origin's services and not this
/// node's (RFC 7838; the listener adds its own), and the fields that set cookies
/// ([`SET_COOKIE_FIELDS`]).
fn is_excluded(name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"age",
        b"alt-svc",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
        || SET_COOKIE_FIELDS.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name))
        || (name.len() >= 6 && name[..6].eq_ignore_ascii_case(b"proxy-"))
}

/// Fields a 304 must not overwrite (RFC 9111 3.2: `Content-Length`; and fields describing
/// the stored content itself, which a 304 cannot change).
fn is_update_excluded(name: &[u8]) -> bool {
    const NAMES: &[&[u8]] = &[b"content-length", b"content-encoding", b"content-range"];
    is_excluded(name) || NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// A value we are willing to store and later write to a client: no CR, LF or NUL
/// (RFC 9110 5.5).
fn valid_value(v: &[u8]) -> bool {
    !v.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0)
}

/// Field names `Connection` lists: also hop-by-hop (RFC 9110 7.6.1).
fn connection_listed<N: AsRef<[u8]>, V: AsRef<[u8]>>(headers: &[(N, V)]) -> Vec<Vec<u8>> {
    headers.list_members("connection").map(|m| m.to_ascii_lowercase()).collect()
}

impl StoredMeta {
    /// Builds the metadata of a response about to be stored: filters its headers (see the
    /// module doc), adds `Date` if missing, and computes its freshness lifetime with
    /// [`freshness_lifetime`]. `vary` is the request's secondary key
    /// ([`VaryKey::from_request`]). `body_len` is `None` while the length is unknown.
    pub fn from_response<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        status: u16,
        headers: &[(N, V)],
        vary: VaryKey,
        times: ResponseTimes,
        body_len: Option<u64>,
        cfg: &PolicyConfig,
        rule: Option<&TtlRule>,
    ) -> Self {
        let (field, cc) = match targeted(headers, &cfg.targeted) {
            Some((name, cc)) => (Some(name.to_string()), cc),
            None => (None, ResponseCacheControl::parse(headers)),
        };
        let mut drop = connection_listed(headers);
        drop.extend(cc.no_cache.fields().iter().map(|f| f.as_bytes().to_vec()));
        drop.extend(cc.private.fields().iter().map(|f| f.as_bytes().to_vec()));
        let mut kept: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(headers.len() + 1);
        for (n, v) in headers {
            let (n, v) = (n.as_ref(), v.as_ref());
            if !is_token(n) || !valid_value(v) || is_excluded(n) {
                continue;
            }
            let n = n.to_ascii_lowercase();
            if drop.contains(&n) {
                continue;
            }
            kept.push((n, v.to_vec()));
        }
        let age_value = parse_age(headers).unwrap_or(0);
        let mut meta = Self {
            status,
            headers: kept,
            request_time: times.request_time,
            response_time: times.response_time,
            lifetime: 0,
            age_value,
            body_len,
            invalidated: false,
            vary,
            targeted: field,
            cc,
            date: 0,
        };
        meta.ensure_date();
        meta.derive();
        meta.lifetime =
            freshness_lifetime(status, &meta.cc, &meta.headers, meta.response_time, cfg, rule)
                .as_secs();
        meta
    }

    /// Adds `Date` from `response_time` if the response had none (RFC 9110 6.6.1).
    fn ensure_date(&mut self) {
        if !self.headers.has("date") {
            self.headers
                .push((b"date".to_vec(), format_http_date(self.response_time).into_bytes()));
        }
    }

    /// Recomputes the fields derived from headers.
    fn derive(&mut self) {
        let names = self.targeted.as_slice();
        self.cc = ResponseCacheControl::for_cache(&self.headers, names);
        self.date = self
            .headers
            .get_first("date")
            .and_then(|d| parse_http_date(d, self.response_time))
            .unwrap_or(self.response_time);
    }

    /// Freshens the stored response with a 304 from revalidation (RFC 9111 4.3.4, 3.2):
    /// every stored field the 304 carries is replaced by the 304's lines, new fields are
    /// added, except hop-by-hop fields, `Age`, `Content-Length`, `Content-Encoding` and
    /// `Content-Range`. Times are taken from the revalidation exchange, the 304's `Age` is
    /// used (or reset to 0), the lifetime is recomputed, and a soft purge is cleared.
    pub fn update_from_304<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        resp: &[(N, V)],
        times: ResponseTimes,
        cfg: &PolicyConfig,
        rule: Option<&TtlRule>,
    ) {
        let conn = connection_listed(resp);
        let mut replaced: Vec<Vec<u8>> = Vec::new();
        for (n, v) in resp {
            let (n, v) = (n.as_ref(), v.as_ref());
            if !is_token(n) || !valid_value(v) || is_update_excluded(n) {
                continue;
            }
            let n = n.to_ascii_lowercase();
            if conn.contains(&n) {
                continue;
            }
            if !replaced.contains(&n) {
                self.headers.retain(|(sn, _)| *sn != n);
                replaced.push(n.clone());
            }
            self.headers.push((n, v.to_vec()));
        }
        self.request_time = times.request_time;
        self.response_time = times.response_time;
        self.age_value = parse_age(resp).unwrap_or(0);
        if !resp.has("date") {
            // The stored Date describes the original fetch; keeping it would count the whole
            // time since then as age of the freshened response.
            self.headers.retain(|(n, _)| n != b"date");
        }
        self.ensure_date();
        self.targeted = targeted(&self.headers, &cfg.targeted).map(|(n, _)| n.to_string());
        self.derive();
        // Qualified no-cache / private fields from the 304 must not be stored either.
        let mut drop: Vec<&[u8]> = Vec::new();
        drop.extend(self.cc.no_cache.fields().iter().map(|f| f.as_bytes()));
        drop.extend(self.cc.private.fields().iter().map(|f| f.as_bytes()));
        if !drop.is_empty() {
            let drop: Vec<Vec<u8>> = drop.into_iter().map(<[u8]>::to_vec).collect();
            self.headers.retain(|(n, _)| !drop.contains(n));
        }
        self.lifetime =
            freshness_lifetime(self.status, &self.cc, &self.headers, self.response_time, cfg, rule)
                .as_secs();
        self.invalidated = false;
    }

    /// Whether a 304 received for a revalidation applies to this stored response (RFC 9111
    /// 4.3.4): a strong ETag in the 304 must equal ours; otherwise a Last-Modified must
    /// equal ours; a 304 with neither applies only to a stored response without validators.
    pub fn matches_304<H: HeaderLookup + ?Sized>(&self, resp: &H) -> bool {
        if let Some(etag) = resp.get_first("etag") {
            let etag = super::headers::trim_ows(etag);
            if !etag.starts_with(b"W/") {
                return self.etag() == Some(etag);
            }
        }
        if let Some(lm) = resp.get_first("last-modified") {
            let theirs = parse_http_date(lm, self.response_time);
            return theirs.is_some() && self.last_modified() == theirs;
        }
        if resp.has("etag") {
            // Weak ETag only: match it weakly (RFC 9110 8.8.3.2) against ours.
            let theirs = resp.get_first("etag").map(super::headers::trim_ows);
            let strip = |t: &[u8]| t.strip_prefix(b"W/").unwrap_or(t).to_vec();
            return match (self.etag(), theirs) {
                (Some(a), Some(b)) => strip(a) == strip(b),
                _ => false,
            };
        }
        self.etag().is_none() && self.last_modified().is_none()
    }

    /// The response status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Stored header fields: lowercase names, in origin order.
    pub fn headers(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.headers
    }

    /// When the request that produced this response was sent (unix seconds).
    pub fn request_time(&self) -> u64 {
        self.request_time
    }

    /// When the response was received (unix seconds).
    pub fn response_time(&self) -> u64 {
        self.response_time
    }

    /// The freshness lifetime computed at store / freshen time.
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(self.lifetime)
    }

    /// Overrides the freshness lifetime (e.g. after a config reload re-evaluated rules).
    pub fn set_lifetime(&mut self, lifetime: Duration) {
        self.lifetime = lifetime.as_secs();
    }

    /// The `Age` value the origin (or an upstream cache) sent, seconds.
    pub fn age_value(&self) -> u64 {
        self.age_value
    }

    /// Body length, `None` while unknown (a still-filling chunked response).
    pub fn body_len(&self) -> Option<u64> {
        self.body_len
    }

    /// Records the body length once known.
    pub fn set_body_len(&mut self, len: Option<u64>) {
        self.body_len = len;
    }

    /// Whether the entry was soft-purged: it may only be used after revalidation (or under
    /// `stale-if-error`).
    pub fn invalidated(&self) -> bool {
        self.invalidated
    }

    /// Marks or clears a soft purge.
    pub fn set_invalidated(&mut self, v: bool) {
        self.invalidated = v;
    }

    /// The secondary key of this variant.
    pub fn vary(&self) -> &VaryKey {
        &self.vary
    }

    /// The targeted field (RFC 9213) whose directives govern this response, if any.
    pub fn targeted_field(&self) -> Option<&str> {
        self.targeted.as_deref()
    }

    /// The directives of the stored response for this cache: its targeted field's
    /// (RFC 9213) when one applied, else its `Cache-Control`.
    pub fn cache_control(&self) -> &ResponseCacheControl {
        &self.cc
    }

    /// The `Date` of the stored response (unix seconds).
    pub fn date(&self) -> u64 {
        self.date
    }

    /// The stored `ETag` field value, as sent (e.g. `"abc"` or `W/"abc"`).
    pub fn etag(&self) -> Option<&[u8]> {
        self.headers.get_first("etag").map(super::headers::trim_ows)
    }

    /// The stored `Last-Modified` (unix seconds), if present and valid.
    pub fn last_modified(&self) -> Option<u64> {
        self.headers.get_first("last-modified").and_then(|d| parse_http_date(d, self.response_time))
    }

    /// The current age (RFC 9111 4.2.3) at `now`; also the value for the `Age` header.
    pub fn current_age(&self, now: u64) -> Duration {
        current_age(self.date, self.age_value, self.request_time, self.response_time, now)
    }

    /// Whether the response is fresh at `now` (RFC 9111 4.2), ignoring request directives.
    pub fn is_fresh(&self, now: u64) -> bool {
        self.lifetime > self.current_age(now).as_secs() && !self.invalidated
    }

    /// Serialises into the versioned binary format described in the module doc.
    pub fn encode(&self) -> Vec<u8> {
        let hdr_bytes: usize = self.headers.iter().map(|(n, v)| n.len() + v.len() + 6).sum();
        let mut out = Vec::with_capacity(48 + hdr_bytes);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        let mut flags = 0;
        if self.invalidated {
            flags |= F_INVALIDATED;
        }
        if self.body_len.is_some() {
            flags |= F_BODY_LEN;
        }
        if self.vary.is_star() {
            flags |= F_VARY_STAR;
        }
        let field = self.targeted.as_deref().filter(|n| n.len() <= usize::from(u16::MAX));
        if field.is_some() {
            flags |= F_TARGETED;
        }
        out.push(flags);
        out.extend_from_slice(&self.status.to_le_bytes());
        for v in [self.request_time, self.response_time, self.lifetime, self.age_value] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(len) = self.body_len {
            out.extend_from_slice(&len.to_le_bytes());
        }
        if let Some(name) = field {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        // Entries too large for the length prefixes cannot come from a real response;
        // skipping them keeps encode infallible.
        let headers: Vec<&(Vec<u8>, Vec<u8>)> = self
            .headers
            .iter()
            .filter(|(n, v)| n.len() <= usize::from(u16::MAX) && u32::try_from(v.len()).is_ok())
            .collect();
        out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
        for (n, v) in headers {
            out.extend_from_slice(&(n.len() as u16).to_le_bytes());
            out.extend_from_slice(n);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        let entries: Vec<&(String, Option<Vec<u8>>)> = self
            .vary
            .entries()
            .iter()
            .filter(|(n, v)| {
                n.len() <= usize::from(u16::MAX)
                    && v.as_ref().is_none_or(|v| u32::try_from(v.len()).is_ok())
            })
            .take(usize::from(u16::MAX))
            .collect();
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        for (n, v) in entries {
            out.extend_from_slice(&(n.len() as u16).to_le_bytes());
            out.extend_from_slice(n.as_bytes());
            match v {
                None => out.push(0),
                Some(v) => {
                    out.push(1);
                    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    out.extend_from_slice(v);
                }
            }
        }
        out
    }

    /// Parses a blob written by [`StoredMeta::encode`]. Never panics on arbitrary input.
    pub fn decode(buf: &[u8]) -> Result<Self, MetaError> {
        let mut r = Reader { buf };
        if r.take(2)? != MAGIC {
            return Err(MetaError::BadMagic);
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(MetaError::UnsupportedVersion(version));
        }
        let flags = r.u8()?;
        if flags & !(F_INVALIDATED | F_BODY_LEN | F_VARY_STAR | F_TARGETED) != 0 {
            return Err(MetaError::Invalid("unknown flags"));
        }
        let status = u16::from_le_bytes(r.array()?);
        if !(100..=999).contains(&status) {
            return Err(MetaError::Invalid("status"));
        }
        let request_time = r.u64()?;
        let response_time = r.u64()?;
        let lifetime = r.u64()?;
        let age_value = r.u64()?;
        let body_len = if flags & F_BODY_LEN != 0 { Some(r.u64()?) } else { None };
        let field = if flags & F_TARGETED != 0 {
            let nl = usize::from(u16::from_le_bytes(r.array()?));
            let n = r.take(nl)?;
            if !is_token(n) || n.iter().any(u8::is_ascii_uppercase) {
                return Err(MetaError::Invalid("targeted field name"));
            }
            Some(String::from_utf8(n.to_vec()).map_err(|_| MetaError::Invalid("targeted"))?)
        } else {
            None
        };
        let n_headers = r.u32()? as usize;
        // Each header needs at least 6 bytes: bound the allocation by the input size.
        let mut headers = Vec::with_capacity(n_headers.min(r.buf.len() / 6));
        for _ in 0..n_headers {
            let nl = usize::from(u16::from_le_bytes(r.array()?));
            let n = r.take(nl)?;
            if !is_token(n) || n.iter().any(u8::is_ascii_uppercase) {
                return Err(MetaError::Invalid("header name"));
            }
            let vl = r.u32()? as usize;
            let v = r.take(vl)?;
            if !valid_value(v) {
                return Err(MetaError::Invalid("header value"));
            }
            headers.push((n.to_vec(), v.to_vec()));
        }
        let n_vary = usize::from(u16::from_le_bytes(r.array()?));
        let mut entries = Vec::with_capacity(n_vary.min(r.buf.len() / 3));
        for _ in 0..n_vary {
            let nl = usize::from(u16::from_le_bytes(r.array()?));
            let n = r.take(nl)?;
            if !is_token(n) || n.iter().any(u8::is_ascii_uppercase) {
                return Err(MetaError::Invalid("vary name"));
            }
            let name =
                String::from_utf8(n.to_vec()).map_err(|_| MetaError::Invalid("vary name"))?;
            let value = match r.u8()? {
                0 => None,
                1 => {
                    let vl = r.u32()? as usize;
                    Some(r.take(vl)?.to_vec())
                }
                _ => return Err(MetaError::Invalid("vary presence")),
            };
            entries.push((name, value));
        }
        if !r.buf.is_empty() {
            return Err(MetaError::TrailingBytes);
        }
        let mut meta = Self {
            status,
            headers,
            request_time,
            response_time,
            lifetime,
            age_value,
            body_len,
            invalidated: flags & F_INVALIDATED != 0,
            vary: VaryKey::from_parts(flags & F_VARY_STAR != 0, entries),
            targeted: field,
            cc: ResponseCacheControl::default(),
            date: 0,
        };
        meta.derive();
        Ok(meta)
    }
}

impl HeaderLookup for StoredMeta {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers.get_all(name)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MetaError> {
        if self.buf.len() < n {
            return Err(MetaError::Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], MetaError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, MetaError> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, MetaError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, MetaError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}
