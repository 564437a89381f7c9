//! Finding what the store holds for a request: the cache key, the representation under it
//! or, when the stored response varies (RFC 9111 4.1), the variant this request selects
//! (through the key's Vary marker, `variants`), with its metadata decoded once per worker.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use reel_http::Request;
use reel_store::{Hit, Lookup, Store};

use super::upstream::origin_form;
use super::variants::{Selector, variant_key};
use crate::key::CacheKey;
use crate::path::answer::stored::{MetaCache, Prepared, ReqHeaders};
use crate::path::worker::settings::Site;
use crate::policy::vary::{Vary, VaryKey};

/// A complete stored representation.
pub(in crate::path) struct Stored {
    /// Its key in the store (the cache key, or a variant key).
    pub store_key: Vec<u8>,
    /// The store's handle.
    pub hit: Rc<Hit>,
    /// Its decoded metadata.
    pub prep: Rc<Prepared>,
}

/// What the store has for a request.
pub(in crate::path) enum Found {
    /// A complete representation.
    Hit(Stored),
    /// A representation being written.
    Filling { fill: reel_store::Filling, prep: Rc<Prepared> },
    /// Nothing usable.
    None,
}

/// The cache key of a request to `site`, if its target can be keyed.
pub(in crate::path) fn cache_key(req: &Request, site: &Site) -> Option<CacheKey> {
    let host = req.host().unwrap_or("");
    CacheKey::build(host.as_bytes(), origin_form(req).as_bytes(), &site.key).ok()
}

/// What a lookup reads: the store, and this worker's decoded metadata.
#[derive(Clone, Copy)]
pub(in crate::path) struct Reader<'a> {
    /// The segment store.
    pub store: &'a Arc<Store>,
    /// This worker's decoded-metadata cache.
    pub metas: &'a RefCell<MetaCache>,
}

impl Reader<'_> {
    /// The decoded form of a stored metadata blob, from this worker's cache.
    pub(in crate::path) fn prepared(&self, blob: &Bytes) -> Option<Rc<Prepared>> {
        self.metas.borrow_mut().get(blob)
    }

    /// Finds the representation for this request: the key itself, or its variant.
    pub(in crate::path) async fn find(&self, key: &CacheKey, req: &ReqHeaders<'_>) -> Found {
        let store = self.store;
        let Some(l) = store.lookup(key.as_bytes()).await else { return Found::None };
        let (store_key, l) = match &l {
            Lookup::Hit(h) => match Selector::parse(h.meta()) {
                Some(sel) => {
                    let vk = VaryKey::from_request(&Vary::Fields(sel.names), req);
                    let sk = variant_key(key.as_bytes(), sel.generation, vk.hash64());
                    match store.lookup(&sk).await {
                        Some(l) => (sk, l),
                        None => return Found::None,
                    }
                }
                None => (key.as_bytes().to_vec(), l),
            },
            Lookup::Filling(_) => (key.as_bytes().to_vec(), l),
        };
        match l {
            Lookup::Hit(hit) => {
                let Some(prep) = self.prepared(hit.meta()) else { return Found::None };
                if !prep.meta.vary().matches(req) {
                    return Found::None;
                }
                Found::Hit(Stored { store_key, hit: Rc::new(hit), prep })
            }
            Lookup::Filling(fill) => match self.prepared(fill.meta()) {
                Some(prep) => Found::Filling { fill, prep },
                None => Found::None,
            },
        }
    }
}
