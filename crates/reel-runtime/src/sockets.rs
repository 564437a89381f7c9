//! Listening sockets: binding one `SO_REUSEPORT` group per listener (one socket per
//! worker), refusing an address another process already listens on, and spreading
//! sockets the process inherited (from systemd or from the process it replaces) over
//! the workers.
//!
//! `SO_REUSEPORT` lets any process of the same user join a group and take a share of its
//! connections. Before binding, a probe socket without `SO_REUSEPORT` is bound to the
//! address: it fails with `EADDRINUSE` when anything listens there, so a second reel
//! started by mistake stops with an error instead of joining the first one's group.
//! Sockets handed over explicitly (a binary upgrade, socket activation) skip the probe.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::error::RuntimeError;
use crate::options::ListenerSpec;
use crate::steer;

/// Listening sockets the process was given, by listener name (see [`crate::start_with`]).
pub type Inherited = BTreeMap<String, Vec<TcpListener>>;

/// Binds one socket of a reuseport group.
fn bind_one(addr: SocketAddr, backlog: i32) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        // An explicit [::] listener must not also claim the IPv4 port a separate 0.0.0.0
        // listener may want.
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s)
}

/// Fails with `EADDRINUSE` when another socket listens on (or is bound to) `addr`.
/// `SO_REUSEADDR` keeps connections of an earlier run in TIME_WAIT from counting.
fn probe_free(addr: SocketAddr) -> io::Result<()> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            io::Error::new(io::ErrorKind::AddrInUse, in_use(addr))
        } else {
            e
        }
    })
}

/// Why `addr` is in use, for the operator: another process listens there (the kernel's
/// socket table has a listening socket on an overlapping address), or something only holds
/// the port bound without listening.
pub fn in_use(addr: SocketAddr) -> String {
    if crate::listening::listens(addr) {
        "another process already listens on this address (reel shares a port only among its \
         own workers; a binary upgrade hands its sockets over)"
            .into()
    } else {
        "the address is in use, though nothing listens on it: a socket holds the port bound \
         (a client's local port, or a program that has not called listen); choose another \
         port or stop what holds it"
            .into()
    }
}

/// Binds `n` sockets for `spec`, all on the same port, in worker order, and attaches the
/// steering program to the group. `own` lists addresses this process already listens
/// on (a renamed listener keeps its address): those skip the probe.
pub(crate) fn bind_group(
    spec: &ListenerSpec,
    n: usize,
    prog: Option<&[steer::Insn]>,
    own: &[SocketAddr],
) -> Result<(Vec<Vec<TcpListener>>, SocketAddr), RuntimeError> {
    let err = |source| RuntimeError::Bind { name: spec.name.clone(), addr: spec.addr, source };
    if spec.addr.port() != 0 && !own.contains(&spec.addr) {
        probe_free(spec.addr).map_err(err)?;
    }
    let mut socks = Vec::with_capacity(n);
    let mut addr = spec.addr;
    if n > 0 {
        // With port 0 each bind would get its own port: resolve it once, share it.
        let (first, at) = bind_first(spec).map_err(err)?;
        addr = at;
        socks.push(first);
    }
    for _ in 1..n {
        socks.push(bind_one(addr, spec.backlog).map_err(err)?);
    }
    if let (Some(p), Some(first)) = (prog, socks.first()) {
        steer::attach(first, p)
            .map_err(|source| RuntimeError::Steer { name: spec.name.clone(), source })?;
    }
    Ok((socks.into_iter().map(|s| vec![s.into()]).collect(), addr))
}

/// How many ports a port-0 listener with a UDP twin tries before it gives up.
const TWIN_TRIES: usize = 64;

/// The group's first socket and its address. For port 0 with a UDP twin, a port whose
/// UDP side is taken (a client's ephemeral port, say) is let go and another is picked.
fn bind_first(spec: &ListenerSpec) -> io::Result<(Socket, SocketAddr)> {
    let twin = spec.udp_twin && spec.addr.port() == 0;
    // Ports let go are held until one is found, or the kernel would offer them again.
    let mut passed = Vec::new();
    for _ in 0..TWIN_TRIES {
        let s = bind_one(spec.addr, spec.backlog)?;
        let addr = local_addr(&s)?;
        if !twin || udp_free(addr)? {
            return Ok((s, addr));
        }
        passed.push(s);
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no port among {TWIN_TRIES} picked had its UDP side free"),
    ))
}

/// Whether a UDP socket may bind `addr` (nothing holds its UDP port).
fn udp_free(addr: SocketAddr) -> io::Result<bool> {
    match std::net::UdpSocket::bind(addr) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(false),
        Err(e) => Err(e),
    }
}

fn local_addr(s: &Socket) -> io::Result<SocketAddr> {
    s.local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("bound address is not an inet address"))
}

