//! Purges by prefix without keys in memory. The index does not hold keys, so a purge
//! cannot walk it comparing them: it becomes a rule, *every key starting with this
//! prefix written before this point of the log is gone*, and a lookup applies the rules
//! to the key it was asked for (it knows that key). A point of the log is a volume
//! incarnation and an offset in it: incarnations only grow, so every record written
//! after the purge lies past its point.
//!
//! The purge record's own position is the rule's point, at once and after a restart
//! (the scan finds the record there; the checkpoint keeps the rules). Fills in flight
//! hold their key and are aborted at once, as before. An entry found purged leaves the
//! index on that lookup; the others go with their volumes, and a second-chance copy
//! checks the rules first. A rule is dropped once no volume of its incarnation or
//! older holds anything.

use std::sync::atomic::Ordering;

use super::entry::Loc;
use super::index::Slot;
use super::purge_rule::Rule;
use super::state::Disk;

impl Disk {
    /// Whether `key`, stored at `loc` (leased, so its volume's incarnation is current),
    /// was purged.
    pub(super) fn is_purged(&self, key: &[u8], loc: &Loc) -> bool {
        if self.purge_n.load(Ordering::Acquire) == 0 {
            return false;
        }
        let seq = self.vols[loc.vol as usize].seq.load(Ordering::SeqCst);
        self.purged_at(key, seq, loc.rec_off)
    }

    /// Whether `key` written at (`seq`, `off`) was purged.
    pub(super) fn purged_at(&self, key: &[u8], seq: u64, off: u64) -> bool {
        if self.purge_n.load(Ordering::Acquire) == 0 {
            return false;
        }
        let rules = self.purges.read().unwrap_or_else(|p| p.into_inner());
        rules.iter().any(|r| r.covers(key, seq, off))
    }

    /// Takes a purged entry out of the index, if it is still the one at `loc`; whether it
    /// did.
    pub(super) fn drop_purged(&self, h: u64, loc: &Loc) -> bool {
        let Ok(mut s) = self.shard(h).write() else { return false };
        if matches!(s.get(&h), Some(Slot::Ready(e)) if e.loc() == *loc)
            && let Some(slot) = s.remove(&h)
        {
            drop(s);
            self.retire_slot(h, slot);
            self.c.changes.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Adds a rule (the purge's point: the write head now, moved to its record's
    /// position once written, or the record's position at a load).
    pub(super) fn add_rule(&self, rule: Rule) {
        let mut rules = self.purges.write().unwrap_or_else(|p| p.into_inner());
        rules.push(rule);
        self.purge_n.store(rules.len(), Ordering::Release);
    }

    /// Moves the rule of `prefix` at `from` to `to` (its record's position).
    pub(super) fn move_rule(&self, prefix: &[u8], from: (u64, u64), to: (u64, u64)) {
        let mut rules = self.purges.write().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = rules.iter_mut().find(|r| &*r.prefix == prefix && (r.seq, r.off) == from) {
            (r.seq, r.off) = to;
        }
    }

    /// The point a purge starting now covers: everything allocated so far.
    pub(super) fn head_point(&self) -> (u64, u64) {
        let a = self.lock_alloc();
        match a.active {
            Some(v) => (self.vols[v as usize].seq.load(Ordering::SeqCst), a.head),
            None => (a.next_seq, 0),
        }
    }

    /// The rules in force.
    pub(super) fn rules(&self) -> Vec<Rule> {
        self.purges.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Drops the rules that no longer cover anything: no volume of their incarnation or
    /// older holds records.
    pub(super) fn retire_rules(&self) {
        if self.purge_n.load(Ordering::Acquire) == 0 {
            return;
        }
        let oldest = self
            .vols
            .iter()
            .map(|v| v.seq.load(Ordering::SeqCst))
            .filter(|&s| s != 0)
            .min()
            .unwrap_or(u64::MAX);
        let mut rules = self.purges.write().unwrap_or_else(|p| p.into_inner());
        rules.retain(|r| r.seq >= oldest);
        self.purge_n.store(rules.len(), Ordering::Release);
    }

    /// Aborts the fills in flight of keys starting with `prefix`; returns how many.
    pub(super) fn purge_fills(&self, prefix: &[u8]) -> u64 {
        let mut n = 0;
        for shard in self.shards.iter() {
            let taken: Vec<(u64, Slot)> = {
                let Ok(mut s) = shard.write() else { continue };
                let hs: Vec<u64> = s
                    .iter()
                    .filter(|(_, v)| matches!(v, Slot::Filling(f) if f.key.starts_with(prefix)))
                    .map(|(h, _)| *h)
                    .collect();
                hs.into_iter().filter_map(|h| s.remove(&h).map(|v| (h, v))).collect()
            };
            n += taken.len() as u64;
            for (h, slot) in taken {
                self.retire_slot(h, slot);
            }
        }
        n
    }
}
