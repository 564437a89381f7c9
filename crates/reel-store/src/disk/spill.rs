//! Fills that outgrow the store: a body of unknown length that needs more than a volume,
//! or that must move while no volume is free, goes on in a spill file so that every
//! reader still gets every byte; it is then not stored.
//!
//! A spill file is an unnamed temporary file in the store directory (`O_TMPFILE`, or a
//! file unlinked right after creation where the file system lacks it): it never shows in
//! the directory, holds no record format, and disappears with the last handle to it (the
//! fill and its readers), also on a crash. Readers get file ranges of it like of a
//! volume. Its size is bounded by the store's capacity; a body beyond that aborts.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::fill::{Committed, FillWriter};
use super::fill_state::{FillState, Place};
use super::state::Disk;
use crate::StoreError;

impl Disk {
    /// A new spill file.
    pub(super) fn spill_file(&self) -> std::io::Result<File> {
        let tmp = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(&self.path);
        match tmp {
            Ok(f) => Ok(f),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
                static N: AtomicU64 = AtomicU64::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let p = self.path.join(format!("spill-{}-{n}.tmp", std::process::id()));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&p)?;
                std::fs::remove_file(&p)?;
                Ok(f)
            }
            Err(e) => Err(e),
        }
    }
}

impl FillWriter {
    /// Moves the fill to a spill file: copies what was written, then goes on there.
    /// The record left in the volume keeps its unknown length, so a rebuild drops it.
    pub(super) async fn spill_out(&mut self, total: u64) -> Result<(), StoreError> {
        self.check_spill_room(total)?;
        let store = self.store.clone();
        let file = Arc::new(store.spill_file().map_err(|e| {
            store.write_error(&e);
            StoreError::Io(e)
        })?);
        let old_body = self.body_off;
        self.spill = Some(file.clone());
        self.body_off = 0;
        if let Err(e) = self.copy_body(&self.vol.clone(), old_body).await {
            self.spill = None;
            self.body_off = old_body;
            return Err(e);
        }
        // No longer writing into the volume.
        self.vol.writers.fetch_sub(1, Ordering::SeqCst);
        self.shared.push_place(Place::new(None, file, 0));
        self.place += 1;
        Ok(())
    }

    /// A spilled body may not grow past the store's capacity.
    pub(super) fn check_spill_room(&self, total: u64) -> Result<(), StoreError> {
        // In memory (module `rescue`): at most a volume, the largest object stored.
        let room = match self.in_memory {
            true => self.store.volume_size,
            false => self.store.vols.len() as u64 * self.store.volume_size,
        };
        if total > room {
            return Err(StoreError::TooLarge(total));
        }
        Ok(())
    }

    /// Completes a spilled fill: its readers see the final length; the key is a miss
    /// again (or the object it was replacing comes back).
    pub(super) fn commit_spilled(mut self) -> Result<Committed, StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            self.abort();
            return Err(StoreError::Aborted);
        }
        if let Some(exp) = self.shared.expected
            && exp != self.written
        {
            self.abort();
            return Err(StoreError::LengthMismatch { expected: exp, got: self.written });
        }
        self.done = true;
        self.unpublish();
        self.shared.progress.send_modify(|p| p.state = FillState::Committed);
        self.store.c.not_stored.fetch_add(1, Ordering::Relaxed);
        Ok(Committed::NotStored)
    }
}
