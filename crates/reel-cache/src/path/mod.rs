//! The cache path: what happens to a request between the HTTP codec and the origin.
//!
//! [`conductor`] walks a request through the phases of its decision tree; every other
//! module is a phase, a phase variant, or what the phases share. The imports go one way,
//! from the conductor down; no phase imports the conductor, none a phase above it:
//!
//! - the conductor, [`WorkerCache`] (`conductor`);
//! - phase variants, each with its own narrow context: `slice` (sliced objects: a head
//!   per URL, slices fetched by `Range`, read-ahead), `partial` (on sites without
//!   slicing, the ranges of an object too large for the store, stored as pieces), both
//!   over `piecewise` (what they share: a request's job, the head, the answer from
//!   pieces), and [`llhls`] (the playlists a fill brings: hints and prefetch);
//! - phases: `lookup` (the stored representation or Vary variant a request selects),
//!   `fetch` (the leader's one origin fetch, revalidation and background refresh, and
//!   what became of it), `fill` (everything written into the store), `serve` (answers
//!   from a stored or filling object, or an unstored origin response), `forward` (what is
//!   not cached, and the invalidation it causes);
//! - what the phases share: `deadline` (every wait bound), `admit` (how many requests
//!   of one client connection wait on the origin at once), [`inflight`] (one origin fetch
//!   per key at a time, across workers), `preamble` (conditionals and ranges of every
//!   answer), `upstream` (the origin requests), `store_keys` (the store keys derived from
//!   a URL's key), `span` (slice arithmetic: which slice holds a byte, a slice's bytes), `variants` (a varying URL's marker), `small` (small bodies read whole on
//!   arrival), `hints` (what LL-HLS playlists announced), [`respond`] (responses built from
//!   stored metadata, bodies streamed from the store), `pieces` (bodies assembled from
//!   pieces), [`pass_stream`] (an origin body streamed to its one client), `interim` (the
//!   origin's 1xx responses), `answer` (a response's cache result and `Cache-Status`),
//!   [`tag`], [`hops`] (`CDN-Loop` and our `Cache-Status` name), [`settings`],
//!   `parts` (a worker's parts and the narrow contexts phases borrow from them) and
//!   [`shared`] ([`SharedCache`], the cross-worker state, and purge).
//!
//! [`SharedCache`]: shared::SharedCache
//! [`WorkerCache`]: conductor::WorkerCache

mod admit;
mod answer;
pub mod conductor;
mod deadline;
mod fetch;
mod fill;
mod forward;
mod hints;
pub mod hops;
pub mod inflight;
mod interim;
pub mod llhls;
mod lookup;
mod partial;
mod parts;
pub mod pass_stream;
mod pieces;
mod piecewise;
mod preamble;
pub mod respond;
mod serve;
pub mod settings;
pub mod shared;
mod slice;
pub mod small;
mod span;
mod store_keys;
pub mod tag;
mod upstream;
mod variants;
