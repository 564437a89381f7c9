//! Fills that are delivered but not kept: a response the admission policy refused
//! (`crate::admission`) still needs one origin fetch shared by every request for it, so it
//! is filled like any object, with a [`Filling`](crate::Filling) slot in the index that
//! concurrent lookups find and follow, but its body goes to a spill file (module `spill`)
//! from the first byte instead of a volume. Its commit is `Committed::NotStored`: readers
//! got the whole body, the slot leaves the index, the file vanishes with the last reader,
//! and no byte was written into a volume.

use std::sync::Arc;

use bytes::Bytes;

use super::fill::FillWriter;
use super::index::Slot;
use super::state::Disk;
use crate::{MAX_KEY_LEN, MAX_META_LEN, StoreError};

impl Disk {
    /// As [`Disk::begin_fill`], but the body is never stored: it goes to a spill file that
    /// readers follow ([`Filling`](crate::Filling) handles, file ranges for sendfile), and
    /// [`FillWriter::commit`] returns
    /// [`Committed::NotStored`](crate::Committed::NotStored). Fails with
    /// [`StoreError::AlreadyFilling`] if a fill for the key is in progress, with
    /// [`StoreError::TooLarge`] for an announced length beyond the store's capacity, and
    /// with [`StoreError::Closed`] while the store is frozen.
    pub(crate) async fn begin_unstored_fill(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        if key.len() > MAX_KEY_LEN || meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        self.check_writable()?;
        let capacity = self.vols.len() as u64 * self.volume_size;
        if let Some(n) = expected_len.filter(|&n| n > capacity) {
            return Err(StoreError::TooLarge(n));
        }
        // Created before the shard is locked: a file system call.
        let file = self.spill_file().map_err(|e| {
            self.write_error(&e);
            StoreError::Io(e)
        })?;
        let h = super::index::index_hash(key);
        let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        if matches!(shard.get(&h), Some(Slot::Filling(_))) {
            return Err(StoreError::AlreadyFilling);
        }
        let w = FillWriter::unstored(self, key, meta, expected_len, Arc::new(file));
        if let Some(Slot::Ready(old)) = shard.insert(h, Slot::Filling(w.shared.clone())) {
            // Served again once this fill is done, as after an abort.
            self.uncount(&old);
            *w.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Committed, IoMode, Lookup};

    fn open(dir: &std::path::Path) -> Arc<Disk> {
        let cfg = super::super::DiskOpen::new(&dir.join("s"), 8 << 20, 4 << 20, IoMode::Threads);
        Disk::open_with(cfg, false, true).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_unstored_fill_is_followed_then_forgotten_and_writes_no_volume() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let before = store.stats();
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = store
            .begin_unstored_fill(b"k", Bytes::from_static(b"meta"), Some(body.len() as u64))
            .await
            .unwrap();
        assert!(matches!(
            store.begin_fill(b"k", Bytes::new(), None).await,
            Err(StoreError::AlreadyFilling)
        ));
        let Some(Lookup::Filling(mut f)) = store.lookup(b"k").await else {
            panic!("a fill to follow")
        };
        assert!(f.is_unstored());
        assert_eq!(f.meta(), &Bytes::from_static(b"meta"));
        w.append(Bytes::copy_from_slice(&body[..100_000])).await.unwrap();
        let late = f.clone();
        w.append(Bytes::copy_from_slice(&body[100_000..])).await.unwrap();
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        for r in [&mut f, &mut late.clone()] {
            let st = r.wait_for(body.len() as u64).await.unwrap();
            assert_eq!(st.final_len, Some(body.len() as u64));
            assert_eq!(r.read(0, body.len() as u64).await.unwrap(), &body[..]);
            let range = r.file_range(1000, 5000).unwrap();
            let mut buf = vec![0u8; 5000];
            rustix::io::pread(range.fd, &mut buf, range.offset).unwrap();
            assert_eq!(buf, &body[1000..6000], "sendfile ranges of the spill file");
        }
        assert!(store.lookup(b"k").await.is_none(), "not stored");
        let after = store.stats();
        assert_eq!(after.bytes_written, before.bytes_written, "nothing written into a volume");
        assert_eq!(after.spill_bytes_written - before.spill_bytes_written, body.len() as u64);
        assert_eq!(after.not_stored, before.not_stored + 1);
        assert_eq!(after.objects, 0);
        // A stored fill of the same key afterwards counts its bytes.
        let mut w = store.begin_fill(b"k", Bytes::new(), Some(10)).await.unwrap();
        w.append(Bytes::from_static(b"0123456789")).await.unwrap();
        assert_eq!(w.commit().await.unwrap(), Committed::Stored);
        assert!(store.stats().bytes_written >= after.bytes_written + 4096 + 10);
        assert!(matches!(store.lookup(b"k").await, Some(Lookup::Hit(_))));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_aborted_unstored_fill_fails_its_readers_and_restores_the_object() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.begin_fill(b"k", Bytes::new(), Some(3)).await.unwrap();
        w.append(Bytes::from_static(b"old")).await.unwrap();
        w.commit().await.unwrap();
        let mut u = store.begin_unstored_fill(b"k", Bytes::new(), None).await.unwrap();
        let Some(Lookup::Filling(mut f)) = store.lookup(b"k").await else { panic!("filling") };
        u.append(Bytes::from_static(b"new bytes")).await.unwrap();
        drop(u);
        assert!(f.wait_for(100).await.is_err(), "readers see the abort");
        let Some(Lookup::Hit(h)) = store.lookup(b"k").await else {
            panic!("the old object is back")
        };
        assert_eq!(h.read(0, 3).await.unwrap(), &b"old"[..]);
        let cap = store.stats().capacity;
        assert!(matches!(
            store.begin_unstored_fill(b"big", Bytes::new(), Some(cap + 1)).await,
            Err(StoreError::TooLarge(_))
        ));
    }
}
