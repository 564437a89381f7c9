//! Signed viewer tokens in the Akamai EdgeAuth 2.0 format, as Akamai's published token
//! generators make them: `[ip=ADDR~][st=START~]exp=END~acl=PATTERN[!PATTERN...][~id=..]
//! [~data=..]~hmac=HEX` (an ACL token) or the same without `acl=` (a URL token, whose HMAC
//! also covers `~url=PATH`, a field the token does not carry). The HMAC is HMAC-SHA256 of
//! the fields before `~hmac=` exactly as they appear in the token, then `~url=` for a URL
//! token, then `~salt=SALT` when the site has a salt.
//!
//! Pure: the caller gives the time and the request's path and address; nothing here reads
//! a clock, the environment or a socket. The HMAC comparison takes the same time whatever
//! the bytes (`subtle`), and several keys may be accepted at once so that a key rolls over
//! without refusing a viewer whose token was made with the one before.
//!
//! - `fields`: splitting a token into its fields.
//! - [`acl`]: the ACL's `*` patterns.
//! - [`pct`]: percent-decoding of a token sent escaped, the generator's `escape_early`.

pub mod acl;
mod fields;
pub mod pct;
pub mod redact;

#[cfg(test)]
mod tests;

use std::net::IpAddr;

use ring::hmac;
use subtle::ConstantTimeEq;

use crate::DenyReason;
use fields::Fields;
use pct::hex_val;

/// Length of an HMAC-SHA256 in bytes (the token carries twice as many hex digits).
pub const HMAC_LEN: usize = 32;

/// A key that is not usable to verify tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not an even number of hex digits (the generators take the key as hex).
    #[error("not a hex string (an even number of 0-9a-f digits)")]
    NotHex,
    /// Fewer than 16 bytes (32 hex digits).
    #[error("shorter than 16 bytes (32 hex digits)")]
    TooShort,
}

/// Decodes a key given as hex, as the generators take it (`EdgeAuth(key=HEX)`).
pub fn parse_hex_key(s: &str) -> Result<Vec<u8>, KeyError> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) || s.is_empty() {
        return Err(KeyError::NotHex);
    }
    let key = hex_bytes(s.as_bytes()).ok_or(KeyError::NotHex)?;
    if key.len() < 16 {
        return Err(KeyError::TooShort);
    }
    Ok(key)
}

fn hex_bytes(s: &[u8]) -> Option<Vec<u8>> {
    s.chunks_exact(2).map(|p| Some(hex_val(p[0])? << 4 | hex_val(p[1])?)).collect()
}

/// How a site verifies tokens: its keys (any one may have signed), salt, leeway and
/// whether URL tokens hash their URL escaped.
pub struct Verifier {
    keys: Vec<hmac::Key>,
    salt: Option<Box<[u8]>>,
    leeway: u64,
    escape_early: bool,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys.
        f.debug_struct("Verifier")
            .field("keys", &self.keys.len())
            .field("salt", &self.salt.is_some())
            .field("leeway", &self.leeway)
            .field("escape_early", &self.escape_early)
            .finish()
    }
}

/// What the request being checked is: its path (without the query), the client's address
/// and the time (Unix seconds).
#[derive(Debug, Clone, Copy)]
pub struct Presented<'a> {
    /// The request's path, as received, without the query.
    pub path: &'a str,
    /// The client's address (`ip=` binds a token to it).
    pub client: IpAddr,
    /// Now, in Unix seconds.
    pub now: u64,
}

/// A token that verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Valid {
    /// The token's HMAC: a stable identity of the token, cheap to key on (rate limits).
    pub identity: [u8; HMAC_LEN],
    /// Whether it is an ACL token (a URL token names one URL and no path to scope a
    /// cookie to).
    pub has_acl: bool,
}

