//! A worker's parts of one config generation ([`WorkerParts`]): its origin connections and
//! settings, its decoded metadata, its `Cache-Status` entries; and the narrow contexts each
//! phase borrows from them.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use tokio::sync::OwnedSemaphorePermit;

use super::answer::StatusNames;
use super::answer::respond::MetaCache;
use super::phase::fetch::FetchCx;
use super::phase::forward::Forwarder;
use super::phase::lookup::Reader;
use super::phase::serve::Serve;
use admit::ClientMisses;

pub(super) mod admit;
pub(super) mod hints;
pub mod hops;
pub(super) mod interim;
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
    pub misses: Rc<ClientMisses>,
}

impl WorkerParts {
    /// Answering from the store.
    pub(super) fn serve(&self) -> Serve<'_> {
        Serve { statuses: &self.statuses, metas: &self.metas, small: &self.fetch.shared.small }
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

    /// A place on the origin for a request of the connection from `peer`, waiting at most
    /// `lock_timeout`; `None`: the connection has too many waiting already (answer 503).
    pub(super) async fn admit(&self, peer: SocketAddr) -> Option<OwnedSemaphorePermit> {
        let s = &self.fetch.settings;
        self.misses.admit(peer, s.max_misses_per_connection, s.lock_timeout).await
    }

    /// Reading the store.
    pub(super) fn reader(&self) -> Reader<'_> {
        Reader { store: &self.fetch.shared.store, metas: &self.metas }
    }
}
