//! Config to options: the one place where the file's sections become each library's own
//! options type. Libraries never see [`Config`]; each takes a plain options struct
//! (`reel_store::StoreConfig`, `reel_http::Limits`, `reel_runtime::RuntimeOptions`,
//! `reel_origin::GroupSpec`, `reel_cache::Settings`, `reel_ops::health::Thresholds`, ...)
//! built by one function here, named after what it builds.

use reel_config::{AccessLogFormat, Config, CpuSet, HostPort, MethodsPolicy};
use reel_origin::{Balance, GroupSpec, HealthSpec, HostSpec, S3Auth, Secret, TlsSpec};
use reel_runtime::{CorePlan, CoreSpec, CpuSelect, ListenerSpec, RuntimeOptions};

use crate::state::fds::FdBudget;

/// Name of the origin group that `--origin` creates.
pub(crate) const FLAG_GROUP: &str = "--origin";

/// `[store]`.
pub(crate) fn store(cfg: &Config) -> reel_store::StoreConfig {
    reel_store::StoreConfig {
        disks: cfg
            .store
            .disks()
            .into_iter()
            .map(|(_, path, size)| reel_store::DiskConfig {
                path: path.to_owned(),
                size: size.bytes(),
            })
            .collect(),
        volume_size: cfg.store.volume_size.bytes(),
        disk_error_limit: cfg.store.disk_error_limit,
        io: match cfg.store.io {
            reel_config::StoreIo::Auto => reel_store::IoMode::Auto,
            reel_config::StoreIo::Uring => reel_store::IoMode::Uring,
            reel_config::StoreIo::Threads => reel_store::IoMode::Threads,
        },
        scrub_rate: cfg.store.scrub_rate.bytes(),
        record_cache: cfg.store.record_cache.bytes(),
    }
}

/// `[http]`: the codec's limits.
pub(crate) fn http_limits(cfg: &Config) -> reel_http::Limits {
    let h = &cfg.http;
    reel_http::Limits {
        max_request_line: h.max_request_line.bytes() as usize,
        max_header_bytes: h.max_header_bytes.bytes() as usize,
        max_headers: h.max_headers as usize,
        max_body_bytes: h.max_body.bytes(),
        header_timeout: h.header_timeout.get(),
        idle_timeout: h.idle_timeout.get(),
        body_timeout: h.body_timeout.get(),
        // A plain keep-alive connection idle this long is parked without a task
        // (`reel_runtime`'s idle lot): a viewer between segments then costs about 100
        // bytes instead of a task, and a busy connection never pays the park.
        park_after: Some(h.park_after.get()).filter(|d| !d.is_zero()),
        send_timeout: h.send_timeout.get(),
        trusted_proxies: trusted_proxies(cfg),
    }
}

/// `http.trusted_proxies`: `None` when empty, so a request pays one branch.
fn trusted_proxies(cfg: &Config) -> Option<std::sync::Arc<reel_http::TrustedProxies>> {
    // Validation refused every entry that does not parse.
    let nets = cfg.http.trusted_proxies.iter().filter_map(|n| reel_config::parse_cidr(n).ok());
    let t = reel_http::TrustedProxies::new(nets);
    (!t.is_empty()).then(|| std::sync::Arc::new(t))
}

/// `[http]` `h2_*`: HTTP/2 settings and defences.
pub(crate) fn h2_settings(cfg: &Config) -> reel_http::H2Settings {
    let h = &cfg.http;
    // Validation bounds the windows to 2^31-1 and the buffers to what a config can name.
    let window = |b: reel_config::ByteSize| u32::try_from(b.bytes()).unwrap_or(u32::MAX >> 1);
    let size = |b: reel_config::ByteSize| usize::try_from(b.bytes()).unwrap_or(usize::MAX);
    reel_http::H2Settings {
        max_concurrent_streams: h.h2_max_concurrent_streams,
        initial_stream_window: window(h.h2_stream_window),
        initial_connection_window: window(h.h2_connection_window),
        max_resets_per_second: h.h2_max_resets_per_second,
        stream_buffer: size(h.h2_stream_buffer),
        connection_buffer: size(h.h2_connection_buffer),
    }
}

