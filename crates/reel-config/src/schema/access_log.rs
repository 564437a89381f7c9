//! `[access_log]`: the line format, which JSON fields in which order, sampling per status
//! class, and the sinks lines are shipped to (`[[access_log.sink]]`: a file, syslog, an
//! HTTP collector), with the parsers of a sink's `address` and `url`.

use super::*;

/// The JSON access-log fields, in their default order (the `fields` default). The
/// documentation's table in `docs/operations.md` lists exactly these.
pub const ACCESS_LOG_FIELDS: [&str; 16] = [
    "time",
    "client",
    "peer",
    "method",
    "host",
    "path",
    "protocol",
    "status",
    "bytes",
    "cache",
    "origin_ms",
    "total_ms",
    "ua",
    "request",
    "error",
    "denied",
];

/// Syslog facility names (RFC 5424 6.2.1), in code order.
pub const SYSLOG_FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
    "ftp", "ntp", "audit", "alert", "clock", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// Line format of the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// One JSON object per request.
    #[default]
    Json,
    /// NCSA combined log format.
    Combined,
}

/// `[access_log]`: one line per client request, batched per worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogConfig {
    /// Write an access log at all. Default `true`.
    pub enabled: bool,
    /// File to append to; `"-"` = standard output; `""` = no file of its own (only the
    /// `[[access_log.sink]]` entries, of which there must then be one). Relative paths are
    /// relative to the working directory. Default `"/var/log/reel/access.log"`.
    pub path: PathBuf,
    /// `json` or `combined`. Default `json`.
    pub format: AccessLogFormat,
    /// Per-worker buffer; a full buffer is handed to the writer thread. Size; default
    /// `"64KiB"`.
    pub buffer: ByteSize,
    /// A partly filled buffer is handed over at least this often. Duration; default `"1s"`.
    pub flush_interval: Duration,
    /// The JSON keys written, in this order (names from [`ACCESS_LOG_FIELDS`]). Default:
    /// all of them, in that order.
    pub fields: Vec<String>,
    /// `[access_log.sample]`: the fraction of requests logged, per status class.
    pub sample: AccessLogSample,
    /// `[[access_log.sink]]`: where lines go besides `path`.
    pub sink: Vec<AccessLogSink>,
    /// CMCD keys the `combined` format appends as `cmcd_KEY=value` when a request
    /// carries them (the `json` format logs every key). Default `[]`.
    pub cmcd_keys: Vec<String>,
}

impl AccessLogConfig {
    /// True when the log goes to standard output (`path = "-"`).
    pub fn is_stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            enabled: true,
            path: "/var/log/reel/access.log".into(),
            format: AccessLogFormat::Json,
            buffer: ByteSize::kib(64),
            flush_interval: Duration::from_secs(1),
            fields: ACCESS_LOG_FIELDS.iter().map(|f| (*f).to_owned()).collect(),
            sample: AccessLogSample::default(),
            sink: Vec::new(),
            cmcd_keys: Vec::new(),
        }
    }
}

/// `[access_log.sample]`: the fraction (0 to 1) of the requests of each status class that
/// is logged. A fraction `r` logs the first of every `round(1/r)` requests of the class,
/// counted per worker; 0 logs none. Default 1 (every request) for each class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogSample {
    /// Informational answers (1xx).
    #[serde(rename = "1xx")]
    pub informational: f64,
    /// Successes (2xx).
    #[serde(rename = "2xx")]
    pub success: f64,
    /// Redirections and not-modified answers (3xx).
    #[serde(rename = "3xx")]
    pub redirection: f64,
    /// Client errors (4xx).
    #[serde(rename = "4xx")]
    pub client_error: f64,
    /// Server errors (5xx).
    #[serde(rename = "5xx")]
    pub server_error: f64,
}

impl AccessLogSample {
    /// The fractions of the classes 1xx to 5xx, with their key names.
    pub fn classes(&self) -> [(&'static str, f64); 5] {
        [
            ("1xx", self.informational),
            ("2xx", self.success),
            ("3xx", self.redirection),
            ("4xx", self.client_error),
            ("5xx", self.server_error),
        ]
    }
}

impl Default for AccessLogSample {
    fn default() -> Self {
        AccessLogSample {
            informational: 1.0,
            success: 1.0,
            redirection: 1.0,
            client_error: 1.0,
            server_error: 1.0,
        }
    }
}

/// What a sink is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// A file (or `-`, standard output), reopened on SIGUSR1.
    File,
    /// RFC 5424 syslog messages over UDP, TCP (octet counting) or a Unix datagram socket.
    Syslog,
    /// NDJSON batches POSTed to an HTTP collector.
    Http,
}

impl SinkKind {
    /// The name in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::File => "file",
            SinkKind::Syslog => "syslog",
            SinkKind::Http => "http",
        }
    }
}

/// `[[access_log.sink]]`: one more destination for the access log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogSink {
    /// `file`, `syslog` or `http`. Required.
    pub kind: Option<SinkKind>,
    /// The `sink` label of its metrics and its name in `/healthz`. Default: its kind.
    pub name: String,
    /// `file`: the file to append to (`-` = standard output).
    pub path: PathBuf,
    /// `syslog`: `udp://host:port`, `tcp://host:port` or `unix:/path`.
    pub address: String,
    /// `syslog`: the facility name. Default `local0`.
    pub facility: String,
    /// `syslog`: the APP-NAME of every message. Default `reel`.
    pub app_name: String,
    /// `http`: the collector's `http://host:port/path`.
    pub url: String,
    /// `http`: gzip each POST's body. Default `false`.
    pub gzip: bool,
    /// `http`: lines per POST at most. Default 1000.
    pub batch_lines: u32,
    /// `http`: bytes (before gzip) per POST at most. Size; default `"1MiB"`.
    pub batch_bytes: ByteSize,
    /// `http`: lines wait at most this long before they are POSTed. Duration; default `"1s"`.
    pub interval: Duration,
    /// `http`: attempts after the first failed POST of a batch, with a doubling backoff
    /// from 100 ms. Default 3.
    pub retries: u32,
    /// `http`, `syslog` over TCP: connect, write and answer timeout. Duration; default `"5s"`.
    pub timeout: Duration,
}

