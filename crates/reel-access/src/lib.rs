//! Viewer access control: who may fetch what from a site, decided before the cache is
//! consulted, so a refusal never reaches the origin and costs less than a hit.
//!
//! - [`deny`]: why a request was refused ([`DenyReason`]), the label of
//!   `reel_denied_total{reason}` and of the access log.

pub mod deny;

pub use deny::DenyReason;
