//! Per-worker free lists of the buffers an HTTP/1.x connection needs only while it has a
//! request in progress: the read buffer, the response-head buffer and the copy of the
//! request head. A connection takes them when the first bytes of a request arrive and
//! gives them back once the response is written and nothing more is buffered, so an idle
//! keep-alive connection holds no buffer at all (a busy edge holds mostly idle viewers).
//!
//! Each list belongs to the worker thread (a thread-local), so taking and giving is a
//! `Vec` pop and push. A list keeps at most [`FREE_MAX`] buffers; beyond that, and for a
//! buffer that grew past its kind's size (a large head, a coalesced body), the buffer goes
//! back to the allocator. Buffers stay in the list rather than being freed after every
//! request, so a steady load allocates nothing and the allocator has no reason to return
//! pages to the kernel and fault them in again.

use std::cell::{Cell, RefCell};
use std::ops::Range;

use bytes::BytesMut;

/// Most buffers of each kind one worker keeps for reuse.
pub const FREE_MAX: usize = 256;
/// Size of a read buffer, and its read granularity.
pub(crate) const READ_SIZE: usize = 8 * 1024;
/// Starting size of a response-head buffer (a head, or a head with a small body behind it).
pub(crate) const WRITE_SIZE: usize = 4 * 1024;
/// Largest response-head buffer kept: a head with a coalesced 16 KiB body fits.
const WRITE_KEEP: usize = 32 * 1024;
/// Starting size of a request head's copy, and the largest kept.
const HEAD_SIZE: usize = 1024;
const HEAD_KEEP: usize = 16 * 1024;
/// Starting and largest kept number of header field slots of a request head.
const FIELDS: usize = 32;
const FIELDS_KEEP: usize = 128;

/// The field positions of a request head: (name, value) ranges into its bytes.
pub(crate) type Fields = Vec<(Range<usize>, Range<usize>)>;

/// The copy of a request head and its field positions (see `Request`).
#[derive(Debug, Default)]
pub(crate) struct HeadBufs {
    pub(crate) head: Vec<u8>,
    pub(crate) fields: Fields,
}

/// One kind of pooled buffer.
pub(crate) trait Reusable: Sized + 'static {
    /// Whether [`lent`] counts this kind (the read and response-head buffers; a request
    /// head's copy can also be cloned, so it is not counted).
    const COUNTED: bool;
    /// A new buffer of the kind's starting size.
    fn fresh() -> Self;
    /// Empties the buffer for reuse; `false` when it is not worth keeping (it grew past
    /// its kind's size, or cannot be reset without allocating).
    fn reset(&mut self) -> bool;
    /// Runs `f` on this thread's list of the kind; `None` while the thread is exiting.
    fn with_list<R>(f: impl FnOnce(&RefCell<Vec<Self>>) -> R) -> Option<R>;
}

thread_local! {
    static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    static WRITE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static HEADS: RefCell<Vec<HeadBufs>> = const { RefCell::new(Vec::new()) };
    static LENT: Cell<usize> = const { Cell::new(0) };
}

impl Reusable for BytesMut {
    const COUNTED: bool = true;
    fn fresh() -> Self {
        BytesMut::with_capacity(READ_SIZE)
    }
    fn reset(&mut self) -> bool {
        self.clear();
        // Moves an advanced view back to the start of its allocation when it owns it
        // alone; a buffer whose earlier bytes still back a request body chunk is kept only
        // if it has a whole read's room left.
        self.try_reclaim(READ_SIZE) && self.capacity() <= 2 * READ_SIZE
    }
    fn with_list<R>(f: impl FnOnce(&RefCell<Vec<Self>>) -> R) -> Option<R> {
        READ.try_with(f).ok()
    }
}

impl Reusable for Vec<u8> {
    const COUNTED: bool = true;
    fn fresh() -> Self {
        Vec::with_capacity(WRITE_SIZE)
    }
    fn reset(&mut self) -> bool {
        self.clear();
        (WRITE_SIZE..=WRITE_KEEP).contains(&self.capacity())
    }
    fn with_list<R>(f: impl FnOnce(&RefCell<Vec<Self>>) -> R) -> Option<R> {
        WRITE.try_with(f).ok()
    }
}