/// Spreads inherited sockets of `spec` over `n` workers: with at least one socket per
/// worker, worker `i` takes sockets `i`, `i + n`, ... (every socket keeps a taker, so no
/// connection waits in a queue nobody accepts from); with fewer, workers share them
/// (each gets a duplicate descriptor of socket `i % k`). The backlog of the config is
/// applied with `listen(2)`. Returns the sockets per worker and the bound address.
pub(crate) fn adopt_group(
    spec: &ListenerSpec,
    socks: Vec<TcpListener>,
    n: usize,
) -> Result<(Vec<Vec<TcpListener>>, SocketAddr), RuntimeError> {
    let err = |source| RuntimeError::Bind { name: spec.name.clone(), addr: spec.addr, source };
    let k = socks.len();
    if k == 0 {
        return Err(err(io::Error::other("no inherited socket")));
    }
    let mut addr = None;
    for s in &socks {
        let r = SockRef::from(s);
        if !r.is_listener().map_err(err)? {
            return Err(err(io::Error::other("the inherited socket is not listening")));
        }
        r.set_nonblocking(true).map_err(err)?;
        r.listen(spec.backlog).map_err(err)?;
        let a = r
            .local_addr()
            .map_err(err)?
            .as_socket()
            .ok_or_else(|| err(io::Error::other("inherited socket is not an inet socket")))?;
        match addr {
            None => addr = Some(a),
            Some(prev) if prev != a => {
                return Err(err(io::Error::other(format!(
                    "inherited sockets are bound to different addresses ({prev} and {a})"
                ))));
            }
            Some(_) => {}
        }
    }
    let addr = addr.unwrap_or(spec.addr);
    let mut per_worker: Vec<Vec<TcpListener>> = (0..n).map(|_| Vec::new()).collect();
    if k >= n {
        for (i, s) in socks.into_iter().enumerate() {
            per_worker[i % n].push(s);
        }
    } else {
        for (i, w) in per_worker.iter_mut().enumerate() {
            w.push(socks[i % k].try_clone().map_err(err)?);
        }
    }
    Ok((per_worker, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(addr: SocketAddr) -> ListenerSpec {
        ListenerSpec { name: "t".into(), addr, backlog: 16, proxy_protocol: false, udp_twin: false }
    }

    #[test]
    fn an_address_another_reuseport_socket_listens_on_is_refused() {
        // What a second process would have: a listening socket with SO_REUSEPORT.
        let other = bind_one("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = local_addr(&other).unwrap();
        let e = bind_group(&spec(addr), 2, None, &[]).unwrap_err();
        assert!(
            matches!(&e, RuntimeError::Bind { source, .. } if source.kind() == io::ErrorKind::AddrInUse),
            "{e}"
        );
        assert!(e.to_string().contains("another process already listens"), "{e}");
        // Our own address (a renamed listener) joins the group.
        let (socks, got) = bind_group(&spec(addr), 2, None, &[addr]).unwrap();
        assert_eq!((socks.len(), got), (2, addr));
        drop(other);
    }

    /// Run in a network namespace of its own whose ephemeral range is 40000-40003 (there
    /// a port-0 `bind` takes 40001 first), with the UDP side of 40001 held: a port-0
    /// listener with a UDP twin must never get 40001, which the kernel offers it first.
    #[test]
    fn port_zero_with_a_udp_twin_skips_ports_whose_udp_side_is_taken() {
        const NAME: &str =
            "sockets::tests::port_zero_with_a_udp_twin_skips_ports_whose_udp_side_is_taken";
        if std::env::var_os("REEL_SOCKETS_NETNS").is_none() {
            let exe = std::env::current_exe().unwrap();
            let script = "ip link set lo up && \
                echo 40000 40003 > /proc/sys/net/ipv4/ip_local_port_range && exec \"$0\" \"$@\"";
            let out = std::process::Command::new("unshare")
                .args(["-rn", "sh", "-c", script])
                .arg(exe)
                .args(["--exact", NAME, "--nocapture"])
                .env("REEL_SOCKETS_NETNS", "1")
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    let text = String::from_utf8_lossy(&o.stdout);
                    assert!(text.contains("1 passed"), "{text}");
                }
                Ok(o) if String::from_utf8_lossy(&o.stderr).contains("Operation not permitted") => {
                    eprintln!(
                        "SKIPPED: no user namespaces here: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                }
                Ok(o) => panic!("in the namespace: {o:?}"),
                Err(e) => eprintln!("SKIPPED: unshare: {e}"),
            }
            return;
        }
        let _held = std::net::UdpSocket::bind("127.0.0.1:40001").unwrap();
        let twin = ListenerSpec { udp_twin: true, ..spec("127.0.0.1:0".parse().unwrap()) };
        for _ in 0..16 {
            let (socks, addr) = bind_group(&twin, 2, None, &[]).unwrap();
            assert_ne!(addr.port(), 40001, "its UDP side is taken");
            drop(socks);
        }
        let plain = (0..8)
            .map(|_| bind_group(&spec("127.0.0.1:0".parse().unwrap()), 1, None, &[]).unwrap().1)
            .any(|a| a.port() == 40001);
        assert!(plain, "without the twin rule the kernel picks 40001");
    }

    #[test]
    fn inherited_sockets_spread_over_workers() {
        let (group, addr) = bind_group(&spec("127.0.0.1:0".parse().unwrap()), 3, None, &[])
            .map(|(g, a)| (g.into_iter().flatten().collect::<Vec<_>>(), a))
            .unwrap();
        let (two, a) = adopt_group(&spec(addr), group, 2).unwrap();
        assert_eq!(a, addr);
        assert_eq!(two.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        let one: Vec<TcpListener> = two.into_iter().flatten().take(1).collect();
        let (four, _) = adopt_group(&spec(addr), one, 4).unwrap();
        assert!(four.iter().all(|w| w.len() == 1), "shared by duplicates");
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        let connected = std::net::TcpStream::connect(plain.local_addr().unwrap()).unwrap();
        let not_listening = TcpListener::from(Socket::from(std::os::fd::OwnedFd::from(connected)));
        assert!(adopt_group(&spec(addr), vec![not_listening], 1).is_err());
    }
}
