//! Certificates and sessions: SNI and strict listeners, rotation by reload under traffic, a mismatched key refused, an expired one warned of, sessions resumed across workers.

use super::*;

#[test]
fn sni_picks_certificates_and_strict_listeners_refuse_unknown_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 5)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let edge = pki.leaf("edge", &["edge.example.test"]);
    let video = pki.leaf("video", &["video.example.test"]);
    let cdn = pki.leaf("cdn", &["*.cdn.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.listeners.push(("strict".into(), "127.0.0.1:0".into()));
    conf.listener_lines
        .insert("strict".into(), format!("{}sni_strict = true\n", tls_lines(&pki, "edge")));
    let d = dir.path().display();
    conf.extra = format!(
        "\n[[certificate]]\nnames = [\"video.example.test\"]\ncert = \"{d}/video.pem\"\nkey = \"{d}/video.key\"\n\n[[certificate]]\nnames = [\"*.cdn.example.test\"]\ncert = \"{d}/cdn.pem\"\nkey = \"{d}/cdn.key\"\n"
    );
    let reel = Reel::start(&conf);
    let lax = reel.listener_addr("https").expect("https");
    let strict = reel.listener_addr("strict").expect("strict");
    let client = pki.client(&[b"h2", b"http/1.1"]);
    rt().block_on(async {
        for (addr, name, want) in [
            (lax, "video.example.test", &video),
            (lax, "a.cdn.example.test", &cdn),
            (lax, "edge.example.test", &edge),
            (strict, "video.example.test", &video),
            (strict, "edge.example.test", &edge),
        ] {
            let s = tls_connect(addr, client.clone(), name).await.expect(name);
            assert_eq!(&leaf_of(&s), want, "{name}");
        }
        // An unknown name: the lax listener answers with its default certificate (which
        // this client then rejects for the name); the strict one refuses the handshake.
        let e = tls_connect(lax, client.clone(), "other.example.test").await.expect_err("lax");
        assert!(e.to_string().contains("not valid for name"), "{e}");
        let e =
            tls_connect(strict, client.clone(), "other.example.test").await.expect_err("strict");
        assert!(e.to_string().to_lowercase().contains("alert"), "{e}");
        // HTTP/2 through an SNI certificate reaches the same cache.
        let c = h2_client(lax, client.clone(), "video.example.test").await;
        assert_eq!(h2_get(&c, "/a.ts").await.status, 200);
    });
    let m = reel.metrics();
    assert_eq!(
        metric(
            &m,
            r#"reel_tls_handshakes_total{result="unknown_name",version="none",resumed="false"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert!(m.contains(r#"reel_tls_cert_expiry_timestamp_seconds{name="*.cdn.example.test",key="certificate[1].cert"}"#));
    let st = reel.status();
    let certs = st["tls"]["certificates"].as_array().expect("certificates");
    assert_eq!(certs.len(), 4, "each listener's own and the two SNI ones: {st}");
    assert!(
        certs
            .iter()
            .any(|c| c["names"][0] == "video.example.test" && c["not_after"].as_i64() > Some(0))
    );
}

#[test]
fn reload_swaps_certificates_under_traffic_without_failed_requests() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(30_000, 6);
    origin.put("/a.ts", Object::ok(a.clone()).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let old = pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https");
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<CertificateDer<'static>>>> = Arc::default();
    let counts = Arc::new(Mutex::new((0u32, Vec::<String>::new())));
    let traffic = {
        let (stop, seen, counts, client, a) =
            (stop.clone(), seen.clone(), counts.clone(), pki.client(&[b"h2"]), a.clone());
        // Full handshakes only: a resumed session shows the certificate of the session it
        // resumes (tickets stay valid across reloads).
        let mut h1 = (*pki.client(&[b"http/1.1"])).clone();
        h1.resumption = rustls::client::Resumption::disabled();
        let h1 = Arc::new(h1);
        std::thread::spawn(move || {
            rt().block_on(async move {
                // A connection opened before the reload keeps working after it.
                let long = h2_client(addr, client.clone(), "edge.example.test").await;
                while !stop.load(Ordering::Relaxed) {
                    let fresh = async {
                        let (head, b, leaf) = https11_get(addr, h1.clone(), "/a.ts").await?;
                        if !head.starts_with("HTTP/1.1 200") || b != a {
                            return Err(std::io::Error::other(format!("bad response: {head}")));
                        }
                        let r = h2_req(&long, "GET", "/a.ts", &[])
                            .await
                            .map_err(std::io::Error::other)?;
                        if r.status != 200 || r.body != a {
                            return Err(std::io::Error::other("bad h2 response"));
                        }
                        Ok::<_, std::io::Error>(leaf)
                    };
                    let outcome = fresh.await;
                    let mut c = counts.lock().unwrap();
                    match outcome {
                        Ok(leaf) => {
                            c.0 += 1;
                            let mut s = seen.lock().unwrap();
                            if !s.contains(&leaf) {
                                s.push(leaf);
                            }
                        }
                        Err(e) => c.1.push(e.to_string()),
                    }
                }
            })
        })
    };
    eventually("traffic before the reload", || (counts.lock().unwrap().0 > 20).then_some(()));
    // New certificate files, then SIGHUP.
    let new = pki.leaf("edge", &["edge.example.test"]);
    assert_ne!(old, new);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    eventually("the new certificate served", || seen.lock().unwrap().contains(&new).then_some(()));
    let after = counts.lock().unwrap().0;
    eventually("traffic after the reload", || {
        (counts.lock().unwrap().0 > after + 20).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    traffic.join().expect("traffic thread");
    let (ok, failures) = counts.lock().unwrap().clone();
    assert!(failures.is_empty(), "{} of {} requests failed: {:?}", failures.len(), ok, failures);
    assert!(seen.lock().unwrap().contains(&old));
}

fn line_col_of(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the config"));
    let line = text[..at].lines().count() + usize::from(text[..at].ends_with('\n'));
    (line, needle.len() + 1)
}

#[test]
fn a_mismatched_key_is_refused_by_check_serve_and_reload_and_the_old_certificate_keeps_serving() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 7)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let edge = pki.leaf("edge", &["edge.example.test"]);
    pki.leaf("other", &["other.example.test"]);
    let good = tls_conf(dir.path(), &origin, &pki);
    let mut bad = good.clone();
    let d = dir.path().display();
    bad.listener_lines.insert(
        "https".into(),
        format!("tls_cert = \"{d}/edge.pem\"\ntls_key = \"{d}/other.key\"\n"),
    );
    bad.write();
    let text = bad.render();
    let (line, col) = line_col_of(&text, "tls_key = ");
    let out =
        Command::new(BIN).arg("check").arg("--config").arg(bad.path()).output().expect("check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    let want =
        format!("{}:{line}:{col}: listener[1].tls_key: the private key in ", bad.path().display());
    assert!(err.contains(&want), "expected {want:?} in:\n{err}");
    assert!(err.contains("does not match the certificate"), "{err}");
    // `serve` refuses it the same way.
    let out =
        Command::new(BIN).arg("serve").arg("--config").arg(bad.path()).output().expect("serve");
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listener[1].tls_key"));
    // A non-PEM certificate and a missing key file are refused with their keys too.
    std::fs::write(dir.path().join("junk.pem"), "not a certificate\n").expect("write");
    for (lines, want) in [
        (
            format!("tls_cert = \"{d}/junk.pem\"\ntls_key = \"{d}/edge.key\"\n"),
            "listener[1].tls_cert: ",
        ),
        (
            format!("tls_cert = \"{d}/edge.pem\"\ntls_key = \"{d}/missing.key\"\n"),
            "listener[1].tls_key: cannot read",
        ),
    ] {
        let mut broken = good.clone();
        broken.listener_lines.insert("https".into(), lines);
        broken.write();
        let out = Command::new(BIN).arg("check").arg("--config").arg(broken.path()).output();
        let out = out.expect("check");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{err}");
        assert!(err.contains(want), "expected {want:?} in {err}");
    }

    // Running with the good file, a reload to the bad one fails and changes nothing.
    let mut reel = Reel::start(&good);
    let addr = reel.listener_addr("https").expect("https");
    let client = pki.client(&[b"http/1.1"]);
    rt().block_on(async {
        let (head, _, leaf) = https11_get(addr, client.clone(), "/a.ts").await.expect("before");
        assert!(head.starts_with("HTTP/1.1 200"));
        assert_eq!(leaf, edge);
    });
    reel.rewrite(&bad);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("listener[1].tls_key"), "{}", r.text());
    rt().block_on(async {
        let (head, _, leaf) = https11_get(addr, client.clone(), "/a.ts").await.expect("after");
        assert!(head.starts_with("HTTP/1.1 200"));
        assert_eq!(leaf, edge, "the old certificate keeps serving");
    });
    assert_eq!(reel.status()["reload"]["last_ok"], false);
}

#[test]
fn an_expired_certificate_is_a_warning_for_check() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    let (c, k) = pki.ca.expired_leaf(&["edge.example.test"]);
    std::fs::write(dir.path().join("edge.pem"), c).expect("write");
    std::fs::write(dir.path().join("edge.key"), k).expect("write");
    let conf = tls_conf(dir.path(), &origin, &pki);
    conf.write();
    let out =
        Command::new(BIN).arg("check").arg("--config").arg(conf.path()).output().expect("check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("listener[1].tls_cert: certificate"),
        "{err}"
    );
    assert!(err.contains("expired"), "{err}");
}

#[test]
fn sessions_resume_across_workers() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 8)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let workers = reel.workers();
    if workers < 2 {
        return skip(&format!("only {workers} worker on this machine"));
    }
    let addr = reel.listener_addr("https").expect("https");
    let accepted = |st: &serde_json::Value| -> Vec<u64> {
        st["workers"]
            .as_array()
            .expect("workers")
            .iter()
            .map(|w| w["accepted"].as_u64().unwrap_or(0))
            .collect()
    };
    let client = pki.client(&[b"http/1.1"]);
    rt().block_on(async {
        let (head, _, _) =
            https11_get(addr, client.clone(), "/a.ts").await.expect("full handshake");
        assert!(head.starts_with("HTTP/1.1 200"));
    });
    let before = accepted(&reel.status());
    rt().block_on(async {
        for _ in 0..24 {
            let (head, _, _) = https11_get(addr, client.clone(), "/a.ts").await.expect("resumed");
            assert!(head.starts_with("HTTP/1.1 200"));
        }
    });
    let after = accepted(&reel.status());
    let busy = before.iter().zip(&after).filter(|(b, a)| a > b).count();
    assert!(busy >= 2, "the connections all landed on one worker: {before:?} -> {after:?}");
    let m = reel.metrics();
    let resumed =
        metric(&m, r#"reel_tls_handshakes_total{result="ok",version="tls1.3",resumed="true"}"#);
    assert_eq!(resumed, Some(24.0), "every later handshake resumed, on whichever worker:\n{m}");
}
