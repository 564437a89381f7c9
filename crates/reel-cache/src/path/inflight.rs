//! One origin fetch per key at a time, across every worker.
//!
//! The first request for a key that is neither stored nor being fetched becomes the
//! *leader* and gets a [`Lead`]; every later request for the same key gets a [`Follow`]
//! and waits on a `watch` channel, woken the moment the leader knows what the origin
//! said (no polling interval). Once the leader has started writing the object into the
//! store ([`State::Filling`]), followers read it from there while it is still arriving,
//! so their first byte comes with the origin's. Dropping a `Lead` without publishing
//! anything tells followers the fetch failed, so a fetch that panics never strands them.
//! A viewer's fetch runs as a task of its own (`conductor::lead`): a leader whose client
//! vanished before the origin answered stops waiting, and the fetch still publishes while
//! a follower waits on it. Once nobody waits any more (the leader's [`Viewing`] and every
//! follower gone) before the origin has answered, the fetch is abandoned
//! ([`Lead::unwanted`]), which gives its origin connection back.
//!
//! A fill that will not be stored (refused by admission) leaves the store's index when it
//! commits, so a follower woken by `Filling` or `Done` may look the key up too late to find
//! it. The leader hands such a fill to its followers through the entry ([`Lead::share_fill`],
//! [`Follow::shared_fill`]): one origin fetch still serves every request that waited on it.
//!
//! The map is sharded by key hash; a shard's mutex is held only to insert or remove an
//! entry, never across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use reel_store::Filling;
use tokio::sync::watch;

const SHARDS: usize = 32;

/// What followers learn about the leader's fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The origin has not answered yet.
    Waiting,
    /// The response is being written to the store: look the key up and stream it.
    Filling,
    /// The response could not be shared (not storable, or the store refused it):
    /// followers fetch on their own.
    NotShared,
    /// The fetch finished and the store has the result (revalidated or stored): look up again.
    Done,
    /// The fetch failed; followers answer with this status (502/504) or stale content.
    Failed(u16),
    /// The fetch was an LL-HLS blocking request whose media did not appear within
    /// `blocking_timeout`: its followers answer 504 `detail=blocking-timeout`.
    BlockingTimeout,
}

impl State {
    /// The status a follower answers with when the fetch failed (a blocking timeout is a
    /// 504), `None` when it did not.
    pub fn failure(self) -> Option<u16> {
        match self {
            State::Failed(st) => Some(st),
            State::BlockingTimeout => Some(504),
            _ => None,
        }
    }
}

/// One fetch: its state, and the fill the leader shares with its followers. Followers hold
/// the fill's slot, never the sender: a leader gone without a word closes the channel.
struct Entry {
    tx: watch::Sender<State>,
    fill: Arc<OnceLock<Filling>>,
}

impl Entry {
    fn new() -> Arc<Entry> {
        Arc::new(Entry { tx: watch::channel(State::Waiting).0, fill: Arc::default() })
    }

    fn follow(&self) -> Follow {
        Follow { rx: self.tx.subscribe(), fill: self.fill.clone() }
    }
}

type Shard = Mutex<HashMap<Box<[u8]>, Arc<Entry>>>;

/// The cross-worker in-flight map.
pub struct Inflight {
    shards: Vec<Shard>,
}

impl Default for Inflight {
    fn default() -> Self {
        Inflight { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }
}

/// The leader's handle. Publishing updates followers; dropping it removes the entry.
pub struct Lead {
    map: Arc<Inflight>,
    key: Box<[u8]>,
    entry: Arc<Entry>,
    finished: bool,
}

/// Held by the leader's own request while it waits for its fetch: with the followers, who
/// still wants the fetch's answer (see [`Lead::unwanted`]).
pub struct Viewing {
    _rx: watch::Receiver<State>,
}

/// A follower's handle.
pub struct Follow {
    rx: watch::Receiver<State>,
    fill: Arc<OnceLock<Filling>>,
}

/// Where a follower finds the fill its leader shared, after its wait.
pub struct SharedFill(Arc<OnceLock<Filling>>);

impl SharedFill {
    /// The fill the leader shared, if it did.
    pub fn get(&self) -> Option<Filling> {
        self.0.get().cloned()
    }
}

/// Either role.
pub enum Role {
    /// Fetch from the origin and publish.
    Lead(Lead),
    /// Wait for the leader.
    Follow(Follow),
}

impl Inflight {
    /// An empty map.
    pub fn new() -> Arc<Inflight> {
        Arc::new(Inflight::default())
    }

    fn shard(&self, key: &[u8]) -> &Shard {
        let h = xxhash_rust::xxh3::xxh3_64(key) as usize;
        &self.shards[h % self.shards.len()]
    }