/// `[cores]`: what the core planner is asked for.
pub(crate) fn core_spec(cfg: &Config) -> CoreSpec {
    let sel = |s: &CpuSet| match s {
        CpuSet::Auto => CpuSelect::Auto,
        CpuSet::List(v) => CpuSelect::List(v.clone()),
    };
    CoreSpec {
        nic: cfg.cores.nic.clone(),
        irq: sel(&cfg.cores.irq),
        workers: sel(&cfg.cores.workers),
    }
}

/// The connection limits of `[http]`: per worker, per client address, and for the whole
/// process the descriptor budget `fds` leaves after `reserved_fds`.
pub(crate) fn connection_limits(cfg: &Config, fds: &FdBudget) -> Result<ConnectionLimits, String> {
    Ok(ConnectionLimits {
        per_worker: cfg.http.max_connections_per_worker as usize,
        per_client: cfg.http.max_connections_per_client as usize,
        total: fds.max_connections(cfg.http.reserved_fds)?,
        // A quarter of the reserve answers connections refused at accept.
        answering: (cfg.http.reserved_fds / 4).max(1) as usize,
    })
}

/// The most descriptors origin connections can hold with `workers` workers: per host,
/// `max_connections` busy ones, `max_idle_per_host` idle ones per worker, an HTTP/2 one per
/// worker and a health probe.
pub(crate) fn origin_descriptors(cfg: &Config, workers: usize) -> u64 {
    let workers = workers as u64;
    cfg.origin_group
        .iter()
        .map(|g| {
            let hosts: u64 = g.tier.iter().map(|t| t.hosts.len() as u64).sum();
            let per_host =
                u64::from(g.max_connections) + workers * (u64::from(g.max_idle_per_host) + 1) + 1;
            hosts.saturating_mul(per_host)
        })
        .fold(0u64, u64::saturating_add)
}

/// Connection limits as the runtime takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    /// `http.max_connections_per_worker`.
    pub per_worker: usize,
    /// `http.max_connections_per_client` (0 = none).
    pub per_client: usize,
    /// The process's budget of client connections.
    pub total: usize,
    /// Refused connections answered at once (each holds a reserved descriptor).
    pub answering: usize,
}

/// The environment variable that runs that many workers, unpinned, whatever `[cores]`
/// plans: tests of what must hold at N workers run 4 workers on a 2-CPU machine with it.
/// Not for production: workers share CPUs and the NIC-IRQ separation is gone.
pub(crate) const TEST_WORKERS: &str = "REEL_TEST_WORKERS";

/// The worker count [`TEST_WORKERS`] asks for: `None` when unset, an error when it is not
/// a count from 1 to 1024.
pub(crate) fn test_workers() -> anyhow::Result<Option<usize>> {
    let Some(v) = std::env::var_os(TEST_WORKERS) else { return Ok(None) };
    match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
        Some(n @ 1..=1024) => Ok(Some(n)),
        _ => anyhow::bail!("{TEST_WORKERS}={v:?}: expected a worker count from 1 to 1024"),
    }
}

/// `[cores]` steering and the connection limits, for the planned cores.
pub(crate) fn runtime(cfg: &Config, plan: &CorePlan, limits: ConnectionLimits) -> RuntimeOptions {
    RuntimeOptions {
        max_connections_per_worker: limits.per_worker,
        max_connections_per_client: limits.per_client,
        max_connections: limits.total,
        max_answering_refused: limits.answering,
        steer: match cfg.cores.steer {
            reel_config::Steer::Hash => reel_runtime::Steer::Hash,
            reel_config::Steer::Cpu => reel_runtime::Steer::Cpu,
        },
        irq_cpus: plan.irq_cpus.clone(),
        ..Default::default()
    }
}

/// `[[listener]]`.
pub(crate) fn listeners(cfg: &Config) -> Vec<ListenerSpec> {
    cfg.listener
        .iter()
        .map(|l| ListenerSpec {
            name: l.name.clone(),
            addr: l.address,
            backlog: l.backlog.min(i32::MAX as u32) as i32,
            proxy_protocol: l.proxy_protocol,
            udp_twin: l.http3_enabled(),
        })
        .collect()
}

/// `[health]`: the overload thresholds.
pub(crate) fn thresholds(cfg: &Config) -> reel_ops::health::Thresholds {
    let h = &cfg.health;
    reel_ops::health::Thresholds {
        max_cpu_percent: f64::from(h.max_cpu_percent),
        resume_cpu_percent: f64::from(h.resume_cpu_percent),
        max_connections: h.max_connections,
        resume_connections: h.resume_connections,
        max_hit_p99: h.max_hit_p99.get(),
        resume_hit_p99: h.resume_hit_p99.get(),
    }
}

