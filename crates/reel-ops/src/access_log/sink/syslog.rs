//! The syslog sink: each line an RFC 5424 message,
//! `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID access - LINE`, with severity
//! informational. Over UDP one datagram per message (RFC 5426); over TCP octet-counted
//! frames, `LEN SP MESSAGE` (RFC 6587 3.4.1), one write per batch on one connection; on a
//! Unix socket one datagram per message.
//!
//! A receiver that is down costs the lines of the batches sent meanwhile (counted): a
//! failed TCP connection is tried again at most once a second.

use std::io::Write as _;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

use crate::access_log::time::rfc3339;
use crate::access_log::writer::{Batch, Out, SinkStats};

/// Severity of every message: informational.
const SEVERITY: u8 = 6;

/// Pause after a failed connection before the next attempt.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Where a syslog sink sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogTarget {
    /// `host:port`, UDP.
    Udp(String),
    /// `host:port`, TCP with octet counting.
    Tcp(String),
    /// A Unix datagram socket (`/dev/log`).
    Unix(PathBuf),
}

enum Conn {
    None,
    Udp(UdpSocket),
    Tcp(TcpStream),
    Unix(UnixDatagram),
}

pub(super) struct SyslogOut {
    name: String,
    target: SyslogTarget,
    /// `" HOSTNAME APP-NAME PROCID access - "`: what follows the timestamp.
    tail: Vec<u8>,
    pri: u8,
    timeout: Duration,
    conn: Conn,
    retry_at: Option<Instant>,
    msg: Vec<u8>,
    frames: Vec<u8>,
}

impl SyslogOut {
    pub(super) fn new(
        name: String,
        target: SyslogTarget,
        facility: u8,
        app_name: &str,
        timeout: Duration,
    ) -> SyslogOut {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
            .unwrap_or_else(|| "-".into());
        let tail = format!(" {host} {app_name} {} access - ", std::process::id()).into_bytes();
        SyslogOut {
            name,
            target,
            tail,
            pri: facility.min(23) * 8 + SEVERITY,
            timeout,
            conn: Conn::None,
            retry_at: None,
            msg: Vec::with_capacity(1024),
            frames: Vec::new(),
        }
    }

    fn connect(&mut self) -> std::io::Result<()> {
        if !matches!(self.conn, Conn::None) {
            return Ok(());
        }
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return Err(std::io::Error::other("receiver unreachable; retrying shortly"));
        }
        let r = match &self.target {
            SyslogTarget::Udp(a) => resolve(a).and_then(|addr| {
                let any: std::net::SocketAddr = if addr.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let s = UdpSocket::bind(any)?;
                s.connect(addr)?;
                Ok(Conn::Udp(s))
            }),
            SyslogTarget::Tcp(a) => resolve(a).and_then(|addr| {
                let s = TcpStream::connect_timeout(&addr, self.timeout)?;
                s.set_write_timeout(Some(self.timeout))?;
                s.set_nodelay(true)?;
                Ok(Conn::Tcp(s))
            }),
            SyslogTarget::Unix(p) => UnixDatagram::unbound().and_then(|s| {
                s.connect(p)?;
                Ok(Conn::Unix(s))
            }),
        };
        match r {
            Ok(c) => {
                self.conn = c;
                self.retry_at = None;
                Ok(())
            }
            Err(e) => {
                self.retry_at = Some(Instant::now() + RECONNECT_AFTER);
                Err(e)
            }
        }
    }
}

fn resolve(a: &str) -> std::io::Result<std::net::SocketAddr> {
    a.to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{a} resolves to no address")))
}

impl Out for SyslogOut {
    fn put(&mut self, b: &Batch, st: &SinkStats) {
        if let Err(e) = self.connect() {
            st.failed(&self.name, b.lines, &e.to_string());
            return;
        }
        let mut head = Vec::with_capacity(48);
        head.extend_from_slice(format!("<{}>1 ", self.pri).as_bytes());
        rfc3339(&mut head, SystemTime::now());
        head.extend_from_slice(&self.tail);
        self.frames.clear();
        let (mut sent, mut lost, mut error) = (0u64, 0u64, None);
        for line in b.bytes.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            self.msg.clear();
            self.msg.extend_from_slice(&head);
            self.msg.extend_from_slice(line);
            let r = match &self.conn {
                Conn::Udp(s) => s.send(&self.msg).map(drop),
                Conn::Unix(s) => s.send(&self.msg).map(drop),
                Conn::Tcp(_) => {
                    self.frames.extend_from_slice(format!("{} ", self.msg.len()).as_bytes());
                    self.frames.extend_from_slice(&self.msg);
                    Ok(())
                }
                Conn::None => Err(std::io::Error::other("not connected")),
            };
            match r {
                Ok(()) => sent += 1,
                Err(e) => {
                    lost += 1;
                    error = Some(e);
                }
            }
        }
        if let Conn::Tcp(s) = &mut self.conn
            && let Err(e) = s.write_all(&self.frames)
        {
            // A partial frame would garble the stream: start a new connection.
            self.conn = Conn::None;
            lost += sent;
            sent = 0;
            error = Some(e);
        }
        st.written.fetch_add(sent, Relaxed);
        if let Some(e) = error {
            st.failed(&self.name, lost, &e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn each_line_is_one_rfc5424_datagram() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let target = SyslogTarget::Udp(rx.local_addr().unwrap().to_string());
        let mut out = SyslogOut::new("s".into(), target, 19, "edge", Duration::from_secs(1));
        let st = SinkStats::default();
        out.put(&Batch { bytes: Bytes::from_static(b"{\"a\":1}\n{\"b\":2}\n"), lines: 2 }, &st);
        let mut got = Vec::new();
        for _ in 0..2 {
            let mut b = [0u8; 2048];
            let n = rx.recv(&mut b).unwrap();
            got.push(String::from_utf8(b[..n].to_vec()).unwrap());
        }
        let pid = std::process::id().to_string();
        for (m, line) in got.iter().zip(["{\"a\":1}", "{\"b\":2}"]) {
            let parts: Vec<&str> = m.splitn(8, ' ').collect();
            assert_eq!(parts[0], "<158>1", "local3.info: {m}");
            assert!(parts[1].ends_with('Z') && parts[1].len() == 24, "{m}");
            assert_eq!(parts[3..8], ["edge", pid.as_str(), "access", "-", line], "{m}");
        }
        assert_eq!(st.written.load(Relaxed), 2);
    }
}
