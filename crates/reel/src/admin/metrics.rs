//! `GET /metrics` on the admin listener: the whole Prometheus exposition, family by family
//! in a fixed order. Crates that own counters render them through the shared writer
//! (requests in `reel-ops` [`render_workers`], by site in `reel_ops::sites`, the access log, slices in `reel-cache`,
//! origins in `reel-origin`, TLS in [`crate::listeners::tls`]); this module renders what only the
//! binary holds: the runtime's per-worker connection counts, the store's gauges, binary
//! upgrades, reloads, the drain state, and the sites' rate limiters and country database.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use reel_ops::metrics::{Kind, PromWriter, render_workers};
use reel_runtime::WorkerStats;

use crate::state::Shared;
use crate::state::status::{ReloadStatus, UpgradeStatus};

/// The exposition for the current state.
pub(crate) fn render(s: &Shared) -> String {
    let live = s.live_full();
    let mut p = PromWriter::new();
    render_workers(&mut p, &s.metrics);
    let sites: Vec<&reel_ops::sites::WorkerSites> = s.metrics.iter().map(|w| &w.sites).collect();
    reel_ops::sites::render_sites(&mut p, &s.site_ids, &sites);
    s.cmcd.render_prometheus(&mut p);
    connections(&mut p, s.worker_stats());
    upgrades(&mut p, &s.upgrade_status());
    store(&mut p, &s.store, &s.cache.admission);
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
    if let Some(h) = s.health() {
        health(&mut p, &h.answer().verdict);
    }
    host(&mut p, &crate::admin::host::sample(&crate::state::options::core_spec(&live.cfg).nic));
    s.cache.slices.render_prometheus(&mut p);
    s.cache.encodings.render_prometheus(&mut p);
    live.origins.snapshot().render_prometheus(&mut p);
    live.tls.render_prometheus(&s.tls_counters, &mut p);
    protocols(&mut p, &s.metrics);
    quic(&mut p, &s.quic.listeners());
    access(&mut p, &live.cache, live.geo.as_deref());
    p.finish()
}

/// The sites' rate limiters (all sites together) and the country database's reloads.
fn access(p: &mut PromWriter, cache: &reel_cache::Settings, geo: Option<&reel_access::Geo>) {
    let limiters: Vec<&reel_access::RateLimiter> = cache
        .sites
        .iter()
        .filter_map(|s| s.access.as_ref().and_then(|a| a.rate.as_deref()))
        .collect();
    p.single(
        "reel_rate_limit_clients",
        Kind::Gauge,
        "Clients the sites' rate limiters track now (bounded by [site.limits] max_clients).",
        limiters.iter().map(|l| l.tracked() as u64).sum::<u64>(),
    );
    p.single(
        "reel_rate_limit_evictions_total",
        Kind::Counter,
        "Clients forgotten by a full rate limiter while their budget was spent.",
        limiters.iter().map(|l| l.evictions()).sum::<u64>(),
    );
    let name = "reel_geo_reloads_total";
    p.family(
        name,
        Kind::Counter,
        "Changed [geo] database files: read (swapped) or refused (kept).",
    );
    p.sample(name, &[("result", "swapped")], geo.map_or(0, |g| g.swaps()));
    p.sample(name, &[("result", "kept")], geo.map_or(0, |g| g.failures()));
}

/// Requests answered per protocol, all workers.
fn protocols(p: &mut PromWriter, workers: &[Arc<reel_ops::metrics::WorkerMetrics>]) {
    let name = "reel_requests_by_protocol_total";
    p.family(name, Kind::Counter, "Requests answered, by protocol (h1, h2, h3), all workers.");
    for proto in reel_ops::metrics::Protocol::ALL {
        let n: u64 = workers.iter().map(|w| w.requests_over(proto)).sum();
        p.sample(name, &[("protocol", proto.label())], n);
    }
}

