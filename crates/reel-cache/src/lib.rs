//! The cache path: keys, RFC 9111 policy, coalesced streaming misses, hits.
#![forbid(unsafe_code)]

//! Two layers: [`key`] and [`policy`] are pure functions of RFC 9111 / 9110; [`path`]
//! runs them against the store and the origin for each request.

pub mod hls;
pub mod key;
pub mod path;
pub mod policy;
pub mod result;
pub mod tokenise;

pub use path::answer::cmsd::Cmsd;
pub use path::answer::edits::ResponseEdits;
pub use path::answer::pass_stream::{PASS_BUFFER, PassBuffered};
pub use path::answer::tag::{MAX_SITE_ID, Tag};
pub use path::conductor::WorkerCache;
pub use path::phase::inflight::Inflight;
pub use path::phase::llhls::Streams;
pub use path::worker::encoded::Compress;
pub use path::worker::hops::Node;
pub use path::worker::settings::{
    InvalidateOn, Prefetch, Propagate, Settings, Site, SiteToken, Slicing,
};
pub use path::worker::shared::{PurgeError, SharedCache};
pub use result::{CacheResult, OUTCOMES};
