//! `[cache]`, its `[[cache.rule]]` path rules, and `[[site]]`: what is cached, for how
//! long, under which key, per site.

use super::*;

/// A path pattern for `[[cache.rule]]`: `*` matches any run of characters (including `/`
/// and the empty run); every other character matches itself. Matching is against the request
/// path without the query string and is case-sensitive. Examples: `"*.m3u8"`, `"/live/*"`,
/// `"/vod/*/init.mp4"`. The cache compiles and matches it (`reel-cache`'s `policy::rules`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PathGlob(pub String);

impl PathGlob {
    /// The pattern text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `[[cache.rule]]`: a per-path freshness override; the first matching rule wins.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheRule {
    /// Path pattern (see [`PathGlob`]); must start with `/` or `*`. TOML key `match`. Required.
    #[serde(rename = "match")]
    pub pattern: PathGlob,
    /// Freshness lifetime given to matching responses. Duration; required; `"0s"` = stored
    /// but always stale (every request revalidates).
    pub ttl: Duration,
    /// `false`: `ttl` applies only when the origin gave no explicit freshness
    /// (Cache-Control max-age/s-maxage or Expires). `true`: `ttl` replaces the origin's
    /// freshness. TOML key `override`. Default `false`.
    #[serde(rename = "override", default)]
    pub override_origin: bool,
}

/// `[cache]`: RFC 9111 caching policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Use RFC 9111 §4.2.2 heuristic freshness (10% of the time since Last-Modified,
    /// capped by `heuristic_max`) for heuristically cacheable responses with no explicit
    /// freshness, as Squid and Traffic Server do. A site can switch it off. Default `true`.
    pub heuristic_freshness: bool,
    /// Upper bound of a heuristic freshness lifetime. Duration; default `"1h"`.
    pub heuristic_max: Duration,
    /// Freshness of 404/410 responses that carry no explicit freshness; `"0s"` = do not cache
    /// them. Duration; default `"10s"`.
    pub negative_ttl: Duration,
    /// Store responses that have neither ETag nor Last-Modified (they can only be refetched,
    /// never revalidated). Default `false`.
    pub store_without_validators: bool,
    /// Stale-while-revalidate window (RFC 5861 §3) applied when the origin sends none;
    /// `"0s"` = none. Duration; default `"0s"`.
    pub stale_while_revalidate_default: Duration,
    /// RFC 9213 targeted cache-control fields obeyed instead of `Cache-Control` and
    /// `Expires`, highest precedence first: the first one present with a valid value wins.
    /// Field names; default `["Reel-Cache-Control", "CDN-Cache-Control"]`; `[]` = obey
    /// `Cache-Control` only.
    pub targeted_cache_control: Vec<String>,
    /// How long a request waits for another request's origin fetch of the same object to
    /// get its response (coalescing) before it fetches on its own, uncached; LL-HLS blocking
    /// requests wait `blocking_timeout` instead. Duration; default `"10s"` (the default
    /// `first_byte_timeout`); greater than 0.
    pub lock_timeout: Duration,
    /// Requests of one client connection that may wait on the origin at once (misses it
    /// leads, requests it passes through); more wait their turn up to `lock_timeout`, then
    /// get 503. Count, at least 1; default 32.
    pub max_misses_per_connection: u32,
    /// How long an LL-HLS blocking request waits (draft-pantos-hls-rfc8216bis §6.2.5.2,
    /// §6.2.6): a playlist reload with `_HLS_msn`, or a request for a part a playlist hints
    /// (`EXT-X-PRELOAD-HINT`), both of which the origin holds until the media exists. It
    /// bounds the one origin request for such a target instead of the origin group's
    /// `first_byte_timeout`, and the requests coalesced onto it instead of `lock_timeout`;
    /// then they get 504. Duration; default `"10s"` (above a realistic origin's p99.99 of
    /// about 6 s plus a part, as the default `first_byte_timeout`); greater than 0.
    pub blocking_timeout: Duration,
    /// Longest time one fill may take, from its origin request to the end of the body: a
    /// dripping origin cannot hold a key (and its waiting viewers) for longer. On expiry
    /// the fill is discarded, never stored short. Duration; default `"10m"`.
    pub fill_timeout: Duration,
    /// Most `Vary` variants stored per URL. A response for a further variant is stored in
    /// place of the URL's oldest variant. Count, 1-1024; default 32.
    pub max_variants: u32,
    /// Request header fields never sent to the origin on fills (fetches whose response may
    /// be stored and served to everyone): fields that make origins or their frameworks
    /// answer for another host, path, scheme or method, so one viewer could poison the
    /// shared copy. Requests passed through uncached keep them. Field names, compared
    /// case-insensitively with `_` and `-` alike (gateways such as CGI and WSGI map `_` to
    /// `-`); fields with `_` in their name are never sent on fills, listed or not;
    /// default [`DEFAULT_FILL_DROP_HEADERS`]; `[]` = forward every other field.
    pub fill_drop_headers: Vec<String>,
    /// Most read-ahead slice fetches (`[[site]].read_ahead`) in flight per worker; further
    /// read-ahead is skipped until some finish. 0 turns read-ahead off everywhere.
    /// Count, at most 4096; default 64.
    pub read_ahead_per_worker: u32,
    /// Bytes of compressed representations (`[site.compress]`) kept in memory, all workers
    /// together; the oldest go first. `"0B"` keeps none, so nothing is compressed. Default
    /// `"32MiB"`.
    pub compressed_memory: ByteSize,
    /// Per-path overrides, tried in order. Default: none.
    pub rule: Vec<CacheRule>,
}

