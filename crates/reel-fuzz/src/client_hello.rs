//! The reading of a ClientHello: reel's own read of its server name
//! ([`reel_tls::fuzzing::sni_is_ip_address`], over handshake records as received,
//! possibly split), and the certificate choice by that name ([`reel_tls::SniResolver`])
//! after rustls' `Acceptor` read the ClientHello.

use std::sync::{Arc, OnceLock};

use reel_tls::cert::{CertSource, CertSpec};
use reel_tls::{LoadedCert, SniResolver};

/// Reads the ClientHello in `data` (TLS records).
pub fn run(data: &[u8]) {
    let _ = reel_tls::fuzzing::sni_is_ip_address(data);
    let mut acceptor = rustls::server::Acceptor::default();
    let mut rd = data;
    while !rd.is_empty() {
        match acceptor.read_tls(&mut rd) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    let Ok(Some(accepted)) = acceptor.accept() else { return };
    let name = accepted.client_hello().server_name().map(str::to_owned);
    for r in resolvers() {
        let known = r.knows(name.as_deref());
        let picked = r.pick(name.as_deref());
        assert_eq!(picked.is_some(), known || !r.is_strict(), "certificate for {name:?}");
    }
}

/// A strict and a lenient resolver with exact and wildcard names, made once.
fn resolvers() -> &'static [SniResolver; 2] {
    static R: OnceLock<[SniResolver; 2]> = OnceLock::new();
    R.get_or_init(|| {
        let load = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let spec = CertSpec {
                source: CertSource::SelfSigned { names: names.clone() },
                names,
                cert_key: "fuzz.cert".into(),
                key_key: "fuzz.key".into(),
            };
            reel_tls::cert::load(&spec).expect("a self-signed certificate")
        };
        let default = load(&["localhost"]);
        let extra: Vec<Arc<LoadedCert>> = vec![
            Arc::new(load(&["video.example.com", "127.0.0.1"])),
            Arc::new(load(&["*.example.net"])),
        ];
        [SniResolver::new(&default, &extra, true), SniResolver::new(&default, &extra, false)]
    })
}