    /// Becomes the leader for `key`, or a follower of the current leader.
    pub fn join(self: &Arc<Self>, key: &[u8]) -> Role {
        let Ok(mut shard) = self.shard(key).lock() else {
            // A poisoned shard only means another thread panicked while holding it; the
            // map is still consistent (inserts and removes are single operations).
            return self.lead_unshared(key);
        };
        if let Some(e) = shard.get(key) {
            return Role::Follow(e.follow());
        }
        let tx = Entry::new();
        shard.insert(key.into(), tx.clone());
        Role::Lead(Lead { map: self.clone(), key: key.into(), entry: tx, finished: false })
    }

    /// Follows the current leader for `key`, if there is one; never leads.
    pub fn follow(&self, key: &[u8]) -> Option<Follow> {
        let shard = self.shard(key).lock().unwrap_or_else(|p| p.into_inner());
        shard.get(key).map(|e| e.follow())
    }

    /// Only becomes the leader if nobody is fetching `key` (background revalidation).
    pub fn try_lead(self: &Arc<Self>, key: &[u8]) -> Option<Lead> {
        match self.join(key) {
            Role::Lead(l) => Some(l),
            Role::Follow(_) => None,
        }
    }

    fn lead_unshared(self: &Arc<Self>, key: &[u8]) -> Role {
        let tx = Entry::new();
        Role::Lead(Lead { map: self.clone(), key: key.into(), entry: tx, finished: true })
    }

    /// Keys being fetched right now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map(|m| m.len()).unwrap_or(0)).sum()
    }

    /// Whether nothing is being fetched.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remove(&self, key: &[u8], tx: &Arc<Entry>) {
        if let Ok(mut shard) = self.shard(key).lock()
            && shard.get(key).is_some_and(|cur| Arc::ptr_eq(cur, tx))
        {
            shard.remove(key);
        }
    }
}

impl Lead {
    /// Tells followers what happened. `Filling` keeps the entry (late arrivals find the
    /// store's fill directly); any other state also ends the leadership.
    pub fn publish(&mut self, s: State) {
        if s != State::Filling && s != State::Waiting {
            // Out of the map before anyone is woken: a follower that goes round again must
            // lead (or follow) a new fetch, never join this finished one.
            self.finish();
        }
        self.entry.tx.send_replace(s);
    }

    /// Hands `fill` to the followers (before publishing `Filling`): for a fill that leaves
    /// the store's index at its commit, so followers woken later still find it.
    pub fn share_fill(&self, fill: Filling) {
        let _ = self.entry.fill.set(fill);
    }

    /// The leader's request's own claim on the answer, to hold while it waits.
    pub fn viewing(&self) -> Viewing {
        Viewing { _rx: self.entry.tx.subscribe() }
    }

    /// Resolves once nobody waits for the fetch (no [`Viewing`], no follower) while the
    /// origin has not answered: nothing would use what it brings, so it may be dropped.
    /// Never resolves once the answer is known (a fill goes on for the cache's sake).
    pub fn unwanted(&self) -> impl Future<Output = ()> + 'static {
        let entry = self.entry.clone();
        async move {
            entry.tx.closed().await;
            if *entry.tx.borrow() != State::Waiting {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Removes the entry: later requests look the store up (or lead a new fetch).
    pub fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.map.remove(&self.key, &self.entry);
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.finish();
        if matches!(*self.entry.tx.borrow(), State::Waiting) {
            self.entry.tx.send_replace(State::Failed(502));
        }
    }
}

impl Follow {
    /// Where the fill the leader shares ([`Lead::share_fill`]) can be found after the wait,
    /// which consumes the handle.
    pub fn shared_fill(&self) -> SharedFill {
        SharedFill(self.fill.clone())
    }

    /// Whether the leader's response is being written into the store already.
    pub fn is_filling(&self) -> bool {
        *self.rx.borrow() == State::Filling
    }

    /// Waits until the leader's fetch has ended: past `Filling` too. For a request that
    /// found nothing of its own while another variant of the key fills: one fetch of a
    /// key at a time (its Vary marker is read and written by the leader alone).
    pub async fn wait_done(mut self) -> State {
        loop {
            let s = *self.rx.borrow_and_update();
            if s != State::Waiting && s != State::Filling {
                return s;
            }
            if self.rx.changed().await.is_err() {
                return match *self.rx.borrow() {
                    State::Waiting | State::Filling => State::Failed(502),
                    s => s,
                };
            }
        }
    }