/// `access_log.format`.
pub(crate) fn access_log_format(cfg: &Config) -> reel_ops::access_log::Format {
    match cfg.access_log.format {
        AccessLogFormat::Json => reel_ops::access_log::Format::Json,
        AccessLogFormat::Combined => reel_ops::access_log::Format::Combined,
    }
}

/// `[[origin_group]]`; with `--origin`, only the flag's group (it serves every Host, so the
/// config's groups would only run health checks nobody uses).
///
/// Fails when an environment variable the groups' authentication names is not set (the
/// config's validation says so first; this is the read the server uses).
pub(crate) fn origin_groups(
    cfg: &Config,
    origin_flag: Option<&OriginFlag>,
) -> Result<Vec<GroupSpec>, String> {
    match origin_flag {
        Some(o) => {
            let mut host = HostSpec::new(o.addr.to_string());
            host.tls = o.tls;
            host.host_header = o.host_header.clone();
            let mut g = GroupSpec::new(FLAG_GROUP, vec![vec![host]]);
            g.health.enabled = false;
            Ok(vec![g])
        }
        None => cfg
            .origin_group
            .iter()
            .map(|g| {
                let mut s = group(g);
                origin_auth(g, &mut s)?;
                Ok(s)
            })
            .collect(),
    }
}

/// `request_headers` and `auth = "s3"` of `g` into `s`, their values read from the
/// environment now (at start and at each reload that rebuilds the groups).
fn origin_auth(g: &reel_config::OriginGroupConfig, s: &mut GroupSpec) -> Result<(), String> {
    let env = |key: &str, name: &str| {
        reel_config::env_value(name)
            .map(Secret::new)
            .map_err(|why| format!("origin group {:?}: {key}: {why}", g.name))
    };
    for (name, v) in &g.request_headers {
        s.request_headers.push((name.clone(), env(&format!("request_headers.{name}"), &v.env)?));
    }
    if g.auth == reel_config::OriginAuth::S3 {
        s.s3 = Some(S3Auth {
            region: g.region.clone(),
            access_key: env("access_key_env", &g.access_key_env)?,
            secret_key: env("secret_key_env", &g.secret_key_env)?,
            session_token: match g.session_token_env.as_str() {
                "" => None,
                name => Some(env("session_token_env", name)?),
            },
        });
    }
    Ok(())
}

fn group(g: &reel_config::OriginGroupConfig) -> GroupSpec {
    let tiers = g
        .tier
        .iter()
        .map(|t| {
            t.hosts
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let mut s = HostSpec::new(h.to_string());
                    if !t.host_header.is_empty() {
                        s.host_header = Some(t.host_header.clone());
                    }
                    s.tls = t.tls;
                    s.weight = t.weights.get(i).copied().unwrap_or(1);
                    s
                })
                .collect()
        })
        .collect();
    let mut s = GroupSpec::new(g.name.clone(), tiers);
    s.connect_timeout = g.connect_timeout.get();
    s.first_byte_timeout = g.first_byte_timeout.get();
    s.idle_timeout = g.idle_timeout.get();
    s.max_idle_per_host = g.max_idle_per_host as usize;
    s.max_connections = g.max_connections.max(1) as usize;
    s.retries = g.retries;
    s.balance = match g.balance {
        reel_config::OriginBalance::RoundRobin => Balance::RoundRobin,
        reel_config::OriginBalance::Rendezvous => Balance::Rendezvous,
    };
    s.tls = TlsSpec {
        ca_file: Some(g.ca_file.clone()).filter(|p| !p.as_os_str().is_empty()),
        insecure_skip_verify: g.insecure_skip_verify,
        http2: g.http2,
    };
    s.health = HealthSpec {
        enabled: g.health.enabled,
        path: g.health.path.clone(),
        interval: g.health.interval.get(),
        timeout: g.health.timeout.get(),
        expect_status: g.health.expect_status,
        rise: g.health.rise,
        fall: g.health.fall,
    };
    s
}

