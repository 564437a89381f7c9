//! CORS (the Fetch standard's "CORS protocol") as pure decisions: which origins a site's
//! `[site.cors]` allows, what a preflight is answered, and the field values that go with
//! them, rendered once per config generation so that a response only clones them.
//!
//! Only GET and HEAD are ever allowed: an edge cache serves reads, and a preflight for
//! anything else is answered without the allow fields (the browser then refuses).

use bytes::Bytes;
use reel_config::{AllowOrigins, CorsConfig};

/// `Access-Control-Allow-Methods` of an allowed preflight.
pub const ALLOW_METHODS: &[u8] = b"GET, HEAD";

/// One site's CORS settings, ready to answer with.
#[derive(Debug, Clone)]
pub struct Cors {
    origins: Origins,
    credentials: bool,
    /// Lowercase names a preflight may ask for; `None` = any (`"*"`).
    allow_headers: Option<Vec<String>>,
    /// `Access-Control-Allow-Headers` of an allowed preflight (`None`: the list is empty).
    allow_headers_value: Option<Bytes>,
    /// `Access-Control-Expose-Headers` (`None`: the list is empty).
    expose: Option<Bytes>,
    /// `Access-Control-Max-Age`, in seconds.
    max_age: Bytes,
}

#[derive(Debug, Clone)]
enum Origins {
    Any,
    List(Vec<OriginPattern>),
}

/// An `allow_origins` entry.
#[derive(Debug, Clone)]
enum OriginPattern {
    /// This origin exactly (kept as the value to echo, so an exact match copies nothing).
    Exact(Bytes),
    /// `scheme://*.domain[:port]`: `prefix` is `scheme://`, `suffix` `.domain`, `port`
    /// `:port` or empty.
    Subdomains { prefix: String, suffix: String, port: String },
}

impl OriginPattern {
    fn parse(o: &str) -> OriginPattern {
        let Some((scheme, rest)) = o.split_once("://") else {
            return OriginPattern::Exact(Bytes::copy_from_slice(o.as_bytes()));
        };
        match rest.strip_prefix('*') {
            Some(tail) if tail.starts_with('.') => {
                let (suffix, port) = match tail.rfind(':') {
                    Some(i) => (&tail[..i], &tail[i..]),
                    None => (tail, ""),
                };
                OriginPattern::Subdomains {
                    prefix: format!("{scheme}://"),
                    suffix: suffix.to_owned(),
                    port: port.to_owned(),
                }
            }
            _ => OriginPattern::Exact(Bytes::copy_from_slice(o.as_bytes())),
        }
    }

    /// The value to echo when `origin` matches.
    fn echo(&self, origin: &[u8]) -> Option<Bytes> {
        match self {
            OriginPattern::Exact(b) => (b[..] == *origin).then(|| b.clone()),
            OriginPattern::Subdomains { prefix, suffix, port } => {
                let rest = origin.strip_prefix(prefix.as_bytes())?;
                let host = rest.strip_suffix(port.as_bytes())?;
                let sub = host.strip_suffix(suffix.as_bytes())?;
                // One label or more before the domain, and no port the pattern has not got.
                let ok = !sub.is_empty()
                    && !sub.starts_with(b".")
                    && sub.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
                ok.then(|| Bytes::copy_from_slice(origin))
            }
        }
    }
}

/// What a preflight is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preflight {
    /// Allowed: the `Access-Control-Allow-Origin` value to send with the allow fields.
    Allowed(Bytes),
    /// The origin, method or a requested field is not allowed: no allow fields.
    Refused,
}

