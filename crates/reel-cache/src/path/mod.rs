//! The cache path: what happens to a request between the HTTP codec and the origin.
//!
//! - [`settings`]: routing (Host to site to origin group) and policy knobs, per config
//!   generation;
//! - [`inflight`]: one origin fetch per key at a time (the coalescing map);
//! - [`shared`]: the cross-worker state ([`SharedCache`]: the store and the in-flight map)
//!   and purge;
//! - [`worker`]: the per-worker [`WorkerCache`] that answers requests: hits, coalesced
//!   streaming misses, revalidation, stale serving, pass-through;
//! - [`respond`]: responses built from stored metadata, bodies streamed from the store;
//! - [`tag`]: the per-response tag the access log and metrics read back.

pub mod inflight;
pub mod respond;
pub mod settings;
pub mod shared;
pub mod tag;
pub mod worker;
