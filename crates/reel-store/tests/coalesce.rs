//! Fills written in coalesced, aligned pieces: what followers see mid-fill (only bytes in
//! the file, byte-exact, at write boundaries or after a flush), after commit, and that a
//! fill aborted or failed with bytes still pending leaves nothing served.

use std::os::unix::fs::FileExt;

use bytes::Bytes;
use reel_store::{Committed, IoMode, Lookup, StoreError};

use crate::{body, both, get, open, rt};

/// The store's fill write unit (`disk::coalesce::WRITE_UNIT`).
const UNIT: u64 = 256 << 10;

/// Reads body bytes `0..len` of a fill through its file range, with plain pread (what
/// sendfile would send).
fn pread_fill(f: &reel_store::Filling, len: u64) -> Vec<u8> {
    let r = f.file_range(0, len).unwrap();
    let file = std::fs::File::from(r.fd.try_clone_to_owned().unwrap());
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, r.offset).unwrap();
    buf
}

fn followers_see_exact_bytes(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 4, io);
    rt(async {
        for known in [true, false] {
            let key: &[u8] = if known { b"known" } else { b"unknown" };
            let data = body(7, 700_001);
            let len = known.then_some(data.len() as u64);
            let mut w = s.begin_fill(key, Bytes::from_static(b"m"), len).await.unwrap();
            let Some(Lookup::Filling(f)) = s.lookup(key).await else { panic!("expected filling") };
            // A follower on another worker thread, with its own runtime and ring.
            let expect = data.clone();
            let mut f2 = f.clone();
            let follower = std::thread::spawn(move || {
                rt(async move {
                    let mut got = Vec::new();
                    loop {
                        let st = f2.wait_for(got.len() as u64 + 1).await.unwrap();
                        if st.available > got.len() as u64 {
                            let b = f2
                                .read(got.len() as u64, st.available - got.len() as u64)
                                .await
                                .unwrap();
                            got.extend_from_slice(&b);
                        }
                        if st.final_len == Some(got.len() as u64) {
                            break;
                        }
                    }
                    assert_eq!(got, expect);
                })
            });
            let mut taken = 0u64;
            let mut saw_boundary = false;
            let mut seen = 0;
            let mut held = false;
            for c in data.chunks(7_001) {
                w.append(Bytes::copy_from_slice(c)).await.unwrap();
                taken += c.len() as u64;
                assert_eq!(w.written(), taken);
                let st = f.status().unwrap();
                // Readers see only what is in the file, and that is byte-exact.
                assert_eq!(st.available + w.pending(), taken);
                if st.available != seen && st.available == taken {
                    held = true;
                }
                if st.available != seen && st.available < taken {
                    let r = f.file_range(0, st.available).unwrap();
                    assert_eq!((r.offset + r.len) % UNIT, 0, "writes end on a unit boundary");
                    assert!(w.pending() < UNIT + c.len() as u64);
                    saw_boundary = true;
                }
                seen = st.available;
                assert_eq!(pread_fill(&f, st.available), data[..st.available as usize]);
                if taken == 14_002 * 10 {
                    // A flush makes everything taken readable at once.
                    w.flush().await.unwrap();
                    assert_eq!(w.pending(), 0);
                    assert_eq!(f.status().unwrap().available, taken);
                    assert_eq!(pread_fill(&f, taken), data[..taken as usize]);
                    seen = taken;
                }
            }
            // On a slow machine the writer's hold bound (4 ms) may write everything
            // before a boundary is reached; that is allowed, a boundary is the usual case.
            assert!(saw_boundary || held, "bytes became readable before the commit");
            assert_eq!(w.commit().await.unwrap(), Committed::Stored);
            follower.join().unwrap();
            assert_eq!(f.status().unwrap().final_len, Some(data.len() as u64));
            assert_eq!(get(&s, key).await.unwrap().1, data);
            let Some(Lookup::Hit(h)) = s.lookup(key).await else { panic!("expected hit") };
            let r = h.file_range(0, h.body_len()).unwrap();
            let file = std::fs::File::from(r.fd.try_clone_to_owned().unwrap());
            let mut buf = vec![0u8; data.len()];
            file.read_exact_at(&mut buf, r.offset).unwrap();
            assert_eq!(buf, data, "the sendfile range is byte-exact");
        }
    });
}
both!(a_coalesced_fill_is_byte_exact_for_followers_and_after_commit, followers_see_exact_bytes);