/// A site's `[site.token]`: its keys (those of `keys_env` read now, at start or reload;
/// validation refused the config if the variable was unset or held a bad key), and the
/// local ports of the TLS listeners, on which a token cookie is `Secure`.
fn site_token(cfg: &Config, t: &reel_config::TokenConfig) -> std::sync::Arc<reel_cache::SiteToken> {
    let tls_ports =
        cfg.listener.iter().filter(|l| l.tls_cert.is_some()).map(|l| l.address.port()).collect();
    std::sync::Arc::new(reel_cache::SiteToken::new(t, tls_ports))
}

/// `[cache]`, `[[cache.rule]]` and `[[site]]`. With `--origin` every Host comes from
/// [`FLAG_GROUP`]: each site keeps its key, methods and policy but fetches from the flag's
/// origin, and a catch-all site takes the Hosts no site claims.
/// A site's `[site.compress]` for the cache; `None` when it is off or no memory is given
/// to compressed representations.
fn compress_of(c: &reel_config::CompressConfig, memory: u64) -> Option<reel_cache::Compress> {
    (c.enabled && memory > 0 && !c.encodings.is_empty()).then(|| reel_cache::Compress {
        types: c.types.iter().map(|t| t.to_ascii_lowercase()).collect(),
        encodings: c.encodings.clone(),
        min_size: c.min_size.bytes(),
        max_size: c.max_size.bytes(),
        brotli_quality: c.brotli_quality,
        gzip_level: c.gzip_level,
    })
}

/// A site's `[site.cmsd]`, when on: named by its `id`, or the machine's host name.
fn cmsd_of(c: &reel_config::CmsdConfig) -> Option<std::sync::Arc<reel_cache::Cmsd>> {
    if !c.enabled {
        return None;
    }
    let id = if c.id.is_empty() { host_name() } else { c.id.clone() };
    reel_cache::Cmsd::new(&id).map(std::sync::Arc::new)
}

/// The machine's host name (`reel` when the kernel does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| (b' '..=b'~').contains(&b)))
        .unwrap_or_else(|| "reel".to_string())
}

pub(crate) fn cache_settings(cfg: &Config, origin_flag: bool) -> reel_cache::Settings {
    use reel_cache::Site;
    use reel_cache::key::KeyConfig;
    use reel_cache::policy::freshness::PolicyConfig;
    use reel_cache::policy::rules::{TtlRule, TtlRules};
    use reel_config::ClientCacheControl;

    let c = &cfg.cache;
    let policy = PolicyConfig {
        heuristic: c.heuristic_freshness,
        heuristic_max: c.heuristic_max.get(),
        store_without_validators: c.store_without_validators,
        negative_ttl: (!c.negative_ttl.get().is_zero()).then(|| c.negative_ttl.get()),
        targeted: c.targeted_cache_control.iter().map(|n| n.to_ascii_lowercase()).collect(),
        store_set_cookie: false,
    };
    let sites = cfg
        .site
        .iter()
        .map(|s| Site {
            hosts: s.hosts.clone(),
            group: if origin_flag { FLAG_GROUP.to_string() } else { s.origin_group.clone() },
            key: KeyConfig {
                ignore_query: s.ignore_query.iter().chain(&s.key.drop).cloned().collect(),
                drop_query: s.drop_query,
                keep_query: s.key.query.clone(),
            },
            pass_methods: s.methods == MethodsPolicy::Pass,
            invalidate_on: s.invalidate_on,
            policy: PolicyConfig {
                heuristic: s.heuristic_freshness.unwrap_or(policy.heuristic),
                store_set_cookie: s.store_set_cookie,
                ..policy.clone()
            },
            honor_client_cache_control: s.client_cache_control == ClientCacheControl::Honor,
            slicing: reel_cache::Slicing { size: s.slice.bytes(), read_ahead: s.read_ahead },
            prefetch: s.prefetch,
            forward_cmcd: s.forward_cmcd,
            prefetch_next: s.prefetch_next,
            token: s.token.as_ref().map(|t| site_token(cfg, t)),
            access: None,
            edits: reel_cache::ResponseEdits::new(s.cors.as_ref(), &s.header),
            compress: compress_of(&s.compress, c.compressed_memory.bytes()),
            cmsd: cmsd_of(&s.cmsd),
            metrics_id: 0,
        })
        .collect();
    let fallback = origin_flag.then(|| Site {
        hosts: Vec::new(),
        group: FLAG_GROUP.to_string(),
        key: KeyConfig::default(),
        pass_methods: true,
        invalidate_on: reel_cache::InvalidateOn::Standard,
        policy: policy.clone(),
        honor_client_cache_control: true,
        slicing: reel_cache::Slicing::default(),
        // A catch-all fetches only what viewers ask for, as any site by default.
        prefetch: reel_cache::Prefetch::Off,
        forward_cmcd: false,
        prefetch_next: false,
        token: None,
        access: None,
        edits: None,
        compress: compress_of(&reel_config::CompressConfig::default(), c.compressed_memory.bytes()),
        cmsd: None,
        metrics_id: 0,
    });
    let rules = TtlRules::new(c.rule.iter().map(|r| {
        (
            r.pattern.as_str().to_string(),
            TtlRule { ttl: r.ttl.get(), override_origin: r.override_origin },
        )
    }));
    reel_cache::Settings {
        sites,
        fallback,
        policy,
        rules,
        swr_default: c.stale_while_revalidate_default.get(),
        fill_drop_headers: c.fill_drop_headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
        max_variants: c.max_variants as usize,
        lock_timeout: c.lock_timeout.get(),
        max_misses_per_connection: c.max_misses_per_connection as usize,
        read_ahead_per_worker: c.read_ahead_per_worker as usize,
        compressed_memory: c.compressed_memory.bytes() as usize,
        blocking_timeout: c.blocking_timeout.get(),
        fill_timeout: c.fill_timeout.get(),
        node: node(cfg),
        admission: match cfg.store.admission {
            reel_config::StoreAdmission::Always => reel_store::AdmissionPolicy::Always,
            reel_config::StoreAdmission::SecondHit => reel_store::AdmissionPolicy::SecondHit,
        },
    }
}