impl AccessLogSink {
    /// The name it goes by: `name`, or its kind.
    pub fn label(&self) -> &str {
        match (&self.name, self.kind) {
            (n, _) if !n.is_empty() => n,
            (_, Some(k)) => k.as_str(),
            (_, None) => "sink",
        }
    }
}

impl Default for AccessLogSink {
    fn default() -> Self {
        AccessLogSink {
            kind: None,
            name: String::new(),
            path: PathBuf::new(),
            address: String::new(),
            facility: "local0".into(),
            app_name: "reel".into(),
            url: String::new(),
            gzip: false,
            batch_lines: 1000,
            batch_bytes: ByteSize::mib(1),
            interval: Duration::from_secs(1),
            retries: 3,
            timeout: Duration::from_secs(5),
        }
    }
}

/// A syslog sink's `address`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogAddress {
    /// `udp://host:port`: one datagram per message (RFC 5426).
    Udp(String),
    /// `tcp://host:port`: octet-counted messages on one connection (RFC 6587 3.4.1).
    Tcp(String),
    /// `unix:/path`: one datagram per message on a Unix socket.
    Unix(PathBuf),
}

/// Parses a syslog sink's `address`.
pub fn parse_syslog_address(a: &str) -> Result<SyslogAddress, String> {
    if let Some(rest) = a.strip_prefix("udp://") {
        return host_port(rest).map(|_| SyslogAddress::Udp(rest.to_owned()));
    }
    if let Some(rest) = a.strip_prefix("tcp://") {
        return host_port(rest).map(|_| SyslogAddress::Tcp(rest.to_owned()));
    }
    if let Some(rest) = a.strip_prefix("unix:") {
        if !rest.starts_with('/') {
            return Err(format!("{a:?}: a Unix socket needs an absolute path (unix:/dev/log)"));
        }
        return Ok(SyslogAddress::Unix(rest.into()));
    }
    Err(format!("{a:?} is not udp://host:port, tcp://host:port or unix:/path"))
}

/// An HTTP sink's `url`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorUrl {
    /// `host:port` to connect to (port 80 when the URL has none).
    pub connect: String,
    /// The `Host` header: the URL's authority.
    pub host: String,
    /// The request target: path and query (`/` when the URL has none).
    pub target: String,
}

/// Parses an HTTP sink's `url` (`http://host[:port][/path]`).
pub fn parse_collector_url(u: &str) -> Result<CollectorUrl, String> {
    let Some(rest) = u.strip_prefix("http://") else {
        return Err(format!("{u:?} is not an http:// URL (https is not supported)"));
    };
    let (authority, target) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let target = if target.starts_with('?') { format!("/{target}") } else { target.to_owned() };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{u:?} has no host (or has credentials, which are not supported)"));
    }
    if target.bytes().any(|b| !(b'!'..=b'~').contains(&b)) {
        return Err(format!("{u:?}: the path must be printable ASCII without spaces"));
    }
    let connect = match host_port(authority) {
        Ok(()) => authority.to_owned(),
        Err(_) if !authority.ends_with(']') && authority.contains(':') => {
            return Err(format!("{u:?}: the port is not a number 1-65535"));
        }
        Err(_) => format!("{authority}:80"),
    };
    Ok(CollectorUrl { connect, host: authority.to_owned(), target })
}

/// Checks `host:port` (a name, an IPv4 address or a bracketed IPv6 address, and a port).
fn host_port(s: &str) -> Result<(), String> {
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} has no :port"));
    };
    if host.is_empty() || host.contains(['/', ' ', '@']) {
        return Err(format!("{s:?} has no host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{s:?}: the port is not a number 1-65535")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_addresses_parse() {
        assert_eq!(
            parse_syslog_address("udp://127.0.0.1:514"),
            Ok(SyslogAddress::Udp("127.0.0.1:514".into()))
        );
        assert_eq!(
            parse_syslog_address("tcp://[::1]:601"),
            Ok(SyslogAddress::Tcp("[::1]:601".into()))
        );
        assert_eq!(
            parse_syslog_address("unix:/dev/log"),
            Ok(SyslogAddress::Unix("/dev/log".into()))
        );
        assert!(parse_syslog_address("udp://host").is_err());
        assert!(parse_syslog_address("unix:dev/log").is_err());
        assert!(parse_syslog_address("syslog.example:514").is_err());
        let u = parse_collector_url("http://logs.example:9000/loki/api/v1/push").unwrap();
        assert_eq!(
            (u.connect.as_str(), u.host.as_str(), u.target.as_str()),
            ("logs.example:9000", "logs.example:9000", "/loki/api/v1/push")
        );
        let u = parse_collector_url("http://vector.local").unwrap();
        assert_eq!((u.connect.as_str(), u.target.as_str()), ("vector.local:80", "/"));
        assert_eq!(parse_collector_url("http://h?x=1").unwrap().target, "/?x=1");
        assert!(parse_collector_url("https://h/").is_err());
        assert!(parse_collector_url("http://h:99999/").is_err());
        assert!(parse_collector_url("http:///x").is_err());
    }
}