/// The default of `[cache] fill_drop_headers`: host, path, scheme and method override
/// fields known to be honoured by origin servers and web frameworks.
pub const DEFAULT_FILL_DROP_HEADERS: [&str; 21] = [
    "Forwarded",
    "X-Forwarded-Host",
    "X-Forwarded-Server",
    "X-Forwarded-Proto",
    "X-Forwarded-Scheme",
    "X-Forwarded-Protocol",
    "X-Forwarded-Ssl",
    "X-Url-Scheme",
    "Front-End-Https",
    "X-Forwarded-Port",
    "X-Forwarded-Prefix",
    "X-Forwarded-Uri",
    "X-Original-URL",
    "X-Original-URI",
    "X-Original-Host",
    "X-Rewrite-URL",
    "X-Host",
    "X-HTTP-Method-Override",
    "X-HTTP-Method",
    "X-Method-Override",
    "X-Envoy-Original-Path",
];

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            heuristic_freshness: true,
            heuristic_max: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(10),
            store_without_validators: false,
            stale_while_revalidate_default: Duration::ZERO,
            targeted_cache_control: vec![
                "Reel-Cache-Control".to_string(),
                "CDN-Cache-Control".to_string(),
            ],
            lock_timeout: Duration::from_secs(10),
            max_misses_per_connection: 32,
            fill_timeout: Duration::from_secs(600),
            blocking_timeout: Duration::from_secs(10),
            max_variants: 32,
            fill_drop_headers: DEFAULT_FILL_DROP_HEADERS.iter().map(|s| s.to_string()).collect(),
            read_ahead_per_worker: 64,
            compressed_memory: ByteSize::mib(32),
            rule: Vec::new(),
        }
    }
}

/// What to do with request methods other than GET and HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MethodsPolicy {
    /// Forward them to the origin uncached, extension methods included; TRACE and CONNECT
    /// are never forwarded.
    #[default]
    Pass,
    /// Answer 405 Method Not Allowed.
    Refuse,
}

/// Which unsafe methods invalidate stored responses (RFC 9111 §4.4) when the origin
/// answers them 2xx or 3xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InvalidateOn {
    /// The standard unsafe methods only: POST, PUT, DELETE and PATCH. An extension method
    /// (`PURGEME`, any token) an origin happens to answer 2xx invalidates nothing, so a
    /// viewer cannot empty the cache with one.
    #[default]
    Standard,
    /// Every unsafe method, extension methods included (any method but GET, HEAD,
    /// OPTIONS and TRACE).
    All,
}