/// `[server]` `cdn_id`, `max_hops` and `cache_status_name`.
pub(crate) fn node(cfg: &Config) -> reel_cache::Node {
    let s = &cfg.server;
    reel_cache::Node::new(&s.cdn_id, s.cache_status_name(), s.max_hops)
}

/// `[demo_origin]`.
#[cfg(feature = "demo")]
pub(crate) fn demo_origin(cfg: &Config) -> reel_demo_origin::DemoOriginConfig {
    let d = &cfg.demo_origin;
    reel_demo_origin::DemoOriginConfig {
        latency_scale: d.latency_scale,
        error_rate: d.error_rate,
        reset_rate: d.reset_rate,
        segment_duration: d.segment_duration.get(),
        live_segment_size: d.live_segment_size.bytes(),
        ..Default::default()
    }
}

/// The origin given by `--origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OriginFlag {
    /// Where to connect.
    pub addr: HostPort,
    /// `https://`: TLS verified against the system roots, SNI the host name.
    pub tls: bool,
    /// The `Host` sent to the origin (and over TLS its SNI name); `None` passes the
    /// viewer's (`--origin-host viewer`).
    pub host_header: Option<String>,
}

/// `--origin-host viewer`: pass the viewer's `Host` on to the origin.
pub(crate) const ORIGIN_HOST_VIEWER: &str = "viewer";

/// `--origin http://HOST[:PORT]` or `https://HOST[:PORT]` (ports 80 and 443 by default), with
/// `--origin-host` (`origin_host`): by default the origin's own `HOST[:PORT]` goes in `Host`
/// (the port only when it is not the scheme's default), as nginx's `proxy_pass` sends;
/// `viewer` passes the viewer's; any other value is sent as it is.
pub(crate) fn parse_origin_flag(
    url: &str,
    origin_host: Option<&str>,
) -> Result<OriginFlag, String> {
    let (rest, tls, default_port) =
        match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false, 80),
            (_, Some(rest)) => (rest, true, 443),
            _ => return Err(format!("{url:?}: expected http://HOST:PORT or https://HOST:PORT")),
        };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') || authority.contains('@') {
        return Err(format!("{url:?}: expected http(s)://HOST:PORT without a path"));
    }
    let with_port =
        if authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
            && !authority.ends_with(']')
        {
            authority.to_string()
        } else {
            format!("{authority}:{default_port}")
        };
    let addr = with_port.parse::<HostPort>()?;
    let host_header = match origin_host {
        None => {
            let host = match addr.host.contains(':') {
                true => format!("[{}]", addr.host),
                false => addr.host.to_ascii_lowercase(),
            };
            Some(match addr.port == default_port {
                true => host,
                false => format!("{host}:{}", addr.port),
            })
        }
        Some(ORIGIN_HOST_VIEWER) => None,
        Some(name) => Some(host_header_value(name)?),
    };
    Ok(OriginFlag { addr, tls, host_header })
}

