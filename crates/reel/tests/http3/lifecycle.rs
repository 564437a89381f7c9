//! A reload that turns HTTP/3 on and off, an upgrade under HTTP/3 load, SIGTERM with a response in flight.

use super::*;

#[test]
fn a_reload_turns_http3_on_and_off() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(100_000, 6);
    origin.put("/a.ts", cached(&a));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let off = tls_conf(dir.path(), &origin, &pki);
    let mut reel = Reel::start(&off);
    let addr = reel.listener_addr("https").expect("https listener");
    let quick = |ep: &quinn::Endpoint| {
        let ep = ep.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(3), h3::connect(&ep, addr))
                .await
                .ok()
                .and_then(Result::ok)
        }
    };
    rt().block_on(async {
        assert!(quick(&h3::endpoint()).await.is_none(), "HTTP/3 answered while off");
        let (head, _, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("HTTPS");
        assert!(!head.to_ascii_lowercase().contains("alt-svc"), "{head}");
    });
    reel.rewrite(&h3_conf(dir.path(), &origin, &pki, ""));
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    let conn = rt().block_on(async {
        let (conn, mut c) = quick(&h3::endpoint()).await.expect("HTTP/3 after the reload");
        assert!(get(&mut c, "/a.ts", &[]).await.body == a);
        let (head, _, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("HTTPS");
        assert!(head.to_ascii_lowercase().contains("alt-svc: h3="), "{head}");
        conn
    });
    // New certificates reach new HTTP/3 connections.
    let leaf2 = pki.leaf("edge2", &["edge.example.test"]);
    let mut rotated = h3_conf(dir.path(), &origin, &pki, "");
    rotated
        .listener_lines
        .insert("https".into(), format!("{}http3 = true\n", crate::tls::tls_lines(&pki, "edge2")));
    reel.rewrite(&rotated);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    rt().block_on(async {
        let (c, _) = quick(&h3::endpoint()).await.expect("HTTP/3 after the rotation");
        let certs = c
            .peer_identity()
            .and_then(|i| i.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>().ok())
            .expect("peer certificates");
        assert_eq!(certs.first(), Some(&leaf2), "the new certificate");
    });
    reel.rewrite(&off);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    rt().block_on(async {
        // The open connection is told to go (GOAWAY, then closed); new ones find nothing.
        tokio::time::timeout(Duration::from_secs(10), conn.closed()).await.expect("closed");
        assert!(quick(&h3::endpoint()).await.is_none(), "HTTP/3 answered after the reload");
    });
}

/// HTTP/3 viewers through a binary upgrade: the UDP sockets are handed over with the TCP
/// ones; the old process's connections are told to go (GOAWAY) and finish what they
/// have, a viewer reconnects and the new process answers. No response is short or
/// wrong, and every request is answered.
#[test]
fn an_upgrade_under_http3_load_hands_over_the_udp_sockets() {
    use crate::restarts::{Successor, become_subreaper, install, status};
    become_subreaper();
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let objects: Vec<Vec<u8>> = (0..8).map(|i| body(150_000 + i * 1000, i as u8)).collect();
    for (i, b) in objects.iter().enumerate() {
        origin.put(&format!("/seg/{i}.ts"), cached(b));
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let conf = h3_conf(dir.path(), &origin, &pki, "");
    let bin = install(dir.path(), std::path::Path::new(crate::common::BIN));
    let mut reel = Reel::start_with(&conf, &bin, &[]);
    let (addr, admin) = (reel.listener_addr("https").expect("https"), reel.admin);
    let old_pid = reel.pid();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let objects = Arc::new(objects);
    // Two viewers, each on its own connection, asking in turn; a viewer whose connection
    // is closed (or refuses a request after GOAWAY) opens a new one and asks again.
    let viewers: Vec<_> = (0..2)
        .map(|v| {
            let (stop, served, objects) = (stop.clone(), served.clone(), objects.clone());
            std::thread::spawn(move || {
                rt().block_on(async move {
                    let ep = h3::endpoint();
                    let mut conn = None;
                    let (mut i, mut retries, mut failed) = (v, 0u64, Vec::new());
                    while !stop.load(Ordering::SeqCst) {
                        if conn.is_none() {
                            let c = tokio::time::timeout(
                                Duration::from_secs(10),
                                h3::connect(&ep, addr),
                            )
                            .await;
                            match c {
                                Ok(Ok(c)) => conn = Some(c),
                                _ => {
                                    retries += 1;
                                    continue;
                                }
                            }
                        }
                        let Some((_, c)) = conn.as_mut() else { continue };
                        let n = i % objects.len();
                        match h3::request_at(
                            c,
                            "edge.example.test",
                            "GET",
                            &format!("/seg/{n}.ts"),
                            &[],
                            None,
                        )
                        .await
                        {
                            Ok(r) if r.status == 200 && r.body == objects[n] => {
                                served.fetch_add(1, Ordering::SeqCst);
                                i += 1;
                            }
                            Ok(r) => failed.push(format!(
                                "/seg/{n}.ts: {} {} bytes",
                                r.status,
                                r.body.len()
                            )),
                            Err(_) => {
                                // Asked again on a new connection.
                                retries += 1;
                                conn = None;
                            }
                        }
                    }
                    (retries, failed)
                })
            })
        })
        .collect();
    eventually("HTTP/3 load before the upgrade", || {
        (served.load(Ordering::SeqCst) > 50).then_some(())
    });
    install(dir.path(), std::path::Path::new(crate::common::BIN));
    reel.signal(libc::SIGUSR2);
    let new_pid = eventually("the new process on the admin socket", || {
        let pid = status(admin)["pid"].as_u64()? as i32;
        (pid != old_pid as i32).then_some(pid)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    let exit = reel.wait_exit();
    assert!(exit.success(), "the old process drains and exits 0: {exit:?}");
    // The new process serves HTTP/3 on the same sockets.
    let at_exit = served.load(Ordering::SeqCst);
    eventually("HTTP/3 served by the new process", || {
        (served.load(Ordering::SeqCst) > at_exit + 50).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    for v in viewers {
        let (retries, failed) = v.join().expect("viewer");
        assert!(failed.is_empty(), "short or wrong responses: {failed:?}");
        assert!(retries < 50, "{retries} retries");
        println!("viewer retries: {retries}");
    }
    // The very sockets: taken over, not bound anew, and only once the old process let go
    // of them (it says so, or it exits first and the end of the channel says it).
    reel.logs.wait_for("the HTTP/3 sockets taken over", |v| {
        crate::common::message(v) == "took over the HTTP/3 sockets"
    });
    let lines = reel.logs.dump();
    let (took, gone) = (
        lines.find("took over the HTTP/3 sockets").expect("taken over"),
        lines
            .find("let go of its HTTP/3 sockets")
            .or_else(|| lines.find("the replaced process has exited"))
            .expect("the old process let go or exited"),
    );
    assert!(gone < took, "the sockets were read by both processes at once");
    let m = crate::common::request(admin, "GET", "127.0.0.1", "/metrics", &[]).text();
    assert!(metric(&m, "reel_requests_by_protocol_total{protocol=\"h3\"}").unwrap_or(0.0) > 0.0);
    assert_eq!(successor.stop(), 0);
}

/// SIGTERM with an HTTP/3 response in flight: it is finished byte-exact, then the
/// process exits 0.
#[test]
fn sigterm_finishes_an_http3_response_in_flight() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let slow = body(800_000, 9);
    origin.put("/slow.ts", cached(&slow).delay(Duration::from_millis(1500)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut reel = Reel::start(&h3_conf(dir.path(), &origin, &pki, ""));
    let addr = reel.listener_addr("https").expect("https listener");
    let r = rt().block_on(async {
        let (_conn, c) = h3::connect(&h3::endpoint(), addr).await.expect("connection");
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut c2 = c.clone();
                let req =
                    tokio::task::spawn_local(async move { get(&mut c2, "/slow.ts", &[]).await });
                let mut waited = 0;
                while origin.hits("/slow.ts") == 0 {
                    waited += 1;
                    assert!(waited < 1000, "the origin was never asked");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                reel.signal(libc::SIGTERM);
                req.await.expect("task")
            })
            .await
    });
    assert_eq!(r.status, 200);
    assert!(r.body == slow, "not byte-exact");
    let exit = reel.wait_exit();
    assert!(exit.success(), "{exit:?}");
}