impl Verifier {
    /// A verifier accepting tokens signed with any of `keys` (raw bytes, not hex),
    /// `salt` appended to what is signed when set, `leeway` seconds of clock skew allowed
    /// on `st` and `exp`, and URL tokens hashing their URL escaped when `escape_early`.
    pub fn new(keys: &[Vec<u8>], salt: Option<&str>, leeway: u64, escape_early: bool) -> Self {
        Verifier {
            keys: keys.iter().map(|k| hmac::Key::new(hmac::HMAC_SHA256, k)).collect(),
            salt: salt.map(|s| s.as_bytes().into()),
            leeway,
            escape_early,
        }
    }

    /// Verifies `token` (as the generator made it: already percent-decoded if it came
    /// escaped) for the request `req`. The reasons are checked in this order: the token's
    /// shape, its HMAC, its times, its ACL or URL, its address.
    pub fn verify(&self, token: &str, req: Presented<'_>) -> Result<Valid, DenyReason> {
        let f = Fields::parse(token).ok_or(DenyReason::TokenMalformed)?;
        let mut given = [0u8; HMAC_LEN];
        if f.hmac.len() != 2 * HMAC_LEN {
            return Err(DenyReason::TokenMalformed);
        }
        for (out, pair) in given.iter_mut().zip(f.hmac.as_bytes().chunks_exact(2)) {
            let (Some(h), Some(l)) = (hex_val(pair[0]), hex_val(pair[1])) else {
                return Err(DenyReason::TokenMalformed);
            };
            *out = h << 4 | l;
        }
        if !self.keys.iter().any(|k| self.signs(k, &f, req.path, &given)) {
            return Err(DenyReason::TokenBadHmac);
        }
        if let Some(st) = f.st
            && st > req.now.saturating_add(self.leeway)
        {
            return Err(DenyReason::TokenNotYetValid);
        }
        if req.now > f.exp.saturating_add(self.leeway) {
            return Err(DenyReason::TokenExpired);
        }
        if let Some(acl) = f.acl
            && !acl::allows(acl, req.path)
        {
            return Err(DenyReason::TokenAcl);
        }
        if let Some(ip) = f.ip
            && !same_address(ip, req.client)
        {
            return Err(DenyReason::TokenIp);
        }
        Ok(Valid { identity: given, has_acl: f.acl.is_some() })
    }

    /// Whether `key` signed the token's fields (and, for a URL token, `path`).
    fn signs(&self, key: &hmac::Key, f: &Fields<'_>, path: &str, given: &[u8; HMAC_LEN]) -> bool {
        let mut cx = hmac::Context::with_key(key);
        cx.update(f.signed.as_bytes());
        if f.acl.is_none() {
            cx.update(b"~url=");
            if self.escape_early {
                // The generator was given the path unescaped, and escaped it itself.
                let Some(plain) = pct::decode(path) else { return false };
                pct::quote_plus_lower(plain.as_bytes(), |run| cx.update(run));
            } else {
                cx.update(path.as_bytes());
            }
        }
        if let Some(salt) = &self.salt {
            cx.update(b"~salt=");
            cx.update(salt);
        }
        cx.sign().as_ref().ct_eq(given).into()
    }
}

/// Whether the token's `ip=` field names `client` (an IPv4 client reached over an IPv6
/// socket, `::ffff:a.b.c.d`, is its IPv4 address).
fn same_address(field: &str, client: IpAddr) -> bool {
    let decoded = pct::decode(field);
    let Some(text) = decoded.as_deref() else { return false };
    let Ok(ip) = text.parse::<IpAddr>() else { return false };
    canonical(ip) == canonical(client)
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The path a cookie carrying `token` is scoped to: its ACL's first pattern up to the
/// first `*`, cut back to the last `/` (cookie paths match whole segments). `None` for a
/// URL token or an ACL that does not start with `/`.
pub fn cookie_path(token: &str) -> Option<&str> {
    let acl = Fields::parse(token)?.acl?;
    let first = acl.split('!').next()?;
    let upto = first.split('*').next()?;
    let cut = upto.rfind('/')?;
    upto.get(..=cut).filter(|p| p.starts_with('/'))
}
