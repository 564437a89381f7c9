//! Property tests: key normalisation is idempotent and never leaves dot-segments; stored
//! metadata round-trips and decoding arbitrary bytes never panics; the header parsers never
//! panic and keep their outputs within bounds; `Accept-Encoding` negotiation and CORS
//! checks take hostile field values without panicking and never grant what was not asked.

use std::time::Duration;

use proptest::prelude::*;
use reel_cache::key::{CacheKey, KeyConfig};
use reel_cache::policy::accept_encoding::choose;
use reel_cache::policy::cache_control::{RequestCacheControl, ResponseCacheControl, targeted};
use reel_cache::policy::cors::{Cors, Preflight};
use reel_cache::policy::freshness::PolicyConfig;
use reel_cache::policy::meta::{ResponseTimes, StoredMeta};
use reel_cache::policy::range::{Available, RangeOutcome, parse_range};
use reel_cache::policy::rules::TtlRule;
use reel_cache::policy::vary::{Vary, VaryKey};

/// Path pieces chosen to hit the interesting cases: dot-segments (raw and encoded),
/// encoded slashes, escapes of reserved and unreserved bytes, odd characters.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/".to_string()),
        Just("..".to_string()),
        Just(".".to_string()),
        Just("%2e".to_string()),
        Just("%2E%2E".to_string()),
        Just("%2F".to_string()),
        Just("%2f".to_string()),
        Just("%41".to_string()),
        Just("%7e".to_string()),
        Just("%3a".to_string()),
        Just("%C3%A9".to_string()),
        Just(" ".to_string()),
        Just("\\".to_string()),
        Just("é".to_string()),
        Just("?".to_string()),
        Just("&".to_string()),
        Just("=".to_string()),
        Just("_HLS_msn=1".to_string()),
        Just("token=x".to_string()),
        "[a-zA-Z0-9._~!$'()*+,;:@-]{1,6}",
    ]
}

fn target() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..16).prop_map(|p| format!("/{}", p.concat()))
}

