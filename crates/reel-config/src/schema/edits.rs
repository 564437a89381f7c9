//! `[site.cors]` and `[[site.header]]`: the fields a site's responses carry besides what
//! is stored, CORS for web players on other origins and operators' header rules. Both
//! apply when a response leaves, to hits as well as misses; nothing stored is rewritten.

use super::*;

/// `[site.cors]`: cross-origin access for web players (hls.js, dash.js, Shaka, video.js)
/// on pages of another origin (Fetch standard, "CORS protocol"). Preflights are answered
/// at the edge; every response of the site carries the allow fields for an allowed
/// `Origin`, and the origin's own `Access-Control-*` fields are dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins whose pages may read the site's responses: `"*"` (any), or a list of
    /// origins, `scheme://host[:port]` exactly as browsers send them (`"https://player.example.com"`),
    /// a host may start with `*.` (`"https://*.example.com"`: any subdomain). Required.
    pub allow_origins: AllowOrigins,
    /// Whether pages may read responses to credentialed requests (cookies, TLS client
    /// certificates: `fetch(..., {credentials: "include"})`, hls.js `xhr.withCredentials`).
    /// Not with `allow_origins = "*"`. Default `false`.
    #[serde(default)]
    pub allow_credentials: bool,
    /// Request header fields a preflight may ask for, besides the CORS-safelisted ones.
    /// Field names, case-insensitive; `"*"` allows any (not with `allow_credentials`).
    /// Default [`DEFAULT_CORS_ALLOW_HEADERS`]: `Range` and the CMCD fields players send.
    #[serde(default = "default_allow_headers")]
    pub allow_headers: Vec<String>,
    /// Response header fields page scripts may read besides the CORS-safelisted ones
    /// (`Access-Control-Expose-Headers`). Field names. Default
    /// [`DEFAULT_CORS_EXPOSE_HEADERS`].
    #[serde(default = "default_expose_headers")]
    pub expose_headers: Vec<String>,
    /// How long a browser may reuse a preflight's answer (`Access-Control-Max-Age`).
    /// Duration, whole seconds, at most `"24h"`; default `"1h"` (Chromium caps it at 2h).
    #[serde(default = "default_max_age")]
    pub max_age: Duration,
}

/// The default of `[site.cors] allow_headers`: the fields web players send that are not
/// CORS-safelisted: `Range` (safelisted only for a single `bytes=N-` or `bytes=N-M`) and
/// the CMCD request fields (CTA-5004).
pub const DEFAULT_CORS_ALLOW_HEADERS: [&str; 5] =
    ["Range", "CMCD-Request", "CMCD-Object", "CMCD-Session", "CMCD-Status"];

/// The default of `[site.cors] expose_headers`: what players and page scripts read of a
/// segment or playlist response (lengths, ranges, cache result, age, the clock that
/// dash.js `http-head` timing reads, validators).
pub const DEFAULT_CORS_EXPOSE_HEADERS: [&str; 7] =
    ["Content-Length", "Content-Range", "Cache-Status", "Age", "Date", "ETag", "Last-Modified"];

fn default_allow_headers() -> Vec<String> {
    DEFAULT_CORS_ALLOW_HEADERS.iter().map(|s| s.to_string()).collect()
}

fn default_expose_headers() -> Vec<String> {
    DEFAULT_CORS_EXPOSE_HEADERS.iter().map(|s| s.to_string()).collect()
}

fn default_max_age() -> Duration {
    Duration::from_secs(3600)
}

/// `[site.cors] allow_origins`: `"*"` or a list of origins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowOrigins {
    /// Any origin (`"*"`).
    Any,
    /// These origins (or `scheme://*.domain[:port]` patterns).
    List(Vec<String>),
}

impl Serialize for AllowOrigins {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AllowOrigins::Any => s.serialize_str("*"),
            AllowOrigins::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AllowOrigins {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AllowOrigins;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"*\" or a list of origins such as [\"https://player.example.com\"]")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AllowOrigins, E> {
                if v == "*" {
                    Ok(AllowOrigins::Any)
                } else {
                    Err(E::custom(format!(
                        "{v:?}: a single value must be \"*\"; list origins as [{v:?}]"
                    )))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<AllowOrigins, A::Error> {
                let mut out = Vec::new();
                while let Some(o) = seq.next_element::<String>()? {
                    out.push(o);
                }
                Ok(AllowOrigins::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[[site.header]]`: one change to the header fields of a site's responses, applied when
/// they leave (hits included), in file order, after the CORS fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRuleConfig {
    /// `set` (replace every field of that name with this one), `add` (one more field
    /// line) or `remove` (every field of that name). Required.
    pub action: HeaderAction,
    /// The field name, case-insensitive. Fields the connection or the cache owns are
    /// refused (framing, hop-by-hop, `Date`, `Age`, `Content-Range`, `Alt-Svc`...).
    /// Required.
    pub name: String,
    /// The field value, for `set` and `add`; not with `remove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Only responses to request paths matching this pattern (as `[[cache.rule]] match`:
    /// `*` matches any run of characters). Default: every path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathGlob>,
    /// Only responses with one of these status codes. Default `[]`: every status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<u16>,
}

/// What a `[[site.header]]` rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderAction {
    /// Replace every field of the name with one carrying `value`.
    Set,
    /// Append a field line carrying `value`.
    Add,
    /// Remove every field of the name.
    Remove,
}