/// `[[site]]`: a set of Host names served from one origin group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// The site's name: the value of the `site` label of its metrics (`/metrics`). 1 to 64
    /// characters of letters, digits, `.`, `-`, `_` and `:`, not starting with `_`
    /// (reserved for `_none`), unique among sites. Default: the first of `hosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Host header values served: exact names (`"live.example.com"`, `"127.0.0.1"`,
    /// `"[::1]"`), `"*.example.com"` (any name ending in `.example.com`, not
    /// `example.com` itself) or `"*"`, the catch-all: every Host no other site names (at
    /// most one site has it). Case-insensitive; the request's port is ignored, so entries
    /// carry no port. Required, non-empty.
    pub hosts: Vec<String>,
    /// Name of the `[[origin_group]]` that serves misses. Required.
    pub origin_group: String,
    /// Query parameters removed from the cache key (and kept on the origin request).
    /// Default `[]`.
    #[serde(default)]
    pub ignore_query: Vec<String>,
    /// Remove the whole query string from the cache key (tokenised segment URLs). Default
    /// `false`. Whenever the key leaves out parameters the origin is sent (this, or
    /// `ignore_query`), error answers (400 and above) are not stored: negative caching is
    /// off for such requests.
    #[serde(default)]
    pub drop_query: bool,
    /// `[site.key]`: which query parameters the cache key keeps or drops by name.
    #[serde(default)]
    pub key: SiteKeyConfig,
    /// `pass` or `refuse`. Default `pass`.
    #[serde(default)]
    pub methods: MethodsPolicy,
    /// Which passed-through methods invalidate what is stored for their URL when the
    /// origin answers 2xx or 3xx: `standard` (POST, PUT, DELETE, PATCH) or `all` (every
    /// method but GET, HEAD, OPTIONS and TRACE, extension methods included). Default
    /// `standard`.
    #[serde(default)]
    pub invalidate_on: InvalidateOn,
    /// Heuristic freshness for this site; unset = `[cache] heuristic_freshness`.
    #[serde(default)]
    pub heuristic_freshness: Option<bool>,
    /// Store responses that carry `Set-Cookie` or `Set-Cookie2` (handled alike). Those
    /// fields themselves are never stored, so no viewer ever receives another's cookie
    /// (not even the viewer whose request filled the cache). Default `false`: such
    /// responses pass uncached.
    #[serde(default)]
    pub store_set_cookie: bool,
    /// `honor`: request `Cache-Control` / `Pragma` (`no-cache`, `no-store`, `max-age`...)
    /// act as RFC 9111 §5.2.1 describes. `ignore`: they are ignored, as CDNs do for
    /// segments, so viewers cannot force origin fetches. Default `honor`.
    #[serde(default)]
    pub client_cache_control: ClientCacheControl,
    /// `"off"`: objects are fetched and stored whole. A size (`"2MiB"`): every GET or HEAD
    /// is answered from slices of this size, each fetched from the origin with a `Range`
    /// request and stored as its own object, so large files (progressive MP4, DASH
    /// on-demand, HLS byte ranges) are fetched only where viewers read them, whatever
    /// their size. At least 64KiB and at most half of `store.volume_size`. Default `"off"`.
    #[serde(default)]
    pub slice: SliceSize,
    /// With slicing on: how many slices past the one a viewer reads sequentially are
    /// fetched ahead (read-ahead). 0 turns read-ahead off; at most 16. Also the most
    /// read-ahead fetches one client connection has in flight. Default 2.
    #[serde(default = "default_read_ahead")]
    pub read_ahead: u32,
    /// LL-HLS prefetch: `hinted` requests, as soon as a playlist from the origin passes
    /// through, the part its `EXT-X-PRELOAD-HINT` names and the parts it lists that are
    /// not stored yet, so viewers find them in flight or stored; `off` fetches only what
    /// viewers ask for. Default `off`.
    #[serde(default)]
    pub prefetch: Prefetch,
    /// Send the viewer's CMCD (CTA-5004: the `CMCD=` query parameter and the
    /// `CMCD-Request`, `CMCD-Object`, `CMCD-Status`, `CMCD-Session` fields) on to the
    /// origin. Default `false`: reel reads and logs it, and the origin request goes
    /// without it (it never enters the cache key either way).
    #[serde(default)]
    pub forward_cmcd: bool,
    /// Warm the object a player's CMCD `nor` (next object request) names, resolved
    /// against the request's path on the same site, into the cache when it is a miss: one
    /// origin fetch, which a viewer asking for it meanwhile joins. Default `false`.
    #[serde(default)]
    pub prefetch_next: bool,
    /// `[site.token]`: signed viewer tokens required; unset = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenConfig>,
    /// `[site.access]`: clients served or refused by address and country.
    #[serde(default)]
    pub access: SiteAccessConfig,
    /// `[site.limits]`: the request rate of one client.
    #[serde(default)]
    pub limits: SiteLimitsConfig,
    /// `[site.cors]`: cross-origin access for web players on other origins. Default: none
    /// (responses carry the origin's own CORS fields, preflights go to the origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<CorsConfig>,
    /// `[[site.header]]`: response header rules, applied in order. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub header: Vec<HeaderRuleConfig>,
    /// `[site.compress]`: gzip and brotli for text responses. Default on for playlists,
    /// manifests, WebVTT, JSON and XML.
    #[serde(default)]
    pub compress: CompressConfig,
    /// `[site.cmsd]`: CTA-5006 `CMSD-Static` and `CMSD-Dynamic` on the site's responses.
    /// Default off.
    #[serde(default)]
    pub cmsd: CmsdConfig,
}

