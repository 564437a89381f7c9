//! Restarts without a failed request, with real processes, signals and a steady
//! keep-alive load: SIGTERM behind a health-checking balancer (lame duck), binary upgrades
//! on SIGUSR2 (the same listening sockets, the cache still warm), upgrades that fail
//! (the old process serves on), and systemd socket activation (stream sockets only).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reel_test_support::{listening_inodes, skip};

use crate::common::*;

const OBJECTS: usize = 16;

fn path(i: usize) -> String {
    format!("/seg/{i}.ts")
}

fn body(i: usize) -> Vec<u8> {
    (0..64 * 1024).map(|k| ((k * 31 + i * 7) % 251) as u8).collect()
}

/// An origin with [`OBJECTS`] segments.
fn origin() -> Origin {
    let o = Origin::start("o");
    for i in 0..OBJECTS {
        o.put(&path(i), Object::ok(body(i)));
    }
    o
}

/// Requests every segment until it comes from the cache.
fn warm(addr: SocketAddr) {
    for i in 0..OBJECTS {
        eventually("a hit", || {
            let r = get(addr, &path(i));
            assert_eq!((r.status, r.body.len()), (200, 64 * 1024));
            r.cache_status().contains("hit").then_some(())
        });
    }
}

/// What the load saw.
#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    told_to_close: u64,
    failed: Vec<String>,
}

/// Keep-alive clients requesting the segments back to back while `routing` is set (a
/// balancer's choice); a response with `Connection: close` makes the client reconnect.
/// Any error, other status or wrong body is a failure.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Tally>>,
}