fn pending_bytes_never_served(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path(), 4, io);
        rt(async {
            // Aborted with bytes both written and pending: followers get Aborted, the key
            // misses.
            let data = body(9, 400_000);
            let mut w = s.begin_fill(b"a", Bytes::new(), Some(data.len() as u64)).await.unwrap();
            w.append(Bytes::copy_from_slice(&data[..300_000])).await.unwrap();
            assert!(w.pending() > 0);
            let Some(Lookup::Filling(mut f)) = s.lookup(b"a").await else { panic!() };
            assert!(f.status().unwrap().available > 0);
            drop(w);
            assert!(matches!(f.wait_for(400_000).await, Err(StoreError::Aborted)));
            assert!(s.lookup(b"a").await.is_none());
            // Short of its announced length at commit, with bytes pending: refused.
            let mut w = s.begin_fill(b"b", Bytes::new(), Some(data.len() as u64)).await.unwrap();
            w.append(Bytes::copy_from_slice(&data[..100_000])).await.unwrap();
            assert!(w.pending() > 0);
            assert!(matches!(w.commit().await, Err(StoreError::LengthMismatch { .. })));
            assert!(s.lookup(b"b").await.is_none());
            // Of unknown length, aborted explicitly with bytes pending.
            let mut w = s.begin_fill(b"c", Bytes::new(), None).await.unwrap();
            w.append(Bytes::copy_from_slice(&data[..30_000])).await.unwrap();
            w.abort();
            assert!(s.lookup(b"c").await.is_none());
            // A complete one beside them, to see the store keeps what it should.
            let mut w = s.begin_fill(b"d", Bytes::new(), None).await.unwrap();
            w.append(Bytes::copy_from_slice(&data[..30_000])).await.unwrap();
            assert_eq!(w.commit().await.unwrap(), Committed::Stored);
            assert_eq!(s.stats().objects, 1);
        });
        s.close().unwrap();
    }
    // After a restart too: only the committed object.
    let s = open(dir.path(), 4, io);
    rt(async {
        for k in [&b"a"[..], b"b", b"c"] {
            assert!(s.lookup(k).await.is_none());
        }
        assert_eq!(get(&s, b"d").await.unwrap().1, body(9, 30_000));
        assert_eq!(s.stats().objects, 1);
    });
}
both!(a_fill_aborted_with_bytes_pending_leaves_nothing_served, pending_bytes_never_served);

fn slow_stream_is_written_within_the_hold(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 4, io);
    rt(async {
        let data = body(11, 30_000);
        let mut w = s.begin_fill(b"slow", Bytes::new(), None).await.unwrap();
        let Some(Lookup::Filling(f)) = s.lookup(b"slow").await else { panic!() };
        w.append(Bytes::copy_from_slice(&data[..10_000])).await.unwrap();
        assert_eq!(f.status().unwrap().available, 0, "below the boundary: pending");
        // The next chunk comes after the writer's hold bound (4 ms): everything taken is
        // written with it, although no boundary was reached and nobody flushed.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        w.append(Bytes::copy_from_slice(&data[10_000..20_000])).await.unwrap();
        assert_eq!(w.pending(), 0);
        assert_eq!(f.status().unwrap().available, 20_000);
        assert_eq!(pread_fill(&f, 20_000), data[..20_000]);
        w.append(Bytes::copy_from_slice(&data[20_000..])).await.unwrap();
        assert_eq!(w.commit().await.unwrap(), Committed::Stored);
        assert_eq!(get(&s, b"slow").await.unwrap().1, data);
    });
}
both!(a_slow_stream_is_written_within_the_hold_bound, slow_stream_is_written_within_the_hold);
