//! The server side of one TLS handshake, on the worker that accepted the connection, and
//! per-worker counters of how handshakes ended.
//!
//! The ClientHello is read first (rustls' `Acceptor`), so a handshake refused by a strict
//! listener for its server name is told apart from other failures, and a server name that
//! was an IP address is noticed (see `client_hello`); the rest of the handshake then runs
//! against the listener's shared configuration. The whole handshake is bounded by one
//! deadline (slow or silent clients cannot hold a connection slot).
//!
//! The handshake reads one record at a time ([`Corked`]), so that when it ends the record
//! layer can leave rustls whole: its secrets go to the kernel ([`KtlsStream`], when the
//! listener's `ktls` allows and the kernel has the `tls` module) or to reel's own record
//! layer ([`SealedStream`]). Which one, and why not the kernel, is counted per worker.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::atomic::AtomicBool;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use rustls::HandshakeKind;
use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::StartHandshake;

use crate::client_hello::{Recorded, sni_is_ip_address};
use crate::context::{ALPN_H2, KtlsMode, ListenerTls};
use crate::cork::Corked;
use crate::ktls::{self, InstallError, KtlsStream};
use crate::record::{DirectionKeys, SessionKeys, Version};
use crate::sealed::SealedStream;

/// A server-side TLS stream whose records rustls seals.
pub type TlsStream = tokio_rustls::server::TlsStream<Corked>;

/// A TLS connection after its handshake.
#[derive(Debug)]
pub enum Session {
    /// The kernel seals and opens the records (kTLS).
    Kernel(KtlsStream),
    /// reel seals and opens the records.
    Sealed(Box<SealedStream>),
    /// rustls does (the secrets could not be taken out of it).
    Rustls(Box<TlsStream>),
}

/// Who seals a connection's records: metric label `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPath {
    /// The kernel.
    Ktls,
    /// User space (reel's record layer, or rustls').
    Userspace,
}

/// Why a connection's records are not sealed by the kernel: metric label `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The listener says `ktls = "off"`.
    Off,
    /// The kernel has no `tls` module loaded.
    NoModule,
    /// The kernel refused the session (its cipher, most often).
    Refused,
    /// The session's secrets could not be taken out of rustls (it stays with rustls).
    Extract,
}

impl Fallback {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Fallback::Off => "off",
            Fallback::NoModule => "no_module",
            Fallback::Refused => "refused",
            Fallback::Extract => "extract",
        }
    }
    const ALL: [Fallback; 4] =
        [Fallback::Off, Fallback::NoModule, Fallback::Refused, Fallback::Extract];
}

/// Negotiated protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// Metric label: `tls1.2` or `tls1.3`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "tls1.2",
            TlsVersion::Tls13 => "tls1.3",
        }
    }

    /// The version number, as `min_tls_version` is written: `1.2` or `1.3`.
    pub fn number(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

/// Application protocol chosen by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `h2`: HTTP/2.
    H2,
    /// `http/1.1`, or no ALPN at all.
    Http11,
}

/// What a completed handshake negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeInfo {
    /// Protocol version.
    pub version: TlsVersion,
    /// Whether the session was resumed from a ticket (no certificate, no full key
    /// exchange signature).
    pub resumed: bool,
    /// The application protocol.
    pub alpn: Alpn,
    /// Who seals the records.
    pub path: RecordPath,
    /// Why not the kernel, when it is not.
    pub fallback: Option<Fallback>,
}

/// Why a handshake did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The handshake did not finish in time.
    #[error("TLS handshake timed out")]
    Timeout,
    /// A strict listener knows no certificate for the server name (or none was sent).
    #[error("TLS handshake refused: unknown server name")]
    UnknownName,
    /// The client closed or reset the connection during the handshake.
    #[error("client closed the connection during the TLS handshake")]
    Closed,
    /// The client's messages were refused (not TLS, no common version, cipher suite or
    /// ALPN protocol, bad record...).
    #[error("TLS handshake failed: {0}")]
    Protocol(String),
    /// Socket error.
    #[error("I/O error during the TLS handshake: {0:?}")]
    Io(io::ErrorKind),
}

