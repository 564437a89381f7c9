//! Per-thread free lists of the record buffers a userspace session reads and writes with.
//!
//! A session holds a buffer only while bytes are in it (a record being read, records
//! waiting for the socket), so an idle connection holds none, and a busy worker reuses the
//! same few buffers instead of asking the allocator for one per record.

use std::cell::RefCell;

/// Room for one largest received record (header, ciphertext, TLS 1.2 explicit nonce).
pub(crate) const IN_SIZE: usize = crate::record::HEADER + crate::record::MAX_CIPHERTEXT + 8;
/// Room for [`OUT_RECORDS`] full sealed records.
pub(crate) const OUT_SIZE: usize = OUT_RECORDS * (crate::record::MAX_PLAINTEXT + 64);
/// Records sealed per write at most: 64 KiB of plaintext per `write(2)`.
pub(crate) const OUT_RECORDS: usize = 4;
/// Buffers kept per list and thread; more go back to the allocator.
const KEEP: usize = 64;

thread_local! {
    static FREE: RefCell<[Vec<Vec<u8>>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// Which list.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    In = 0,
    Out = 1,
}

impl Kind {
    fn size(self) -> usize {
        match self {
            Kind::In => IN_SIZE,
            Kind::Out => OUT_SIZE,
        }
    }
}

/// An empty buffer with the kind's capacity.
pub(crate) fn take(kind: Kind) -> Vec<u8> {
    FREE.with(|f| f.borrow_mut()[kind as usize].pop())
        .unwrap_or_else(|| Vec::with_capacity(kind.size()))
}

/// Gives a buffer back. A received-record buffer keeps its length (it is used at full
/// length, zeroed once); a record buffer to send is emptied.
pub(crate) fn give(kind: Kind, mut v: Vec<u8>) {
    if v.capacity() < kind.size() {
        return;
    }
    if let Kind::Out = kind {
        v.clear();
    }
    FREE.with(|f| {
        let mut f = f.borrow_mut();
        if f[kind as usize].len() < KEEP {
            f[kind as usize].push(v);
        }
    });
}
