//! Per-worker context: a worker's parts of one config generation ([`WorkerParts`]: its
//! origin connections and settings, its decoded metadata, its `Cache-Status` entries, its
//! miss quota) and the narrow contexts each phase borrows from them; and what the phases
//! read around a request: `access` (a site's access rules at the door), [`shared`] (the cross-worker state and purge), [`settings`],
//! [`hops`] (`CDN-Loop` and our `Cache-Status` name), `hints` (what LL-HLS playlists
//! announced), `interim` (the origin's 1xx responses), [`small`] (small bodies read whole
//! on arrival), [`encoded`] (compressed representations of text responses) and
//! `miss_quota` (how many requests of one client connection wait on the origin at once).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use tokio::sync::OwnedSemaphorePermit;

use super::answer::StatusNames;
use super::answer::stored::MetaCache;
use super::phase::fetch::FetchCx;
use super::phase::forward::Forwarder;
use super::phase::lookup::Reader;
use super::phase::serve::Serve;
use miss_quota::MissQuota;
use settings::Site;

pub(super) mod access;
pub mod encoded;
pub(super) mod hints;
pub mod hops;
pub(super) mod interim;
pub(super) mod miss_quota;
pub mod settings;
pub mod shared;
pub mod small;

/// A worker's parts of one config generation, owned: the conductor's, and a copy for a
/// sliced or partial request, whose body walk and fetches outlive the handler's borrows.
#[derive(Clone)]
pub(super) struct WorkerParts {
    /// The store, settings and origin connections.
    pub fetch: FetchCx,
    /// This worker's decoded metadata.
    pub metas: Rc<RefCell<MetaCache>>,
    /// Our `Cache-Status` entries.
    pub statuses: Rc<StatusNames>,
    /// The places of this worker's client connections on the origin.
    pub miss_quota: Rc<MissQuota>,
}

impl WorkerParts {
    /// Answering from the store, identity only (slices and pieces).
    pub(super) fn serve(&self) -> Serve<'_> {
        let shared = &self.fetch.shared;
        Serve {
            statuses: &self.statuses,
            metas: &self.metas,
            small: &shared.small,
            compress: None,
            encodings: &shared.encodings,
            compressed_memory: 0,
        }
    }

    /// Answering from the store for `site`, with its compression.
    pub(super) fn serve_for<'a>(&'a self, site: &'a Site) -> Serve<'a> {
        let memory = self.fetch.settings.compressed_memory;
        Serve { compress: site.compress.as_ref(), compressed_memory: memory, ..self.serve() }
    }

    /// Passing through.
    pub(super) fn forwarder(&self) -> Forwarder<'_> {
        let f = &self.fetch;
        Forwarder {
            shared: &f.shared,
            settings: &f.settings,
            client: &f.client,
            statuses: &self.statuses,
        }
    }

    /// A place on the origin for a request of the connection from `peer` (its socket's peer,
    /// which names one connection, behind a balancer too), waiting at most
    /// `lock_timeout`; `None`: the connection has too many waiting already (answer 503).
    pub(super) async fn miss_place(&self, peer: SocketAddr) -> Option<OwnedSemaphorePermit> {
        let s = &self.fetch.settings;
        self.miss_quota.take(peer, s.max_misses_per_connection, s.lock_timeout).await
    }

    /// Reading the store.
    pub(super) fn reader(&self) -> Reader<'_> {
        Reader { store: &self.fetch.shared.store, metas: &self.metas }
    }
}
