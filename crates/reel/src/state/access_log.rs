//! The access log of a config generation: its sinks (`access_log.path` first, as the sink
//! named `file`, then each `[[access_log.sink]]`) and its layout (`fields`, `[sample]`).
//! A generation keeps the running sinks when `path`, `format` and the sink tables are the
//! same (`same_sinks`); the layout is the generation's, so changing it reopens nothing.

use reel_config::{
    AccessLogSink, Config, SYSLOG_FACILITIES, SinkKind, SyslogAddress, parse_collector_url,
    parse_syslog_address,
};
use reel_ops::access_log::{Collector, Field, Layout, Sample, SinkSpec, SyslogTarget};

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

/// Whether the generation of `cfg` can keep the sinks of the generation of `prev`: the
/// log stays on and its path, format and sinks are the same.
pub(crate) fn same_sinks(prev: &Config, cfg: &Config) -> bool {
    let (p, a) = (&prev.access_log, &cfg.access_log);
    p.enabled && a.enabled && p.path == a.path && p.format == a.format && p.sink == a.sink
}
