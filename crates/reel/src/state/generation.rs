//! One generation of the reloadable state ([`Live`]): the config and what is built from
//! it (HTTP limits, origin groups, cache settings, access log). A reload builds the next
//! generation next to the running one, reusing every part whose config did not change.

use std::sync::Arc;
use std::time::SystemTime;

use reel_config::Config;

use crate::state::options::OriginFlag;
use reel_ops::access_log::{AccessLog, AccessLogError, SinkSpec};
use reel_origin::Origins;

use crate::state::{access, access_log, options};

/// One generation of reloadable state.
pub(crate) struct Live {
    /// Generation number, 1 at start-up, +1 per successful reload.
    pub generation: u64,
    /// The config it was built from.
    pub cfg: Config,
    /// HTTP codec limits.
    pub limits: reel_http::Limits,
    /// HTTP/2 settings of the TLS listeners that offer it.
    pub h2: reel_http::H2Settings,
    /// Origin groups (health checks run while this generation is alive). Shared with the
    /// previous generation when `[[origin_group]]` did not change, so workers keep their
    /// connection pools.
    pub origins: Arc<Origins>,
    /// The cache's routing and policy settings.
    pub cache: Arc<reel_cache::Settings>,
    /// The country database of `[geo]`, shared with the previous generation when its path
    /// did not change.
    pub geo: Option<Arc<reel_access::Geo>>,
    /// The access log, if enabled.
    pub access_log: Option<Arc<AccessLog>>,
    /// The access log's fields and sampling.
    pub log_layout: Arc<reel_ops::access_log::Layout>,
    /// The TLS listeners' certificates and configurations.
    pub tls: Arc<crate::listeners::tls::TlsState>,
    /// When it was loaded.
    pub loaded_at: SystemTime,
}

/// Why a generation could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GenerationError {
    /// The origin groups were rejected.
    #[error("origin groups: {0}")]
    Origins(#[from] reel_origin::SpecError),
    /// A secret the origin groups name could not be read from the environment.
    #[error("origin groups: {0}")]
    OriginSecrets(String),
    /// The health checker thread could not start.
    #[error("starting origin health checks: {0}")]
    HealthChecks(#[source] std::io::Error),
    /// The access log's directory could not be created.
    #[error("creating {}: {source}", path.display())]
    LogDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The access log could not be opened.
    #[error(transparent)]
    AccessLog(#[from] AccessLogError),
    /// The `[geo]` database could not be read.
    #[error("[geo] database: {0}")]
    Geo(#[from] reel_access::GeoError),
}

impl Live {
    /// Builds generation `generation` from `cfg` and its TLS state `tls` (built first, see
    /// [`crate::listeners::tls::TlsState::build`]); `prev` is the running generation, whose origin
    /// groups and access log are kept when their config is unchanged; `site_ids` gives each
    /// site its id in the per-site metrics.
    pub(crate) fn build(
        cfg: Config,
        generation: u64,
        origin_flag: Option<&OriginFlag>,
        prev: Option<&Live>,
        tls: crate::listeners::tls::TlsState,
        site_ids: &reel_ops::sites::SiteIds,
    ) -> Result<Live, GenerationError> {
        // Unchanged origin groups keep their `Origins`: health state, counters and (in the
        // workers) connection pools survive a reload that did not touch them.
        let origins = match prev {
            Some(p) if p.cfg.origin_group == cfg.origin_group => p.origins.clone(),
            _ => {
                let groups = options::origin_groups(&cfg, origin_flag)
                    .map_err(GenerationError::OriginSecrets)?;
                let origins = Arc::new(Origins::new(groups)?);
                origins.start_health_checks().map_err(GenerationError::HealthChecks)?;
                origins
            }
        };
        let access_log = match prev {
            _ if !cfg.access_log.enabled => None,
            // The sinks (their threads, files and connections) stay across reloads that keep
            // them; `fields`, `[access_log.sample]`, `buffer` and `flush_interval` are the
            // generation's and apply without reopening anything.
            Some(p) if p.access_log.is_some() && access_log::same_sinks(&p.cfg, &cfg) => {
                p.access_log.clone()
            }
            _ => {
                let sinks = access_log::sinks(&cfg);
                for dir in sinks.iter().filter_map(file_dir) {
                    std::fs::create_dir_all(dir).map_err(|source| GenerationError::LogDir {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                }
                Some(AccessLog::start(options::access_log_format(&cfg), sinks)?)
            }
        };
        let log_layout = Arc::new(access_log::layout(&cfg));
        let geo = access::geo(&cfg, prev.and_then(|p| p.geo.as_ref()))?;
        let mut cache = options::cache_settings(&cfg, origin_flag.is_some());
        // Ids by name, for the process: a site keeps its counters across reloads.
        for (site, c) in cache.sites.iter_mut().zip(&cfg.site) {
            site.metrics_id = site_ids.id(c.metrics_name());
        }
        access::attach(&mut cache, &cfg, geo.as_ref(), prev.map(|p| &*p.cache));
        Ok(Live {
            generation,
            limits: options::http_limits(&cfg),
            h2: options::h2_settings(&cfg),
            cache: Arc::new(cache),
            geo,
            cfg,
            origins,
            access_log,
            log_layout,
            tls: Arc::new(tls),
            loaded_at: SystemTime::now(),
        })
    }
}

/// The directory a file sink's file goes in, to create if missing.
fn file_dir(s: &SinkSpec) -> Option<&std::path::Path> {
    match s {
        SinkSpec::File { path, .. } if path.as_os_str() != "-" => {
            path.parent().filter(|d| !d.as_os_str().is_empty())
        }
        _ => None,
    }
}