fn key_config() -> impl Strategy<Value = KeyConfig> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(drop_query, ignore, keep)| KeyConfig {
        ignore_query: if ignore { vec!["token".into()] } else { vec![] },
        drop_query,
        keep_query: if keep { vec!["v".into()] } else { vec![] },
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn key_normalisation_is_idempotent(t in target(), cfg in key_config(), port in prop_oneof![Just(""), Just(":80"), Just(":8080")]) {
        let host = format!("Example.COM{port}");
        if let Ok(k) = CacheKey::build(host.as_bytes(), t.as_bytes(), &cfg) {
            let again = CacheKey::build(k.host(), k.path_and_query(), &cfg).unwrap();
            prop_assert_eq!(&again, &k);
            prop_assert_eq!(again.hash128(), k.hash128());
            prop_assert!(k.path().starts_with(b"/"));
            for seg in k.path().split(|&b| b == b'/') {
                prop_assert!(seg != b".." && seg != b".", "dot segment in {:?}", String::from_utf8_lossy(k.path()));
            }
            prop_assert!(k.as_bytes().iter().all(|&b| (0x21..0x7f).contains(&b)));
        }
    }

    /// The origin is asked for exactly what the key names: a key built from the origin
    /// target equals the request's key, and no dot-segment ever reaches the origin.
    #[test]
    fn the_origin_request_normalises_to_the_same_key(t in target(), cfg in key_config()) {
        let key = CacheKey::build(b"example.com", t.as_bytes(), &cfg);
        let sent = reel_cache::key::origin_target(t.as_bytes());
        match (key, sent) {
            (Ok(k), Ok(o)) => {
                let again = CacheKey::build(b"example.com", o.as_bytes(), &cfg).unwrap();
                prop_assert_eq!(&again, &k, "origin target {:?}", o);
                let path = o.split('?').next().unwrap_or("");
                prop_assert!(path.split('/').all(|s| s != ".." && s != "."), "{}", o);
                // Idempotent: normalising what is sent sends the same thing.
                prop_assert_eq!(reel_cache::key::origin_target(o.as_bytes()).unwrap(), o);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (k, o) => prop_assert!(false, "key {:?} and origin target {:?} disagree", k, o),
        }
    }

    #[test]
    fn key_build_never_panics(host in prop::collection::vec(any::<u8>(), 0..20), t in prop::collection::vec(any::<u8>(), 0..60)) {
        let _ = CacheKey::build(&host, &t, &KeyConfig::default());
        let _ = reel_cache::key::prefix_for_purge(&host, &t);
        let _ = reel_cache::key::origin_target(&t);
    }

    #[test]
    fn meta_roundtrip(
        status in 200u16..600,
        headers in prop::collection::vec(("[a-z][a-z0-9-]{0,12}", "[ -~]{0,30}"), 0..12),
        vary_names in prop::collection::vec("[a-z]{1,8}", 0..4),
        req_vals in prop::collection::vec(prop::option::of("[ -~]{0,10}"), 0..4),
        times in (0u64..u32::MAX as u64, 0u64..1000),
        body_len in prop::option::of(any::<u64>()),
        invalidated in any::<bool>(),
        ttl in prop::option::of(0u64..100_000),
    ) {
        let mut resp: Vec<(String, String)> = headers;
        if !vary_names.is_empty() {
            resp.push(("vary".into(), vary_names.join(", ")));
        }
        let req: Vec<(String, String)> = vary_names
            .iter()
            .zip(req_vals.iter())
            .filter_map(|(n, v)| v.clone().map(|v| (n.clone(), v)))
            .collect();
        let rule = ttl.map(|t| TtlRule { ttl: Duration::from_secs(t), override_origin: false });
        let mut meta = StoredMeta::from_response(
            status,
            &resp,
            VaryKey::from_request(&Vary::parse(&resp), &req),
            ResponseTimes { request_time: times.0, response_time: times.0 + times.1 },
            body_len,
            &PolicyConfig::default(),
            rule.as_ref(),
        );
        meta.set_invalidated(invalidated);
        let bytes = meta.encode();
        let back = StoredMeta::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &meta);
        prop_assert_eq!(back.encode(), bytes);
    }

    #[test]
    fn meta_decode_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = StoredMeta::decode(&bytes);
        let mut framed = b"RM\x01\x00".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = StoredMeta::decode(&framed);
    }

    #[test]
    fn meta_decode_mutations_never_panic(idx in any::<prop::sample::Index>(), val in any::<u8>()) {
        let resp = [("etag", "\"x\""), ("cache-control", "max-age=5"), ("vary", "a")];
        let req = [("a", "1")];
        let meta = StoredMeta::from_response(
            200, &resp, VaryKey::from_request(&Vary::parse(&resp[..]), &req[..]),
            ResponseTimes { request_time: 1, response_time: 2 }, Some(3),
            &PolicyConfig::default(), None,
        );
        let mut bytes = meta.encode();
        let i = idx.index(bytes.len());
        bytes[i] = val;
        if let Ok(m) = StoredMeta::decode(&bytes) {
            // Whatever decodes must encode back to the same bytes.
            prop_assert_eq!(m.encode(), bytes);
        }
    }

    #[test]
    fn cache_control_never_panics(v in "[ -~\t]{0,80}") {
        let _ = ResponseCacheControl::parse_values([v.as_bytes()]);
        let _ = RequestCacheControl::parse_values([v.as_bytes()]);
    }

    /// RFC 9213: any `CDN-Cache-Control` value either parses as a Structured Fields
    /// Dictionary and governs, or is ignored and `Cache-Control` governs; never a panic.
    #[test]
    fn targeted_cache_control_governs_or_falls_back(v in "[ -~\t]{0,60}") {
        let targets = vec!["cdn-cache-control".to_string()];
        let h = vec![("cache-control", "max-age=77"), ("cdn-cache-control", v.as_str())];
        let got = ResponseCacheControl::for_cache(&h, &targets);
        match targeted(&h, &targets) {
            Some((name, cc)) => {
                prop_assert_eq!(name, "cdn-cache-control");
                prop_assert_eq!(got, cc);
            }
            None => prop_assert_eq!(got, ResponseCacheControl::parse_values([&b"max-age=77"[..]])),
        }
    }

    /// Directives written the same way in `CDN-Cache-Control` and `Cache-Control` mean
    /// the same (RFC 9213 2.1), whatever `Cache-Control` itself says.
    #[test]
    fn targeted_directives_mean_what_cache_control_directives_mean(
        max_age in proptest::option::of(0u32..100_000),
        s_maxage in proptest::option::of(0u32..100_000),
        flags in proptest::collection::vec(
            proptest::sample::select(vec!["no-store", "private", "no-cache", "public", "must-revalidate", "immutable"]),
            0..4,
        ),
        cc in "[ -~]{0,30}",
    ) {
        let mut d: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        if let Some(n) = max_age { d.push(format!("max-age={n}")); }
        if let Some(n) = s_maxage { d.push(format!("s-maxage={n}")); }
        d.dedup();
        prop_assume!(!d.is_empty());
        let text = d.join(", ");
        let targets = vec!["cdn-cache-control".to_string()];
        let h = vec![("cache-control", cc.as_str()), ("cdn-cache-control", text.as_str())];
        prop_assert_eq!(
            ResponseCacheControl::for_cache(&h, &targets),
            ResponseCacheControl::parse_values([text.as_bytes()])
        );
    }

    #[test]
    fn range_resolution_in_bounds(v in "(bytes|BYTES|x)=[0-9,\\- ]{0,30}", len in 0u64..10_000, avail in 0u64..10_000) {
        if let Some(set) = parse_range(v.as_bytes()) {
            for r in set.satisfiable(len) {
                prop_assert!(r.start <= r.end && r.end < len);
            }
            match set.resolve(Available::Complete(len)) {
                RangeOutcome::Partial { range, total } => {
                    prop_assert!(range.end < len);
                    prop_assert_eq!(total, Some(len));
                }
                RangeOutcome::Wait => prop_assert!(false, "complete never waits"),
                _ => {}
            }
            let avail = avail.min(len);
            if let RangeOutcome::Partial { range, .. } = set.resolve(Available::Filling { available: avail, total: None }) {
                prop_assert!(range.end < avail);
            }
            if let RangeOutcome::Partial { range, .. } = set.resolve(Available::Filling { available: avail, total: Some(len) }) {
                prop_assert!(range.end < avail);
            }
        }
    }

    #[test]
    fn accept_encoding_never_panics_and_grants_only_what_is_named(
        fields in proptest::collection::vec(proptest::collection::vec(
            prop_oneof![
                Just(b"gzip".to_vec()), Just(b"br".to_vec()), Just(b"x-gzip".to_vec()),
                Just(b"*".to_vec()), Just(b";q=".to_vec()), Just(b";q=0".to_vec()),
                Just(b";q=1.000".to_vec()), Just(b";q=0.5".to_vec()), Just(b";q=1.5".to_vec()),
                Just(b",".to_vec()), Just(b" ".to_vec()), Just(b";".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..8),
            ], 0..24).prop_map(|v| v.concat()), 0..3),
    ) {
        let h: Vec<(&str, &[u8])> = fields.iter().map(|f| ("accept-encoding", f.as_slice())).collect();
        let offered = [reel_config::Coding::Br, reel_config::Coding::Gzip];
        if let Some(c) = choose(&h, &offered) {
            // A coding is granted only when the field names it (or `*`) in some way.
            let all: Vec<u8> = fields.concat().to_ascii_lowercase();
            let named = match c {
                reel_config::Coding::Br => b"br".as_slice(),
                reel_config::Coding::Gzip => b"gzip".as_slice(),
            };
            prop_assert!(all.windows(named.len()).any(|w| w == named) || all.contains(&b'*'));
        }
        prop_assert_eq!(choose(&h, &[]), None);
    }

    #[test]
    fn cors_checks_never_panic_and_echo_only_allowed_origins(
        origin in proptest::collection::vec(any::<u8>(), 0..64),
        method in proptest::collection::vec(any::<u8>(), 0..8),
        requested in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        credentials in any::<bool>(),
    ) {
        let list = reel_config::AllowOrigins::List(vec![
            "https://player.example".into(),
            "https://*.example.com".into(),
        ]);
        for origins in [list, reel_config::AllowOrigins::Any] {
            let listed = matches!(origins, reel_config::AllowOrigins::List(_));
            let cors = Cors::new(&reel_config::CorsConfig {
                allow_origins: origins,
                allow_credentials: credentials,
                allow_headers: reel_config::DEFAULT_CORS_ALLOW_HEADERS.map(String::from).to_vec(),
                expose_headers: vec!["Cache-Status".into()],
                max_age: reel_config::Duration::from_secs(600),
            });
            if let Some(v) = cors.allow(&origin) {
                // Echoed origins are the request's own, byte for byte; a list allows only
                // https origins of the names it holds.
                if listed {
                    prop_assert_eq!(&v[..], &origin[..]);
                    prop_assert!(origin.starts_with(b"https://"));
                } else {
                    prop_assert!(&v[..] == b"*" || v[..] == origin[..]);
                }
            }
            if let Preflight::Allowed(v) = cors.preflight(&origin, &method, requested.as_deref()) {
                prop_assert!(method == b"GET" || method == b"HEAD");
                prop_assert_eq!(Some(v), cors.allow(&origin));
            }
        }
    }
}
