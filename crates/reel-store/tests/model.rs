//! Model-based property test: random put / get / streaming put / evict / restart
//! sequences against a HashMap model.
//!
//! The store may forget objects (eviction, fills refused while a volume drains), so the
//! model is "last value written": anything the store returns must equal the model's
//! value for the key, removed keys must stay gone, and a key never written must miss.

use std::collections::HashMap;

use bytes::Bytes;
use proptest::prelude::*;
use reel_store::{Committed, IoMode};

use crate::{body, get, open};

/// (meta, body) of an object.
type Value = (Vec<u8>, Vec<u8>);

#[derive(Clone, Debug)]
enum Op {
    Put { key: u8, seed: u64, len: usize, known: bool },
    Stream { key: u8, seed: u64, len: usize, commit: bool },
    Get { key: u8 },
    Remove { key: u8 },
    Meta { key: u8, v: u8 },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, any::<u64>(), 0usize..300_000, any::<bool>())
            .prop_map(|(key, seed, len, known)| Op::Put { key, seed, len, known }),
        2 => (0u8..12, any::<u64>(), 0usize..200_000, any::<bool>())
            .prop_map(|(key, seed, len, commit)| Op::Stream { key, seed, len, commit }),
        4 => (0u8..12).prop_map(|key| Op::Get { key }),
        1 => (0u8..12).prop_map(|key| Op::Remove { key }),
        1 => (0u8..12, any::<u8>()).prop_map(|(key, v)| Op::Meta { key, v }),
        1 => Just(Op::Restart),
    ]
}

thread_local! {
    static RT: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
}

fn run(ops: Vec<Op>, io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    // 3 volumes of 1 MiB: a few puts force reclaims.
    let mut s = open(dir.path(), 3, io);
    // key -> (meta, body) last written; None = removed.
    let mut model: HashMap<u8, Option<Value>> = HashMap::new();
    let mut unknown = std::collections::HashSet::new();
    RT.with(|rt| {
        rt.block_on(async {
            for op in ops {
                match op {
                    Op::Put { key, seed, len, known } => {
                        let data = body(seed, len);
                        let meta = vec![key, 0];
                        let k = [b'k', key];
                        // A refused fill leaves the previous object in place.
                        if let Ok(mut w) = s
                            .begin_fill(&k, Bytes::from(meta.clone()), known.then_some(len as u64))
                            .await
                        {
                            let mut ok = true;
                            for c in data.chunks(64 * 1024) {
                                ok &= w.append(Bytes::copy_from_slice(c)).await.is_ok();
                            }
                            if ok && w.commit().await.is_ok_and(|c| c == Committed::Stored) {
                                unknown.remove(&key);
                                model.insert(key, Some((meta, data)));
                            }
                        }
                    }
                    Op::Stream { key, seed, len, commit } => {
                        let data = body(seed, len);
                        let k = [b'k', key];
                        if let Ok(mut w) = s.begin_fill(&k, Bytes::from(vec![key, 1]), None).await {
                            let half = len / 2;
                            let _ = w.append(Bytes::copy_from_slice(&data[..half])).await;
                            if let Some(reel_store::Lookup::Filling(f)) = s.lookup(&k).await {
                                let st = f.status();
                                if let Ok(st) = st
                                    && st.available > 0
                                {
                                    let got = f.read(0, st.available).await.unwrap();
                                    prop_assert_eq!(&got[..], &data[..st.available as usize]);
                                }
                            }
                            let _ = w.append(Bytes::copy_from_slice(&data[half..])).await;
                            // An aborted refill restores the previous object.
                            if commit && w.commit().await.is_ok_and(|c| c == Committed::Stored) {
                                unknown.remove(&key);
                                model.insert(key, Some((vec![key, 1], data)));
                            }
                        }
                    }
                    Op::Get { key } => {
                        let got = get(&s, &[b'k', key]).await;
                        if let Some(got) = got
                            && !unknown.contains(&key)
                        {
                            match model.get(&key) {
                                Some(Some(want)) => {
                                    prop_assert!(&got == want, "key {} differs", key)
                                }
                                _ => prop_assert!(
                                    false,
                                    "key {} returned but never stored/removed",
                                    key
                                ),
                            }
                        }
                    }
                    Op::Remove { key } => {
                        // A tombstone that cannot be written (no free volume) leaves
                        // the key undetermined after a restart.
                        if s.remove(&[b'k', key]).await.is_err() {
                            unknown.insert(key);
                        } else {
                            unknown.remove(&key);
                        }
                        model.insert(key, None);
                    }
                    Op::Meta { key, v } => {
                        match s.update_meta(&[b'k', key], Bytes::from(vec![v])).await {
                            Ok(true) => {
                                if let Some(Some((m, _))) = model.get_mut(&key) {
                                    *m = vec![v];
                                }
                            }
                            Ok(false) => {}
                            // Not persisted, but maybe applied: nothing to assert.
                            Err(_) => {}
                        }
                    }
                    Op::Restart => {
                        drop(s);
                        s = open(dir.path(), 3, io);
                    }
                }
                let st = s.stats();
                prop_assert!(st.bytes_used <= st.capacity);
            }
            // Final full check after a restart.
            drop(s);
            s = open(dir.path(), 3, io);
            for (key, want) in &model {
                if let Some(got) = get(&s, &[b'k', *key]).await
                    && !unknown.contains(key)
                {
                    prop_assert!(Some(&got) == want.as_ref(), "key {} differs after restart", key);
                }
            }
            Ok(())
        })
    })
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    #[cfg_attr(reel_no_uring, ignore = "io_uring is unavailable on this machine")]
    fn model_uring(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops, IoMode::Uring);
    }

    #[test]
    fn model_threads(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops, IoMode::Threads);
    }
}
