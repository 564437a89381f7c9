//! The cache path: keys, RFC 9111 policy, coalesced streaming misses, hits.
#![forbid(unsafe_code)]

pub mod key;
pub mod policy;
