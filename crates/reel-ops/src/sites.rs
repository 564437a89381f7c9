//! Per-site counters: requests by status class, requests served from the cache and bytes
//! written, under a bounded `site` label, so a node that serves many tenants can be billed
//! and watched per site from `/metrics`.
//!
//! A site is known by a small id that names it for the whole process ([`SiteIds`]): ids
//! are handed out by name when a config generation is built and never reused, so a reload
//! that renames, adds or removes sites leaves every remaining name's counters where they
//! were (a counter never goes down), and a request answered across a reload is counted
//! under the site that answered it. A name no longer configured keeps its series until
//! the process ends.
//!
//! Each worker writes its own [`SiteCounters`] (relaxed atomics no other core writes) and
//! reaches them through its [`SiteView`], a plain vector indexed by id: recording a request
//! takes no lock and allocates nothing. A worker meets an id the first time with one lock
//! of its [`WorkerSites`] table, which the admin listener reads to render.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use reel_metrics::{Kind, PromWriter};

/// The label of requests no site answered (unknown Host, `/healthz`, refused heads, the
/// catch-all of `--origin`): id 0.
pub const NO_SITE: &str = "_none";
/// The label of sites past the most ids a process hands out.
pub const OTHER_SITES: &str = "_other";

/// Status classes 1xx..5xx, index 0 for anything else.
const N_CLASSES: usize = 6;

/// Site names and their ids, for the whole process. Id 0 is [`NO_SITE`]; `most`, the
/// largest id, is [`OTHER_SITES`], given to every name past the others.
#[derive(Debug)]
pub struct SiteIds {
    most: u16,
    /// Names of ids 1, 2, ... in the order they were first seen.
    names: Mutex<Vec<Arc<str>>>,
}

impl SiteIds {
    /// A table whose largest id is `most` (at least 1).
    pub fn new(most: u16) -> SiteIds {
        SiteIds { most: most.max(1), names: Mutex::new(Vec::new()) }
    }

    /// The id of site `name`, handed out now if the name is new.
    pub fn id(&self, name: &str) -> u16 {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = names.iter().position(|n| &**n == name) {
            return u16::try_from(i + 1).unwrap_or(self.most);
        }
        let next = names.len() + 1;
        match u16::try_from(next) {
            Ok(id) if id < self.most => {
                names.push(Arc::from(name));
                id
            }
            _ => self.most,
        }
    }

    /// The label of id `id`.
    pub fn label(&self, id: u16) -> Arc<str> {
        if id == 0 {
            return Arc::from(NO_SITE);
        }
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        match names.get(usize::from(id) - 1) {
            Some(n) if id < self.most => n.clone(),
            _ => Arc::from(OTHER_SITES),
        }
    }
}

/// One site's counters on one worker.
#[derive(Debug, Default)]
pub struct SiteCounters {
    /// Requests by status class (index 0: no status).
    requests: [AtomicU64; N_CLASSES],
    /// Requests served from the cache.
    hits: AtomicU64,
    /// Bytes written to clients.
    bytes: AtomicU64,
}

