//! `GET /metrics` on the admin listener: the whole Prometheus exposition, family by family
//! in a fixed order. Crates that own counters render them through the shared writer
//! (requests in `reel-ops` [`render_workers`], the access log, slices in `reel-cache`,
//! origins in `reel-origin`, TLS in [`crate::tls`]); this module renders what only the
//! binary holds: the runtime's per-worker connection counts, the store's gauges, binary
//! upgrades, reloads and the drain state.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use reel_ops::metrics::{Kind, PromWriter, render_workers};
use reel_runtime::WorkerStats;

use crate::reload::ReloadStatus;
use crate::state::Shared;
use crate::upgrade::UpgradeStatus;

/// The exposition for the current state.
pub(crate) fn render(s: &Shared) -> String {
    let live = s.live_full();
    let mut p = PromWriter::new();
    render_workers(&mut p, &s.metrics);
    connections(&mut p, s.worker_stats());
    upgrades(&mut p, &s.upgrade_status());
    store(&mut p, &s.store);
    reloads(&mut p, &s.reload_status(), live.generation);
    if let Some(l) = &live.access_log {
        l.render_prometheus(&mut p);
    }
    p.single(
        "reel_body_buffers_lent",
        Kind::Gauge,
        "Pooled 16 KiB body buffers (TLS and HTTP/2 file bodies) lent out, all workers.",
        reel_http::PoolBuf::lent() as u64,
    );
    p.single(
        "reel_draining",
        Kind::Gauge,
        "1 while the node is draining.",
        s.health().is_some_and(|h| h.draining()),
    );
    s.cache.slices.render_prometheus(&mut p);
    live.origins.snapshot().render_prometheus(&mut p);
    live.tls.render_prometheus(&s.tls_counters, &mut p);
    p.finish()
}

/// The runtime's connection counts: one family each, one sample per worker, labelled
/// `worker="<index>"`.
fn connections(p: &mut PromWriter, stats: &[Arc<WorkerStats>]) {
    type Pick = fn(&WorkerStats) -> u64;
    let families: [(&str, Kind, &str, Pick); 4] = [
        ("reel_connections_open", Kind::Gauge, "Open client connections, per worker.", |w| {
            w.open.load(Relaxed) as u64
        }),
        (
            "reel_connections_parked",
            Kind::Gauge,
            "Open client connections idle without a task (counted in reel_connections_open too), per worker.",
            |w| w.parked.load(Relaxed) as u64,
        ),
        (
            "reel_connections_accepted_total",
            Kind::Counter,
            "Accepted connections, per worker.",
            |w| w.accepted.load(Relaxed),
        ),
        (
            "reel_connections_refused_total",
            Kind::Counter,
            "Connections closed at accept over a connection limit, per worker.",
            |w| w.refused.load(Relaxed),
        ),
    ];
    for (name, kind, help, pick) in families {
        p.family(name, kind, help);
        for (i, w) in stats.iter().enumerate() {
            p.sample(name, &[("worker", &i.to_string())], pick(w));
        }
    }
}

fn upgrades(p: &mut PromWriter, up: &UpgradeStatus) {
    p.single("reel_upgrades_total", Kind::Counter, "Binary upgrades attempted.", up.attempts);
    p.single(
        "reel_upgrade_failures_total",
        Kind::Counter,
        "Binary upgrades that failed (this process kept serving).",
        up.failures,
    );
}

/// The store's gauges and counters (`reel-store` keeps them without a metrics writer).
fn store(p: &mut PromWriter, store: &reel_store::Store) {
    p.single(
        "reel_store_frozen",
        Kind::Gauge,
        "1 while the store takes no writes (handed over in a binary upgrade).",
        store.is_frozen(),
    );
    let st = store.stats();
    p.single("reel_store_objects", Kind::Gauge, "Objects in the store.", st.objects);
    p.single("reel_store_bytes", Kind::Gauge, "Bytes used in the store.", st.bytes_used);
    p.single("reel_store_capacity_bytes", Kind::Gauge, "Store capacity.", st.capacity);
    p.single("reel_store_evictions_total", Kind::Counter, "Objects evicted.", st.evictions);
    p.single(
        "reel_store_write_errors_total",
        Kind::Counter,
        "Store write errors.",
        st.write_errors,
    );
    p.single("reel_store_read_errors_total", Kind::Counter, "Store read errors.", st.read_errors);
}

/// Reload counters and the generation they produced.
fn reloads(p: &mut PromWriter, rs: &ReloadStatus, generation: u64) {
    p.single("reel_reloads_total", Kind::Counter, "Configuration reloads attempted.", rs.attempts);
    p.single(
        "reel_reload_failures_total",
        Kind::Counter,
        "Configuration reloads that failed.",
        rs.failures,
    );
    p.single(
        "reel_reload_last_success",
        Kind::Gauge,
        "1 if the last reload succeeded (1 before any).",
        rs.last_ok != Some(false),
    );
    p.single(
        "reel_reload_last_timestamp_seconds",
        Kind::Gauge,
        "Unix time of the last reload.",
        rs.last_at.unwrap_or(0),
    );
    p.single(
        "reel_config_generation",
        Kind::Gauge,
        "Config generation (1 + successful reloads).",
        generation,
    );
}
