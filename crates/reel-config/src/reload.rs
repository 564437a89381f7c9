//! Which keys a live reload applies and which need a restart: one table ([`RELOAD_KEYS`])
//! from which the reload's behaviour is derived ([`Config::diff_needs_restart`],
//! [`Config::keeping_restart_keys`]) and against which `docs/configuration.md` and
//! `docs/operations.md` are checked by the tests.
//!
//! A key needs a restart when what it configures is bound, allocated or pinned at startup:
//! the worker threads and their CPUs, the store's files, the admin socket, the log
//! formatter, the demo origin's socket, the shutdown deadline the signal loop was given.

use serde::Serialize;
use toml::Value;

use crate::Config;

/// When a changed key takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reload {
    /// At the reload (for new requests or new connections).
    Live,
    /// At the next start; a reload keeps the running value and reports the key.
    Restart,
}

impl Reload {
    /// `live` or `restart`, as in the docs' reload column.
    pub fn as_str(self) -> &'static str {
        match self {
            Reload::Live => "live",
            Reload::Restart => "restart",
        }
    }
}

/// One key of the file and when a change to it takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadKey {
    /// Key path; `[]` marks an array of tables (`listener[].address`).
    pub key: &'static str,
    /// When a change takes effect.
    pub reload: Reload,
}

const fn live(key: &'static str) -> ReloadKey {
    ReloadKey { key, reload: Reload::Live }
}

const fn restart(key: &'static str) -> ReloadKey {
    ReloadKey { key, reload: Reload::Restart }
}