/// `[site.key]`: the cache key's query parameters by name (compared after
/// percent-normalisation, case-sensitively). The origin is always sent every parameter;
/// the LL-HLS parameters `_HLS_msn`, `_HLS_part` and `_HLS_skip` always stay in the key and
/// CTA-5004's `CMCD` always leaves it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteKeyConfig {
    /// Keep only these parameters in the key; empty = no such rule. Excludes `drop`,
    /// `ignore_query` and `drop_query`. Default `[]`.
    pub query: Vec<String>,
    /// Remove these parameters from the key, like `ignore_query` (both lists apply).
    /// Default `[]`.
    pub drop: Vec<String>,
}

/// What a site fetches before viewers ask (LL-HLS, draft-pantos-hls-rfc8216bis §4.4.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prefetch {
    /// The preload-hinted part and the listed parts not stored yet.
    Hinted,
    /// Nothing: only what viewers request.
    #[default]
    Off,
}

fn default_read_ahead() -> u32 {
    2
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig {
            name: None,
            hosts: Vec::new(),
            origin_group: String::new(),
            ignore_query: Vec::new(),
            drop_query: false,
            key: SiteKeyConfig::default(),
            methods: MethodsPolicy::default(),
            invalidate_on: InvalidateOn::default(),
            heuristic_freshness: None,
            store_set_cookie: false,
            client_cache_control: ClientCacheControl::default(),
            slice: SliceSize::default(),
            read_ahead: default_read_ahead(),
            prefetch: Prefetch::default(),
            forward_cmcd: false,
            prefetch_next: false,
            token: None,
            access: SiteAccessConfig::default(),
            limits: SiteLimitsConfig::default(),
            cors: None,
            header: Vec::new(),
            compress: CompressConfig::default(),
            cmsd: CmsdConfig::default(),
        }
    }
}

/// `[[site]].slice`: `"off"`, or the size of the slices a large object is cached in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SliceSize(pub Option<ByteSize>);

impl SliceSize {
    /// The slice size in bytes, `None` when slicing is off.
    pub fn bytes(self) -> Option<u64> {
        self.0.map(ByteSize::bytes)
    }
}

impl Serialize for SliceSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            None => s.serialize_str("off"),
            Some(b) => b.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SliceSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SliceSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"off\" or a size such as \"2MiB\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SliceSize, E> {
                if v == "off" {
                    return Ok(SliceSize(None));
                }
                v.parse().map(|b| SliceSize(Some(b))).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SliceSize, E> {
                u64::try_from(v)
                    .map(|n| SliceSize(Some(ByteSize(n))))
                    .map_err(|_| E::custom(format!("invalid size {v}: must not be negative")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SliceSize, E> {
                Ok(SliceSize(Some(ByteSize(v))))
            }
        }
        d.deserialize_any(V)
    }
}

/// How a site treats the cache directives of viewers' requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientCacheControl {
    /// RFC 9111 §5.2.1 request directives apply.
    #[default]
    Honor,
    /// Request directives are ignored.
    Ignore,
}

impl SiteConfig {
    /// True when the request `Host` value (optionally with `:port`) is one of `hosts`.
    pub fn matches_host(&self, host: &str) -> bool {
        let name = strip_port(host);
        self.hosts.iter().any(|p| host_pattern_matches(p, name))
    }
}

/// Removes a trailing `:port` from a Host header value, keeping IPv6 brackets.
pub fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// True when Host name `name` (no port) matches a `[[site]].hosts` entry (the catch-all
/// `"*"` matches every name; routing tries it last).
pub fn host_pattern_matches(pattern: &str, name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            name.len() > domain.len() + 1
                && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
                && name[name.len() - domain.len()..].eq_ignore_ascii_case(domain)
        }
        None => pattern.eq_ignore_ascii_case(name),
    }
}
