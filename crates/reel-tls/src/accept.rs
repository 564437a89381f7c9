//! The server side of one TLS handshake, on the worker that accepted the connection, and
//! per-worker counters of how handshakes ended.
//!
//! The ClientHello is read first (rustls' `Acceptor`), so a handshake refused by a strict
//! listener for its server name is told apart from other failures, and a server name that
//! was an IP address is noticed (see `client_hello`); the rest of the handshake then runs
//! against the listener's shared configuration, on rustls' unbuffered connection (given
//! the ClientHello's bytes again), whose session leaves rustls with its key schedule
//! (`KernelConnection`: the next traffic secrets at a TLS 1.3 key update). The whole
//! handshake is bounded by one deadline (slow or silent clients cannot hold a connection
//! slot); a failure sends the alert rustls has for it.
//!
//! The handshake reads one record at a time ([`Corked`]), so that when it ends the record
//! layer can leave rustls whole: its secrets go to the kernel ([`KtlsStream`], when the
//! listener's `ktls` allows and the kernel has the `tls` module) or to reel's own record
//! layer ([`SealedStream`], with the key schedule). Which one, and why not the kernel, is
//! counted per worker.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::atomic::AtomicBool;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use rustls::HandshakeKind;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, InsufficientSizeError, UnbufferedStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;

use crate::client_hello::{MAX_RECORDED, Recorded, sni_is_ip_address};
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
    let client_hello_whole = recorded.len() < MAX_RECORDED;
    drop(start.accepted);
    // The rest of the handshake runs on rustls' unbuffered connection, the one whose
    // session can leave it with its key schedule (`KernelConnection`): the ClientHello the
    // acceptor read is given to it again, then the socket, one record at a time.
    let mut conn = match UnbufferedServerConnection::new(tls.config.clone()) {
        Ok(c) => c,
        Err(e) => return (Err(HandshakeError::Protocol(e.to_string())), sni_ip_address),
    };
    let mut io = tcp;
    let early = if client_hello_whole {
        drive(&mut conn, &mut io, recorded, deadline).await
    } else {
        Err(HandshakeError::Protocol("ClientHello too long".into()))
    };
    let early = match early {
        Ok(early) => early,
        Err(HandshakeError::Protocol(_)) if refused => {
            return (Err(HandshakeError::UnknownName), sni_ip_address);
        }
        Err(e) => return (Err(e), sni_ip_address),
    };
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
    match hand_over(tls, conn, io.into_tcp(), early, timeout, &mut info) {
        Ok(session) => (Ok((session, info)), sni_ip_address),
        Err(e) => (Err(e), sni_ip_address),
    }
}

/// Runs the handshake on `conn` from the bytes already read (`incoming`, the ClientHello)
/// until the session may leave rustls: the client's Finished read, the server's flights
/// (session tickets included) written. Returns plaintext the client sent with its last
/// flight (none, normally). A failure sends the alert rustls has for it first.
async fn drive(
    conn: &mut UnbufferedServerConnection,
    io: &mut Corked,
    mut incoming: Vec<u8>,
    deadline: tokio::time::Instant,
) -> Result<Vec<u8>, HandshakeError> {
    let mut used = incoming.len();
    let mut out: Vec<u8> = Vec::new();
    let mut early = Vec::new();
    let mut failed: Option<HandshakeError> = None;
    loop {
        let UnbufferedStatus { mut discard, state } =
            conn.process_tls_records(&mut incoming[..used]);
        let (mut blocked, mut writable) = (false, false);
        match state {
            // Called again once, for the alert rustls queued for the failure.
            Err(e) => match failed {
                Some(f) => return Err(f),
                None => failed = Some(HandshakeError::Protocol(e.to_string())),
            },
            Ok(ConnectionState::EncodeTlsData(mut enc)) => {
                let at = out.len();
                out.resize(at + 2048, 0);
                let n = match enc.encode(&mut out[at..]) {
                    Ok(n) => n,
                    Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                        out.resize(at + required_size, 0);
                        enc.encode(&mut out[at..])
                            .map_err(|e| HandshakeError::Protocol(e.to_string()))?
                    }
                    Err(e) => return Err(HandshakeError::Protocol(e.to_string())),
                };
                out.truncate(at + n);
            }
            Ok(ConnectionState::TransmitTlsData(t)) => {
                match tokio::time::timeout_at(deadline, io.write_all(&out)).await {
                    Err(_) => return Err(HandshakeError::Timeout),
                    Ok(Err(e)) => return Err(failed.unwrap_or(HandshakeError::from_io(e))),
                    Ok(Ok(())) => {}
                }
                out.clear();
                t.done();
            }
            Ok(_) if failed.is_some() => return Err(failed.unwrap_or(HandshakeError::Closed)),
            Ok(ConnectionState::ReadTraffic(mut r)) => {
                while let Some(rec) = r.next_record() {
                    let rec = rec.map_err(|e| HandshakeError::Protocol(e.to_string()))?;
                    discard += rec.discard;
                    early.extend_from_slice(rec.payload);
                }
            }
            Ok(ConnectionState::WriteTraffic(_)) => writable = true,
            Ok(ConnectionState::BlockedHandshake) => blocked = true,
            Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                return Err(HandshakeError::Closed);
            }
            Ok(_) => return Err(HandshakeError::Protocol("unexpected handshake state".into())),
        }
        if discard > 0 {
            incoming.copy_within(discard..used, 0);
            used -= discard;
        }
        if writable {
            // TLS 1.3: the server may send once its Finished left, before the client's
            // arrived; the session is whole once it did.
            if conn.is_handshaking() {
                blocked = true;
            } else if used != 0 {
                // Corked reads stop at record boundaries, so this cannot happen; a session
                // with ciphertext already read cannot be handed over.
                return Err(HandshakeError::Protocol("bytes read past the handshake".into()));
            } else {
                return Ok(early);
            }
        }
        if blocked {
            if incoming.len() < used + 4096 {
                incoming.resize(used + 4096 + 4096, 0);
            }
            match tokio::time::timeout_at(deadline, io.read(&mut incoming[used..])).await {
                Err(_) => return Err(HandshakeError::Timeout),
                Ok(Err(e)) => return Err(HandshakeError::from_io(e)),
                Ok(Ok(0)) => return Err(HandshakeError::Closed),
                Ok(Ok(n)) => used += n,
            }
        }
    }
}

/// Takes the record layer out of rustls after the handshake; a record reel opens must
/// arrive whole within `record_timeout` of its first byte.
fn hand_over(
    tls: &ListenerTls,
    conn: UnbufferedServerConnection,
    tcp: TcpStream,
    early: Vec<u8>,
    record_timeout: Duration,
    info: &mut HandshakeInfo,
) -> Result<Session, HandshakeError> {
    let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(|e| {
        once(Fallback::Extract, &e.to_string());
        HandshakeError::Protocol(format!("taking the session out of rustls: {e}"))
    })?;
    let keys = (|| {
        Some(SessionKeys {
            version: match info.version {
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
    sealed.set_key_schedule(kernel);
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
