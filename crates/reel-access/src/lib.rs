//! Viewer access control: who may fetch what from a site, decided before the cache is
//! consulted, so a refusal never reaches the origin and costs less than a hit.
//!
//! - [`deny`]: why a request was refused ([`DenyReason`]), the label of
//!   `reel_denied_total{reason}` and of the access log.
//! - [`token`]: signed viewer tokens (Akamai EdgeAuth 2.0): parsing and verification.

pub mod deny;
pub mod token;

pub use deny::DenyReason;
