//! Handing the store over to another process (a binary upgrade). The process that has
//! it stops writing ([`Disk::freeze`]), waits until its writes under way are done
//! ([`Disk::writes_in_progress`]), and gives up the directory lock
//! ([`Disk::release_lock`], which first writes a checkpoint so the successor loads the
//! index quickly); only then does the other process open the directory, frozen
//! ([`Disk::open_frozen`]) until the first one has exited. The two never write the same
//! volumes at once; reads go on in both. A hand-over called off takes the lock back
//! ([`Disk::relock`]) and thaws.

use std::sync::atomic::Ordering;

use super::dir::lock_dir;
use super::state::Disk;
use crate::StoreError;

impl Disk {
    /// Stops this process writing the store: from now on fills, removals, metadata
    /// updates, reclaims and checkpoints are refused ([`StoreError::Closed`]; a miss is
    /// then served without being stored); lookups and reads of stored objects go on.
    /// Writes already under way finish: wait until [`Disk::writes_in_progress`] is 0
    /// before another process opens the directory.
    pub(crate) fn freeze(&self) {
        // Under the allocation lock: an allocation or reclaim that saw the store writable
        // has counted itself before this returns.
        let _a = self.lock_alloc();
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Lets this process write the store again (the other process is gone, or the
    /// hand-over was called off and [`Disk::relock`] succeeded).
    pub(crate) fn thaw(&self) {
        self.closed.store(false, Ordering::SeqCst);
    }

    /// Whether the store takes no writes ([`Disk::freeze`] or [`Disk::close`]).
    pub(crate) fn is_frozen(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Writes under way: fills not yet committed or aborted, small records being
    /// appended, a reclaim, a checkpoint. After [`Disk::freeze`] it only goes down.
    pub(crate) fn writes_in_progress(&self) -> u64 {
        let writers: u64 =
            self.vols.iter().map(|v| u64::from(v.writers.load(Ordering::SeqCst))).sum();
        writers
            + u64::from(self.lock_alloc().reclaim_running)
            + u64::from(self.checkpointing.load(Ordering::SeqCst))
    }

    /// Writes a checkpoint of the frozen index (so the next process loads it instead of
    /// scanning) and gives up the directory lock. The store keeps serving reads.
    pub(crate) fn release_lock(&self) -> Result<(), StoreError> {
        if !self.is_frozen() {
            return Err(StoreError::Config("release_lock needs a frozen store".into()));
        }
        // The active volume is not covered: should the hand-over be called off, writes
        // go on in it, and the next open scans it.
        if let Err(e) = self.checkpoint_with(false) {
            tracing::warn!(error = %e, "store index checkpoint before the hand-over not written");
        }
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// Takes the directory lock back after [`Disk::release_lock`] (waiting a few seconds
    /// for a successor that is still exiting); fails with [`StoreError::Locked`] if
    /// another process holds it.
    pub(crate) fn relock(&self) -> Result<(), StoreError> {
        let mut l = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if l.is_none() {
            *l = Some(lock_dir(&self.path)?);
        }
        Ok(())
    }

    /// Whether this store holds its directory's lock (not after [`Disk::release_lock`]).
    pub(crate) fn has_lock(&self) -> bool {
        self.lock.lock().map(|l| l.is_some()).unwrap_or(false)
    }

    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        if self.is_frozen() { Err(StoreError::Closed) } else { Ok(()) }
    }
}
