//! Small bodies in memory from the moment they arrive: a fill whose origin body is at most
//! [`SMALL_BODY`] bytes (announced by `Content-Length`) is read whole before anyone is told
//! about it, kept here, shared by the workers, and every request for that object version
//! answers with one send of head and body, whether the fill is still being written or not.
//! That is what lets one origin response release every waiter at once: an LL-HLS blocking
//! playlist reload wakes hundreds of them at the same instant, and none waits for the store
//! write or reads the store back. A request that finds such a fill while its body is still
//! being read waits for that release with the leader's followers.
//!
//! Entries are keyed by the identity of the stored metadata blob (the store hands out
//! clones of one `Bytes` per object version, fills and hits alike) and kept with it, so an
//! address is never reused while it names an entry. They are needed until each worker has
//! its own copy in its decoded-metadata cache ([`Prepared::small_body`]); the oldest go
//! first beyond [`SMALL_BODIES_BYTES`].

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use reel_origin::{OriginError, OriginResponse};

use crate::path::answer::stored::{MetaCache, Prepared};

/// Bodies up to this size are read whole before followers are woken and answered from
/// memory (as the hit path answers them, see `serve`).
pub const SMALL_BODY: u64 = 16 * 1024;
/// Bytes of bodies kept, all workers together.
pub const SMALL_BODIES_BYTES: usize = 4 << 20;

type Id = (usize, usize);

fn id(blob: &Bytes) -> Id {
    (blob.as_ptr() as usize, blob.len())
}

#[derive(Default)]
struct Inner {
    map: HashMap<Id, (Bytes, Bytes)>,
    order: VecDeque<Id>,
    bytes: usize,
}

/// Recently filled small bodies, by metadata blob; shared by the workers.
#[derive(Default)]
pub struct SmallBodies {
    inner: Mutex<Inner>,
}

impl SmallBodies {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each operation leaves the map consistent, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `body` as the body of the object version whose metadata blob is `blob`.
    pub fn insert(&self, blob: &Bytes, body: Bytes) {
        let cost = blob.len() + body.len();
        if cost > SMALL_BODIES_BYTES {
            return;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        while inner.bytes + cost > SMALL_BODIES_BYTES {
            let Some(old) = inner.order.pop_front() else { break };
            if let Some((b, v)) = inner.map.remove(&old) {
                inner.bytes -= b.len() + v.len();
            }
        }
        let k = id(blob);
        if let Some((b, v)) = inner.map.insert(k, (blob.clone(), body)) {
            inner.bytes -= b.len() + v.len();
        } else {
            inner.order.push_back(k);
        }
        inner.bytes += cost;
    }

    /// The body kept for `blob`'s object version.
    pub fn get(&self, blob: &Bytes) -> Option<Bytes> {
        self.lock().map.get(&id(blob)).map(|(_, body)| body.clone())
    }

    /// Bytes kept (bodies and their blobs).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// Reads `resp`'s body whole when its length is announced and at most [`SMALL_BODY`];
/// `Ok(None)` for any other body, which is left unread.
pub(in crate::path) async fn read_small(
    resp: &mut OriginResponse,
) -> Result<Option<Bytes>, OriginError> {
    let Some(len) = resp.body.content_length().filter(|&l| l > 0 && l <= SMALL_BODY) else {
        return Ok(None);
    };
    let mut buf = BytesMut::with_capacity(len as usize);
    while let Some(c) = resp.next_chunk().await? {
        buf.extend_from_slice(&c);
    }
    // The origin client ends a body short of its Content-Length with an error.
    Ok(Some(buf.freeze()))
}

/// The whole body of the object version `blob` names, `n` bytes, from this worker's copy
/// (in `prep`) or the shared one, which then becomes this worker's within its budget.
pub(in crate::path) fn small_body(
    prep: &Prepared,
    blob: &Bytes,
    n: u64,
    shared: &SmallBodies,
    metas: &RefCell<MetaCache>,
) -> Option<Bytes> {
    if let Some(b) = prep.small_body() {
        return Some(b);
    }
    let b = shared.get(blob).filter(|b| b.len() as u64 == n)?;
    if metas.borrow_mut().admit_small(n) {
        prep.set_small_body(b.clone());
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_kept_by_blob_identity_within_a_byte_bound() {
        let s = SmallBodies::default();
        let a = Bytes::from(vec![1u8; 100]);
        let a_copy = Bytes::from(vec![1u8; 100]);
        s.insert(&a, Bytes::from_static(b"body a"));
        assert_eq!(s.get(&a).as_deref(), Some(&b"body a"[..]));
        assert_eq!(s.get(&a.clone()).as_deref(), Some(&b"body a"[..]), "a clone is the same blob");
        assert_eq!(s.get(&a_copy), None, "equal bytes elsewhere are another version");
        s.insert(&a, Bytes::from_static(b"again"));
        assert_eq!(s.bytes(), 105);
        // Beyond the bound the oldest go first.
        let big = Bytes::from(vec![0u8; 1 << 20]);
        let blobs: Vec<Bytes> = (0..4).map(|i| Bytes::from(vec![i as u8; 10])).collect();
        for b in &blobs {
            s.insert(b, big.clone());
        }
        assert!(s.bytes() <= SMALL_BODIES_BYTES);
        assert_eq!(s.get(&a), None);
        assert_eq!(s.get(&blobs[0]), None);
        assert!(s.get(&blobs[3]).is_some());
        s.insert(&Bytes::from_static(b"x"), Bytes::from(vec![0u8; SMALL_BODIES_BYTES]));
        assert!(s.bytes() <= SMALL_BODIES_BYTES, "a body beyond the bound is not kept");
    }
}
