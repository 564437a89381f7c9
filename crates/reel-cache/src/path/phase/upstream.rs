//! The origin requests the cache path sends: the target and the client's fields each kind
//! of request carries (a pass-through for one client, a fill led by one, a fill on
//! everyone's behalf), with reel's own `X-Forwarded-For` and `CDN-Loop`.

use std::borrow::Cow;

use http::{HeaderMap, HeaderName, HeaderValue, uri::PathAndQuery};
use reel_http::Request;
use reel_origin::{OriginRequest, Requester};

use crate::key::{CacheKey, KeyConfig};
use crate::path::worker::hops::Node;
use crate::path::worker::settings::Settings;
use crate::policy::conditional;
use crate::policy::meta::StoredMeta;

/// Request fields that belong to one viewer: a fetch made on everyone's behalf (a
/// background refresh) does not send them to the origin.
pub(in crate::path) const PER_VIEWER: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// The request target in origin-form: as received, or for an absolute-form target its
/// path and query (RFC 9112 3.2.2: the authority replaced Host).
pub(in crate::path) fn origin_form(req: &Request) -> Cow<'_, str> {
    let t = req.target();
    if t.starts_with('/') {
        return Cow::Borrowed(t);
    }
    match req.query() {
        Some(q) => Cow::Owned(format!("{}?{q}", req.path())),
        None => Cow::Borrowed(req.path()),
    }
}

/// The target the origin is asked for: the request's, normalised exactly as its cache
/// key is ([`crate::key::origin_target`]), so the origin's answer is stored under the
/// key of the resource it describes and no `..` is ever forwarded. `None`: not a
/// target we can key (the client gets 400).
pub(in crate::path) fn origin_path(req: &Request) -> Option<PathAndQuery> {
    let t = crate::key::origin_target(origin_form(req).as_bytes()).ok()?;
    PathAndQuery::try_from(t).ok()
}

/// What an origin request is for, which decides the client fields it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::path) enum Forward {
    /// Forwarded for this client alone: its fields go along.
    Pass,
    /// A fill led by this client: the whole representation, whatever its range or
    /// conditionals.
    Fill,
    /// A fill on everyone's behalf (background refresh): as [`Forward::Fill`], and
    /// without the viewer's credentials and cookies ([`PER_VIEWER`]).
    SharedFill,
}

/// The client's header fields for the origin: without Host (the origin client sets it)
/// and without the client's hop-by-hop fields (RFC 9110 7.6.1: `Connection`, what it
/// lists, and the fixed ones). For fills, also without the fields that would make the
/// origin answer something other than the whole representation, and without the fields
/// [`fill_drops`] names (`[cache] fill_drop_headers`: host, path, scheme and method
/// overrides, in any spelling; any name with `_`). Then reel's own
/// `X-Forwarded-For` and `CDN-Loop` (what came in, then our entry, RFC 8586): added after
/// the client's `Connection` list was applied and never dropped, so no client can have
/// them stripped.
pub(in crate::path) fn forward_headers(
    req: &Request,
    why: Forward,
    drop: &[String],
    node: &Node,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case("host") || n.eq_ignore_ascii_case("cdn-loop") {
            continue;
        }
        if why != Forward::Pass {
            let lower = n.to_ascii_lowercase();
            if lower == "range"
                || lower.starts_with("if-")
                || lower == "cache-control"
                || lower == "pragma"
                || (why == Forward::SharedFill && PER_VIEWER.contains(&lower.as_str()))
                || fill_drops(n, drop)
            {
                continue;
            }
        }
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(n.as_bytes()), HeaderValue::from_bytes(v))
        {
            h.append(name, value);
        }
    }
    reel_origin::strip_hop_by_hop(&mut h);
    // Our entry is who handed us the request (the connection's client), after what came
    // in: not `peer()`, which a trusted proxy's entries may have named.
    let ip = req.connection_client().ip().to_string();
    if let Ok(v) = HeaderValue::from_str(&ip) {
        h.append("x-forwarded-for", v);
    }
    h.insert("cdn-loop", node.cdn_loop(req));
    h
}

/// Whether a fill leaves out the client field `name`, given `drop` (`[cache]
/// fill_drop_headers`). Gateways in front of many origin frameworks (CGI, WSGI: Django's
/// `X-Forwarded-Host` support, wsgiref) turn `_` in a field name into `-`, so
/// `X_Forwarded_Host` would reach them as `X-Forwarded-Host`: names are compared with
/// `_` folded to `-` and ASCII case folded, and, as nginx does by default
/// (`underscores_in_headers off`), a name with `_` in it is never sent on a fill at all.
pub(in crate::path) fn fill_drops(name: &str, drop: &[String]) -> bool {
    name.contains('_') || drop.iter().any(|d| same_field_name(d, name))
}

/// Whether `a` and `b` name the same field for a gateway that folds `_` to `-`.
fn same_field_name(a: &str, b: &str) -> bool {
    let fold = |c: u8| if c == b'_' { b'-' } else { c.to_ascii_lowercase() };
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| fold(x) == fold(y))
}

/// The origin request for a fill of `key`: the Host the key names, the client's headers
/// as [`forward_headers`] keeps them for `why`, plus our validators when revalidating
/// `stale`.
pub(in crate::path) fn fill_request(
    req: &Request,
    key: &CacheKey,
    why: Forward,
    stale: Option<&StoredMeta>,
    settings: &Settings,
) -> Option<OriginRequest> {
    let pq = origin_path(req)?;
    let mut headers = forward_headers(req, why, &settings.fill_drop_headers, &settings.node);
    if let Some(meta) = stale {
        for (n, v) in conditional::revalidation_headers(meta) {
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                headers.insert(n, v);
            }
        }
    }
    let mut o = OriginRequest::get(pq, String::from_utf8_lossy(key.host()));
    o.headers = headers;
    o.from = Requester::Viewer(req.peer().ip());
    Some(o)
}

/// Whether `key` leaves out query parameters the origin is sent for `req` (`drop_query`,
/// `ignore_query`). The origin then answers for a query that other viewers of the key do
/// not send: a 404 to one viewer's junk token says nothing about another's valid one.
pub(in crate::path) fn key_omits_query(req: &Request, key: &CacheKey) -> bool {
    let full = CacheKey::build(key.host(), origin_form(req).as_bytes(), &KeyConfig::default());
    full.map_or(true, |f| f != *key)
}

/// The viewer's fields a fill does not send: the configured drops and any name with `_`
/// ([`fill_drops`]), and for a shared fill the viewer's credentials and cookies
/// ([`PER_VIEWER`]).
#[derive(Clone, Copy)]
pub(in crate::path) struct Withheld<'a> {
    /// `[cache] fill_drop_headers`, lowercase.
    pub dropped: &'a [String],
    /// Whether [`PER_VIEWER`] is withheld too.
    pub per_viewer: bool,
}

impl Withheld<'_> {
    pub(in crate::path) fn contains(&self, name: &str) -> bool {
        (self.per_viewer && PER_VIEWER.contains(&name)) || fill_drops(name, self.dropped)
    }
}
