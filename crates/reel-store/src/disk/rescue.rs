//! Fills that outlive their disk: when writing a fill into its volume fails (an I/O
//! error, or the volume was quarantined under it), the fill is not aborted. Its readers
//! may already have sent a head with `Content-Length`, and the origin's bytes keep coming:
//! the fill goes on in memory (an unnamed `memfd`, read and sent with `sendfile` like a
//! volume) and its commit is `Committed::NotStored`. The write error still counts toward
//! the disk's `disk_error_limit`, so a failing disk still leaves service.
//!
//! What was written before the error is copied from where the readers read it; if that
//! read fails too the fill is aborted as before. The memory is the body's, at most a
//! volume, and goes with the fill's last reader.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::fill::FillWriter;
use super::fill_state::Place;
use crate::StoreError;

/// An unnamed file in memory.
fn memory_file() -> std::io::Result<File> {
    let fd = rustix::fs::memfd_create("reel-fill", rustix::fs::MemfdFlags::CLOEXEC)?;
    Ok(File::from(fd))
}

impl FillWriter {
    /// Whether `e`, from a write into the fill's volume, is one the fill survives by
    /// going on in memory ([`FillWriter::rescue`]).
    pub(super) fn rescuable(&self, e: &StoreError) -> bool {
        matches!(e, StoreError::Io(_) | StoreError::Gone)
            && self.spill.is_none()
            && !self.internal
            && !self.done
            && !self.shared.purged.load(Ordering::SeqCst)
    }

    /// After `e` from a write into the fill's volume: moves the fill into memory, copying
    /// the bytes written so far from the place its readers read them, and leaves the
    /// volume. Returns whether the fill goes on; `false` leaves it as it was.
    pub(super) async fn rescue(&mut self, e: &StoreError) -> bool {
        if !self.rescuable(e) {
            return false;
        }
        let file = match memory_file() {
            Ok(f) => Arc::new(f),
            Err(err) => {
                tracing::warn!(error = %err, "cannot create a memory file for a failed fill");
                return false;
            }
        };
        let (old_file, old_body, old_vol) = {
            let p = self.shared.place(self.place);
            (p.file.clone(), p.body_off, p.vol().cloned())
        };
        let mut pos = 0;
        while pos < self.written {
            let n = (self.written - pos).min(super::fill::MOVE_CHUNK);
            let buf = match self.store.io.read_exact_at(&old_file, n as usize, old_body + pos).await
            {
                Ok(b) => b,
                Err(err) => {
                    if let Some(v) = &old_vol {
                        self.store.read_error(v, &err);
                    }
                    return false;
                }
            };
            if let Err(err) = self.store.io.write_all_at(&file, Bytes::from(buf), pos).await {
                tracing::warn!(error = %err, "cannot copy a failed fill into memory");
                return false;
            }
            pos += n;
        }
        {
            // Nothing of ours reached the disk: give the reservation back (as an abort).
            let mut a = self.store.lock_alloc();
            if !self.header_on_disk && a.active == Some(self.vol.idx) && a.head == self.reserved_end
            {
                a.head = self.rec_off;
            }
        }
        // No longer writing into the volume.
        self.vol.writers.fetch_sub(1, Ordering::SeqCst);
        self.spill = Some(file.clone());
        self.in_memory = true;
        self.body_off = 0;
        self.shared.push_place(Place::new(None, file, 0));
        self.place += 1;
        let (written, place) = (self.written, self.place);
        self.shared.progress.send_modify(|p| {
            p.written = written;
            p.place = place;
        });
        self.store.c.rescued.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(error = %e, written, "a fill goes on in memory, unstored, after a write error");
        true
    }
}