impl Load {
    fn start(addr: SocketAddr, clients: usize, routing: Arc<AtomicBool>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let threads = (0..clients)
            .map(|t| {
                let (stop, ok, routing) = (stop.clone(), ok.clone(), routing.clone());
                std::thread::spawn(move || {
                    let bodies: Vec<Vec<u8>> = (0..OBJECTS).map(body).collect();
                    let mut tally = Tally::default();
                    let mut conn: Option<Conn> = None;
                    let mut i = t;
                    while !stop.load(Ordering::SeqCst) {
                        if !routing.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        let c = match conn.as_mut() {
                            Some(c) => c,
                            None => match Conn::open(addr) {
                                Ok(c) => conn.insert(c),
                                Err(e) => {
                                    tally.failed.push(format!("connect: {e}"));
                                    continue;
                                }
                            },
                        };
                        let k = i % OBJECTS;
                        i += 1;
                        match c.get("127.0.0.1", &path(k)) {
                            Ok(r) if r.status == 200 && r.body == bodies[k] => {
                                tally.ok += 1;
                                ok.fetch_add(1, Ordering::SeqCst);
                                if r.header("connection") == Some("close") {
                                    tally.told_to_close += 1;
                                    conn = None;
                                }
                            }
                            Ok(r) => {
                                tally.failed.push(format!(
                                    "{}: status {} with {} bytes",
                                    path(k),
                                    r.status,
                                    r.body.len()
                                ));
                                conn = None;
                            }
                            Err(e) => {
                                tally.failed.push(format!("{}: {e}", path(k)));
                                conn = None;
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        Load { stop, ok, threads }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::SeqCst)
    }

    fn finish(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Tally::default();
        for t in self.threads {
            let t = t.join().expect("load thread");
            all.ok += t.ok;
            all.told_to_close += t.told_to_close;
            all.failed.extend(t.failed);
        }
        all
    }
}

/// Makes this test process the reaper of its orphaned descendants, so the successor of
/// an upgraded `reel` (the old process's child) can be waited for and cleaned up here.
pub(crate) fn become_subreaper() {
    // Any non-zero argument sets the flag.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .expect("prctl(PR_SET_CHILD_SUBREAPER)");
}

/// A process started by an upgrade (reparented to this test): stopped with SIGTERM by
/// [`Successor::stop`], killed on drop.
pub(crate) struct Successor {
    pub(crate) pid: i32,
    pub(crate) reaped: bool,
}

impl Successor {
    /// Sends `sig`.
    fn signal(&self, sig: i32) {
        // Our descendant, not reaped yet (only this value reaps it): the pid cannot have
        // been reused.
        let pid = rustix::process::Pid::from_raw(self.pid).expect("a pid");
        let signal = rustix::process::Signal::from_named_raw(sig).expect("a signal");
        rustix::process::kill_process(pid, signal).expect("kill");
    }

    /// SIGTERM, then waits for the exit status (0 expected).
    pub(crate) fn stop(mut self) -> i32 {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + PATIENCE * 2;
        loop {
            let pid = rustix::process::Pid::from_raw(self.pid).expect("a pid");
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
                Ok(Some((_, status))) => {
                    self.reaped = true;
                    return status.as_raw();
                }
                Ok(None) => {}
                Err(e) => panic!("waitpid({}): {e}", self.pid),
            }
            assert!(Instant::now() < deadline, "the successor did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        if !self.reaped
            && let Some(pid) = rustix::process::Pid::from_raw(self.pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
    }
}

/// Installs a copy of the binary under test at `dir/bin/reel` the way a package manager
/// does (a new file renamed over the path, so a running process keeps its old one).
pub(crate) fn install(dir: &Path, from: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tmp = bin.join(".reel.new");
    // Written by a child process: a file this process held open for writing would be
    // inherited by any child another test forks meanwhile, and exec of it would fail with
    // ETXTBSY until that child execs.
    let st = std::process::Command::new("cp").arg(from).arg(&tmp).status().unwrap();
    assert!(st.success(), "cp {} {}", from.display(), tmp.display());
    let dest = bin.join("reel");
    std::fs::rename(&tmp, &dest).unwrap();
    dest
}

/// `/status` of whichever process answers on the admin socket.
pub(crate) fn status(admin: SocketAddr) -> serde_json::Value {
    let r = request(admin, "GET", "127.0.0.1", "/status", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn sigterm_with_shutdown_delay_loses_no_request_behind_a_health_checking_balancer() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let mut conf = Conf::new(dir.path(), &o);
    conf.server = "shutdown_delay = \"3s\"\n".into();
    // Only the stop may turn the node unhealthy, not a test machine busy with others.
    conf.health = "max_cpu_percent = 100\nresume_cpu_percent = 99\nmax_hit_p99 = \"1h\"\nresume_hit_p99 = \"59m\"\n".into();
    let mut reel = Reel::start(&conf);
    let addr = reel.data;
    warm(addr);

    // The balancer: probes /healthz every 200 ms and stops routing after two 503s.
    let routing = Arc::new(AtomicBool::new(true));
    let probes: Arc<Mutex<Vec<String>>> = Arc::default();
    let checker = {
        let (routing, probes) = (routing.clone(), probes.clone());
        std::thread::spawn(move || {
            let mut fails = 0;
            while routing.load(Ordering::SeqCst) {
                let r = Conn::open(addr).and_then(|mut c| c.get("127.0.0.1", "/healthz"));
                let seen = match r {
                    Ok(r) => {
                        fails = if r.status == 503 { fails + 1 } else { 0 };
                        format!("{} {}", r.status, r.text().trim())
                    }
                    Err(e) => format!("error {e}"),
                };
                probes.lock().unwrap().push(seen);
                if fails >= 2 {
                    routing.store(false, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let load = Load::start(addr, 4, routing.clone());
    eventually("load before the stop", || (load.ok() > 200).then_some(()));
    // A keep-alive connection that is idle when the stop begins.
    let mut idle = Conn::open(addr).unwrap();
    assert_eq!(idle.get("127.0.0.1", &path(0)).unwrap().status, 200);

    reel.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    // Still served during the delay: the idle connection was not closed, its next
    // response tells it to go.
    let r = idle.get("127.0.0.1", &path(1)).expect("served during the delay");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));

    let exit = reel.wait_exit();
    checker.join().unwrap();
    let tally = load.finish();
    assert!(exit.success(), "{exit:?}\n{}", reel.logs.dump());
    assert!(!routing.load(Ordering::SeqCst), "the balancer saw two 503s");
    let probes = probes.lock().unwrap().clone();
    assert!(
        probes.iter().filter(|p| p.starts_with("503") && p.contains("\"stopping\"")).count() >= 2,
        "{probes:?}"
    );
    assert!(!probes.iter().any(|p| p.starts_with("error")), "no probe failed: {probes:?}");
    assert!(tally.failed.is_empty(), "failed requests: {:?}", tally.failed);
    assert!(tally.told_to_close > 0, "{tally:?}");
    reel.logs.wait_for("the lame-duck line", |v| message(v).starts_with("stopping: /healthz"));
}

#[test]
fn an_upgrade_under_load_keeps_the_sockets_and_the_cache_and_fails_nothing() {
    upgrade_under_load(false);
}

/// The same with the store on two disks: both are handed over (frozen, checkpointed,
/// unlocked; opened frozen by the successor) and both stay warm and writable.
#[test]
fn an_upgrade_under_load_hands_over_a_store_on_two_disks() {
    upgrade_under_load(true);
}

fn upgrade_under_load(two_disks: bool) {
    become_subreaper();
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let mut conf = Conf::new(dir.path(), &o);
    conf.server = "shutdown_delay = \"5s\"\n".into();
    let disks = [dir.path().join("d0"), dir.path().join("d1")];
    if two_disks {
        for d in &disks {
            std::fs::create_dir(d).unwrap();
        }
        conf.raw = Some(conf.with_disks(&[&disks[0], &disks[1]]));
    }
    let bin = install(dir.path(), Path::new(BIN));
    let old_inode = std::fs::metadata(&bin).unwrap().ino();
    let mut reel = Reel::start_with(&conf, &bin, &[]);
    let (addr, admin) = (reel.data, reel.admin);
    let old_pid = reel.pid();
    warm(addr);
    let data_sockets = listening_inodes(addr.port());
    let admin_socket = listening_inodes(admin.port());
    assert_eq!(data_sockets.len(), reel.workers(), "one socket per worker");

    let load = Load::start(addr, 4, Arc::new(AtomicBool::new(true)));
    eventually("load before the upgrade", || (load.ok() > 200).then_some(()));
    // A new version is installed at the same path, then SIGUSR2.
    let bin = install(dir.path(), Path::new(BIN));
    let new_inode = std::fs::metadata(&bin).unwrap().ino();
    assert_ne!(new_inode, old_inode);
    reel.signal(libc::SIGUSR2);

    let new_pid = eventually("the new process on the admin socket", || {
        let pid = status(admin)["pid"].as_u64()? as i32;
        (pid != old_pid as i32).then_some(pid)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    let exit = reel.wait_exit();
    assert!(exit.success(), "the old process drains and exits 0: {exit:?}");
    let at_exit = load.ok();
    eventually("load served by the new process alone", || {
        (load.ok() > at_exit + 300).then_some(())
    });
    let tally = load.finish();
    assert!(tally.failed.is_empty(), "failed or short responses: {:?}", tally.failed);

    // The very same listening sockets, now held by the new process only.
    assert_eq!(listening_inodes(addr.port()), data_sockets);
    assert_eq!(listening_inodes(admin.port()), admin_socket);
    let exe = std::fs::metadata(format!("/proc/{new_pid}/exe")).unwrap().ino();
    assert_eq!(exe, new_inode, "the binary installed at the path runs");
    // The cache is warm: every segment is a hit, the origin saw each one once.
    for i in 0..OBJECTS {
        let r = get(addr, &path(i));
        assert_eq!(r.body, body(i));
        assert!(r.cache_status().contains("hit"), "{i}: {}", r.cache_status());
        assert_eq!(o.hits(&path(i)), 1, "{i}");
    }
    // Once the old process is gone the new one stores again.
    eventually("the store to take writes", || {
        (status(admin)["store"]["frozen"] == false).then_some(())
    });
    o.put("/seg/new.ts", Object::ok("fresh"));
    assert!(get(addr, "/seg/new.ts").cache_status().contains("stored"));
    eventually("a hit", || get(addr, "/seg/new.ts").cache_status().contains("hit").then_some(()));
    let up = status(admin);
    assert_eq!(up["upgrade"]["predecessor"], serde_json::Value::Null, "{up}");
    if two_disks {
        let listed = up["store"]["disks"].as_array().expect("disks");
        assert_eq!(listed.len(), 2, "{}", up["store"]);
        for d in listed {
            assert_eq!(d["state"], "online", "{}", up["store"]);
            assert!(d["objects"].as_u64().unwrap() > 0, "both disks hold objects: {}", up["store"]);
        }
    }
    assert_eq!(successor.stop(), 0);
}

#[test]
fn an_admin_request_in_flight_when_an_upgrade_hands_over_is_answered() {
    use std::io::{Read, Write};

    become_subreaper();
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let conf = Conf::new(dir.path(), &o);
    let mut reel = Reel::start(&conf);
    let admin = reel.admin;
    let old_pid = reel.pid() as u64;
    // Accepted by the old process, half a request sent: in flight when it hands over.
    let mut c = std::net::TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    c.write_all(b"GET /status HTTP/1.1\r\n").unwrap();
    // Accepted in order, and only the old process accepts yet: it holds `c` now.
    assert_eq!(status(admin)["pid"].as_u64(), Some(old_pid));
    reel.signal(libc::SIGUSR2);
    let new_pid = eventually("the new process on the admin socket", || {
        let pid = status(admin)["pid"].as_u64()?;
        (pid != old_pid).then_some(pid as i32)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    c.write_all(b"Host: 127.0.0.1\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "answered by the old process: {text:?}");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(v["pid"].as_u64(), Some(old_pid), "{text}");
    assert!(reel.wait_exit().success());
    assert_eq!(successor.stop(), 0);
}

#[test]
fn a_failed_upgrade_leaves_the_old_process_serving() {
    become_subreaper();
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let conf = Conf::new(dir.path(), &o);
    let bin = install(dir.path(), Path::new(BIN));
    let mut reel = Reel::start_with(&conf, &bin, &[]);
    let (addr, admin) = (reel.data, reel.admin);
    warm(addr);
    let upgrade_failed = |n: u64, why: &str| {
        let st = eventually("the failure to be reported", || {
            let st = status(admin);
            (st["upgrade"]["failures"].as_u64() == Some(n)).then_some(st)
        });
        let err = st["upgrade"]["last_error"].as_str().unwrap_or("").to_string();
        assert!(err.contains(why), "{err}");
        assert_eq!(st["pid"].as_u64(), Some(u64::from(reel.pid())), "the old process answers");
        assert_eq!(st["store"]["frozen"], false, "{st}");
        assert_eq!(st["upgrade"]["in_progress"], false);
        assert!(get(addr, &path(3)).cache_status().contains("hit"));
    };

    // A broken config: the new process refuses it before touching anything.
    let good = std::fs::read_to_string(conf.path()).unwrap();
    std::fs::write(conf.path(), format!("{good}\nbogus = 1\n")).unwrap();
    reel.signal(libc::SIGUSR2);
    upgrade_failed(1, "exit status: 64");
    reel.logs.wait_for("the failure logged", |v| {
        message(v) == "upgrade failed; this process keeps serving"
    });
    // Issue 26.4: the new process's own error line is in the old process's log, and in
    // the reason `/status` shows.
    let said = reel
        .logs
        .wait_for("the new process's words", |v| message(v) == "upgrade: the new process said");
    let line = said["fields"]["line"].as_str().unwrap_or("");
    assert!(line.contains("bogus") && line.contains(&conf.path().display().to_string()), "{said}");
    upgrade_failed(1, "bogus");

    // A store the new process cannot open: it fails after the old one handed the store
    // over, which takes it back and stores again. (A volume that is a directory: `check`
    // cannot tell a volume file from a directory before opening the store.)
    let other = dir.path().join("other-store");
    std::fs::create_dir_all(other.join("vol-00000.dat")).unwrap();
    let store_line = format!("path = \"{}/store\"", dir.path().display());
    assert!(good.contains(&store_line));
    std::fs::write(
        conf.path(),
        good.replace(&store_line, &format!("path = \"{}\"", other.display())),
    )
    .unwrap();
    reel.signal(libc::SIGUSR2);
    upgrade_failed(2, "exit status: 1");
    upgrade_failed(2, "vol-00000.dat");
    o.put("/seg/after.ts", Object::ok("after"));
    assert!(get(addr, "/seg/after.ts").cache_status().contains("stored"), "writes again");

    // A binary that crashes at start.
    std::fs::write(conf.path(), &good).unwrap();
    let crash = dir.path().join("crash.sh");
    std::fs::write(&crash, "#!/bin/sh\nkill -SEGV $$\n").unwrap();
    std::fs::set_permissions(&crash, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    install(dir.path(), &crash);
    reel.signal(libc::SIGUSR2);
    upgrade_failed(3, "signal: 11");

    // With a good binary the next attempt succeeds.
    install(dir.path(), Path::new(BIN));
    reel.signal(libc::SIGUSR2);
    let new_pid = eventually("the new process", || {
        let pid = status(admin)["pid"].as_u64()? as i32;
        (pid != reel.pid() as i32).then_some(pid)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    assert!(reel.wait_exit().success());
    assert!(get(addr, &path(3)).cache_status().contains("hit"));
    // Its standard error was handed over: with the old process gone, its log still
    // arrives where the old one's went.
    successor.signal(libc::SIGHUP);
    reel.logs.wait_for("the successor's reload logged", |v| message(v) == "configuration reloaded");
    assert_eq!(successor.stop(), 0);
}

/// `name` found in `PATH`.
fn in_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A free port on 127.0.0.1 (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn systemd_socket_activation_serves_connections_queued_before_start_and_upgrades() {
    let Some(tool) = in_path("systemd-socket-activate") else {
        return skip("systemd-socket-activate is not installed");
    };
    become_subreaper();
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let mut conf = Conf::new(dir.path(), &o);
    let port = free_port();
    conf.listeners = vec![("http".into(), format!("127.0.0.1:{port}"))];
    // systemd-socket-activate owns the socket and starts reel on the first connection.
    let script = dir.path().join("activate.txt");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} -l 127.0.0.1:{port} --fdname=http {BIN} \"$@\"\n",
            tool.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Copied by a child process, as `install` does (ETXTBSY otherwise).
    let wrapper = install(dir.path(), &script);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let early = std::thread::spawn(move || {
        let deadline = Instant::now() + PATIENCE;
        loop {
            // Accepted into the socket's queue before reel runs; answered once it does.
            if let Ok(mut c) = Conn::open(addr) {
                return c.get("127.0.0.1", &path(0)).map(|r| (r.status, r.body.len()));
            }
            assert!(Instant::now() < deadline, "the activation socket never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let mut reel = Reel::start_with(&conf, &wrapper, &[]);
    assert_eq!(early.join().unwrap().expect("answered"), (200, 64 * 1024));
    reel.logs.wait_for("the socket taken from systemd", |v| {
        message(v) == "listener socket from systemd" && v["fields"]["listener"] == "http"
    });
    let sockets = listening_inodes(port);
    assert_eq!(sockets.len(), 1, "systemd's one socket, shared by the workers");
    let mut counts = HashMap::new();
    for _ in 0..20 {
        *counts.entry(get(addr, &path(1)).status).or_insert(0) += 1;
    }
    assert_eq!(counts.get(&200), Some(&20));

    // The socket systemd passed is handed on by an upgrade like any other.
    reel.signal(libc::SIGUSR2);
    let admin = reel.admin;
    let new_pid = eventually("the new process", || {
        let pid = status(admin)["pid"].as_u64()? as i32;
        (pid != reel.pid() as i32).then_some(pid)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    assert!(reel.wait_exit().success());
    assert_eq!(listening_inodes(port), sockets);
    assert!(get(addr, &path(1)).cache_status().contains("hit"));
    assert_eq!(successor.stop(), 0);
}

/// A wrapper that runs reel under `systemd-socket-activate` with one datagram socket on
/// `addr` named `name`; systemd starts it at the first datagram.
fn datagram_activation(tool: &Path, dir: &Path, addr: SocketAddr, name: &str) -> PathBuf {
    let script = dir.join("activate-udp.txt");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec {} -d -l {addr} --fdname={name} {BIN} \"$@\"\n", tool.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    install(dir, &script)
}

/// Sends a datagram to `addr` every 50 ms until `stop` is set: what starts the service.
fn knock(addr: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let deadline = Instant::now() + PATIENCE;
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            let _ = s.send_to(b"knock", addr);
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// reel takes only stream sockets from systemd. A datagram socket (`ListenDatagram=`) on
/// an HTTP/3 listener's address stops the start with a line that says what to change (it
/// used to be taken for the TCP listener: "the inherited socket is not listening"); one
/// that no HTTP/3 listener uses is closed with a warning, and reel serves.
#[test]
fn systemd_datagram_sockets_are_refused_on_http3_listeners_and_closed_elsewhere() {
    let Some(tool) = in_path("systemd-socket-activate") else {
        return skip("systemd-socket-activate is not installed");
    };
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let pki = crate::tls::Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);

    // On the HTTP/3 listener: refused, and the process exits.
    let mut conf = crate::tls::tls_conf(dir.path(), &o, &pki);
    let https: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    conf.listeners.retain(|(n, _)| n != "https");
    conf.listeners.push(("https".into(), https.to_string()));
    conf.listener_lines.get_mut("https").unwrap().push_str("http3 = true\n");
    conf.write();
    let wrapper = datagram_activation(&tool, dir.path(), https, "https");
    let child = std::process::Command::new(&wrapper)
        .arg("serve")
        .arg("--config")
        .arg(conf.path())
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let knocking = knock(https, stop.clone());
    let out = child.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    knocking.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "reel started on a datagram socket from systemd:\n{err}");
    assert!(
        err.contains(&format!(
            "systemd passed a datagram socket (UDP {https}) for listener \"https\""
        )) && err.contains("remove the ListenDatagram= line from the socket unit"),
        "{err}"
    );

    // On an address nothing uses: closed, and reel serves.
    let conf = Conf::new(dir.path(), &o);
    let other: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let wrapper = datagram_activation(&tool, dir.path(), other, "stats");
    let stop = Arc::new(AtomicBool::new(false));
    let knocking = knock(other, stop.clone());
    let reel = Reel::start_with(&conf, &wrapper, &[]);
    stop.store(true, Ordering::Relaxed);
    knocking.join().unwrap();
    let warned = reel.logs.wait_for("the datagram socket closed", |v| {
        message(v).starts_with("systemd passed a datagram socket;")
    });
    assert_eq!(warned["fields"]["address"], other.to_string());
    assert_eq!(warned["fields"]["name"], "stats");
    assert_eq!(get(reel.data, &path(0)).status, 200);
}

#[test]
fn under_systemd_an_upgrade_names_the_new_main_process() {
    use std::os::unix::net::UnixDatagram;

    become_subreaper();
    let dir = tempfile::tempdir().unwrap();
    let o = origin();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let recv = || {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let conf = Conf::new(dir.path(), &o);
    let mut reel = Reel::start_env(&conf, &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())]);
    assert!(recv().starts_with("READY=1"));
    reel.signal(libc::SIGUSR2);
    // The old main process hands the service over: no STOPPING=1, which would stop it.
    let handed = recv();
    let pid: i32 = handed
        .lines()
        .find_map(|l| l.strip_prefix("MAINPID="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("MAINPID in {handed:?}"));
    assert_ne!(pid, reel.pid() as i32);
    let successor = Successor { pid, reaped: false };
    assert!(reel.wait_exit().success());
    // The new main process is ready once it is alone (its store takes writes again).
    assert!(recv().starts_with("READY=1"));
    successor.signal(libc::SIGTERM);
    assert_eq!(recv(), "STOPPING=1");
    assert_eq!(successor.stop(), 0);
}
