//! TLS listener keys, certificates and origin TLS: parsing and the problems reported.

use super::*;
use reel_config::{TlsCert, TlsVersion};

#[test]
fn tls_listener_keys_and_certificates_parse() {
    let text = format!(
        r#"{BASE}
[[listener]]
name = "https"
address = "127.0.0.1:8443"
tls_cert = "self-signed"
sni_strict = true

[[listener]]
name = "https-files"
address = "127.0.0.1:9443"
tls_cert = "/etc/reel/tls/edge.pem"
tls_key = "/etc/reel/tls/edge.key"
http2 = false

[[certificate]]
names = ["video.example.com", "*.cdn.example.com"]
cert = "tls/video.pem"
key = "tls/video.key"
"#
    );
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    assert!(!cfg.listener[0].is_tls() && !cfg.listener[0].http2_enabled());
    assert_eq!(cfg.listener[1].tls_cert, Some(TlsCert::SelfSigned));
    assert!(cfg.listener[1].http2_enabled() && cfg.listener[1].sni_strict);
    assert_eq!(cfg.listener[2].tls_cert, Some(TlsCert::File("/etc/reel/tls/edge.pem".into())));
    assert!(cfg.listener[2].is_tls() && !cfg.listener[2].http2_enabled());
    assert_eq!(cfg.certificate[0].names.len(), 2);
    assert_eq!(cfg.certificate[0].key, std::path::PathBuf::from("tls/video.key"));
    // What the binary reports about a file a key names points at that key.
    let p = cfg.problem("listener[2].tls_key", "key does not match");
    assert_eq!((p.line, p.key.as_str()), (line_of(&text, "tls_key ="), "listener[2].tls_key"));
    assert_eq!(p.column, "tls_key = ".len() + 1);
    let p = cfg.problem("certificate[0].cert", "x");
    assert_eq!(p.line, line_of(&text, "cert = \"tls/video.pem\""));
    // Round trip through serialization keeps the TLS keys.
    let again = Config::parse(&toml::to_string(&cfg).expect("ser"), "again.toml").expect("parse");
    assert_eq!(again.listener, cfg.listener);
    assert_eq!(again.certificate, cfg.certificate);
}

#[test]
fn tls_key_combinations_and_certificate_names_are_validated() {
    let text = format!(
        r#"{BASE}
[[listener]]
name = "a"
address = "127.0.0.1:8443"
tls_cert = "edge.pem"

[[listener]]
name = "b"
address = "127.0.0.1:8444"
tls_key = "edge.key"
sni_strict = true
http2 = true

[[listener]]
name = "c"
address = "127.0.0.1:8445"
tls_cert = "self-signed"
tls_key = "edge.key"

[[certificate]]
names = ["video.example.com", "10.0.0.1"]
cert = "v.pem"
key = ""

[[certificate]]
names = ["VIDEO.example.com"]
cert = "w.pem"
key = "w.key"
"#
    );
    let ps = problems(&text);
    let msg = |k: &str| find(&ps, k).message.clone();
    assert!(msg("listener[1].tls_cert").contains("needs tls_key"));
    assert!(msg("listener[2].tls_key").contains("set tls_cert"));
    assert!(msg("listener[2].sni_strict").contains("TLS listener"));
    assert!(msg("listener[2].http2").contains("TLS listeners only"));
    assert!(msg("listener[3].tls_key").contains("self-signed"));
    assert!(msg("certificate[0].names[1]").contains("not a DNS name"));
    assert!(msg("certificate[0].key").contains("PEM file path"));
    assert!(msg("certificate[1].names[0]").contains("already listed by certificate[0]"));
    assert_eq!(find(&ps, "listener[1].tls_cert").line, line_of(&text, "tls_cert = \"edge.pem\""));
    assert_eq!(ps.len(), 8, "{ps:#?}");
}

