//! The access log of a config generation: its sinks (`access_log.path` first, as the sink
//! named `file`, then each `[[access_log.sink]]`) and its layout (`fields`, `[sample]`).
//! The sinks stay across a reload that leaves `path`, `format` and the sink tables alone;
//! the layout is the generation's, so changing it reopens nothing.

use std::sync::Arc;

use reel_config::{
    AccessLogSink, Config, SYSLOG_FACILITIES, SinkKind, SyslogAddress, parse_collector_url,
    parse_syslog_address,
};
use reel_ops::access_log::{AccessLog, Collector, Field, Layout, Sample, SinkSpec, SyslogTarget};

use crate::state::generation::{GenerationError, Live};
use crate::state::options;

/// The layout of `cfg`: its fields in order, its sampling.
pub(crate) fn layout(cfg: &Config) -> Layout {
    let a = &cfg.access_log;
    Layout {
        // Validation refused unknown names.
        fields: a.fields.iter().filter_map(|f| Field::from_name(f)).collect(),
        sample: Sample::from_fractions(a.sample.classes().map(|(_, r)| r)),
    }
}

/// The sinks of `cfg`, in order.
pub(crate) fn sinks(cfg: &Config) -> Vec<SinkSpec> {
    let a = &cfg.access_log;
    let mut out = Vec::with_capacity(a.sink.len() + 1);
    if !a.path.as_os_str().is_empty() {
        out.push(SinkSpec::File { name: "file".into(), path: a.path.clone() });
    }
    out.extend(a.sink.iter().filter_map(sink));
    out
}

fn sink(s: &AccessLogSink) -> Option<SinkSpec> {
    let name = s.label().to_owned();
    Some(match s.kind? {
        SinkKind::File => SinkSpec::File { name, path: s.path.clone() },
        SinkKind::Syslog => SinkSpec::Syslog {
            name,
            target: match parse_syslog_address(&s.address).ok()? {
                SyslogAddress::Udp(a) => SyslogTarget::Udp(a),
                SyslogAddress::Tcp(a) => SyslogTarget::Tcp(a),
                SyslogAddress::Unix(p) => SyslogTarget::Unix(p),
            },
            facility: SYSLOG_FACILITIES.iter().position(|f| *f == s.facility).unwrap_or(16) as u8,
            app_name: s.app_name.clone(),
            timeout: s.timeout.get(),
        },
        SinkKind::Http => {
            let u = parse_collector_url(&s.url).ok()?;
            SinkSpec::Http {
                name,
                collector: Collector {
                    connect: u.connect,
                    host: u.host,
                    target: u.target,
                    gzip: s.gzip,
                    batch_lines: u64::from(s.batch_lines),
                    batch_bytes: usize::try_from(s.batch_bytes.bytes()).unwrap_or(usize::MAX),
                    interval: s.interval.get(),
                    retries: s.retries,
                    timeout: s.timeout.get(),
                },
            }
        }
    })
}

/// The access log of the generation built from `cfg`: the running one's when its sinks are
/// unchanged, else a new one (the old one's sinks ship what they hold and stop once the
/// old generation is gone).
pub(crate) fn open(
    cfg: &Config,
    prev: Option<&Live>,
) -> Result<Option<Arc<AccessLog>>, GenerationError> {
    let a = &cfg.access_log;
    if !a.enabled {
        return Ok(None);
    }
    if let Some(p) = prev
        && p.cfg.access_log.enabled
        && p.cfg.access_log.path == a.path
        && p.cfg.access_log.format == a.format
        && p.cfg.access_log.sink == a.sink
        && p.access_log.is_some()
    {
        return Ok(p.access_log.clone());
    }
    let specs = sinks(cfg);
    for spec in &specs {
        if let SinkSpec::File { path, .. } = spec
            && path.as_os_str() != "-"
            && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .map_err(|source| GenerationError::LogDir { path: dir.to_path_buf(), source })?;
        }
    }
    Ok(Some(AccessLog::start(options::access_log_format(cfg), specs)?))
}