impl SiteCounters {
    /// Requests so far, all statuses.
    pub fn requests(&self) -> u64 {
        self.requests.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// One worker's counters of every site it has answered, by id (shared with the admin
/// listener; written by the worker only).
#[derive(Debug, Default)]
pub struct WorkerSites {
    table: Mutex<Vec<Option<Arc<SiteCounters>>>>,
}

impl WorkerSites {
    /// The counters of id `id`, made now if this worker has none yet.
    fn slot(&self, id: u16) -> Arc<SiteCounters> {
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let i = usize::from(id);
        if t.len() <= i {
            t.resize(i + 1, None);
        }
        match t.get_mut(i) {
            Some(Some(c)) => c.clone(),
            Some(slot) => slot.insert(Arc::default()).clone(),
            None => Arc::default(),
        }
    }

    /// The counters of id `id`, if this worker has answered the site.
    pub fn get(&self, id: u16) -> Option<Arc<SiteCounters>> {
        let t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        t.get(usize::from(id)).cloned().flatten()
    }

    /// How many ids this worker has a place for.
    fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A worker's lock-free view of its [`WorkerSites`]: lives on the worker's thread.
#[derive(Debug, Default)]
pub struct SiteView {
    slots: RefCell<Vec<Option<Arc<SiteCounters>>>>,
}

impl SiteView {
    /// Counts one request of site `id` in `sites` (the worker's own table): a vector index
    /// and three relaxed increments; the first request of an id on this worker takes the
    /// table's lock once.
    pub fn record(&self, sites: &WorkerSites, id: u16, status: u16, bytes: u64, hit: bool) {
        let class = match status / 100 {
            c @ 1..=5 => usize::from(c),
            _ => 0,
        };
        let i = usize::from(id);
        let mut slots = self.slots.borrow_mut();
        if slots.get(i).is_none_or(Option::is_none) {
            if slots.len() <= i {
                slots.resize(i + 1, None);
            }
            if let Some(s) = slots.get_mut(i) {
                *s = Some(sites.slot(id));
            }
        }
        let Some(Some(c)) = slots.get(i) else { return };
        if let Some(r) = c.requests.get(class) {
            r.fetch_add(1, Relaxed);
        }
        if hit {
            c.hits.fetch_add(1, Relaxed);
        }
        c.bytes.fetch_add(bytes, Relaxed);
    }
}

/// Renders `reel_site_requests_total{site,status}`, `reel_site_hits_total{site}` and
/// `reel_site_bytes_out_total{site}`, summed over the workers, for every site a worker
/// has answered.
pub fn render_sites(p: &mut PromWriter, ids: &SiteIds, workers: &[&WorkerSites]) {
    let n = workers.iter().map(|w| w.len()).max().unwrap_or(0);
    let mut rows: Vec<(Arc<str>, Vec<Arc<SiteCounters>>)> = Vec::new();
    for id in 0..n {
        let id = u16::try_from(id).unwrap_or(u16::MAX);
        let counters: Vec<Arc<SiteCounters>> = workers.iter().filter_map(|w| w.get(id)).collect();
        if !counters.is_empty() {
            rows.push((ids.label(id), counters));
        }
    }
    let sum = |cs: &[Arc<SiteCounters>], f: &dyn Fn(&SiteCounters) -> u64| -> u64 {
        cs.iter().map(|c| f(c)).sum()
    };
    p.family(
        "reel_site_requests_total",
        Kind::Counter,
        "Requests answered, by site and status class.",
    );
    for (site, cs) in &rows {
        for class in 0..N_CLASSES {
            let v = sum(cs, &|c| c.requests.get(class).map_or(0, |r| r.load(Relaxed)));
            if v == 0 {
                continue;
            }
            let cls = if class == 0 { "other".to_string() } else { format!("{class}xx") };
            p.sample("reel_site_requests_total", &[("site", site), ("status", &cls)], v);
        }
    }
    p.family(
        "reel_site_hits_total",
        Kind::Counter,
        "Requests served from the cache (hit or stale), by site.",
    );
    for (site, cs) in &rows {
        p.sample("reel_site_hits_total", &[("site", site)], sum(cs, &|c| c.hits.load(Relaxed)));
    }
    p.family("reel_site_bytes_out_total", Kind::Counter, "Bytes written to clients, by site.");
    for (site, cs) in &rows {
        let v = sum(cs, &|c| c.bytes.load(Relaxed));
        p.sample("reel_site_bytes_out_total", &[("site", site)], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_by_name_and_bounded() {
        let ids = SiteIds::new(4);
        assert_eq!(ids.id("a"), 1);
        assert_eq!(ids.id("b"), 2);
        assert_eq!(ids.id("a"), 1, "the same name, the same id");
        assert_eq!(ids.id("c"), 3);
        assert_eq!(ids.id("d"), 4, "past the most: the shared id");
        assert_eq!(ids.id("e"), 4);
        assert_eq!(&*ids.label(0), NO_SITE);
        assert_eq!(&*ids.label(2), "b");
        assert_eq!(&*ids.label(4), OTHER_SITES);
        assert_eq!(&*ids.label(9), OTHER_SITES);
    }

    #[test]
    fn workers_count_apart_and_render_summed() {
        let ids = SiteIds::new(100);
        let (a, b) = (ids.id("tenant-a"), ids.id("tenant-b"));
        let (wa, wb) = (WorkerSites::default(), WorkerSites::default());
        let (va, vb) = (SiteView::default(), SiteView::default());
        va.record(&wa, a, 200, 100, true);
        vb.record(&wb, a, 200, 50, false);
        vb.record(&wb, b, 404, 10, false);
        vb.record(&wb, 0, 421, 5, false);
        va.record(&wa, 7, 0, 0, false);
        assert_eq!(wb.get(a).map(|c| c.requests()), Some(1));
        let mut p = PromWriter::new();
        render_sites(&mut p, &ids, &[&wa, &wb]);
        let t = p.finish();
        for line in [
            "reel_site_requests_total{site=\"tenant-a\",status=\"2xx\"} 2\n",
            "reel_site_requests_total{site=\"tenant-b\",status=\"4xx\"} 1\n",
            "reel_site_requests_total{site=\"_none\",status=\"4xx\"} 1\n",
            "reel_site_requests_total{site=\"_other\",status=\"other\"} 1\n",
            "reel_site_hits_total{site=\"tenant-a\"} 1\n",
            "reel_site_hits_total{site=\"tenant-b\"} 0\n",
            "reel_site_bytes_out_total{site=\"tenant-a\"} 150\n",
            "reel_site_bytes_out_total{site=\"_none\"} 5\n",
        ] {
            assert!(t.contains(line), "{line} in {t}");
        }
        assert!(!t.contains("site=\"tenant-b\",status=\"2xx\""), "zero classes left out: {t}");
    }
}