/// Every key of the configuration file, in file order, with when a change takes effect.
/// Restart keys are never inside an array of tables.
pub const RELOAD_KEYS: &[ReloadKey] = &[
    restart("server.shutdown_timeout"),
    live("server.shutdown_delay"),
    live("server.cdn_id"),
    live("server.max_hops"),
    live("server.cache_status_name"),
    live("log.level"),
    restart("log.format"),
    live("listener[].name"),
    live("listener[].address"),
    live("listener[].backlog"),
    live("listener[].tls_cert"),
    live("listener[].tls_key"),
    live("listener[].sni_strict"),
    live("listener[].http2"),
    live("listener[].ktls"),
    live("listener[].min_tls_version"),
    live("listener[].http3"),
    live("listener[].alt_svc_max_age"),
    live("listener[].quic_retry"),
    live("listener[].proxy_protocol"),
    restart("cores.nic"),
    restart("cores.irq"),
    restart("cores.workers"),
    restart("cores.steer"),
    live("http.max_request_line"),
    live("http.max_header_bytes"),
    live("http.max_headers"),
    live("http.max_body"),
    live("http.header_timeout"),
    live("http.idle_timeout"),
    live("http.body_timeout"),
    live("http.park_after"),
    live("http.send_timeout"),
    live("http.max_connections_per_worker"),
    live("http.max_connections_per_client"),
    live("http.reserved_fds"),
    live("http.h2_max_concurrent_streams"),
    live("http.h2_stream_window"),
    live("http.h2_connection_window"),
    live("http.h2_max_resets_per_second"),
    live("http.h2_stream_buffer"),
    live("http.h2_connection_buffer"),
    live("http.h3_send_budget"),
    live("http.trusted_proxies"),
    live("health.path"),
    live("health.max_cpu_percent"),
    live("health.resume_cpu_percent"),
    live("health.max_connections"),
    live("health.resume_connections"),
    live("health.max_hit_p99"),
    live("health.resume_hit_p99"),
    restart("admin.address"),
    restart("admin.allow_non_loopback"),
    live("admin.token"),
    live("admin.token_env"),
    live("admin.insecure_no_token"),
    live("access_log.enabled"),
    live("access_log.path"),
    live("access_log.format"),
    live("access_log.buffer"),
    live("access_log.flush_interval"),
    live("access_log.fields"),
    live("access_log.sample.1xx"),
    live("access_log.sample.2xx"),
    live("access_log.sample.3xx"),
    live("access_log.sample.4xx"),
    live("access_log.sample.5xx"),
    live("access_log.sink[].kind"),
    live("access_log.sink[].name"),
    live("access_log.sink[].path"),
    live("access_log.sink[].address"),
    live("access_log.sink[].facility"),
    live("access_log.sink[].app_name"),
    live("access_log.sink[].url"),
    live("access_log.sink[].gzip"),
    live("access_log.sink[].batch_lines"),
    live("access_log.sink[].batch_bytes"),
    live("access_log.sink[].interval"),
    live("access_log.sink[].retries"),
    live("access_log.sink[].timeout"),
    live("access_log.cmcd_keys"),
    restart("store.path"),
    restart("store.size"),
    restart("store.volume_size"),
    restart("store.io"),
    live("store.scrub_rate"),
    restart("store.disk"),
    restart("store.disk_error_limit"),
    live("store.admission"),
    restart("store.admission_window"),
    restart("store.record_cache"),
    live("cache.heuristic_freshness"),
    live("cache.heuristic_max"),
    live("cache.negative_ttl"),
    live("cache.store_without_validators"),
    live("cache.stale_while_revalidate_default"),
    live("cache.targeted_cache_control"),
    live("cache.fill_drop_headers"),
    live("cache.max_variants"),
    live("cache.lock_timeout"),
    live("cache.read_ahead_per_worker"),
    live("cache.fill_timeout"),
    live("cache.blocking_timeout"),
    live("cache.max_misses_per_connection"),
    live("cache.compressed_memory"),
    live("cache.rule[].match"),
    live("cache.rule[].ttl"),
    live("cache.rule[].override"),
    live("site[].name"),
    live("site[].hosts"),
    live("site[].origin_group"),
    live("site[].ignore_query"),
    live("site[].drop_query"),
    live("site[].key.query"),
    live("site[].key.drop"),
    live("site[].methods"),
    live("site[].invalidate_on"),
    live("site[].heuristic_freshness"),
    live("site[].store_set_cookie"),
    live("site[].client_cache_control"),
    live("site[].slice"),
    live("site[].read_ahead"),
    live("site[].prefetch"),
    live("site[].forward_cmcd"),
    live("site[].prefetch_next"),
    live("site[].token.format"),
    live("site[].token.param"),
    live("site[].token.keys"),
    live("site[].token.keys_env"),
    live("site[].token.salt"),
    live("site[].token.leeway"),
    live("site[].token.escape_early"),
    live("site[].token.propagate"),
    live("site[].access.allow"),
    live("site[].access.deny"),
    live("site[].access.allow_countries"),
    live("site[].access.deny_countries"),
    live("site[].access.geo_status"),
    live("site[].limits.rate"),
    live("site[].limits.burst"),
    live("site[].limits.max_clients"),
    live("site[].cors.allow_origins"),
    live("site[].cors.allow_credentials"),
    live("site[].cors.allow_headers"),
    live("site[].cors.expose_headers"),
    live("site[].cors.max_age"),
    live("site[].header[].action"),
    live("site[].header[].name"),
    live("site[].header[].value"),
    live("site[].header[].path"),
    live("site[].header[].status"),
    live("site[].compress.enabled"),
    live("site[].compress.types"),
    live("site[].compress.encodings"),
    live("site[].compress.min_size"),
    live("site[].compress.max_size"),
    live("site[].compress.brotli_quality"),
    live("site[].compress.gzip_level"),
    live("site[].cmsd.enabled"),
    live("site[].cmsd.id"),
    live("origin_group[].name"),
    live("origin_group[].connect_timeout"),
    live("origin_group[].first_byte_timeout"),
    live("origin_group[].idle_timeout"),
    live("origin_group[].max_idle_per_host"),
    live("origin_group[].max_connections"),
    live("origin_group[].retries"),
    live("origin_group[].balance"),
    live("origin_group[].ca_file"),
    live("origin_group[].http2"),
    live("origin_group[].insecure_skip_verify"),
    live("origin_group[].request_headers"),
    live("origin_group[].auth"),
    live("origin_group[].region"),
    live("origin_group[].access_key_env"),
    live("origin_group[].secret_key_env"),
    live("origin_group[].session_token_env"),
    live("origin_group[].health.enabled"),
    live("origin_group[].health.path"),
    live("origin_group[].health.interval"),
    live("origin_group[].health.timeout"),
    live("origin_group[].health.expect_status"),
    live("origin_group[].health.rise"),
    live("origin_group[].health.fall"),
    live("origin_group[].tier[].hosts"),
    live("origin_group[].tier[].host_header"),
    live("origin_group[].tier[].tls"),
    live("origin_group[].tier[].weights"),
    restart("demo_origin.enabled"),
    restart("demo_origin.address"),
    restart("demo_origin.latency_scale"),
    restart("demo_origin.error_rate"),
    restart("demo_origin.reset_rate"),
    restart("demo_origin.segment_duration"),
    restart("demo_origin.live_segment_size"),
    live("geo.database"),
    live("certificate[].names"),
    live("certificate[].cert"),
    live("certificate[].key"),
];

/// When a change to `key` takes effect; `key` may carry indexes (`listener[2].address`).
/// `None` for a path that is not a key of the file.
pub fn reload_of(key: &str) -> Option<Reload> {
    let normal = normalize(key);
    RELOAD_KEYS.iter().find(|k| k.key == normal).map(|k| k.reload)
}

/// `listener[2].address` -> `listener[].address`.
fn normalize(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut in_index = false;
    for c in key.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            c => out.push(c),
        }
    }
    out
}

