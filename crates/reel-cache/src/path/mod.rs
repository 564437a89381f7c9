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
//! - [`llhls`]: LL-HLS blocking requests (their wait bound) and the prefetch of the parts
//!   playlists announce;
//! - `small`: small bodies read whole on arrival and answered from memory, shared by the
//!   workers;
//! - `interim`: the origin's 1xx responses, forwarded to the waiting client, never stored;
//! - `answer`: a response's cache result, `Cache-Status` and origin time as one value;
//! - `slice`: sliced objects (`[[site]] slice`): a head per URL, slices fetched by `Range`,
//!   each its own object; `readahead` fetches the slices ahead of a sequential viewer;
//! - `partial`: on sites without slicing, the ranges of an object too large for the store,
//!   each stored as a piece listed in the URL's index, gaps fetched as requests need them;
//! - `pieces`: bodies assembled from pieces (slices, multipart parts) by a walk that
//!   fetches what is missing as it goes;
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
pub mod llhls;
mod lookup;
mod partial;
pub mod pass_stream;
mod pieces;
pub mod readahead;
pub mod respond;
mod serve;
pub mod settings;
pub mod shared;
pub mod slice;
pub mod small;
pub mod tag;
mod variants;
pub mod worker;
