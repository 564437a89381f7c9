//! Handing the store to another process: a frozen store refuses every write but keeps
//! serving reads, lets writes under way finish, and a store opened afterwards on the
//! same directory finds everything the first one committed.

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig, StoreError};

use crate::{VOL, body, both, get, open, put, rt};

fn freeze_hands_over(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let old = open(dir.path(), 6, io);
    rt(async {
        put(&old, b"a", b"ma", &body(1, 200_000), true).await;
        // A fill under way when the hand-over starts.
        let mut w = old.begin_fill(b"b", Bytes::from_static(b"mb"), Some(100_000)).await.unwrap();
        w.append(Bytes::from(body(2, 60_000))).await.unwrap();

        old.freeze();
        assert!(old.is_frozen());
        assert_eq!(old.writes_in_progress(), 1, "the open fill");
        assert!(matches!(
            old.begin_fill(b"c", Bytes::new(), Some(1)).await,
            Err(StoreError::Closed)
        ));
        assert!(matches!(old.remove(b"a").await, Err(StoreError::Closed)));
        assert!(matches!(old.remove_prefix(b"").await, Err(StoreError::Closed)));
        assert!(matches!(
            old.update_meta(b"a", Bytes::from_static(b"x")).await,
            Err(StoreError::Closed)
        ));
        assert_eq!(get(&old, b"a").await.unwrap().1, body(1, 200_000), "reads go on");

        // The fill under way finishes.
        w.append(Bytes::from(body(2, 100_000)[60_000..].to_vec())).await.unwrap();
        w.commit().await.unwrap();
        assert_eq!(old.writes_in_progress(), 0);
        old.maintain().await;
        assert_eq!(old.writes_in_progress(), 0, "no reclaim starts while frozen");
    });

    // The lock goes with the hand-over; the successor opens the directory, frozen until
    // the first process is gone.
    assert!(old.has_lock());
    old.release_lock().unwrap();
    assert!(!old.has_lock());
    let new = Store::open_frozen(StoreConfig {
        path: dir.path().to_owned(),
        size: 6 * VOL,
        volume_size: VOL,
        io,
        scrub_rate: 0,
    })
    .unwrap();
    new.wait_loaded();
    assert!(new.is_frozen());
    rt(async {
        assert_eq!(get(&new, b"a").await.unwrap(), (b"ma".to_vec(), body(1, 200_000)));
        assert_eq!(get(&new, b"b").await.unwrap().1, body(2, 100_000));
        assert!(matches!(
            new.begin_fill(b"c", Bytes::new(), Some(1)).await,
            Err(StoreError::Closed)
        ));
        assert_eq!(get(&old, b"b").await.unwrap().1, body(2, 100_000));
    });
    drop(old);
    new.thaw();
    rt(async {
        put(&new, b"c", b"mc", &body(3, 50_000), true).await;
        assert!(new.remove(b"a").await.unwrap());
    });
    drop(new);
    let again = open(dir.path(), 6, io);
    rt(async {
        assert!(get(&again, b"a").await.is_none());
        assert_eq!(get(&again, b"c").await.unwrap().1, body(3, 50_000));
    });
}
both!(freeze_hands_over_works, freeze_hands_over);

fn thaw_after_a_called_off_hand_over(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 4, io);
    s.wait_loaded();
    s.freeze();
    assert!(s.release_lock().is_ok());
    // Nobody took it: the store takes the lock back and writes again.
    s.relock().unwrap();
    s.thaw();
    rt(async {
        put(&s, b"k", b"m", &body(4, 10_000), false).await;
        assert!(get(&s, b"k").await.is_some());
    });
}
both!(thaw_after_a_called_off_hand_over_works, thaw_after_a_called_off_hand_over);
