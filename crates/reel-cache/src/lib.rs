//! The cache path: keys, RFC 9111 policy, coalesced streaming misses, hits.
