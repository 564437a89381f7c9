//! HTTPS after the handshake on the real binary: whichever record layer a TLS listener's
//! sessions get (the kernel's where it has kTLS, reel's otherwise, or reel's always with
//! `ktls = "off"`), bodies of every size are byte-exact over HTTP/1.1 and HTTP/2, and the
//! path is counted. Where kTLS is expected (the kernel has the `tls` module, or
//! `REEL_REQUIRE_KTLS=1` as `benches/ktls-vm.sh` sets), a 2 MiB hit over HTTPS/1.1 must leave
//! by `sendfile(2)` (seen with strace).

use std::process::{Command, Stdio};
use std::time::Duration;

use reel_test_support::skip;

use crate::common::{Object, Origin, Reel, eventually, metric};
use crate::tls::{Pki, https11_get, rt, tls_conf};

fn kernel_expected() -> bool {
    std::env::var_os("REEL_REQUIRE_KTLS").is_some_and(|v| v == "1") || reel_tls::kernel_has_tls()
}

fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i * 131 + i / 4099) as u8).wrapping_add(seed)).collect()
}

/// `reel_tls_connections_total{path=..,reason=..}`.
fn connections(reel: &Reel, path: &str, reason: &str) -> f64 {
    let m = reel.metrics();
    metric(&m, &format!("reel_tls_connections_total{{path=\"{path}\",reason=\"{reason}\"}}"))
        .unwrap_or(0.0)
}

/// The listener's own path: `("ktls", "none")` or `("userspace", reason)`.
fn expected_path(ktls_off: bool) -> (&'static str, &'static str) {
    if ktls_off {
        ("userspace", "off")
    } else if kernel_expected() {
        ("ktls", "none")
    } else {
        ("userspace", "no_module")
    }
}

const SIZES: [usize; 4] = [1024, 256 * 1024, 2 << 20, 5 << 20];

fn serve_sizes(ktls_off: bool) {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    for (i, n) in SIZES.iter().enumerate() {
        origin.put(
            &format!("/s{i}.ts"),
            Object::ok(body(*n, i as u8)).header("cache-control", "max-age=3600"),
        );
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    if ktls_off {
        conf.listener_lines.get_mut("https").expect("https").push_str("ktls = \"off\"\n");
    }
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let (path, reason) = expected_path(ktls_off);
    let before = connections(&reel, path, reason);
    rt().block_on(async {
        for round in 0..2 {
            for (i, n) in SIZES.iter().enumerate() {
                let target = format!("/s{i}.ts");
                let (head, got, _) =
                    https11_get(addr, pki.client(&[b"http/1.1"]), &target).await.expect("h1");
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                assert!(got == body(*n, i as u8), "h1 {target} round {round}: {} bytes", got.len());
            }
        }
        let c = crate::tls::h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        for (i, n) in SIZES.iter().enumerate() {
            let r = crate::tls::h2_get(&c, &format!("/s{i}.ts")).await;
            assert_eq!(r.status, 200);
            assert!(r.body == body(*n, i as u8), "h2 /s{i}.ts: {} bytes", r.body.len());
        }
    });
    // Eight HTTP/1.1 connections and one HTTP/2 connection, all on the listener's path.
    let counted = connections(&reel, path, reason) - before;
    assert!(counted >= 9.0, "{path}/{reason}: {counted}\n{}", reel.metrics());
    let st = reel.status();
    let l = st["tls"]["listeners"]
        .as_array()
        .and_then(|a| a.iter().find(|l| l["name"] == "https").cloned())
        .expect("https in /status");
    assert_eq!(l["ktls"], if ktls_off { "off" } else { "auto" }, "{l}");
    assert_eq!(l["ktls_in_use"], !ktls_off && kernel_expected(), "{l}");
}

#[test]
fn ktls_https_bodies_of_every_size_are_byte_exact_over_http11_and_http2() {
    serve_sizes(false);
}

#[test]
fn ktls_off_keeps_every_session_in_reels_record_layer_byte_exact() {
    serve_sizes(true);
}

#[test]
fn ktls_a_reload_switches_ktls_for_new_connections() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(300_000, 9)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.listener_lines.get_mut("https").expect("https").push_str("ktls = \"off\"\n");
    let mut reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let fetch = || {
        rt().block_on(async {
            let (head, got, _) =
                https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("h1");
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert!(got == body(300_000, 9));
        })
    };
    fetch();
    assert_eq!(connections(&reel, "userspace", "off"), 1.0, "{}", reel.metrics());
    let on = expected_path(false);
    assert_eq!(connections(&reel, on.0, on.1), 0.0);
    conf.listener_lines.insert("https".into(), crate::tls::tls_lines(&pki, "edge"));
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    fetch();
    assert_eq!(connections(&reel, on.0, on.1), 1.0, "{}", reel.metrics());
    assert_eq!(connections(&reel, "userspace", "off"), 1.0);
}

/// The syscalls a 2 MiB hit makes on one worker, seen by strace attached to reel.
#[test]
fn ktls_a_2_mib_hit_over_https11_leaves_by_sendfile_on_a_ktls_connection() {
    if !kernel_expected() {
        return skip("a kernel with the tls module (benches/ktls-vm.sh runs this test in one)");
    }
    if Command::new("strace").arg("-V").output().is_err() {
        return skip("strace");
    }
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let big = body(2 << 20, 3);
    origin.put("/big.ts", Object::ok(big.clone()).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    let get = || {
        rt().block_on(async {
            let (_, got, _) =
                https11_get(addr, pki.client(&[b"http/1.1"]), "/big.ts").await.expect("h1");
            assert!(got == big);
        })
    };
    get(); // the miss fills the store
    let out = dir.path().join("strace.txt");
    let mut tracer = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=sendfile,write,writev,sendmsg,sendto", "-o"])
        .arg(&out)
        .args(["-p", &reel.pid().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace");
    // Every thread of reel is traced before the hit is asked for.
    let (reel_pid, tracer_pid) = (reel.pid(), tracer.id());
    eventually("strace attached to every thread of reel", || {
        traced_by(reel_pid, tracer_pid).then_some(())
    });
    get();
    // The trace is read as strace writes it: the hit's sendfile calls show up once strace
    // has seen them return (the client has every byte by now).
    let sendfile_bytes = |trace: &str| -> u64 {
        trace
            .lines()
            // `sendfile(...) = N`, or split by another thread's call:
            // `<... sendfile resumed> ... = N`.
            .filter(|l| l.contains("sendfile") && !l.contains("<unfinished"))
            .filter_map(|l| l.rsplit("= ").next()?.trim().parse::<u64>().ok())
            .sum()
    };
    let deadline = std::time::Instant::now() + reel_test_support::PATIENCE;
    while sendfile_bytes(&std::fs::read_to_string(&out).unwrap_or_default()) < 2 << 20
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGINT makes strace detach cleanly and write its file out.
    let _ = Command::new("kill").args(["-INT", &tracer.id().to_string()]).status();
    let _ = tracer.wait();
    let trace = std::fs::read_to_string(&out).expect("trace");
    let sent = sendfile_bytes(&trace);
    assert!(sent >= 2 << 20, "sendfile sent {sent} bytes of the 2 MiB hit:\n{trace}");
}

/// Whether every thread of process `pid` is traced by `tracer` (`TracerPid` in each task's
/// status).
fn traced_by(pid: u32, tracer: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mut any = false;
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let tracer_of = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if tracer_of != Some(tracer) {
            return false;
        }
        any = true;
    }
    any
}
