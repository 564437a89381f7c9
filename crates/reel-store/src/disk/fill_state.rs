//! What a fill shares with its readers ([`FillShared`]): its key and metadata, the
//! places its body is written to ([`Place`], chained as the fill moves), and the
//! [`Progress`] it publishes after every write. The index holds it in a filling slot;
//! `fill` writes it, `handles` reads it.

use std::fs::File;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use tokio::sync::watch;

use super::entry::Entry;
use super::volumes::{Lease, Volume};

/// Where a fill stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FillState {
    Open,
    Committed,
    Aborted,
}

/// What a fill publishes to its readers after every write.
#[derive(Clone, Copy, Debug)]
pub(super) struct Progress {
    pub(super) written: u64,
    pub(super) state: FillState,
    /// Which place (0 = the first, see [`FillShared::place`]) holds all `written` bytes.
    pub(super) place: u32,
}

/// One place a fill's body is (or was) written to: a reservation in a volume, or a
/// spill file (module `spill`). Kept, with its volume lease, for as long as the fill's
/// shared state lives, so ranges handed to readers stay valid.
pub(super) struct Place {
    /// The volume's lease; `None` for a spill file.
    pub(super) lease: Option<Lease>,
    /// The volume file or the spill file.
    pub(super) file: Arc<File>,
    /// Offset of body byte 0 in the file.
    pub(super) body_off: u64,
    /// Where the fill moved next, if it did.
    pub(super) next: OnceLock<Box<Place>>,
}

impl Place {
    pub(super) fn new(lease: Option<Lease>, file: Arc<File>, body_off: u64) -> Place {
        Place { lease, file, body_off, next: OnceLock::new() }
    }

    /// The volume, unless this is a spill file.
    pub(super) fn vol(&self) -> Option<&Arc<Volume>> {
        self.lease.as_ref().map(|l| &l.0)
    }
}

/// State of an in-progress fill shared with readers on any thread.
pub(super) struct FillShared {
    pub(super) key: Box<[u8]>,
    pub(super) meta: Bytes,
    /// The first place; later ones are chained from it.
    pub(super) first: Place,
    pub(super) stored_at: u64,
    pub(super) expected: Option<u64>,
    pub(super) progress: watch::Sender<Progress>,
    pub(super) purged: AtomicBool,
    /// The complete object this fill replaces; restored if the fill is aborted.
    pub(super) replaced: Mutex<Option<Entry>>,
}

impl FillShared {
    /// Place number `i` (as published in [`Progress::place`]).
    pub(super) fn place(&self, i: u32) -> &Place {
        let mut p = &self.first;
        for _ in 0..i {
            match p.next.get() {
                Some(n) => p = n,
                None => break,
            }
        }
        p
    }

    pub(super) fn push_place(&self, place: Place) {
        let mut p = &self.first;
        while let Some(n) = p.next.get() {
            p = n;
        }
        // Only the writer pushes, one place at a time: the last place has no successor.
        let _ = p.next.set(Box::new(place));
    }
}
