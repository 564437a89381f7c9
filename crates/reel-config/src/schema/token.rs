//! `[site.token]`: the signed viewer tokens a site requires (Akamai EdgeAuth 2.0), their
//! keys, and how a token follows the player to the URIs of the playlists it is served.

use super::*;

/// `[site.token]` of a `[[site]]`: every GET and HEAD (and every method passed to the
/// origin) needs a valid token, in the query parameter `param` or the cookie of that name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The token format: `edgeauth` (Akamai EdgeAuth 2.0, HMAC-SHA256). Required.
    pub format: TokenFormat,
    /// The query parameter, and the cookie, that carry the token. Default `"hdnts"`.
    #[serde(default = "default_param")]
    pub param: String,
    /// Keys, hex as the generators take them (at least 16 bytes); a token signed with any
    /// of them is accepted. Default `[]`; `keys` and `keys_env` together name at least one.
    #[serde(default)]
    pub keys: Vec<String>,
    /// An environment variable holding more keys, hex, separated by commas or white
    /// space, read at start and at every reload. Default unset.
    #[serde(default)]
    pub keys_env: Option<String>,
    /// The generators' `salt`, appended to what is signed. Default unset.
    #[serde(default)]
    pub salt: Option<String>,
    /// Clock skew allowed on the token's `st` and `exp`. Default `"5s"`; at most `"5m"`.
    #[serde(default = "default_leeway")]
    pub leeway: Duration,
    /// The generators' `escape_early` for URL tokens: the URL was hashed escaped. Default
    /// `false`.
    #[serde(default)]
    pub escape_early: bool,
    /// How a token follows the player: `query`, `cookie` or `off`. Default `off`.
    #[serde(default)]
    pub propagate: Propagate,
}

/// `[site.token].format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenFormat {
    /// Akamai EdgeAuth 2.0 (`st=..~exp=..~acl=..~hmac=..`), HMAC-SHA256.
    Edgeauth,
}

/// `[site.token].propagate`: how the token reaches the requests a player makes from the
/// playlists it was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Propagate {
    /// HLS playlists served to a viewer who sent the token in the query carry it on every
    /// URI they list.
    Query,
    /// A viewer who sent the token in the query is given it as a cookie scoped to its
    /// ACL's path.
    Cookie,
    /// Neither: the player adds the token itself.
    #[default]
    Off,
}

fn default_param() -> String {
    "hdnts".into()
}

fn default_leeway() -> Duration {
    Duration::from_secs(5)
}

impl TokenConfig {
    /// The keys as hex text: `keys`, then those of `keys_env`. Errors: the variable is
    /// unset or not UTF-8 (the message says which).
    pub fn key_texts(&self) -> Result<Vec<String>, String> {
        let mut out = self.keys.clone();
        if let Some(var) = &self.keys_env {
            let v = std::env::var(var).map_err(|e| format!("environment variable {var:?}: {e}"))?;
            out.extend(
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            );
        }
        Ok(out)
    }
}
