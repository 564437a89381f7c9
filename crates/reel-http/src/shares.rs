//! Budgets shared by key on one worker ([`Shares`]): every holder of one key (the
//! connections of one client address, the requests of one connection) draws from the same
//! semaphore while any of them holds it, and the entry is forgotten once none does.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Weak};

use tokio::sync::Semaphore;

/// Budgets by key, for one worker thread.
#[derive(Debug)]
pub struct Shares<K> {
    map: RefCell<HashMap<K, Weak<Semaphore>>>,
}

impl<K> Default for Shares<K> {
    fn default() -> Self {
        Shares { map: RefCell::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash> Shares<K> {
    /// The budget of `key`: the one its other holders have, else a new one of `permits`.
    pub fn get(&self, key: K, permits: usize) -> Arc<Semaphore> {
        let mut map = self.map.borrow_mut();
        if let Some(s) = map.get(&key).and_then(Weak::upgrade) {
            return s;
        }
        if map.len() >= 64 && map.len().is_power_of_two() {
            // Forget the keys nobody holds any more, now and then: the map stays within
            // about twice the keys in use.
            map.retain(|_, w| w.strong_count() > 0);
        }
        let s = Arc::new(Semaphore::new(permits.clamp(1, Semaphore::MAX_PERMITS)));
        map.insert(key, Arc::downgrade(&s));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_of_a_key_share_its_budget_until_none_holds_it() {
        let shares = Shares::default();
        let a = shares.get(1u32, 2);
        assert!(Arc::ptr_eq(&a, &shares.get(1, 2)), "a second holder shares it");
        assert!(!Arc::ptr_eq(&a, &shares.get(2, 2)), "another key has its own");
        let _p = a.clone().try_acquire_owned().unwrap();
        assert_eq!(shares.get(1, 2).available_permits(), 1);
        drop((a, _p));
        assert_eq!(shares.get(1, 2).available_permits(), 2, "forgotten, then made anew");
        for k in 0..1000u32 {
            let _ = shares.get(k, 1);
        }
        assert!(shares.map.borrow().len() <= 128, "unheld keys are forgotten");
    }
}