impl Cors {
    /// The settings of `[site.cors]` (validated: field names are tokens, origins as
    /// browsers send them).
    pub fn new(c: &CorsConfig) -> Cors {
        let origins = match &c.allow_origins {
            AllowOrigins::Any => Origins::Any,
            AllowOrigins::List(l) => {
                Origins::List(l.iter().map(|o| OriginPattern::parse(o)).collect())
            }
        };
        let allow_headers = (!c.allow_headers.iter().any(|h| h == "*"))
            .then(|| c.allow_headers.iter().map(|h| h.to_ascii_lowercase()).collect::<Vec<_>>());
        let joined = |l: &[String]| (!l.is_empty()).then(|| Bytes::from(l.join(", ")));
        Cors {
            origins,
            credentials: c.allow_credentials,
            allow_headers_value: allow_headers.as_deref().and_then(joined),
            allow_headers,
            expose: joined(&c.expose_headers),
            max_age: Bytes::from(c.max_age.get().as_secs().to_string()),
        }
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, if it may read
    /// the response: `*` for any origin without credentials, else the origin itself.
    pub fn allow(&self, origin: &[u8]) -> Option<Bytes> {
        match &self.origins {
            Origins::Any if !self.credentials => Some(Bytes::from_static(b"*")),
            Origins::Any => Some(Bytes::copy_from_slice(origin)),
            Origins::List(l) => l.iter().find_map(|p| p.echo(origin)),
        }
    }

    /// Whether responses differ by the request's `Origin` (so they carry `Vary: Origin`):
    /// always, except for `"*"` without credentials.
    pub fn varies(&self) -> bool {
        !matches!(self.origins, Origins::Any) || self.credentials
    }

    /// Whether `Access-Control-Allow-Credentials: true` goes with allowed responses.
    pub fn credentials(&self) -> bool {
        self.credentials
    }

    /// `Access-Control-Expose-Headers`, unless the list is empty.
    pub fn expose(&self) -> Option<&Bytes> {
        self.expose.as_ref()
    }

    /// `Access-Control-Allow-Headers` of an allowed preflight: the configured list, or the
    /// fields asked for when any is allowed.
    pub fn allow_headers_for(&self, requested: Option<&[u8]>) -> Option<Bytes> {
        match &self.allow_headers_value {
            Some(v) => Some(v.clone()),
            None if self.allow_headers.is_none() => {
                requested.filter(|r| !r.is_empty()).map(Bytes::copy_from_slice)
            }
            None => None,
        }
    }

    /// `Access-Control-Max-Age`.
    pub fn max_age(&self) -> &Bytes {
        &self.max_age
    }

    /// The answer to a preflight from `origin` for `method`
    /// (`Access-Control-Request-Method`) with the fields `requested`
    /// (`Access-Control-Request-Headers`, a comma-separated list).
    pub fn preflight(&self, origin: &[u8], method: &[u8], requested: Option<&[u8]>) -> Preflight {
        // Methods are case-sensitive; browsers send these two uppercased.
        if method != b"GET" && method != b"HEAD" {
            return Preflight::Refused;
        }
        if let (Some(allowed), Some(req)) = (&self.allow_headers, requested) {
            let all = req
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
                .filter(|n| !n.is_empty())
                .all(|n| allowed.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(n)));
            if !all {
                return Preflight::Refused;
            }
        }
        match self.allow(origin) {
            Some(v) => Preflight::Allowed(v),
            None => Preflight::Refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors(origins: AllowOrigins, credentials: bool) -> Cors {
        Cors::new(&CorsConfig {
            allow_origins: origins,
            allow_credentials: credentials,
            allow_headers: reel_config::DEFAULT_CORS_ALLOW_HEADERS.map(String::from).to_vec(),
            expose_headers: vec!["Cache-Status".into(), "Content-Range".into()],
            max_age: reel_config::Duration::from_secs(600),
        })
    }

    fn list(l: &[&str]) -> AllowOrigins {
        AllowOrigins::List(l.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn listed_origins_are_echoed_and_others_refused() {
        let c = cors(list(&["https://player.example.com", "http://localhost:8000"]), false);
        let echo = c.allow(b"https://player.example.com").unwrap();
        assert_eq!(&echo[..], b"https://player.example.com");
        assert!(c.allow(b"http://localhost:8000").is_some());
        for no in [
            &b"https://evil.example"[..],
            b"http://player.example.com",
            b"http://localhost:8001",
            b"null",
            b"",
        ] {
            assert!(c.allow(no).is_none(), "{}", String::from_utf8_lossy(no));
        }
        assert!(c.varies());
        assert_eq!(c.expose().map(|b| &b[..]), Some(&b"Cache-Status, Content-Range"[..]));
        assert_eq!(&c.max_age()[..], b"600");
    }

    #[test]
    fn subdomain_patterns_match_one_level_or_more_on_the_same_scheme_and_port() {
        let c = cors(list(&["https://*.example.com", "http://*.dev.test:8080"]), false);
        assert!(c.allow(b"https://a.example.com").is_some());
        assert!(c.allow(b"https://a.b.example.com").is_some());
        assert!(c.allow(b"http://x.dev.test:8080").is_some());
        for no in [
            &b"https://example.com"[..],
            b"https://.example.com",
            b"http://a.example.com",
            b"https://a.example.com:8443",
            b"https://aexample.com",
            b"https://a.example.com.evil.test",
            b"http://x.dev.test",
            b"http://x.dev.test:80801",
        ] {
            assert!(c.allow(no).is_none(), "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn any_origin_is_a_star_without_vary_unless_credentials() {
        let c = cors(AllowOrigins::Any, false);
        assert_eq!(&c.allow(b"https://x.test").unwrap()[..], b"*");
        assert!(!c.varies());
        let c = cors(AllowOrigins::Any, true);
        assert_eq!(&c.allow(b"https://x.test").unwrap()[..], b"https://x.test");
        assert!(c.varies() && c.credentials());
    }

    #[test]
    fn preflights_allow_get_and_head_with_listed_fields_only() {
        let c = cors(list(&["https://p.test"]), false);
        let ok = Preflight::Allowed(Bytes::from_static(b"https://p.test"));
        assert_eq!(c.preflight(b"https://p.test", b"GET", Some(b"cmcd-request, range")), ok);
        assert_eq!(c.preflight(b"https://p.test", b"HEAD", None), ok);
        assert_eq!(c.preflight(b"https://p.test", b"GET", Some(b"CMCD-Session,CMCD-Object")), ok);
        assert_eq!(c.preflight(b"https://p.test", b"POST", None), Preflight::Refused);
        assert_eq!(c.preflight(b"https://p.test", b"get", None), Preflight::Refused);
        assert_eq!(c.preflight(b"https://p.test", b"GET", Some(b"x-token")), Preflight::Refused);
        assert_eq!(c.preflight(b"https://q.test", b"GET", None), Preflight::Refused);
        let v = c.allow_headers_for(Some(b"range")).unwrap();
        assert_eq!(&v[..], b"range, cmcd-request, cmcd-object, cmcd-session, cmcd-status");
    }

    #[test]
    fn a_star_in_allow_headers_allows_and_echoes_any_field() {
        let mut cfg = CorsConfig {
            allow_origins: AllowOrigins::Any,
            allow_credentials: false,
            allow_headers: vec!["*".into()],
            expose_headers: Vec::new(),
            max_age: reel_config::Duration::from_secs(1),
        };
        let c = Cors::new(&cfg);
        assert!(matches!(
            c.preflight(b"https://p.test", b"GET", Some(b"x-anything")),
            Preflight::Allowed(_)
        ));
        assert_eq!(&c.allow_headers_for(Some(b"x-anything")).unwrap()[..], b"x-anything");
        assert!(c.expose().is_none());
        cfg.allow_headers.clear();
        let c = Cors::new(&cfg);
        assert_eq!(c.preflight(b"https://p.test", b"GET", Some(b"range")), Preflight::Refused);
        assert!(c.allow_headers_for(None).is_none());
    }
}
