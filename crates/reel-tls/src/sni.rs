//! Certificate selection by server name (SNI, RFC 6066 section 3): an exact name first,
//! then a one-label wildcard (`*.cdn.example.com` covers `a.cdn.example.com`, not
//! `a.b.cdn.example.com` nor `cdn.example.com`, RFC 6125 section 6.4.3), then the
//! listener's default certificate unless the listener is strict.

use std::collections::HashMap;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::cert::LoadedCert;

/// Picks the certificate of a handshake. Immutable; shared by every worker.
#[derive(Debug)]
pub struct SniResolver {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the domain after `*.`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
    strict: bool,
}

impl SniResolver {
    /// A resolver answering the names of `extra` and of `default` (the names listed by an
    /// `extra` certificate win), falling back to `default` unless `strict`.
    pub fn new(default: &LoadedCert, extra: &[Arc<LoadedCert>], strict: bool) -> SniResolver {
        let mut r = SniResolver {
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            default: default.certified.clone(),
            strict,
        };
        for c in std::iter::once(default).chain(extra.iter().map(|c| &**c)) {
            for n in &c.names {
                let n = n.trim_end_matches('.').to_ascii_lowercase();
                match n.strip_prefix("*.") {
                    Some(domain) => r.wildcard.insert(domain.to_owned(), c.certified.clone()),
                    None => r.exact.insert(n, c.certified.clone()),
                };
            }
        }
        r
    }

    /// The certificate configured for `name`, without the default fallback.
    fn lookup(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.');
        let lower;
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = name.to_ascii_lowercase();
            lower.as_str()
        } else {
            name
        };
        if let Some(c) = self.exact.get(name) {
            return Some(c);
        }
        let (_, parent) = name.split_once('.')?;
        self.wildcard.get(parent)
    }

    /// Whether some certificate lists `name` (a handshake without SNI knows none).
    pub fn knows(&self, name: Option<&str>) -> bool {
        name.is_some_and(|n| self.lookup(n).is_some())
    }

    /// Whether unknown names (and handshakes without SNI) are refused.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// The certificate a handshake for `name` gets; `None` = refuse the handshake.
    pub fn pick(&self, name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        match name.and_then(|n| self.lookup(n)) {
            Some(c) => Some(c.clone()),
            None if self.strict => None,
            None => Some(self.default.clone()),
        }
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cert::{CertSource, CertSpec, load};

    fn cert(names: &[&str], listed: &[&str]) -> Arc<LoadedCert> {
        let spec = CertSpec {
            source: CertSource::SelfSigned { names: names.iter().map(|s| s.to_string()).collect() },
            names: listed.iter().map(|s| s.to_string()).collect(),
            cert_key: "c".into(),
            key_key: "k".into(),
        };
        Arc::new(load(&spec).expect("load"))
    }

    #[test]
    fn exact_then_wildcard_then_default_unless_strict() {
        let default = cert(&["edge.example.net"], &[]);
        let video = cert(&["video.example.com"], &["Video.Example.com"]);
        let cdn = cert(&["*.cdn.example.com"], &["*.cdn.example.com"]);
        let exact_in_wild = cert(&["x.cdn.example.com"], &["x.cdn.example.com"]);
        let extra = vec![video.clone(), cdn.clone(), exact_in_wild.clone()];
        let r = SniResolver::new(&default, &extra, false);
        let is = |name: Option<&str>, c: &Arc<LoadedCert>| {
            r.pick(name).is_some_and(|k| Arc::ptr_eq(&k, &c.certified))
        };
        assert!(is(Some("video.example.com"), &video));
        assert!(is(Some("VIDEO.example.com."), &video));
        assert!(is(Some("a.cdn.example.com"), &cdn));
        assert!(is(Some("x.cdn.example.com"), &exact_in_wild));
        assert!(is(Some("a.b.cdn.example.com"), &default));
        assert!(is(Some("cdn.example.com"), &default));
        assert!(is(Some("edge.example.net"), &default));
        assert!(is(None, &default));
        assert!(r.knows(Some("edge.example.net")) && r.knows(Some("q.cdn.example.com")));
        assert!(!r.knows(Some("other.org")) && !r.knows(None));

        let strict = SniResolver::new(&default, &extra, true);
        assert!(strict.pick(Some("other.org")).is_none());
        assert!(strict.pick(None).is_none());
        assert!(strict.pick(Some("edge.example.net")).is_some());
        assert!(strict.pick(Some("a.cdn.example.com")).is_some());
    }
}
