//! A worker's parts of one config generation ([`WorkerParts`]): its origin connections and
//! settings, its decoded metadata, its `Cache-Status` entries; and the narrow contexts each
//! phase borrows from them.

use std::cell::RefCell;
use std::rc::Rc;

use super::answer::StatusNames;
use super::fetch::FetchCx;
use super::forward::Forwarder;
use super::lookup::Reader;
use super::respond::MetaCache;
use super::serve::Serve;

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

    /// Reading the store.
    pub(super) fn reader(&self) -> Reader<'_> {
        Reader { store: &self.fetch.shared.store, metas: &self.metas }
    }
}