    /// Waits until the leader publishes something other than `Waiting`.
    pub async fn wait(mut self) -> State {
        loop {
            let s = *self.rx.borrow_and_update();
            if s != State::Waiting {
                return s;
            }
            if self.rx.changed().await.is_err() {
                // The leader vanished without a word.
                return match *self.rx.borrow() {
                    State::Waiting => State::Failed(502),
                    s => s,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn one_leader_and_woken_followers() {
        let m = Inflight::new();
        let Role::Lead(mut lead) = m.join(b"k") else { panic!("first is the leader") };
        let Role::Follow(f1) = m.join(b"k") else { panic!("second follows") };
        let Role::Follow(f2) = m.join(b"k") else { panic!("third follows") };
        assert!(m.try_lead(b"k").is_none());
        let t = tokio::spawn(f1.wait());
        lead.publish(State::Filling);
        assert_eq!(t.await.unwrap(), State::Filling);
        assert_eq!(m.len(), 1, "a filling key stays in the map");
        lead.publish(State::Done);
        assert_eq!(f2.wait().await, State::Done, "a late follower sees the latest news");
        assert!(m.is_empty());
        assert!(matches!(m.join(b"k"), Role::Lead(_)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn follow_only_joins_a_fetch_under_way() {
        let m = Inflight::new();
        assert!(m.follow(b"k").is_none());
        assert!(m.is_empty(), "following nothing leads nothing");
        let Role::Lead(mut lead) = m.join(b"k") else { panic!() };
        let f = m.follow(b"k").expect("a fetch is under way");
        let t = tokio::spawn(f.wait());
        lead.publish(State::Filling);
        assert_eq!(t.await.unwrap(), State::Filling);
        lead.publish(State::Done);
        assert!(m.follow(b"k").is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn wait_done_waits_past_filling_for_the_end_of_the_fill() {
        let m = Inflight::new();
        let Role::Lead(mut lead) = m.join(b"k") else { panic!() };
        lead.publish(State::Filling);
        let Role::Follow(f) = m.join(b"k") else { panic!("a filling key is still led") };
        assert!(f.is_filling());
        let t = tokio::spawn(f.wait_done());
        tokio::task::yield_now().await;
        assert!(!t.is_finished(), "still filling");
        lead.publish(State::Done);
        assert_eq!(t.await.unwrap(), State::Done);
        let Role::Lead(mut lead) = m.join(b"k") else { panic!() };
        lead.publish(State::Filling);
        let Role::Follow(f) = m.join(b"k") else { panic!() };
        drop(lead);
        assert_eq!(f.wait_done().await, State::Failed(502), "a leader gone mid-fill");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_leader_fails_its_followers() {
        let m = Inflight::new();
        let Role::Lead(lead) = m.join(b"k") else { panic!() };
        let Role::Follow(f) = m.join(b"k") else { panic!() };
        drop(lead);
        assert_eq!(f.wait().await, State::Failed(502));
        assert!(m.is_empty());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn followers_find_the_fill_the_leader_shared_after_it_ended() {
        let dir = tempfile::tempdir().unwrap();
        let store = reel_store::Store::open(reel_store::StoreConfig::single(
            dir.path().join("s"),
            8 << 20,
            4 << 20,
            reel_store::IoMode::Threads,
        ))
        .unwrap();
        let m = Inflight::new();
        let Role::Lead(mut lead) = m.join(b"k") else { panic!() };
        let Role::Follow(f) = m.join(b"k") else { panic!() };
        let slot = f.shared_fill();
        assert!(slot.get().is_none(), "nothing shared yet");
        let mut w = store.begin_unstored_fill(b"k", bytes::Bytes::new(), Some(2)).await.unwrap();
        let Some(reel_store::Lookup::Filling(fill)) = store.lookup(b"k").await else { panic!() };
        lead.share_fill(fill);
        lead.publish(State::Filling);
        w.append(bytes::Bytes::from_static(b"ok")).await.unwrap();
        w.commit().await.unwrap();
        lead.publish(State::Done);
        assert_eq!(f.wait().await, State::Done);
        assert!(store.lookup(b"k").await.is_none(), "gone from the store");
        let mut fill = slot.get().expect("still reachable through the fetch");
        assert_eq!(fill.wait_for(2).await.unwrap().final_len, Some(2));
        assert_eq!(fill.read(0, 2).await.unwrap(), &b"ok"[..]);
    }

    #[test]
    fn a_default_map_has_shards() {
        let m = Arc::new(Inflight::default());
        let Role::Lead(mut lead) = m.join(b"k") else { panic!("first is the leader") };
        assert!(matches!(m.join(b"k"), Role::Follow(_)));
        assert_eq!(m.len(), 1);
        lead.publish(State::Done);
        assert!(m.is_empty());
    }

    #[test]
    fn followers_on_other_threads_are_woken() {
        let m = Inflight::new();
        let Role::Lead(mut lead) = m.join(b"x") else { panic!() };
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let Role::Follow(f) = m.join(b"x") else { panic!() };
                std::thread::spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap()
                        .block_on(f.wait())
                })
            })
            .collect();
        lead.publish(State::NotShared);
        for h in handles {
            assert_eq!(h.join().unwrap(), State::NotShared);
        }
    }
}