/// The HTTP/3 listeners' QUIC endpoints, per listener (summed over workers).
fn quic(p: &mut PromWriter, listeners: &[Arc<crate::listeners::quic::QuicListener>]) {
    type Pick = fn(&reel_quic::QuicCounters) -> u64;
    let families: [(&str, Kind, &str, Pick); 7] = [
        ("reel_quic_connections_open", Kind::Gauge, "Open QUIC connections.", |c| {
            c.open.load(Relaxed)
        }),
        ("reel_quic_handshakes_total", Kind::Counter, "QUIC handshakes completed.", |c| {
            c.handshakes.load(Relaxed)
        }),
        (
            "reel_quic_handshake_failures_total",
            Kind::Counter,
            "QUIC handshakes that failed or timed out.",
            |c| c.handshake_failures.load(Relaxed),
        ),
        (
            "reel_quic_retries_total",
            Kind::Counter,
            "Retry packets sent to validate a new connection's address (quic_retry).",
            |c| c.retries.load(Relaxed),
        ),
        (
            "reel_quic_refused_worker_total",
            Kind::Counter,
            "New QUIC connections refused at http.max_connections_per_worker.",
            |c| c.refused_worker.load(Relaxed),
        ),
        (
            "reel_quic_send_window_bytes",
            Kind::Gauge,
            "Response bytes the open QUIC connections may hold unacknowledged (their send windows summed).",
            |c| c.send_windows.load(Relaxed),
        ),
        (
            "reel_quic_refused_client_total",
            Kind::Counter,
            "New QUIC connections refused at http.max_connections_per_client or the QUIC share of an address.",
            |c| c.refused_client.load(Relaxed),
        ),
    ];
    for (name, kind, help, pick) in families {
        p.family(name, kind, help);
        for l in listeners {
            let n: u64 = l.counters.iter().map(|c| pick(c)).sum();
            p.sample(name, &[("listener", &l.name)], n);
        }
    }
    p.family(
        "reel_quic_routing_by_id",
        Kind::Gauge,
        "1 when packets reach their connection's worker by connection ID, 0 when by address hash.",
    );
    for l in listeners {
        p.sample(
            "reel_quic_routing_by_id",
            &[("listener", &l.name)],
            u64::from(l.hash_routing.is_none()),
        );
    }
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
            "Connections closed at accept over a connection limit (or, on a PROXY protocol listener, from an untrusted source or without a valid header), per worker.",
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

/// The store's gauges and counters, and its admission's (`reel-store` keeps them without a
/// metrics writer).
fn store(p: &mut PromWriter, store: &reel_store::Store, admission: &reel_store::Admission) {
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
    p.single(
        "reel_store_rescued_fills_total",
        Kind::Counter,
        "Fills whose write into the store failed, delivered whole from memory and not stored.",
        st.rescued_fills,
    );
    p.single("reel_store_volumes", Kind::Gauge, "Store volume files.", st.volumes);
    p.single(
        "reel_store_quarantined_volumes",
        Kind::Gauge,
        "Store volumes taken out of service after I/O errors (the store is degraded).",
        st.quarantined_volumes,
    );
    p.single(
        "reel_store_scrub_bytes_total",
        Kind::Counter,
        "Bytes the store scrub read back to verify stored objects.",
        st.scrub_bytes,
    );
    p.single(
        "reel_store_scrub_objects_total",
        Kind::Counter,
        "Stored objects the scrub verified.",
        st.scrub_objects,
    );
    p.single(
        "reel_store_scrub_corrupt_total",
        Kind::Counter,
        "Stored objects the scrub found corrupt on disk and removed (refetched on their next request).",
        st.scrub_corrupt,
    );
    p.single(
        "reel_store_scrub_passes_total",
        Kind::Counter,
        "Scrub passes completed over the whole store.",
        st.scrub_passes,
    );
    let disks = store.disks();
    let label = |d: &reel_store::DiskInfo| d.path.display().to_string();
    p.family("reel_store_disk_online", Kind::Gauge, "1 while a store disk is in service.");
    for d in &disks {
        let online = d.state == reel_store::DiskState::Online;
        p.sample("reel_store_disk_online", &[("path", &label(d))], online);
    }
    p.family(
        "reel_store_disk_errors_total",
        Kind::Counter,
        "I/O errors on a store disk since it was opened (disk_error_limit takes it out).",
    );
    for d in &disks {
        p.sample("reel_store_disk_errors_total", &[("path", &label(d))], d.errors);
    }
    p.family("reel_store_disk_bytes", Kind::Gauge, "Bytes used on a store disk.");
    for d in &disks {
        p.sample("reel_store_disk_bytes", &[("path", &label(d))], d.stats.bytes_used);
    }
    p.family("reel_store_disk_capacity_bytes", Kind::Gauge, "Capacity of a store disk in service.");
    for d in &disks {
        p.sample("reel_store_disk_capacity_bytes", &[("path", &label(d))], d.stats.capacity);
    }
    p.family("reel_store_disk_objects", Kind::Gauge, "Objects on a store disk.");
    for d in &disks {
        p.sample("reel_store_disk_objects", &[("path", &label(d))], d.stats.objects);
    }
    p.single(
        "reel_store_record_cache_bytes",
        Kind::Gauge,
        "Bytes of keys and metadata of hot objects held in memory (store.record_cache).",
        st.record_cache_bytes,
    );
    p.single(
        "reel_store_record_reads_total",
        Kind::Counter,
        "Hits that read their key and metadata from the object's record on disk (not cached).",
        st.record_reads,
    );
    p.single(
        "reel_store_bytes_written_total",
        Kind::Counter,
        "Bytes written into the store's volume files (objects, copies, metadata records).",
        st.bytes_written,
    );
    p.single(
        "reel_store_spill_bytes_written_total",
        Kind::Counter,
        "Bytes written into unnamed spill files: bodies delivered but not stored.",
        st.spill_bytes_written,
    );
    let ad = admission.stats();
    p.single(
        "reel_store_admission_rejected_total",
        Kind::Counter,
        "Fetched objects served but not stored: first seen within the window (second-hit).",
        ad.rejected,
    );
    p.single(
        "reel_store_admission_admitted_total",
        Kind::Counter,
        "Fetched objects stored because seen before within the window (second-hit).",
        ad.admitted,
    );
}

/// What `/healthz` answers now: 1 for healthy (200), and the verdict's status as a label.
fn health(p: &mut PromWriter, v: &reel_ops::health::Verdict) {
    p.single(
        "reel_healthy",
        Kind::Gauge,
        "1 while /healthz answers 200 (the node takes traffic).",
        v.http_status() == 200,
    );
    p.family("reel_health_status", Kind::Gauge, "The /healthz verdict, as a label (value 1).");
    let status = serde_json::to_value(v.status).ok();
    let status = status.as_ref().and_then(|s| s.as_str()).unwrap_or("unknown");
    p.sample("reel_health_status", &[("status", status)], 1u64);
}

/// The host's hidden limits: cgroup CPU quota and throttling, data interfaces' bytes,
/// descriptors.
fn host(p: &mut PromWriter, h: &crate::admin::host::HostSample) {
    if let Some((q, _)) = h.cpu_group.as_ref().and_then(|g| g.quota.as_ref()) {
        p.single(
            "reel_cgroup_cpu_quota_cpus",
            Kind::Gauge,
            "The cgroup CPU quota, in CPUs (absent without a quota).",
            *q,
        );
    }
    if let Some(st) = h.cpu_stat {
        p.single(
            "reel_cgroup_cpu_periods_total",
            Kind::Counter,
            "CPU enforcement periods of the process's cgroup with runnable threads (cpu.stat nr_periods).",
            st.periods,
        );
        p.single(
            "reel_cgroup_cpu_throttled_periods_total",
            Kind::Counter,
            "Periods in which the cgroup ran out of CPU quota (cpu.stat nr_throttled).",
            st.throttled_periods,
        );
        p.single(
            "reel_cgroup_cpu_throttled_seconds_total",
            Kind::Counter,
            "Time the cgroup's threads waited for CPU quota (cpu.stat throttled_usec).",
            st.throttled_usec as f64 / 1e6,
        );
    }
    if !h.net.is_empty() {
        for (name, help, pick) in [
            (
                "reel_net_receive_bytes_total",
                "Bytes received on a data interface ([cores] nic), all processes.",
                (|n: &crate::admin::host::NetCounters| n.rx_bytes)
                    as fn(&crate::admin::host::NetCounters) -> u64,
            ),
            (
                "reel_net_transmit_bytes_total",
                "Bytes sent on a data interface ([cores] nic), all processes.",
                |n| n.tx_bytes,
            ),
        ] {
            p.family(name, Kind::Counter, help);
            for n in &h.net {
                p.sample(name, &[("interface", &n.name)], pick(n));
            }
        }
    }
    if let Some(n) = h.open_fds {
        p.single("reel_process_open_fds", Kind::Gauge, "Open file descriptors.", n);
    }
    if let Some(n) = h.max_fds {
        p.single(
            "reel_process_max_fds",
            Kind::Gauge,
            "The descriptor limit (soft RLIMIT_NOFILE).",
            n,
        );
    }
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
