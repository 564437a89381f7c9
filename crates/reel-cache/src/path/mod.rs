//! The cache path: what happens to a request between the HTTP codec and the origin.
//!
//! - [`settings`]: routing (Host to site to origin group) and policy knobs, per config
//!   generation;
//! - [`inflight`]: one origin fetch per key at a time (the coalescing map);
//! - [`shared`]: the cross-worker state ([`SharedCache`]: the store and the in-flight map)
//!   and purge;
//! - [`worker`]: the per-worker [`WorkerCache`] that routes a request and decides which
//!   of the following answers it;
//! - `lookup`: the stored representation (or Vary variant) a request selects;
//! - `variants`: a varying URL's marker, which lists its variants (invalidation and purge
//!   are lookups, the variants per URL are capped);
//! - `serve`: answers from a stored object, a fill in progress or an unstored origin
//!   response: conditionals, ranges, HEAD;
//! - `fetch`: the leader's origin fetch, revalidation and the background refresh, all
//!   through one fetch-and-store step, and the origin requests they send;
//! - `fill`: writing an origin response into the store;
//! - `forward`: what is not cached (pass-through) and the invalidation it causes;
//! - `interim`: the origin's 1xx responses, forwarded to the waiting client, never stored;
//! - `answer`: a response's cache result, `Cache-Status` and origin time as one value;
//! - [`hops`]: this node among the others: `CDN-Loop` loop protection and its
//!   `Cache-Status` name;
//! - [`pass_stream`]: an origin body streamed to its one client, its buffer bounded;
//! - [`respond`]: responses built from stored metadata, bodies streamed from the store;
//! - [`tag`]: the per-response tag the access log and metrics read back.
//!
//! [`SharedCache`]: shared::SharedCache
//! [`WorkerCache`]: worker::WorkerCache

mod answer;
mod fetch;
mod fill;
mod forward;
pub mod hops;
pub mod inflight;
mod interim;
mod lookup;
pub mod pass_stream;
pub mod respond;
mod serve;
pub mod settings;
pub mod shared;
pub mod tag;
mod variants;
pub mod worker;
