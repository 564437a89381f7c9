//! The cache path: what happens to a request between the HTTP codec and the origin.
//!
//! [`conductor`] walks a request through the phases of its decision tree. The other modules
//! are grouped by what they are to it; the imports go one way, from the conductor down: no
//! module imports the conductor.
//!
//! - the conductor, [`WorkerCache`] (`conductor`);
//! - [`phase`]: the phases (lookup, inflight, deadline, fetch, fill, serve, forward, llhls);
//! - [`answer`]: building answers (a response's cache result and `Cache-Status`, the tag,
//!   the preamble of conditionals and ranges, the responses built from stored objects,
//!   bodies assembled from pieces, an origin body streamed to its one client);
//! - `piecewise`: objects stored piecewise (sliced objects, the ranges of an object too
//!   large for the store, the store keys derived from a URL's key and the slice
//!   arithmetic);
//! - [`worker`]: per-worker context (a worker's parts and the narrow contexts phases
//!   borrow, the cross-worker [`SharedCache`], settings, `CDN-Loop` hops, LL-HLS hints,
//!   interim responses, small bodies, the misses each client connection may have waiting).
//!
//! [`SharedCache`]: worker::shared::SharedCache
//! [`WorkerCache`]: conductor::WorkerCache

pub mod answer;
pub mod conductor;
pub mod phase;
mod piecewise;
pub mod worker;
