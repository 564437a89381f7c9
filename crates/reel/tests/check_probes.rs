//! Issue 44.2: three files `check` used to accept and `serve` refused with exit 1 and no
//! position: an access log that cannot be created, a port below 1024 without
//! `CAP_NET_BIND_SERVICE`, and an HTTP/3 UDP port another process holds. `check` probes
//! each, and both `check` and `serve` refuse with exit 64 and `file:line:col: key:`.

use std::path::Path;
use std::process::Command;

use reel_test_support::{skip, which};

use crate::common::*;

/// Runs `[prefix...] reel <sub> --config p` in `p`'s directory: exit code and stderr.
fn run(prefix: &[&str], sub: &str, p: &Path) -> (Option<i32>, String) {
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    cmd.arg(sub).arg("--config").arg(p).env_remove("NOTIFY_SOCKET").env_remove("LISTEN_FDS");
    let out = cmd.current_dir(p.parent().unwrap()).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Both `check` and `serve` exit 64 with a line `FILE:L:C: key: ...` saying `why`.
fn both_refuse(prefix: &[&str], conf: &Conf, key: &str, why: &str) {
    let p = conf.path();
    let file = p.display().to_string();
    for sub in ["check", "serve"] {
        let (code, err) = run(prefix, sub, &p);
        assert_eq!(code, Some(64), "{sub} {key}: {err}");
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("{file}:")) && l.contains(&format!(": {key}: ")))
            .unwrap_or_else(|| panic!("{sub}: no line for {key}:\n{err}"));
        assert!(line.contains(why), "{sub} {key}: {why:?} in {line}");
        let pos: Vec<&str> = line[file.len() + 1..].splitn(3, ':').collect();
        assert!(
            pos[0].parse::<usize>().is_ok_and(|n| n > 1) && pos[1].parse::<usize>().is_ok(),
            "{sub} {key}: a real position: {line}"
        );
    }
}

#[test]
fn an_access_log_that_cannot_be_created_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let base = Conf::new(dir.path(), &o);
    let d = dir.path().display().to_string();
    let with_log = |path: &str| {
        let mut c = base.clone();
        c.raw = Some(
            base.render()
                .replace(&format!("path = \"{d}/access.log\""), &format!("path = \"{path}\"")),
        );
        c.write();
        c
    };
    // A file where the log's directory would be made (`File exists (os error 17)` before).
    std::fs::write(dir.path().join("var"), b"not a directory").unwrap();
    let c = with_log(&format!("{d}/var/log/access.log"));
    both_refuse(&[], &c, "access_log.path", "var is not a directory");
    // A directory where the file would be.
    std::fs::create_dir(dir.path().join("logdir")).unwrap();
    let c = with_log(&format!("{d}/logdir"));
    both_refuse(&[], &c, "access_log.path", "is a directory, not a file");
    // A log whose directories are missing passes, and `check` leaves nothing behind.
    let c = with_log(&format!("{d}/new/log/access.log"));
    let (code, err) = run(&[], "check", &c.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(!dir.path().join("new").exists(), "check made the log's directory");
}

#[test]
fn a_port_below_1024_without_the_capability_is_refused_at_its_key() {
    let start: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024);
    if start <= 80 {
        return skip(&format!("ip_unprivileged_port_start is {start}: port 80 needs no right"));
    }
    if which("setpriv").is_none() {
        return skip("no setpriv (util-linux) to drop CAP_NET_BIND_SERVICE");
    }
    let drop = ["setpriv", "--inh-caps=-net_bind_service", "--bounding-set=-net_bind_service"];
    // The capability is gone from the effective set of what setpriv runs.
    let out = Command::new(drop[0]).args(&drop[1..]).args(["cat", "/proc/self/status"]).output();
    let eff = out.ok().and_then(|o| {
        let s = String::from_utf8_lossy(&o.stdout).into_owned();
        let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim().to_owned();
        u64::from_str_radix(&hex, 16).ok()
    });
    match eff {
        Some(e) if e & (1 << 10) == 0 => {}
        other => return skip(&format!("setpriv did not drop CAP_NET_BIND_SERVICE ({other:?})")),
    }
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut c = Conf::new(dir.path(), &o);
    c.listeners = vec![("http".into(), "127.0.0.1:80".into())];
    c.write();
    both_refuse(&drop, &c, "listener[0].address", "lacks CAP_NET_BIND_SERVICE");
    let (_, err) = run(&drop, "check", &c.path());
    assert!(err.contains("AmbientCapabilities=CAP_NET_BIND_SERVICE"), "what to do: {err}");
    // With the capability the same file passes the probe (`check` binds no port).
    let mut have = Command::new("sh");
    have.arg("-c").arg("grep CapEff /proc/self/status");
    let caps = String::from_utf8_lossy(&have.output().unwrap().stdout).into_owned();
    let ours = caps.split_whitespace().nth(1).and_then(|h| u64::from_str_radix(h, 16).ok());
    if ours.is_some_and(|e| e & (1 << 10) != 0) {
        let (code, err) = run(&[], "check", &c.path());
        assert_eq!(code, Some(0), "with CAP_NET_BIND_SERVICE: {err}");
    }
}

/// A UDP socket on 127.0.0.1 (with `SO_REUSEPORT` when `reuse_port`) whose port is free
/// for TCP, and the port.
fn udp_port(reuse_port: bool) -> (socket2::Socket, u16) {
    use socket2::{Domain, Socket, Type};
    (0..20)
        .find_map(|_| {
            let s = Socket::new(Domain::IPV4, Type::DGRAM, None).ok()?;
            s.set_reuse_port(reuse_port).ok()?;
            s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).ok()?;
            let port = s.local_addr().ok()?.as_socket()?.port();
            std::net::TcpListener::bind(("127.0.0.1", port)).ok().map(|_| (s, port))
        })
        .expect("a UDP port whose TCP port is free")
}

/// The test config with one HTTPS listener on `port` serving HTTP/3.
fn h3_conf(dir: &Path, o: &Origin, port: u16) -> Conf {
    let mut c = Conf::new(dir, o);
    c.listeners = vec![("https".into(), format!("127.0.0.1:{port}"))];
    c.listener_lines.insert("https".into(), "tls_cert = \"self-signed\"\nhttp3 = true\n".into());
    c.write();
    c
}

#[test]
fn an_http3_port_another_process_holds_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    // A UDP port held without SO_REUSEPORT, whose TCP port is free.
    let (held, port) = udp_port(false);
    let c = h3_conf(dir.path(), &o, port);
    both_refuse(&[], &c, "listener[0].address", &format!("UDP 127.0.0.1:{port} (HTTP/3"));
    let (_, err) = run(&[], "check", &c.path());
    assert!(err.contains("http3 = false"), "what to do: {err}");
    drop(held);

    // A socket that shares its port (SO_REUSEPORT, this user: a running reel) passes.
    let (shared, port) = udp_port(true);
    let c = h3_conf(dir.path(), &o, port);
    let (code, err) = run(&[], "check", &c.path());
    assert_eq!(code, Some(0), "a port shared by SO_REUSEPORT: {err}");
    drop(shared);
}