impl HandshakeError {
    /// Metric label: `timeout`, `unknown_name`, `closed`, `protocol_error`, `io_error`.
    pub fn label(&self) -> &'static str {
        match self {
            HandshakeError::Timeout => "timeout",
            HandshakeError::UnknownName => "unknown_name",
            HandshakeError::Closed => "closed",
            HandshakeError::Protocol(_) => "protocol_error",
            HandshakeError::Io(_) => "io_error",
        }
    }

    fn from_io(e: io::Error) -> HandshakeError {
        match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => HandshakeError::Closed,
            io::ErrorKind::InvalidData => HandshakeError::Protocol(
                e.get_ref().map_or_else(|| e.to_string(), |inner| inner.to_string()),
            ),
            kind => HandshakeError::Io(kind),
        }
    }
}

/// Runs the server handshake on `tcp` with `tls`, within `timeout`, then hands the
/// record layer to the kernel or to reel (see the module docs). Sets `TCP_NODELAY`.
pub async fn accept(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
) -> Result<(Session, HandshakeInfo), HandshakeError> {
    handshake(tls, tcp, timeout).await.0
}

/// [`accept`], counting the outcome in `counters`, and the ClientHello when its server
/// name was an IP address.
pub async fn accept_counted(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
    counters: &HandshakeCounters,
) -> Result<(Session, HandshakeInfo), HandshakeError> {
    let (r, sni_ip_address) = handshake(tls, tcp, timeout).await;
    counters.record(&r.as_ref().map(|(_, i)| *i).map_err(Clone::clone));
    if sni_ip_address {
        counters.sni_ip_address.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// The handshake, and whether the ClientHello's server name was an IP address.
async fn handshake(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
) -> (Result<(Session, HandshakeInfo), HandshakeError>, bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    // Handshake flights and responses leave in whole writes; Nagle would only hold back
    // the last segment of each (and meet the client's delayed ACK).
    let _ = tcp.set_nodelay(true);
    let lazy = LazyConfigAcceptor::new(
        rustls::server::Acceptor::default(),
        Recorded::new(Corked::new(tcp)),
    );
    let start = match tokio::time::timeout_at(deadline, lazy).await {
        Err(_) => return (Err(HandshakeError::Timeout), false),
        Ok(Err(e)) => return (Err(HandshakeError::from_io(e)), false),
        Ok(Ok(s)) => s,
    };
    let (tcp, recorded) = start.io.into_parts();
    let (refused, sni_ip_address) = {
        let hello = start.accepted.client_hello();
        let name = hello.server_name();
        // rustls reports an address sent as server name as no name at all.
        let ip = name.is_none() && sni_is_ip_address(&recorded);
        (tls.resolver.is_strict() && !tls.resolver.knows(name), ip)
    };
    // Not held for the rest of the handshake, which may take until the deadline.
    drop(recorded);
    let start = StartHandshake::from_parts(start.accepted, tcp);
    let stream =
        match tokio::time::timeout_at(deadline, start.into_stream(tls.config.clone())).await {
            Err(_) => return (Err(HandshakeError::Timeout), sni_ip_address),
            Ok(Err(_)) if refused => return (Err(HandshakeError::UnknownName), sni_ip_address),
            Ok(Err(e)) => return (Err(HandshakeError::from_io(e)), sni_ip_address),
            Ok(Ok(s)) => s,
        };
    let conn = stream.get_ref().1;
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_2) => TlsVersion::Tls12,
        _ => TlsVersion::Tls13,
    };
    let mut info = HandshakeInfo {
        version,
        resumed: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        alpn: if conn.alpn_protocol() == Some(ALPN_H2) { Alpn::H2 } else { Alpn::Http11 },
        path: RecordPath::Userspace,
        fallback: None,
    };
    match hand_over(tls, stream, version, timeout, &mut info) {
        Ok(session) => (Ok((session, info)), sni_ip_address),
        Err(e) => (Err(e), sni_ip_address),
    }
}

