//! Live reload (SIGHUP, `POST /admin/reload`): re-read and validate the file, keep the
//! running values of the keys that need a restart (`reel_config::RELOAD_KEYS` decides which),
//! build the next generation, apply what lives outside it (listeners, connection limits,
//! the log filter, health thresholds, the store's scrub rate), then swap it in. A file
//! with any problem changes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tracing::{error, info, warn};

use crate::state::Shared;
use crate::state::generation::Live;
use crate::state::options;
use crate::state::preflight;
use crate::state::status::{ReloadError, ReloadStatus};

/// Re-reads the config file and swaps in a new generation. An invalid file leaves the
/// running config untouched; the error is logged and kept for `/status`.
pub(crate) fn reload(
    shared: &Arc<Shared>,
    runtime: &reel_runtime::Runtime,
) -> Result<ReloadStatus, ReloadError> {
    reel_ops::notify::reloading();
    let outcome = apply(shared, runtime);
    let mut st = shared.reload_status();
    st.attempts += 1;
    st.last_at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok().map(|d| d.as_secs());
    match &outcome {
        Ok(restart) => {
            st.last_ok = Some(true);
            st.last_error = None;
            st.needs_restart = restart.clone();
            info!(generation = shared.live().generation, "configuration reloaded");
            for k in restart {
                warn!(key = %k, "changed in the file but needs a restart to take effect");
            }
        }
        Err(e) => {
            st.failures += 1;
            st.last_ok = Some(false);
            st.last_error = Some(e.to_string());
            error!("reload failed; the running configuration is unchanged:\n{e}");
        }
    }
    if let Ok(mut s) = shared.reload_status.lock() {
        *s = st.clone();
    }
    reel_ops::notify::ready();
    outcome.map(|_| st)
}

/// One reload; returns the keys that changed but need a restart.
fn apply(
    shared: &Arc<Shared>,
    runtime: &reel_runtime::Runtime,
) -> Result<Vec<String>, ReloadError> {
    let path = shared.config_path.as_ref().ok_or(ReloadError::BuiltIn)?;
    let read = reel_config::load_and_validate(path)?;
    // Everything that can fail without side effects comes first: a failure after the
    // listeners changed would leave them out of step with the running config. The file is
    // checked as `reel check` checks it (a file this process could not restart with is
    // refused now, with its keys' positions); certificates are loaded here, so a bad one
    // fails the reload and the running ones serve on. The keys the checks build from
    // (certificates, `http.reserved_fds`) all reload live.
    let ready = preflight::check(&read, shared.origin_flag.is_some(), &shared.tickets, &shared.fds)
        .map_err(ReloadError::Preflight)?;
    let (tls, limits) = (ready.tls, ready.limits);
    for w in &ready.warnings {
        warn!("{w}");
    }
    let old = shared.live_full();
    let needs_restart = old.cfg.diff_needs_restart(&read);
    // Restart keys keep their running values, so what runs stays coherent.
    let new = read.keeping_restart_keys(&old.cfg);
    let generation = shared.generation.load(Ordering::SeqCst) + 1;
    let live = Live::build(
        new,
        generation,
        shared.origin_flag.as_ref(),
        Some(&old),
        tls,
        &shared.site_ids,
    )?;
    if old.cfg.listener != live.cfg.listener {
        let r = runtime.set_listeners(options::listeners(&live.cfg));
        // Even a partly failed change may have bound or closed sockets: show what is real.
        shared.record_listeners(runtime);
        r.map_err(ReloadError::Listeners)?;
    }
    if options::connection_limits(&old.cfg, &shared.fds).ok() != Some(limits) {
        runtime
            .set_connection_limits(
                limits.per_worker,
                limits.per_client,
                limits.total,
                limits.answering,
            )
            .map_err(ReloadError::ConnectionCap)?;
    }
    shared.generation.store(generation, Ordering::SeqCst);
    if live.cfg.log.level != old.cfg.log.level
        && let Err(e) = crate::state::logging::set_level(&live.cfg.log.level)
    {
        warn!("keeping the previous log filter: {e}");
    }
    if let Some(h) = shared.health() {
        h.set_thresholds(options::thresholds(&live.cfg));
    }
    shared.store.set_scrub_rate(options::store(&live.cfg).scrub_rate);
    shared.live.store(Arc::new(live));
    // HTTP/3 follows: new certificates and settings, listeners turned on or off.
    shared.apply_quic().map_err(|e| ReloadError::Quic(format!("{e:#}")))?;
    Ok(needs_restart)
}