/// A `--origin-host NAME`: a host name or address, with an optional port.
fn host_header_value(name: &str) -> Result<String, String> {
    let ok =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'[' | b']');
    if name.is_empty() || !name.bytes().all(ok) {
        return Err(format!(
            "--origin-host {name:?}: expected {ORIGIN_HOST_VIEWER:?} or a host name with an \
             optional port (NAME[:PORT])"
        ));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const CFG: &str = r#"
[[listener]]
name = "http"
address = "127.0.0.1:8080"
backlog = 100
[http]
max_request_line = "1KiB"
idle_timeout = "5s"
max_connections_per_worker = 7
[cache]
negative_ttl = "0s"
heuristic_freshness = true
[[cache.rule]]
match = "*.m3u8"
ttl = "1s"
override = true
[[site]]
hosts = ["live.example.com"]
origin_group = "a"
ignore_query = ["token"]
methods = "refuse"
invalidate_on = "all"
slice = "1MiB"
read_ahead = 3
prefetch = "hinted"
[[origin_group]]
name = "a"
retries = 3
  [origin_group.health]
  enabled = false
  [[origin_group.tier]]
  hosts = ["127.0.0.1:1", "[::1]:2"]
  host_header = "origin.example.com"
"#;

    fn cfg() -> Config {
        Config::parse_and_validate(CFG, "t.toml").expect("valid")
    }

    #[test]
    fn origin_descriptors_count_busy_idle_http2_and_probe_per_host() {
        // Two hosts in one tier.
        let mut c = cfg();
        c.origin_group.truncate(1);
        c.origin_group[0].tier.truncate(1);
        assert_eq!(c.origin_group[0].tier[0].hosts.len(), 2);
        c.origin_group[0].max_connections = 100;
        c.origin_group[0].max_idle_per_host = 8;
        // Per host: 100 busy + 4 workers × (8 idle + 1 HTTP/2) + 1 probe = 137.
        assert_eq!(origin_descriptors(&c, 4), 2 * 137);
    }

    #[test]
    fn sections_become_library_options() {
        let c = cfg();
        let l = http_limits(&c);
        assert_eq!((l.max_request_line, l.idle_timeout), (1024, Duration::from_secs(5)));
        let ls = listeners(&c);
        assert_eq!((ls[0].name.as_str(), ls[0].backlog), ("http", 100));
        let plan = CorePlan {
            cpus: vec![],
            workers: vec![0],
            irq_cpus: vec![1],
            warnings: vec![],
            cpu_quota: None,
        };
        let limits = connection_limits(&c, &FdBudget { limit: 1000, base: 10 }).unwrap();
        assert_eq!(
            limits,
            ConnectionLimits { per_worker: 7, per_client: 2048, total: 734, answering: 64 }
        );
        let r = runtime(&c, &plan, limits);
        assert_eq!((r.max_connections_per_worker, r.irq_cpus), (7, vec![1]));
        assert_eq!((r.max_connections_per_client, r.max_connections), (2048, 734));
        assert!(connection_limits(&c, &FdBudget { limit: 100, base: 10 }).is_err());
        let g = origin_groups(&c, None).expect("groups");
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].retries, 3);
        assert!(!g[0].health.enabled);
        assert_eq!(g[0].tiers[0][1].addr, "[::1]:2");
        assert_eq!(g[0].tiers[0][0].host_header.as_deref(), Some("origin.example.com"));
    }

    #[test]
    fn cache_settings_follow_sites_rules_and_the_origin_flag() {
        let c = cfg();
        let s = cache_settings(&c, false);
        let site = s.site_for("live.example.com").expect("site");
        assert_eq!(site.group, "a");
        assert!(!site.pass_methods, "methods = refuse");
        assert_eq!(site.invalidate_on, reel_cache::InvalidateOn::All);
        assert_eq!(site.key.ignore_query, ["token"]);
        assert_eq!((site.slicing.size, site.slicing.read_ahead), (Some(1 << 20), 3));
        assert_eq!(s.read_ahead_per_worker, 64);
        assert_eq!(s.policy.negative_ttl, None, "0s: do not cache 404s");
        assert!(s.policy.heuristic);
        assert!(s.site_for("other.example").is_none());
        assert_eq!(site.prefetch, reel_cache::Prefetch::Hinted);
        assert_eq!(s.blocking_timeout, Duration::from_secs(10), "[cache] blocking_timeout default");
        assert_eq!(s.node.cache_status_name(), "reel", "[server] defaults");
        assert!(s.node.loop_entry().starts_with("reel; t="));
        let with_flag = cache_settings(&c, true);
        let fallback = with_flag.site_for("other.example").expect("fallback");
        assert_eq!(fallback.group, FLAG_GROUP);
        assert_eq!(fallback.prefetch, reel_cache::Prefetch::Off);
        assert_eq!(fallback.invalidate_on, reel_cache::InvalidateOn::Standard);
        let claimed = with_flag.site_for("live.example.com").expect("site");
        assert_eq!(claimed.group, FLAG_GROUP, "--origin serves the sites' Hosts too");
        assert_eq!(claimed.key.ignore_query, ["token"], "with the site's own key");
        let fallback = with_flag.site_for("other.example").expect("fallback");
        assert_eq!(fallback.slicing.size, None, "the fallback site does not slice");
        let hp = OriginFlag {
            addr: "10.0.0.1:8000".parse().expect("host"),
            tls: false,
            host_header: Some("10.0.0.1:8000".into()),
        };
        let groups = origin_groups(&c, Some(&hp)).expect("groups");
        assert_eq!(groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), [FLAG_GROUP]);
    }

    #[test]
    fn origin_flag_forms() {
        let f = parse_origin_flag("http://127.0.0.1:8081/", None).unwrap();
        assert_eq!((f.addr.to_string(), f.tls), ("127.0.0.1:8081".to_string(), false));
        assert_eq!(parse_origin_flag("http://origin.test", None).unwrap().addr.port, 80);
        assert_eq!(parse_origin_flag("http://[::1]", None).unwrap().addr.to_string(), "[::1]:80");
        let t = parse_origin_flag("https://origin.test", None).unwrap();
        assert_eq!((t.addr.port, t.tls), (443, true));
        assert!(parse_origin_flag("https://a:1", None).unwrap().tls);
        assert!(parse_origin_flag("ftp://a:1", None).is_err());
        assert!(parse_origin_flag("http://a:1/path", None).is_err());
    }

    #[test]
    fn origin_flag_sends_the_origins_own_host_unless_told_otherwise() {
        let host =
            |url: &str, flag: Option<&str>| parse_origin_flag(url, flag).unwrap().host_header;
        // As nginx's proxy_pass: the URL's host, with its port unless it is the default.
        assert_eq!(host("http://127.0.0.1:8081", None).as_deref(), Some("127.0.0.1:8081"));
        assert_eq!(host("http://Origin.test/", None).as_deref(), Some("origin.test"));
        assert_eq!(host("http://origin.test:80", None).as_deref(), Some("origin.test"));
        assert_eq!(host("https://b.s3.example:443", None).as_deref(), Some("b.s3.example"));
        assert_eq!(host("https://b.s3.example:8443", None).as_deref(), Some("b.s3.example:8443"));
        assert_eq!(host("http://origin.test:443", None).as_deref(), Some("origin.test:443"));
        assert_eq!(host("http://[::1]:8081", None).as_deref(), Some("[::1]:8081"));
        assert_eq!(host("http://[::1]", None).as_deref(), Some("[::1]"));
        assert_eq!(host("http://o.test", Some("viewer")), None);
        assert_eq!(
            host("http://o.test", Some("www.example.com")).as_deref(),
            Some("www.example.com")
        );
        assert_eq!(host("http://o.test", Some("a.test:81")).as_deref(), Some("a.test:81"));
        for bad in ["", "a b", "a/b", "a@b", "a\nb"] {
            assert!(parse_origin_flag("http://o.test", Some(bad)).is_err(), "{bad:?}");
        }
        // The flag's group carries it.
        let f = parse_origin_flag("https://b.s3.example", None).unwrap();
        let g = origin_groups(&cfg(), Some(&f)).expect("groups");
        assert_eq!(g[0].tiers[0][0].host_header.as_deref(), Some("b.s3.example"));
        assert_eq!(g[0].tiers[0][0].tls_name(), "b.s3.example");
    }
}