/// Takes the record layer out of rustls after the handshake; a record reel opens must
/// arrive whole within `record_timeout` of its first byte.
fn hand_over(
    tls: &ListenerTls,
    mut stream: TlsStream,
    version: TlsVersion,
    record_timeout: Duration,
    info: &mut HandshakeInfo,
) -> Result<Session, HandshakeError> {
    let (corked, conn) = stream.get_ref();
    if conn.wants_write() || conn.is_handshaking() || !corked.at_boundary() {
        info.fallback = Some(Fallback::Extract);
        return Ok(Session::Rustls(Box::new(stream)));
    }
    // Plaintext rustls has already opened (none, normally: the handshake stops reading at
    // the client's last handshake record).
    let mut early = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.get_mut().1.reader().read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => early.extend_from_slice(&chunk[..n]),
            Err(_) => break,
        }
    }
    let (corked, conn) = stream.into_inner();
    let tcp = corked.into_tcp();
    let secrets = conn.dangerous_extract_secrets().map_err(|e| {
        once(Fallback::Extract, &e.to_string());
        HandshakeError::Protocol(format!("taking the session out of rustls: {e}"))
    })?;
    let keys = (|| {
        Some(SessionKeys {
            version: match version {
                TlsVersion::Tls12 => Version::Tls12,
                TlsVersion::Tls13 => Version::Tls13,
            },
            tx: DirectionKeys::from_rustls(secrets.tx.0, &secrets.tx.1)?,
            rx: DirectionKeys::from_rustls(secrets.rx.0, &secrets.rx.1)?,
        })
    })()
    .ok_or_else(|| HandshakeError::Protocol("unknown cipher after the handshake".into()))?;
    let fallback = match (tls.ktls, tls.kernel_tls) {
        (KtlsMode::Off, _) => Fallback::Off,
        (KtlsMode::Auto, false) => Fallback::NoModule,
        (KtlsMode::Auto, true) => match ktls::install(&tcp, &keys) {
            Ok(()) => {
                info.path = RecordPath::Ktls;
                return Ok(Session::Kernel(KtlsStream::with_early(tcp, keys.version, early)));
            }
            Err(InstallError::Refused(e)) => {
                once(Fallback::Refused, &e.to_string());
                Fallback::Refused
            }
            Err(InstallError::Broken(e)) => {
                return Err(HandshakeError::Protocol(format!("kTLS took TX but not RX: {e}")));
            }
        },
    };
    if fallback != Fallback::Off {
        once(fallback, "");
    }
    info.fallback = Some(fallback);
    let mut sealed = SealedStream::new(tcp, &keys, early)
        .ok_or_else(|| HandshakeError::Protocol("no AEAD for the session's cipher".into()))?;
    sealed.set_record_timeout(record_timeout);
    Ok(Session::Sealed(Box::new(sealed)))
}

/// Logs the first connection of the process that fell back for `why`.
fn once(why: Fallback, detail: &str) {
    static SEEN: [AtomicBool; 4] = [
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ];
    let at = Fallback::ALL.iter().position(|f| *f == why).unwrap_or(0);
    if !SEEN[at].swap(true, Ordering::Relaxed) {
        tracing::info!(
            reason = why.label(),
            detail,
            "TLS records are sealed in user space, not by the kernel (kTLS); logged once per reason"
        );
    }
}

const FAILURES: [&str; 5] = ["timeout", "unknown_name", "closed", "protocol_error", "io_error"];

/// Handshake outcomes of one worker (relaxed atomics: the admin thread reads them).
#[derive(Debug, Default)]
pub struct HandshakeCounters {
    /// `[version][resumed]`: completed handshakes.
    ok: [[AtomicU64; 2]; 2],
    /// Indexed like [`FAILURES`].
    failed: [AtomicU64; FAILURES.len()],
    /// Completed handshakes whose records the kernel seals.
    ktls: AtomicU64,
    /// Completed handshakes sealed in user space, by [`Fallback`].
    userspace: [AtomicU64; 4],
    /// ClientHellos whose server name was an IP address (RFC 6066 allows DNS names only).
    sni_ip_address: AtomicU64,
}

