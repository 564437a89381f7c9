//! A site's telemetry keys: its `name` (the `site` label of the per-site metrics) and
//! `[site.cmsd]`, the CTA-5006 Common Media Server Data fields its responses carry.

use super::*;

/// `[site.cmsd]`: `CMSD-Static` (the object's type) and `CMSD-Dynamic` (this edge, and
/// `du` while the node is overloaded) on every response of the site, so players (dash.js,
/// hls.js with CMSD support) step down their bitrate before a balancer moves them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CmsdConfig {
    /// Add the fields to the site's responses. Default `false`.
    pub enabled: bool,
    /// This edge's identity, the string `CMSD-Dynamic` names it by: printable ASCII, at
    /// most 64 characters. Default `""`: the machine's host name.
    pub id: String,
}

impl SiteConfig {
    /// The site's name in the per-site metrics: `name`, or its first host.
    pub fn metrics_name(&self) -> &str {
        match &self.name {
            Some(n) => n,
            None => self.hosts.first().map_or("", String::as_str),
        }
    }
}
