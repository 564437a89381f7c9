//! The phases a GET or HEAD goes through, each a step of the conductor's decision tree:
//! `lookup` (the stored representation or Vary variant a request selects, with
//! `variants`, a varying URL's marker), [`inflight`] (one origin fetch per key at a time,
//! across workers), `deadline` (every wait bound), `fetch` (the leader's one origin fetch,
//! revalidation and background refresh, and what became of it, with `upstream`, the
//! origin requests), `fill` (everything written into the store), `serve` (answers from a
//! stored or filling object, or an unstored origin response), `forward` (what is not
//! cached, and the invalidation it causes) and [`llhls`] (the playlists a fill brings:
//! hints and prefetch), with `cmcd` (a viewer's CMCD: kept from the origin, its next
//! object warmed). No phase imports the conductor.

pub(super) mod cmcd;
pub(super) mod deadline;
pub(super) mod fetch;
pub(super) mod fill;
pub(super) mod forward;
pub mod inflight;
pub mod llhls;
pub(super) mod lookup;
pub(super) mod serve;
pub(super) mod upstream;
pub(super) mod variants;