#[test]
fn certificates_without_a_tls_listener_are_refused_and_tls_keys_reload_live() {
    let text =
        format!("{BASE}\n[[certificate]]\nnames = [\"a.example\"]\ncert = \"a\"\nkey = \"b\"\n");
    let ps = problems(&text);
    assert!(find(&ps, "certificate").message.contains("no [[listener]] sets tls_cert"));
    let old = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    let mut new = old.clone();
    new.listener[0].tls_cert = Some(TlsCert::File("x.pem".into()));
    new.listener[0].tls_key = Some("x.key".into());
    assert!(old.diff_needs_restart(&new).is_empty());
    new.certificate.push(reel_config::CertificateConfig {
        names: vec!["a.example".into()],
        cert: "a.pem".into(),
        key: "a.key".into(),
    });
    assert!(old.diff_needs_restart(&new).is_empty());
    new.store.size = ByteSize::gib(1);
    assert_eq!(old.diff_needs_restart(&new), vec!["store.size"]);
}

#[test]
fn min_tls_version_defaults_to_1_2_and_takes_1_3_on_tls_listeners() {
    let text = format!(
        "{BASE}\n[[listener]]\nname = \"a\"\naddress = \"127.0.0.1:8443\"\ntls_cert = \"self-signed\"\n\
         \n[[listener]]\nname = \"b\"\naddress = \"127.0.0.1:8444\"\ntls_cert = \"self-signed\"\n\
         min_tls_version = \"1.3\"\n\n[[listener]]\nname = \"c\"\naddress = \"127.0.0.1:8445\"\n\
         tls_cert = \"self-signed\"\nmin_tls_version = \"1.2\"\n"
    );
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    let versions: Vec<TlsVersion> = cfg.listener.iter().map(|l| l.min_tls_version).collect();
    assert_eq!(
        versions,
        [TlsVersion::Tls12, TlsVersion::Tls12, TlsVersion::Tls13, TlsVersion::Tls12]
    );
    // Round trip: written out only where it differs from the default.
    let out = toml::to_string(&cfg).expect("ser");
    assert_eq!(out.matches("min_tls_version").count(), 1, "{out}");
    let again = Config::parse(&out, "again.toml").expect("parse");
    assert_eq!(again.listener, cfg.listener);
    // A reload applies it.
    let mut new = cfg.clone();
    new.listener[1].min_tls_version = TlsVersion::Tls13;
    assert!(cfg.diff_needs_restart(&new).is_empty());
}