fn restart_keys() -> impl Iterator<Item = &'static str> {
    RELOAD_KEYS.iter().filter(|k| k.reload == Reload::Restart).map(|k| k.key)
}

fn to_table(c: &Config) -> Option<toml::Table> {
    match Value::try_from(c) {
        Ok(Value::Table(t)) => Some(t),
        _ => None,
    }
}

/// The value at a dotted path of tables (restart keys are never inside arrays).
fn get<'a>(t: &'a toml::Table, key: &str) -> Option<&'a Value> {
    let mut parts = key.split('.');
    let mut v = t.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    Some(v)
}

/// Sets (or, with `None`, removes) the value at a dotted path, creating tables on the way.
fn set(t: &mut toml::Table, key: &str, value: Option<Value>) {
    let (parents, leaf) = key.rsplit_once('.').map_or(("", key), |(p, l)| (p, l));
    let mut cur = t;
    for p in parents.split('.').filter(|p| !p.is_empty()) {
        let next = cur.entry(p).or_insert_with(|| Value::Table(toml::Table::new()));
        let Value::Table(next) = next else { return };
        cur = next;
    }
    match value {
        Some(v) => {
            cur.insert(leaf.to_owned(), v);
        }
        None => {
            cur.remove(leaf);
        }
    }
}

/// Appends the paths below `path` where `a` and `b` differ: table keys and array-of-table
/// elements are compared one by one, anything else as a whole.
fn diff(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
    match (a, b) {
        (Some(Value::Table(ta)), Some(Value::Table(tb))) => {
            let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff(&format!("{path}.{k}"), ta.get(k), tb.get(k), out);
            }
        }
        (Some(Value::Array(xa)), Some(Value::Array(xb)))
            if xa.iter().chain(xb).all(Value::is_table) && !(xa.is_empty() && xb.is_empty()) =>
        {
            for i in 0..xa.len().max(xb.len()) {
                diff(&format!("{path}[{i}]"), xa.get(i), xb.get(i), out);
            }
        }
        (a, b) if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

pub(crate) fn needs_restart(old: &Config, new: &Config) -> Vec<String> {
    let (Some(a), Some(b)) = (to_table(old), to_table(new)) else {
        // Config always serializes to a table; if it somehow does not, the safe answer is
        // that everything may have changed.
        return vec!["*".to_owned()];
    };
    let mut out = Vec::new();
    for key in restart_keys() {
        diff(key, get(&a, key), get(&b, key), &mut out);
    }
    out
}

pub(crate) fn keeping_restart_keys(new: &Config, running: &Config) -> Config {
    let (Some(mut merged), Some(old)) = (to_table(new), to_table(running)) else {
        return running.clone();
    };
    for key in restart_keys() {
        set(&mut merged, key, get(&old, key).cloned());
    }
    match Value::Table(merged).try_into::<Config>() {
        Ok(mut c) => {
            c.source = new.source.clone();
            c
        }
        // Both halves came from valid configs; should the round trip fail anyway, running
        // the old configuration is the safe outcome.
        Err(_) => running.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_array_diffs_by_element_and_is_live() {
        let mut a = Config::default();
        a.listener.push(crate::ListenerConfig::default());
        let mut b = a.clone();
        b.listener[0].address = "127.0.0.1:8181".parse().expect("addr");
        b.listener.push(crate::ListenerConfig { name: "two".into(), ..Default::default() });
        assert!(needs_restart(&a, &b).is_empty());
        assert_eq!(reload_of("listener[1].address"), Some(Reload::Live));
        assert_eq!(reload_of("origin_group[0].tier[3].hosts"), Some(Reload::Live));
        assert_eq!(reload_of("store.size"), Some(Reload::Restart));
        assert_eq!(reload_of("store"), None);
        assert_eq!(reload_of("store.bogus"), None);
    }

    #[test]
    fn restart_keys_keep_their_running_values() {
        let mut old = Config::default();
        old.listener.push(crate::ListenerConfig::default());
        let mut new = old.clone();
        new.store.size = crate::ByteSize::gib(20);
        new.cores.workers = crate::CpuSet::List(vec![1, 2]);
        new.demo_origin.latency_scale = 0.5;
        new.cache.negative_ttl = crate::Duration::from_secs(1);
        new.listener[0].backlog = 10;
        let kept = new.keeping_restart_keys(&old);
        assert_eq!(kept.store, old.store);
        assert_eq!(kept.cores, old.cores);
        assert_eq!(kept.demo_origin, old.demo_origin);
        assert_eq!(kept.cache, new.cache, "live keys take the new value");
        assert_eq!(kept.listener, new.listener);
        assert!(old.diff_needs_restart(&kept).is_empty());
    }
}