impl HandshakeCounters {
    /// Counts one handshake's outcome.
    pub fn record(&self, outcome: &Result<HandshakeInfo, HandshakeError>) {
        match outcome {
            Ok(i) => {
                let v = usize::from(i.version == TlsVersion::Tls13);
                self.ok[v][usize::from(i.resumed)].fetch_add(1, Ordering::Relaxed);
                match i.fallback {
                    None => self.ktls.fetch_add(1, Ordering::Relaxed),
                    Some(f) => {
                        let at = Fallback::ALL.iter().position(|x| *x == f).unwrap_or(0);
                        self.userspace[at].fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            Err(e) => {
                let at = FAILURES.iter().position(|l| *l == e.label()).unwrap_or(0);
                self.failed[at].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> HandshakeSnapshot {
        let mut s = HandshakeSnapshot::default();
        s.add(self);
        s
    }
}

/// Handshake counts, summed over workers with [`HandshakeSnapshot::add`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandshakeSnapshot {
    ok: [[u64; 2]; 2],
    failed: [u64; FAILURES.len()],
    ktls: u64,
    userspace: [u64; 4],
    sni_ip_address: u64,
}

impl HandshakeSnapshot {
    /// Adds a worker's counters.
    pub fn add(&mut self, c: &HandshakeCounters) {
        for v in 0..2 {
            for r in 0..2 {
                self.ok[v][r] += c.ok[v][r].load(Ordering::Relaxed);
            }
        }
        for (i, f) in c.failed.iter().enumerate() {
            self.failed[i] += f.load(Ordering::Relaxed);
        }
        self.sni_ip_address += c.sni_ip_address.load(Ordering::Relaxed);
        self.ktls += c.ktls.load(Ordering::Relaxed);
        for (i, f) in c.userspace.iter().enumerate() {
            self.userspace[i] += f.load(Ordering::Relaxed);
        }
    }

    /// Rows `(path, reason, count)` of completed handshakes by who seals their records:
    /// `ktls` with reason `none`, `userspace` with a [`Fallback::label`].
    pub fn paths(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = vec![("ktls", "none", self.ktls)];
        for (i, f) in Fallback::ALL.iter().enumerate() {
            out.push(("userspace", f.label(), self.userspace[i]));
        }
        out
    }

    /// Completed handshakes sealed by the kernel.
    pub fn ktls(&self) -> u64 {
        self.ktls
    }

    /// Completed handshakes sealed in user space because of `why`.
    pub fn userspace(&self, why: Fallback) -> u64 {
        Fallback::ALL.iter().position(|f| *f == why).map_or(0, |i| self.userspace[i])
    }

    /// Rows `(result, version, resumed, count)`: result `ok` with version `tls1.2` or
    /// `tls1.3` and resumption, or a failure label (see [`HandshakeError::label`]) with
    /// version `none`.
    pub fn rows(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        let mut out = Vec::with_capacity(4 + FAILURES.len());
        for (v, name) in [(0, TlsVersion::Tls12), (1, TlsVersion::Tls13)] {
            for r in [false, true] {
                out.push(("ok", name.as_str(), r, self.ok[v][usize::from(r)]));
            }
        }
        for (i, l) in FAILURES.iter().enumerate() {
            out.push((*l, "none", false, self.failed[i]));
        }
        out
    }

    /// Completed handshakes of `version`, `resumed` or not.
    pub fn completed(&self, version: TlsVersion, resumed: bool) -> u64 {
        self.ok[usize::from(version == TlsVersion::Tls13)][usize::from(resumed)]
    }

    /// Failed handshakes with `label`.
    pub fn failed(&self, label: &str) -> u64 {
        FAILURES.iter().position(|l| *l == label).map_or(0, |i| self.failed[i])
    }

    /// ClientHellos that named an IP address as server name (rustls serves them as if they
    /// sent no name; counted whether or not the handshake then completed).
    pub fn sni_ip_address(&self) -> u64 {
        self.sni_ip_address
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Session::Kernel($s) => {
                let $s = Pin::new($s);
                $e
            }
            Session::Sealed($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
            Session::Rustls($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
        }
    };
}

/// A session is a byte stream whichever record layer it has (tests and simple servers use
/// it so; reel's HTTP server matches on it to pick the path).
impl AsyncRead for Session {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Session {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_write(cx, buf))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_shutdown(cx))
    }
}
