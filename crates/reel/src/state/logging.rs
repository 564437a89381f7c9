//! Log set-up: a `tracing` subscriber with the config's filter (or `RUST_LOG`) and format,
//! and the bridge that brings the `log` records of dependencies (rustls) into it.
//!
//! ANSI colours are used only when standard error is a terminal, so the lines that land in
//! the journal, a file or a test harness are plain text (or plain JSON). The filter can be
//! replaced later ([`set_level`]) so `log.level` changes with a reload; the format cannot.
//!
//! The bridge ([`Bridge`]) passes every record on unchanged but one kind: rustls' warnings
//! about a ClientHello's server name (`Illegal SNI ...`), which any client can cause on every
//! handshake (an IP address as server name, a name that is not a DNS name). They go on at
//! debug level, so a client cannot fill the log; the address case is counted instead
//! (`reel_tls_sni_ip_address_total`), the others fail their handshake and are counted as
//! `reel_tls_handshakes_total{result="protocol_error"}`.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;
use std::sync::OnceLock;

use reel_config::{LogConfig, LogFormat};
use tracing::level_filters::LevelFilter;
use tracing_log::log;
use tracing_log::{AsLog, LogTracer};
use tracing_subscriber::EnvFilter;

type SetFilter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

/// Replaces the installed subscriber's filter; absent when `RUST_LOG` rules or when no
/// subscriber was installed by [`init`].
static SET_FILTER: OnceLock<SetFilter> = OnceLock::new();

/// Installs the global subscriber and the `log` bridge. `RUST_LOG`, when set, overrides
/// `log.level` (also across reloads).
pub(crate) fn init(cfg: &LogConfig) {
    let from_env = std::env::var("RUST_LOG").ok().and_then(|v| EnvFilter::try_new(v).ok());
    let env_rules = from_env.is_some();
    let filter = from_env
        .or_else(|| EnvFilter::try_new(&cfg.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let (installed, set): (bool, SetFilter) = match cfg.format {
        LogFormat::Json => {
            let b = builder.json().with_current_span(false).with_filter_reloading();
            let h = b.reload_handle();
            let ok = tracing::subscriber::set_global_default(b.finish()).is_ok();
            (ok, Box::new(move |f| h.reload(f).map_err(|e| e.to_string())))
        }
        LogFormat::Human => {
            let b = builder.with_target(true).with_filter_reloading();
            let h = b.reload_handle();
            let ok = tracing::subscriber::set_global_default(b.finish()).is_ok();
            (ok, Box::new(move |f| h.reload(f).map_err(|e| e.to_string())))
        }
    };
    if !installed {
        return;
    }
    if log::set_boxed_logger(Box::new(Bridge(LogTracer::new()))).is_ok() {
        // As tracing-subscriber does for its own bridge (and again at each filter reload):
        // `log` skips records above the level any filter could let through.
        log::set_max_level(LevelFilter::current().as_log());
    }
    if !env_rules {
        let _ = SET_FILTER.set(set);
    }
}

/// Applies a reloaded `log.level`. Returns an error for a directive the filter rejects
/// (validation already accepted it, so this is unexpected) or a failed swap.
pub(crate) fn set_level(level: &str) -> Result<(), String> {
    let Some(set) = SET_FILTER.get() else { return Ok(()) };
    let f = EnvFilter::try_new(level).map_err(|e| format!("log.level {level:?}: {e}"))?;
    set(f)
}

/// `log` records into tracing events (tracing-log's [`LogTracer`]), with rustls' per-handshake
/// server-name warnings turned down to debug (see the module docs).
struct Bridge(LogTracer);

impl log::Log for Bridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !is_client_sni_warning(record) {
            return self.0.log(record);
        }
        let demoted = log::Record::builder()
            .args(*record.args())
            .level(log::Level::Debug)
            .target(record.target())
            .module_path(record.module_path())
            .file(record.file())
            .line(record.line())
            .build();
        self.0.log(&demoted);
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// rustls' warnings about the server name in a client's ClientHello (rustls 0.23,
/// `msgs/handshake.rs`): `Illegal SNI extension: ignoring IP address presented as
/// hostname (...)`, `Illegal SNI hostname received ...`, `Illegal SNI extension: duplicate
/// host_name received`.
fn is_client_sni_warning(record: &log::Record<'_>) -> bool {
    record.level() == log::Level::Warn
        && record.target().starts_with("rustls::")
        && starts_with(record.args(), "Illegal SNI ")
}

/// Whether the formatted `args` start with `prefix`, formatting no further than needed and
/// allocating nothing.
fn starts_with(args: &fmt::Arguments<'_>, prefix: &str) -> bool {
    /// Compares what is written with the rest of the prefix; an error stops the formatting
    /// at the first difference, or once the whole prefix matched.
    struct Prefix<'a> {
        rest: &'a [u8],
        differs: bool,
    }
    impl fmt::Write for Prefix<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let n = s.len().min(self.rest.len());
            let (want, rest) = self.rest.split_at(n);
            if s.as_bytes().get(..n) != Some(want) {
                self.differs = true;
                return Err(fmt::Error);
            }
            self.rest = rest;
            if self.rest.is_empty() { Err(fmt::Error) } else { Ok(()) }
        }
    }
    if let Some(s) = args.as_str() {
        return s.starts_with(prefix);
    }
    let mut p = Prefix { rest: prefix.as_bytes(), differs: false };
    let _ = p.write_fmt(*args);
    !p.differs && p.rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_matches(level: log::Level, target: &str, args: fmt::Arguments<'_>) -> bool {
        let r = log::Record::builder().args(args).level(level).target(target).build();
        is_client_sni_warning(&r)
    }

    #[test]
    fn rustls_server_name_warnings_are_recognised_and_nothing_else() {
        let ip = [127u8, 0, 0, 1];
        let target = "rustls::msgs::handshake";
        let warn = log::Level::Warn;
        assert!(record_matches(
            warn,
            target,
            format_args!(
                "Illegal SNI extension: ignoring IP address presented as hostname ({ip:?})"
            )
        ));
        assert!(record_matches(
            warn,
            target,
            format_args!("Illegal SNI hostname received {:?}", "a b")
        ));
        assert!(record_matches(
            warn,
            target,
            format_args!("Illegal SNI extension: duplicate host_name received")
        ));
        // Another level, another crate, another message.
        let sni = format_args!("Illegal SNI hostname received {:?}", "a b");
        assert!(!record_matches(log::Level::Error, target, sni));
        assert!(!record_matches(warn, "reel::tls", format_args!("Illegal SNI hostname {ip:?}")));
        assert!(!record_matches(warn, target, format_args!("TLS alert warning received: {ip:?}")));
        assert!(!record_matches(warn, target, format_args!("Illegal {}", "SNI")));
        assert!(!record_matches(warn, target, format_args!("{}", "Illegal SN")));
    }

    #[test]
    fn prefixes_are_matched_across_formatting_pieces() {
        let (a, b) = ("Illeg", "al SNI x");
        assert!(starts_with(&format_args!("{a}{b}"), "Illegal SNI "));
        assert!(starts_with(&format_args!("Illegal SNI "), "Illegal SNI "));
        assert!(!starts_with(&format_args!("{a}"), "Illegal SNI "));
        assert!(!starts_with(&format_args!("{a}{}", "al sni"), "Illegal SNI "));
        assert!(starts_with(&format_args!("{}", 12345), "123"));
        assert!(starts_with(&format_args!("é{}", 1), "é1"));
        assert!(!starts_with(&format_args!("é{}", 1), "e"));
    }
}
