//! HTTP caching policy: pure functions implementing RFC 9111 (HTTP Caching) and the
//! cache-relevant parts of RFC 9110 (conditional requests, ranges, Vary).
//!
//! Nothing here performs I/O. The cache path feeds these functions with its own header
//! storage through [`HeaderLookup`] and acts on the decisions they return.

pub mod accept_encoding;
pub mod cache_control;
pub mod cmsd;
pub mod conditional;
pub mod cors;
pub mod decision;
pub mod freshness;
pub mod header_rules;
pub mod headers;
pub mod meta;
pub mod multipart;
pub mod range;
pub mod rules;
pub mod vary;

pub use headers::HeaderLookup;
