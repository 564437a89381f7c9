//! Viewer access control: who may fetch what from a site, decided before the cache is
//! consulted, so a refusal never reaches the origin and costs less than a hit.
//!
//! - [`deny`]: why a request was refused ([`DenyReason`]), the label of
//!   `reel_denied_total{reason}` and of the access log.
//! - [`token`]: signed viewer tokens (Akamai EdgeAuth 2.0): parsing and verification.
//! - [`rules`]: CIDR sets and a site's `allow` / `deny` address rules.
//! - [`geo`]: the country of an address from a MaxMind DB, reloaded when its file changes.
//! - [`rate`]: the request-rate limiter all workers share (GCRA, per address or token).
//! - [`site`]: a site's rules together ([`SiteAccess`]) and how a request is refused.

pub mod deny;
pub mod geo;
pub mod rate;
pub mod rules;
pub mod site;
pub mod token;

pub use deny::DenyReason;
pub use geo::{Country, Geo, GeoError, Refresh};
pub use rate::{RateLimiter, RateSpec, retry_after_secs};
pub use rules::{AddrRules, Cidr, CidrError, CidrSet, canonical};
pub use site::{CountryRules, Refusal, SiteAccess};
