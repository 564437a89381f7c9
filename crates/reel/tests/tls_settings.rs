//! Listener TLS settings against the real binary: `min_tls_version` refusing TLS 1.2
//! clients (and a reload changing it for new connections), and clients that send an IP
//! address as server name, counted in `/metrics` instead of logged per handshake.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;

use reel_test_support::{skip, which};
use serde_json::Value;

use crate::common::{Object, Origin, Reel, eventually, message, metric};
use crate::tls::{Pki, https11_get, rt, tls_conf, tls_lines};

/// One HTTPS/1.1 request on a new connection: the status line, or why it failed.
fn served(addr: SocketAddr, client: &Arc<rustls::ClientConfig>) -> Result<String, String> {
    let r = rt().block_on(https11_get(addr, client.clone(), "/a.ts"));
    r.map(|(head, _, _)| head.lines().next().unwrap_or_default().to_owned())
        .map_err(|e| e.to_string())
}

/// `min_tls_version` of listener `name` in `/status`.
fn status_min_version(st: &Value, name: &str) -> String {
    let listeners = st["tls"]["listeners"].as_array().expect("tls listeners");
    let l = listeners.iter().find(|l| l["name"] == name).expect("listener in /status");
    l["min_tls_version"].as_str().unwrap_or_default().to_owned()
}

const PROTOCOL_ERRORS: &str =
    r#"reel_tls_handshakes_total{result="protocol_error",version="none",resumed="false"}"#;

#[test]
fn min_tls_version_1_3_refuses_tls12_clients_and_a_reload_changes_it_for_new_connections() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(vec![7; 1000]).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.listeners.push(("modern".into(), "127.0.0.1:0".into()));
    let only_13 = format!("{}min_tls_version = \"1.3\"\n", tls_lines(&pki, "edge"));
    conf.listener_lines.insert("modern".into(), only_13.clone());
    let reel = Reel::start(&conf);
    let (tls12, tls13) = (pki.client_tls12(), pki.client(&[b"http/1.1"]));
    let addrs = |reel: &Reel| {
        (reel.listener_addr("https").expect("https"), reel.listener_addr("modern").expect("1.3"))
    };
    let (both, modern) = addrs(&reel);
    // The default takes both versions; "1.3" refuses a TLS-1.2-only client.
    assert_eq!(served(both, &tls12).as_deref(), Ok("HTTP/1.1 200 OK"));
    assert_eq!(served(both, &tls13).as_deref(), Ok("HTTP/1.1 200 OK"));
    assert_eq!(served(modern, &tls13).as_deref(), Ok("HTTP/1.1 200 OK"));
    let e = served(modern, &tls12).expect_err("TLS 1.2 refused");
    assert!(e.contains("ProtocolVersion"), "{e}");
    let refused = |n: f64| {
        eventually("the refused handshake counted", || {
            (metric(&reel.metrics(), PROTOCOL_ERRORS) == Some(n)).then_some(())
        })
    };
    refused(1.0);
    let st = reel.status();
    assert_eq!(
        (status_min_version(&st, "https"), status_min_version(&st, "modern")),
        ("1.2".into(), "1.3".into())
    );

    // A reload swaps them: new connections follow.
    conf.listener_lines.insert("https".into(), only_13);
    conf.listener_lines.insert("modern".into(), tls_lines(&pki, "edge"));
    conf.write();
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(
        (status_min_version(&st, "https"), status_min_version(&st, "modern")),
        ("1.3".into(), "1.2".into())
    );
    let (both, modern) = addrs(&reel);
    let e = served(both, &tls12).expect_err("TLS 1.2 refused after the reload");
    assert!(e.contains("ProtocolVersion"), "{e}");
    assert_eq!(served(both, &tls13).as_deref(), Ok("HTTP/1.1 200 OK"));
    assert_eq!(served(modern, &tls12).as_deref(), Ok("HTTP/1.1 200 OK"));
    refused(2.0);
}

/// `openssl s_client` sends the address given as `-servername` in SNI (rustls clients send
/// no SNI for an address).
fn openssl_with_ip_sni(openssl: &std::path::Path, addr: SocketAddr) {
    let out = Command::new(openssl)
        .args(["s_client", "-brief", "-connect", &addr.to_string(), "-servername", "127.0.0.1"])
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("CONNECTION ESTABLISHED"), "the handshake completes:\n{text}");
}

#[test]
fn an_ip_address_as_server_name_is_counted_and_not_logged_per_handshake() {
    let Some(openssl) = which("openssl") else {
        return skip("openssl is not installed");
    };
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https");
    assert_eq!(metric(&reel.metrics(), "reel_tls_sni_ip_address_total"), Some(0.0));
    for _ in 0..5 {
        openssl_with_ip_sni(&openssl, addr);
    }
    let counted = |n: f64| {
        eventually("the handshakes counted", || {
            let m = reel.metrics();
            let ok = metric(
                &m,
                r#"reel_tls_handshakes_total{result="ok",version="tls1.3",resumed="false"}"#,
            );
            (metric(&m, "reel_tls_sni_ip_address_total") == Some(n) && ok == Some(n)).then_some(())
        })
    };
    counted(5.0);
    // A line logged after the handshakes (the reload's), so every line they could have
    // caused has been read; the reload lets rustls' debug lines through.
    conf.log_level = "info,rustls=debug".into();
    conf.write();
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    reel.logs.wait_for("the reload", |v| message(v) == "configuration reloaded");
    let logs = reel.logs.dump();
    assert!(!logs.contains("Illegal SNI"), "a warning per handshake:\n{logs}");
    // At debug level rustls' line is there, as debug.
    openssl_with_ip_sni(&openssl, addr);
    let line = reel.logs.wait_for("rustls' line at debug", |v| {
        message(v).starts_with("Illegal SNI extension: ignoring IP address presented as hostname")
    });
    assert_eq!(line["level"], "DEBUG", "{line}");
    counted(6.0);
}