impl Reusable for HeadBufs {
    const COUNTED: bool = false;
    fn fresh() -> Self {
        HeadBufs { head: Vec::with_capacity(HEAD_SIZE), fields: Vec::with_capacity(FIELDS) }
    }
    fn reset(&mut self) -> bool {
        self.head.clear();
        self.fields.clear();
        (HEAD_SIZE..=HEAD_KEEP).contains(&self.head.capacity())
            && (FIELDS..=FIELDS_KEEP).contains(&self.fields.capacity())
    }
    fn with_list<R>(f: impl FnOnce(&RefCell<Vec<Self>>) -> R) -> Option<R> {
        HEADS.try_with(f).ok()
    }
}

/// A buffer from this worker's list, or a new one.
pub(crate) fn take<T: Reusable>() -> T {
    if T::COUNTED {
        let _ = LENT.try_with(|n| n.set(n.get() + 1));
    }
    T::with_list(|l| l.borrow_mut().pop()).flatten().unwrap_or_else(T::fresh)
}

/// Gives a buffer back to this worker's list (or to the allocator, see the module doc).
pub(crate) fn give<T: Reusable>(mut buf: T) {
    if T::COUNTED {
        let _ = LENT.try_with(|n| n.set(n.get().saturating_sub(1)));
    }
    if buf.reset() {
        T::with_list(|l| {
            let mut l = l.borrow_mut();
            if l.len() < FREE_MAX {
                l.push(buf);
            }
        });
    }
}

/// Read and response-head buffers this worker's connections hold right now: connections
/// between requests hold none.
pub fn lent() -> usize {
    LENT.try_with(Cell::get).unwrap_or(0)
}

/// Buffers of kind `T` this worker keeps for reuse.
#[cfg(test)]
pub(crate) fn kept<T: Reusable>() -> usize {
    T::with_list(|l| l.borrow().len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_up_to_the_cap() {
        let a: Vec<u8> = take();
        let ptr = a.as_ptr();
        give(a);
        let b: Vec<u8> = take();
        assert_eq!(b.as_ptr(), ptr, "the given buffer comes back");
        give(b);
        let many: Vec<Vec<u8>> = (0..FREE_MAX + 10).map(|_| take()).collect();
        for b in many {
            give(b);
        }
        assert_eq!(kept::<Vec<u8>>(), FREE_MAX);
    }

    #[test]
    fn grown_buffers_go_back_to_the_allocator() {
        let before = kept::<Vec<u8>>();
        let mut w: Vec<u8> = take();
        w.resize(WRITE_KEEP + 1, 0);
        give(w);
        assert_eq!(kept::<Vec<u8>>(), before.saturating_sub(1));

        let before = kept::<BytesMut>();
        let mut r: BytesMut = take();
        r.extend_from_slice(&[b'x'; 3 * READ_SIZE]);
        give(r);
        assert_eq!(kept::<BytesMut>(), before.saturating_sub(1));
    }

    #[test]
    fn an_advanced_read_buffer_is_reclaimed_whole() {
        let mut r: BytesMut = take();
        let ptr = r.as_ptr();
        r.extend_from_slice(&[b'x'; READ_SIZE - 10]);
        bytes::Buf::advance(&mut r, READ_SIZE - 10);
        give(r);
        let r: BytesMut = take();
        assert_eq!((r.as_ptr(), r.len()), (ptr, 0));
        assert!(r.capacity() >= READ_SIZE);
    }

    #[test]
    fn a_read_buffer_shared_with_a_body_chunk_never_aliases_it() {
        let mut r: BytesMut = take();
        r.extend_from_slice(&[b'a'; READ_SIZE - 100]);
        let chunk = r.split_to(READ_SIZE - 100).freeze();
        give(r);
        let mut again: BytesMut = take();
        again.extend_from_slice(&[b'b'; READ_SIZE]);
        assert!(chunk.iter().all(|&b| b == b'a'), "the chunk's bytes are untouched");
    }
}
