//! Handing the store over to another process (a binary upgrade): the process that has
//! it stops writing ([`Store::freeze`]), waits until its writes under way are done
//! ([`Store::writes_in_progress`]), and only then does the other process open the
//! directory. The two never write the same volumes at once; reads go on in both.

use std::sync::atomic::Ordering;

use super::Store;
use crate::StoreError;

impl Store {
    /// Stops this process writing the store: from now on fills, removals, metadata
    /// updates and reclaims are refused with [`StoreError::Frozen`] (a miss is then
    /// served without being stored); lookups and reads of stored objects go on. Writes
    /// already under way finish: wait until [`Store::writes_in_progress`] is 0 before
    /// another process opens the directory.
    pub fn freeze(&self) {
        // Under the allocation lock: an allocation that saw the store writable has
        // counted its writer before this returns.
        let _a = self.lock_alloc();
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Lets this process write the store again (the other process is gone, or the
    /// hand-over was called off).
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }

    /// Whether [`Store::freeze`] is in force.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Writes under way: fills not yet committed or aborted, small records being
    /// appended, and a reclaim in progress. After [`Store::freeze`] it only goes down.
    pub fn writes_in_progress(&self) -> u64 {
        let writers: u64 =
            self.vols.iter().map(|v| u64::from(v.writers.load(Ordering::SeqCst))).sum();
        writers + u64::from(self.lock_alloc().reclaim_running)
    }

    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        if self.is_frozen() { Err(StoreError::Frozen) } else { Ok(()) }
    }
}
