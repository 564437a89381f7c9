//! The cache path: keys, RFC 9111 policy, coalesced streaming misses, hits.
#![forbid(unsafe_code)]

//! Two layers: [`key`] and [`policy`] are pure functions of RFC 9111 / 9110; [`path`]
//! runs them against the store and the origin for each request.

pub mod hls;
pub mod key;
pub mod path;
pub mod policy;
pub mod result;

pub use path::conductor::WorkerCache;
pub use path::hops::Node;
pub use path::inflight::Inflight;
pub use path::llhls::Streams;
pub use path::pass_stream::{PASS_BUFFER, PassBuffered};
pub use path::settings::{InvalidateOn, Prefetch, Settings, Site, Slicing};
pub use path::shared::{PurgeError, SharedCache};
pub use path::tag::Tag;
pub use result::{CacheResult, OUTCOMES};