#[test]
fn min_tls_version_refuses_other_versions_numbers_and_plain_listeners() {
    let tls =
        "[[listener]]\nname = \"a\"\naddress = \"127.0.0.1:8443\"\ntls_cert = \"self-signed\"\n";
    for value in ["\"1.1\"", "\"tls1.3\"", "\"1.0\"", "\"\"", "\"TLSv1.3\"", "1.3", "1", "true"] {
        let text = format!("{BASE}\n{tls}min_tls_version = {value}\n");
        let ps = Config::parse(&text, "t.toml").expect_err(value).problems;
        assert_eq!(ps.len(), 1, "{value}: {ps:#?}");
        let p = &ps[0];
        assert_eq!(p.key, "listener[1].min_tls_version", "{value}: {p}");
        assert_eq!(p.line, line_of(&text, "min_tls_version"), "{value}: {p}");
        assert!(p.message.contains(r#""1.2" or "1.3""#), "{value}: {p}");
        let shown = p.to_string();
        assert!(
            shown.starts_with(&format!("t.toml:{}:", p.line))
                && shown.contains(": listener[1].min_tls_version: "),
            "{shown}"
        );
    }
    let ps = problems(&format!("{BASE}\n{tls}min_tls_version = 1.3\n"));
    assert!(find(&ps, "listener[1].min_tls_version").message.contains("in quotes"), "{ps:#?}");
    let ps = problems(&format!("{BASE}\n{tls}min_tls_version = \"1.1\"\n"));
    assert!(find(&ps, "listener[1].min_tls_version").message.contains(r#""1.1""#), "{ps:#?}");
    // A plain listener speaks no TLS: "1.3" there is a mistake.
    let plain = BASE.replace(
        "address = \"127.0.0.1:8080\"\n",
        "address = \"127.0.0.1:8080\"\nmin_tls_version = \"1.3\"\n",
    );
    let ps = problems(&plain);
    let p = find(&ps, "listener[0].min_tls_version");
    assert!(p.message.contains("TLS listener"), "{p}");
    assert_eq!(p.line, line_of(&plain, "min_tls_version"), "{p}");
}

#[test]
fn origin_tls_and_rendezvous_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        .expect("write");
    let text = format!(
        r#"{BASE}
[[origin_group]]
name = "shield"
balance = "rendezvous"
ca_file = "{}"
http2 = true
  [[origin_group.tier]]
  hosts = ["10.0.0.1:443", "10.0.0.2:443", "10.0.0.3:443"]
  host_header = "shield.example.com"
  tls = true
  weights = [1, 2, 1]
  [[origin_group.tier]]
  hosts = ["origin.example.com:80"]
"#,
        ca.display()
    );
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    let g = &cfg.origin_group[1];
    assert_eq!(g.balance, reel_config::OriginBalance::Rendezvous);
    assert_eq!(g.ca_file, ca);
    assert!(g.http2 && !g.insecure_skip_verify);
    assert!(g.tier[0].tls && !g.tier[1].tls);
    assert_eq!(g.tier[0].weights, [1, 2, 1]);
    // Defaults.
    let main = &cfg.origin_group[0];
    assert_eq!(main.balance, reel_config::OriginBalance::RoundRobin);
    assert!(main.ca_file.as_os_str().is_empty() && !main.http2 && !main.insecure_skip_verify);
    assert!(!main.tier[0].tls && main.tier[0].weights.is_empty());
}

#[test]
fn origin_tls_and_rendezvous_problems() {
    let dir = tempfile::tempdir().expect("tempdir");
    let not_pem = dir.path().join("ca.der");
    std::fs::write(&not_pem, [0x30, 0x82, 0x01]).expect("write");
    let text = format!(
        r#"{BASE}
[[origin_group]]
name = "a"
http2 = true
  [[origin_group.tier]]
  hosts = ["10.0.0.1:80", "10.0.0.2:80"]
  weights = [1, 2]

[[origin_group]]
name = "b"
balance = "rendezvous"
ca_file = "{}"
insecure_skip_verify = true
  [[origin_group.tier]]
  hosts = ["10.0.0.1:443", "10.0.0.2:443"]
  tls = true
  host_header = "under_score.example"
  weights = [0, 1, 1]

[[origin_group]]
name = "c"
ca_file = "{}"
  [[origin_group.tier]]
  hosts = ["10.0.0.1:443"]
  tls = true
"#,
        not_pem.display(),
        dir.path().join("missing.pem").display()
    );
    let ps = problems(&text);
    let expect: &[(&str, &str, &str)] = &[
        ("origin_group[1].http2", "http2 = true", "no [[origin_group.tier]]"),
        ("origin_group[1].tier[0].weights", "weights = [1, 2]", "balance = \"rendezvous\""),
        ("origin_group[2].ca_file", "ca_file = \"", "no PEM certificate"),
        ("origin_group[2].insecure_skip_verify", "insecure_skip_verify", "contradicts ca_file"),
        ("origin_group[2].tier[0].host_header", "host_header = \"under", "DNS name or IP"),
        ("origin_group[2].tier[0].weights", "weights = [0", "3 weights for 2 hosts"),
        ("origin_group[2].tier[0].weights[0]", "weights = [0", "must be 1-1000"),
        ("origin_group[3].ca_file", "missing.pem", "cannot read"),
    ];
    for (key, needle, msg) in expect {
        let p = find(&ps, key);
        assert_eq!(p.line, line_of(&text, needle), "{p}");
        assert!(p.message.contains(msg), "{p}");
    }
    assert_eq!(ps.len(), expect.len(), "unexpected extra problems: {ps:#?}");
    let shown = find(&ps, "origin_group[2].tier[0].weights[0]").to_string();
    assert!(shown.starts_with(&format!("t.toml:{}:", line_of(&text, "weights = [0"))), "{shown}");

    let text = BASE.replace("name = \"main\"", "name = \"main\"\nbalance = \"least_conn\"");
    let ps = Config::parse(&text, "t.toml").expect_err("unknown variant").problems;
    assert_eq!(ps[0].key, "origin_group[0].balance");
    assert!(ps[0].message.contains("rendezvous"), "{}", ps[0].message);
}
