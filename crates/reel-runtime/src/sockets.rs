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
    for i in 0..n {
        let s = bind_one(addr, spec.backlog).map_err(err)?;
        if i == 0 {
            // With port 0 each bind would get its own port: resolve it once, share it.
            addr = local_addr(&s).map_err(err)?;
        }
        socks.push(s);
    }
    if let (Some(p), Some(first)) = (prog, socks.first()) {
        steer::attach(first, p)
            .map_err(|source| RuntimeError::Steer { name: spec.name.clone(), source })?;
    }
    Ok((socks.into_iter().map(|s| vec![s.into()]).collect(), addr))
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
        ListenerSpec { name: "t".into(), addr, backlog: 16, proxy_protocol: false }
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
