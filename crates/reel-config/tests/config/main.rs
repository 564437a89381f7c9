//! End-to-end tests of the public API: the shipped config files, problem reports with
//! file:line:column and key, hashing, reload diffs, and loading from disk.

use std::path::PathBuf;

use std::collections::BTreeMap;

use reel_config::{
    ACCESS_LOG_FIELDS, ByteSize, Config, ConfigProblem, CpuSet, Duration, LogFormat, MethodsPolicy,
    RELOAD_KEYS, Reload, content_hash, load_and_validate,
};

fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// A minimal valid document that tests extend.
const BASE: &str = r#"[[listener]]
name = "http"
address = "127.0.0.1:8080"

[[site]]
hosts = ["example.com"]
origin_group = "main"

[[origin_group]]
name = "main"
  [[origin_group.tier]]
  hosts = ["127.0.0.1:8081"]
"#;

fn problems(text: &str) -> Vec<ConfigProblem> {
    match Config::parse_and_validate(text, "t.toml") {
        Ok(_) => Vec::new(),
        Err(e) => e.problems,
    }
}

fn line_of(text: &str, needle: &str) -> usize {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in text"));
    text[..at].lines().count() + usize::from(text[..at].ends_with('\n'))
}

fn find<'a>(ps: &'a [ConfigProblem], key: &str) -> &'a ConfigProblem {
    ps.iter().find(|p| p.key == key).unwrap_or_else(|| panic!("no problem for {key}: {ps:#?}"))
}

#[test]
fn every_shipped_config_parses_and_validates() {
    let mut seen = 0;
    let entries = std::fs::read_dir(config_dir()).expect("config/ exists");
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Err(e) = load_and_validate(&path) {
                panic!("{} does not validate:\n{e}", path.display());
            }
            seen += 1;
        }
    }
    assert!(seen >= 2, "expected reel.toml and production.toml, found {seen} files");
}

#[test]
fn default_config_serves_the_demo() {
    let cfg = load_and_validate(config_dir().join("reel.toml")).expect("valid");
    assert_eq!(cfg.listener[0].address, "127.0.0.1:8080".parse().expect("addr"));
    assert_eq!(cfg.admin.address, "127.0.0.1:9090".parse().expect("addr"));
    let disks = cfg.store.disks();
    assert_eq!(disks.len(), 1, "one disk");
    assert!(disks[0].1.is_relative());
    assert_eq!((disks[0].2, cfg.store.volume_size), (ByteSize::gib(1), ByteSize::mib(64)));
    assert!(cfg.demo_origin.enabled);
    assert_eq!(cfg.demo_origin.address, "127.0.0.1:8081".parse().expect("addr"));
    // `curl http://127.0.0.1:8080/live/index.m3u8` sends Host: 127.0.0.1:8080.
    assert!(cfg.site[0].matches_host("127.0.0.1:8080"));
    assert!(cfg.site[0].matches_host("localhost"));
    let tier_host = &cfg.origin_group[0].tier[0].hosts[0];
    assert_eq!(tier_host.socket_addr(), Some(cfg.demo_origin.address));
}

#[test]
fn production_example_uses_its_features() {
    let cfg = load_and_validate(config_dir().join("production.toml")).expect("valid");
    assert_eq!(cfg.log.format, LogFormat::Json);
    assert_eq!(cfg.cores.irq, CpuSet::List(vec![0, 1, 16, 17]));
    assert!(cfg.origin_group.iter().all(|g| g.tier.len() == 2));
    assert_eq!(cfg.site[1].methods, MethodsPolicy::Refuse);
    // Keys left out of the file take their defaults.
    assert_eq!(cfg.origin_group[1].health.expect_status, 200);
}

#[test]
fn minimal_document_takes_documented_defaults() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.server.shutdown_timeout, Duration::from_secs(10));
    assert_eq!((cfg.server.cdn_id.as_str(), cfg.server.max_hops), ("reel", 3));
    assert_eq!(cfg.server.cache_status_name(), "reel", "defaults to cdn_id");
    assert_eq!(cfg.log.level, "info");
    assert_eq!(cfg.listener[0].backlog, 4096);
    assert_eq!(cfg.http.max_request_line, ByteSize::kib(8));
    assert_eq!(cfg.http.max_body, ByteSize::mib(64));
    assert_eq!(cfg.health.max_hit_p99, Duration::from_millis(50));
    assert_eq!(cfg.store.size, ByteSize::gib(10));
    assert_eq!(cfg.cache.negative_ttl, Duration::from_secs(10));
    assert_eq!(cfg.origin_group[0].first_byte_timeout, Duration::from_secs(10));
    assert_eq!(cfg.origin_group[0].health.fall, 3);
    assert!(!cfg.demo_origin.enabled);
    assert_eq!(cfg.file_name(), "t.toml");
}

#[test]
fn unknown_key_names_line_column_and_key() {
    let text = format!("{BASE}\n[cache]\nnegative_tll = \"10s\"\n");
    let err = Config::parse(&text, "config/reel.toml").expect_err("typo must fail");
    assert_eq!(err.problems.len(), 1, "{err}");
    let p = &err.problems[0];
    assert_eq!(p.key, "cache.negative_tll");
    assert_eq!((p.line, p.column), (line_of(&text, "negative_tll"), 1));
    assert!(p.message.contains("unknown field `negative_tll`"), "{}", p.message);
    let shown = p.to_string();
    assert!(
        shown.starts_with(&format!("config/reel.toml:{}:1: cache.negative_tll: ", p.line)),
        "{shown}"
    );
}

#[test]
fn unknown_key_in_array_of_tables() {
    let text = BASE
        .replace("  hosts = [\"127.0.0.1:8081\"]", "  hosts = [\"127.0.0.1:8081\"]\n  weight = 3");
    let ps = Config::parse(&text, "t.toml").expect_err("unknown").problems;
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].key, "origin_group[0].tier[0].weight");
    assert_eq!((ps[0].line, ps[0].column), (line_of(&text, "weight"), 3));
}

#[test]
fn type_error_names_line_and_column_of_the_value() {
    let text = format!("{BASE}\n[http]\nmax_headers = \"many\"\n");
    let ps = Config::parse(&text, "t.toml").expect_err("type error").problems;
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].key, "http.max_headers");
    assert_eq!((ps[0].line, ps[0].column), (line_of(&text, "max_headers"), 15));
    assert!(ps[0].message.contains("invalid type"), "{}", ps[0].message);
}

#[test]
fn invalid_duration_reported_like_the_spec() {
    let text = format!(
        "{BASE}\n[[cache.rule]]\nmatch = \"*.m3u8\"\nttl = \"1s\"\n\n[[cache.rule]]\nmatch = \"*.ts\"\n    ttl = \"1x\"\n"
    );
    let ps = Config::parse(&text, "config/reel.toml").expect_err("bad duration").problems;
    assert_eq!(ps.len(), 1, "{ps:#?}");
    let line = line_of(&text, "ttl = \"1x\"");
    assert_eq!(
        ps[0].to_string().split(" (").next().map(str::to_owned),
        Some(format!(
            "config/reel.toml:{line}:11: cache.rule[1].ttl: invalid duration \"1x\": unknown unit"
        ))
    );
}

#[test]
fn store_admission_is_parsed_checked_and_located() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.store.admission, reel_config::StoreAdmission::Always, "the default");
    assert_eq!(cfg.store.admission_window, 1_000_000);
    let text = format!("{BASE}\n[store]\nadmission = \"second-hit\"\nadmission_window = 4096\n");
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    assert_eq!(cfg.store.admission, reel_config::StoreAdmission::SecondHit);
    assert_eq!(cfg.store.admission_window, 4096);
    let text = format!("{BASE}\n[store]\nadmission = \"third-hit\"\n");
    let ps = problems(&text);
    let p = find(&ps, "store.admission");
    assert_eq!(p.line, line_of(&text, "admission ="), "{p}");
    assert!(p.message.contains("unknown variant `third-hit`"), "{p}");
    let text = format!("{BASE}\n[store]\nadmission_window = 10\n");
    let ps = problems(&text);
    let p = find(&ps, "store.admission_window");
    assert_eq!(p.line, line_of(&text, "admission_window ="), "{p}");
    assert!(p.message.contains("outside 1024..="), "{p}");
}

#[test]
fn several_parse_errors_are_all_reported_in_file_order() {
    let text = format!(
        "{BASE}\n[server]\nshutdown_timeout = \"10\"\n\n[admin]\naddress = \"localhost:9090\"\ntokn = \"x\"\n\n[store]\nsize = \"10 gigs\"\nio = \"aio\"\n"
    );
    let ps = Config::parse(&text, "t.toml").expect_err("errors").problems;
    let keys: Vec<&str> = ps.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        ["server.shutdown_timeout", "admin.address", "admin.tokn", "store.size", "store.io"],
        "{ps:#?}"
    );
    for p in &ps {
        assert!(p.line > line_of(&text, "[server]"), "{p}");
        assert!(p.column >= 1, "{p}");
    }
    assert!(find(&ps, "store.io").message.contains("unknown variant `aio`"));
    assert!(find(&ps, "server.shutdown_timeout").message.contains("missing unit"));
}

#[test]
fn errors_inside_inline_tables_and_arrays_are_located() {
    let text =
        format!("http = {{ max_headers = -1 }}\ncores = {{ workers = [1, \"two\"] }}\n{BASE}");
    let ps = Config::parse(&text, "t.toml").expect_err("errors").problems;
    assert_eq!(ps.len(), 2, "{ps:#?}");
    assert_eq!(ps[0].key, "http.max_headers");
    assert_eq!(ps[1].key, "cores.workers[1]");
    assert_eq!(ps[1].line, line_of(&text, "cores = "));
}

#[test]
fn missing_required_key_points_at_its_table() {
    let text = format!("{BASE}\n[[cache.rule]]\nmatch = \"*.ts\"\n");
    let ps = Config::parse(&text, "t.toml").expect_err("missing ttl").problems;
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].key, "cache.rule[0]");
    assert_eq!((ps[0].line, ps[0].column), (line_of(&text, "[[cache.rule]]"), 1));
    assert!(ps[0].message.contains("missing field `ttl`"));
}

#[test]
fn syntax_errors_have_line_and_column() {
    let text = "[server]\nshutdown_timeout = \n[log]\nlevel = 'info\n";
    let ps = Config::parse(text, "t.toml").expect_err("syntax").problems;
    assert!(!ps.is_empty());
    assert_eq!(ps[0].line, 2, "{ps:#?}");
    assert!(ps.iter().all(|p| p.line >= 1 && p.column >= 1 && p.file == "t.toml"));
}

#[test]
fn every_semantic_problem_is_reported_with_its_position() {
    let text = r#"[log]
level = "inof"

[[listener]]
name = "http"
address = "0.0.0.0:9090"

[[listener]]
name = "http"
address = "127.0.0.1:8081"

[health]
path = "healthz"
max_cpu_percent = 80
resume_cpu_percent = 85

[admin]
address = "10.0.0.5:9090"

[store]
size = "1000KiB"
volume_size = "512KiB"

[[cache.rule]]
match = ""
ttl = "1s"

[[site]]
hosts = ["a.example.com", "a b"]
origin_group = "nope"

[[site]]
hosts = ["A.example.com"]
origin_group = "main"

[[origin_group]]
name = "main"
  [origin_group.health]
  interval = "0s"
  [[origin_group.tier]]
  hosts = []
"#;
    let ps = problems(text);
    let expect: &[(&str, &str)] = &[
        ("log.level", "level = "),
        ("listener[0].address", "address = \"0.0.0.0:9090\""),
        ("listener[1].name", "name = \"http\"\naddress = \"127"),
        ("health.path", "path = \"healthz\""),
        ("health.resume_cpu_percent", "resume_cpu_percent"),
        ("admin.address", "address = \"10.0.0.5"),
        ("admin.token", "[admin]"),
        ("store.size", "size = \"1000KiB\""),
        ("store.volume_size", "volume_size"),
        ("cache.rule[0].match", "match = \"\""),
        ("site[0].hosts[1]", "hosts = [\"a.example.com\""),
        ("site[0].origin_group", "origin_group = \"nope\""),
        ("site[1].hosts[0]", "hosts = [\"A.example"),
        ("origin_group[0].health.interval", "interval"),
        ("origin_group[0].health.timeout", "[origin_group.health]"),
        ("origin_group[0].tier[0].hosts", "hosts = []"),
    ];
    for (key, needle) in expect {
        let p = find(&ps, key);
        assert_eq!(p.line, line_of(text, needle), "{p}");
        assert!(p.column >= 1, "{p}");
    }
    assert_eq!(ps.len(), expect.len(), "unexpected extra problems: {ps:#?}");
    // Sorted in file order, each naming the file.
    assert!(ps.windows(2).all(|w| (w[0].line, w[0].column) <= (w[1].line, w[1].column)));
    assert!(ps.iter().all(|p| p.to_string().starts_with("t.toml:")));
    assert!(find(&ps, "site[1].hosts[0]").message.contains("already claimed by site[0]"));
    assert!(find(&ps, "listener[0].address").message.contains("admin.address"));
}

#[test]
fn problems_about_absent_keys_point_at_the_nearest_table_or_the_top() {
    let text = "[store]\nvolume_size = \"8GiB\"\n";
    let ps = problems(text);
    // No [[listener]] at all: reported at the top of the file.
    let p = find(&ps, "listener");
    assert_eq!((p.line, p.column), (1, 1));
    // store.size was left at its default 10GiB, less than 2 x 8GiB: points at [store].
    let p = find(&ps, "store.size");
    assert_eq!((p.line, p.column), (1, 1));
    let text = "\n\n[store]\nvolume_size = \"8GiB\"\n";
    assert_eq!(find(&problems(text), "store.size").line, 3);
}

#[test]
fn store_disks_are_checked_one_by_one_and_not_mixed_with_path() {
    let text = "[store]\npath = \"/a\"\nvolume_size = \"1GiB\"\n\n[[store.disk]]\npath = \"/d1\"\nsize = \"4GiB\"\n\n[[store.disk]]\npath = \"/d1\"\nsize = \"1GiB\"\n";
    let ps = problems(text);
    assert!(find(&ps, "store.path").message.contains("not both"), "{ps:#?}");
    let p = find(&ps, "store.disk[1].path");
    assert!(p.message.contains("is also store.disk[0].path"), "{p:?}");
    assert_eq!(p.line, 10);
    let p = find(&ps, "store.disk[1].size");
    assert!(p.message.contains("at least twice store.volume_size"), "{p:?}");
    assert_eq!(p.line, 11);
    assert!(ps.iter().all(|p| p.key != "store.disk[0].size"), "{ps:#?}");
    let ok = format!(
        "{BASE}\n[store]\nvolume_size = \"1GiB\"\n[[store.disk]]\npath = \"/d1\"\nsize = \"4GiB\"\n[[store.disk]]\npath = \"/d2\"\nsize = \"8GiB\"\n"
    );
    let cfg = Config::parse_and_validate(&ok, "t.toml").expect("valid");
    let disks: Vec<_> =
        cfg.store.disks().into_iter().map(|(k, p, s)| (k, p.to_owned(), s)).collect();
    assert_eq!(disks[1], ("store.disk[1]".to_owned(), "/d2".into(), ByteSize::gib(8)));
}

#[test]
fn origin_group_without_tiers_and_demo_collisions() {
    let text = format!(
        "{}\n[demo_origin]\nenabled = true\naddress = \"127.0.0.1:8080\"\nerror_rate = 1.5\n",
        BASE.replace("  [[origin_group.tier]]\n  hosts = [\"127.0.0.1:8081\"]\n", "")
    );
    let ps = problems(&text);
    let keys: Vec<&str> = ps.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        ["listener[0].address", "origin_group[0]", "demo_origin.error_rate"],
        "{ps:#?}"
    );
}

#[test]
fn hash_is_stable_and_content_sensitive() {
    let a = Config::parse(BASE, "a.toml").expect("parse");
    let b = Config::parse(BASE, "elsewhere/b.toml").expect("parse");
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash(), content_hash(BASE));
    assert_eq!(a.hash().len(), 16);
    assert!(a.hash().bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    // Pinned when first computed, so the hash shown on /status cannot change silently
    // between releases.
    assert_eq!(content_hash("reel"), "e449397b701763d7");
    let c = Config::parse(&format!("{BASE}# comment\n"), "a.toml").expect("parse");
    assert_ne!(a.hash(), c.hash());
}

#[test]
fn diff_needs_restart_lists_only_restart_keys() {
    let old = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    let text = BASE.replace("127.0.0.1:8080", "127.0.0.1:8181")
        + "\n[store]\nsize = \"20GiB\"\nio = \"threads\"\n\n[cores]\nworkers = [1, 2]\n\n[log]\nlevel = \"debug\"\nformat = \"json\"\n\n[cache]\nnegative_ttl = \"1s\"\n\n[admin]\ntoken = \"t\"\n";
    let new = Config::parse_and_validate(&text, "t.toml").expect("valid");
    // The listener's address is applied live (its sockets are rebound).
    assert_eq!(
        old.diff_needs_restart(&new),
        ["log.format", "cores.workers", "store.size", "store.io"]
    );
    assert!(old.diff_needs_restart(&old.clone()).is_empty());
    // Live-only changes need no restart.
    let live = BASE.replace("example.com", "example.org") + "\n[http]\nidle_timeout = \"5s\"\n";
    let live = Config::parse_and_validate(&live, "t.toml").expect("valid");
    assert!(old.diff_needs_restart(&live).is_empty());
}

#[test]
fn serialized_config_parses_back_identically() {
    for name in ["reel.toml", "production.toml"] {
        let cfg = Config::load(config_dir().join(name)).expect("load");
        let text = toml::to_string(&cfg).expect("serialize");
        let back = Config::parse_and_validate(&text, "round-trip.toml").expect("valid");
        assert_eq!(toml::to_string(&back).expect("serialize"), text);
        assert!(cfg.diff_needs_restart(&back).is_empty());
    }
}

#[test]
fn load_reads_files_and_reports_unreadable_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("reel.toml");
    std::fs::write(&path, BASE).expect("write");
    let cfg = load_and_validate(&path).expect("valid");
    assert_eq!(cfg.file_name(), path.display().to_string());
    assert_eq!(cfg.hash(), content_hash(BASE));

    let missing = dir.path().join("missing.toml");
    let err = load_and_validate(&missing).expect_err("missing file");
    assert_eq!(err.problems.len(), 1);
    assert!(err.to_string().starts_with(&missing.display().to_string()));
    assert!(err.problems[0].message.contains("cannot read"));

    std::fs::write(&path, format!("{BASE}\n[http]\nmax_headers = 0\n")).expect("write");
    let err = load_and_validate(&path).expect_err("invalid");
    assert_eq!(err.problems[0].key, "http.max_headers");
    assert!(err.to_string().starts_with(&format!("{}:", path.display())));
}

#[test]
fn site_for_host_prefers_exact_then_longest_wildcard() {
    let text = r#"[[listener]]
name = "http"
address = "127.0.0.1:8080"

[[site]]
hosts = ["*.example.com"]
origin_group = "g"

[[site]]
hosts = ["*.live.example.com", "live.example.com"]
origin_group = "g"

[[site]]
hosts = ["a.live.example.com"]
origin_group = "g"

[[origin_group]]
name = "g"
  [[origin_group.tier]]
  hosts = ["127.0.0.1:8081"]
"#;
    let cfg = Config::parse_and_validate(text, "t.toml").expect("valid");
    let site = |h: &str| cfg.site_for_host(h).map(|(i, _)| i);
    assert_eq!(site("a.live.example.com:8080"), Some(2));
    assert_eq!(site("b.live.example.com"), Some(1));
    assert_eq!(site("LIVE.example.com"), Some(1));
    assert_eq!(site("vod.example.com"), Some(0));
    assert_eq!(site("example.com"), None);
    assert_eq!(site("other.org"), None);
}

#[test]
fn every_key_is_documented_and_present_in_the_default_config() {
    fn keys(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    out.push(path.clone());
                    keys(&path, v, out);
                }
            }
            toml::Value::Array(items) => {
                for item in items.iter().filter(|i| i.is_table()) {
                    keys(prefix, item, out);
                }
            }
            _ => {}
        }
    }
    let docs =
        std::fs::read_to_string(config_dir().join("../docs/configuration.md")).expect("docs");
    let default = Config::load(config_dir().join("reel.toml")).expect("load");
    let production = Config::load(config_dir().join("production.toml")).expect("load");
    let mut all = Vec::new();
    keys("", &toml::Value::try_from(&production).expect("serialize"), &mut all);
    let mut in_default = Vec::new();
    keys("", &toml::Value::try_from(&default).expect("serialize"), &mut in_default);
    let default_text = std::fs::read_to_string(config_dir().join("reel.toml")).expect("read");
    for path in &all {
        let leaf = path.rsplit('.').next().unwrap_or(path);
        assert!(
            docs.contains(&format!("`{leaf}`"))
                || docs.contains(&format!("`[{path}]`"))
                || docs.contains(&format!("`[[{path}]]`")),
            "{path} not documented"
        );
        assert!(in_default.contains(path), "{path} missing from the default config");
        assert!(default_text.contains(leaf), "{path} not written out in config/reel.toml");
    }
}

#[test]
fn a_bad_required_value_in_an_array_of_tables_does_not_hide_other_problems() {
    let text = "[server]\nshutdown_timeout = \"1x\"\n[[listener]]\nname = \"a\"\naddress = \"1.2.3.4\"\n[http]\nmax_headers = \"many\"\n";
    let ps = problems(text);
    assert_eq!(find(&ps, "server.shutdown_timeout").line, 2, "{ps:#?}");
    assert_eq!(find(&ps, "listener[0].address").line, 5, "{ps:#?}");
    assert_eq!(find(&ps, "http.max_headers").line, 7, "{ps:#?}");
}

/// Scheme overrides (`X-Forwarded-Ssl: on` and its kin) make frameworks build `https`
/// or `http` links into the stored page for everyone; they were not dropped by default.
/// The shipped configs spell the default out and must keep up with it.
#[test]
fn default_fill_drop_headers_cover_scheme_overrides_and_match_the_shipped_configs() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    let defaults = &cfg.cache.fill_drop_headers;
    for h in ["X-Forwarded-Ssl", "X-Url-Scheme", "Front-End-Https", "X-Forwarded-Protocol"] {
        assert!(defaults.iter().any(|d| d == h), "{h} is not dropped by default");
    }
    for file in ["reel.toml", "production.toml"] {
        let shipped = load_and_validate(config_dir().join(file)).expect("valid");
        assert_eq!(&shipped.cache.fill_drop_headers, defaults, "{file}");
    }
}

#[test]
fn fill_drop_headers_are_field_names_and_never_host() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert!(cfg.cache.fill_drop_headers.iter().any(|h| h == "X-Forwarded-Host"));
    let text = format!("{BASE}\n[cache]\nfill_drop_headers = [\"X-Ok\", \"bad name\", \"HOST\"]\n");
    let ps = problems(&text);
    assert!(find(&ps, "cache.fill_drop_headers[1]").message.contains("not a header field name"));
    assert!(find(&ps, "cache.fill_drop_headers[2]").message.contains("Host is always sent"));
    assert!(ps.iter().all(|p| p.key != "cache.fill_drop_headers[0]"), "{ps:#?}");
}

#[test]
fn cdn_loop_and_cache_status_names_are_checked() {
    let with = |lines: &str| format!("[server]\n{lines}\n{BASE}");
    let cfg = Config::parse_and_validate(
        &with("cdn_id = \"cdn.example.com:8443\"\ncache_status_name = \"edge-1\""),
        "t.toml",
    )
    .expect("valid");
    assert_eq!(cfg.server.cache_status_name(), "edge-1");
    let ps = problems(&with("cdn_id = \"a b\"\nmax_hops = 65"));
    assert!(find(&ps, "server.cdn_id").message.contains("RFC 8586"), "{ps:#?}");
    assert!(find(&ps, "server.max_hops").message.contains("0-64"), "{ps:#?}");
    // A cdn_id that is not a Cache-Status name needs cache_status_name.
    let ps = problems(&with("cdn_id = \"192.0.2.1\""));
    assert!(find(&ps, "server.cdn_id").message.contains("set server.cache_status_name"), "{ps:#?}");
    let ps = problems(&with("cache_status_name = \"edge 1\""));
    assert!(find(&ps, "server.cache_status_name").message.contains("RFC 9211"), "{ps:#?}");
    let ok = with("cdn_id = \"192.0.2.1\"\ncache_status_name = \"edge\"");
    Config::parse_and_validate(&ok, "t.toml").expect("valid");
}

#[test]
fn max_variants_is_between_1_and_1024() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.cache.max_variants, 32);
    for (v, ok) in [(0, false), (1, true), (1024, true), (1025, false)] {
        let ps = problems(&format!("{BASE}\n[cache]\nmax_variants = {v}\n"));
        assert_eq!(ps.iter().any(|p| p.key == "cache.max_variants"), !ok, "{v}: {ps:#?}");
    }
}

#[test]
fn lock_timeout_defaults_to_ten_seconds_and_must_be_positive() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.cache.lock_timeout, Duration::from_secs(10));
    let ps = problems(&format!("{BASE}\n[cache]\nlock_timeout = \"0s\"\n"));
    assert!(find(&ps, "cache.lock_timeout").message.contains("greater than 0"), "{ps:#?}");
}

#[test]
fn slices_are_off_by_default_and_sized_within_the_volume() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!((cfg.site[0].slice.bytes(), cfg.site[0].read_ahead), (None, 2));
    assert_eq!(cfg.cache.read_ahead_per_worker, 64);
    let with = |line: &str| {
        BASE.replace("origin_group = \"main\"\n", &format!("origin_group = \"main\"\n{line}\n"))
    };
    let cfg = Config::parse_and_validate(&with("slice = \"2MiB\""), "t.toml").expect("valid");
    assert_eq!(cfg.site[0].slice.bytes(), Some(2 << 20));
    let cfg = Config::parse_and_validate(&with("slice = \"off\""), "t.toml").expect("valid");
    assert_eq!(cfg.site[0].slice.bytes(), None);
    // The default volume is 256 MiB: a slice may take half of it at most.
    for (v, ok) in
        [("\"32KiB\"", false), ("\"64KiB\"", true), ("\"128MiB\"", true), ("\"129MiB\"", false)]
    {
        let ps = problems(&with(&format!("slice = {v}")));
        assert_eq!(ps.iter().any(|p| p.key == "site[0].slice"), !ok, "{v}: {ps:#?}");
    }
    let ps = Config::parse(&with("slice = \"on\""), "t.toml").expect_err("not a size").problems;
    assert_eq!(ps[0].key, "site[0].slice");
    assert!(find(&problems(&with("read_ahead = 17")), "site[0].read_ahead").message.contains("16"));
    let ps = problems(&format!("{BASE}\n[cache]\nread_ahead_per_worker = 5000\n"));
    assert!(find(&ps, "cache.read_ahead_per_worker").message.contains("4096"));
}

#[test]
fn http2_settings_are_bounded() {
    let text = format!(
        "{BASE}\n[http]\nh2_max_concurrent_streams = 0\nh2_stream_window = \"1KiB\"\n\
         h2_connection_window = \"4GiB\"\nh2_max_resets_per_second = 0\n\
         h2_stream_buffer = \"2MiB\"\nh2_connection_buffer = \"1MiB\"\n"
    );
    let ps = problems(&text);
    for key in [
        "http.h2_max_concurrent_streams",
        "http.h2_stream_window",
        "http.h2_connection_window",
        "http.h2_max_resets_per_second",
        "http.h2_stream_buffer",
    ] {
        let p = find(&ps, key);
        assert!(p.line > 0, "{p:?}");
    }
    let ok =
        format!("{BASE}\n[http]\nh2_max_concurrent_streams = 1000\nh2_stream_window = \"60KiB\"\n");
    assert!(problems(&ok).iter().any(|p| p.key == "http.h2_stream_window"), "60KiB < 65535B");
    let ok =
        format!("{BASE}\n[http]\nh2_max_concurrent_streams = 1000\nh2_stream_window = \"1MiB\"\n");
    let ps = problems(&ok);
    assert!(ps.is_empty(), "{ps:#?}");
}

#[test]
fn the_http3_send_budget_holds_at_least_one_window() {
    let p = find(
        &problems(&format!("{BASE}\n[http]\nh3_send_budget = \"200KiB\"\n")),
        "http.h3_send_budget",
    )
    .clone();
    assert!(p.line > 0 && p.message.contains("256KiB"), "{p:?}");
    let ps = problems(&format!("{BASE}\n[http]\nh3_send_budget = \"4MiB\"\n"));
    assert!(ps.is_empty(), "{ps:#?}");
    assert_eq!(reel_config::HttpConfig::default().h3_send_budget.bytes(), 64 << 20);
}

#[test]
fn llhls_keys_default_and_validate() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.cache.blocking_timeout, Duration::from_secs(10));
    assert!(cfg.site.iter().all(|s| s.prefetch == reel_config::Prefetch::Off));
    let ps = problems(&format!("{BASE}\n[cache]\nblocking_timeout = \"0s\"\n"));
    assert!(find(&ps, "cache.blocking_timeout").message.contains("greater than 0"), "{ps:#?}");
    let hinted =
        BASE.replace("origin_group = \"main\"", "origin_group = \"main\"\nprefetch = \"hinted\"");
    let cfg = Config::parse_and_validate(&hinted, "t.toml").expect("valid");
    assert_eq!(cfg.site[0].prefetch, reel_config::Prefetch::Hinted);
    let bad =
        BASE.replace("origin_group = \"main\"", "origin_group = \"main\"\nprefetch = \"all\"");
    assert!(Config::parse_and_validate(&bad, "t.toml").is_err());
}

/// Any viewer could invalidate any URL with an extension method its origin answers 2xx
/// (`PURGEME /x`); only POST, PUT, DELETE and PATCH do unless a site asks for `all`.
#[test]
fn invalidate_on_defaults_to_standard_and_refuses_unknown_values_with_their_position() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.site[0].invalidate_on, reel_config::InvalidateOn::Standard);
    let all =
        BASE.replace("origin_group = \"main\"", "origin_group = \"main\"\ninvalidate_on = \"all\"");
    let cfg = Config::parse_and_validate(&all, "t.toml").expect("valid");
    assert_eq!(cfg.site[0].invalidate_on, reel_config::InvalidateOn::All);
    let bad = BASE.replace(
        "origin_group = \"main\"",
        "origin_group = \"main\"\ninvalidate_on = \"unsafe-methods\"",
    );
    let ps = problems(&bad);
    let p = find(&ps, "site[0].invalidate_on");
    assert_eq!(p.line, line_of(&bad, "invalidate_on"), "{p}");
    assert!(p.column >= 1, "{p}");
    assert!(p.message.contains("unknown variant `unsafe-methods`"), "{p}");
    assert!(p.to_string().starts_with("t.toml:"), "{p}");
}

#[test]
fn heuristic_freshness_is_on_unless_switched_off() {
    // RFC 9111 4.2.2, as Squid and Traffic Server do by default.
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert!(cfg.cache.heuristic_freshness);
    let off = format!("{BASE}\n[cache]\nheuristic_freshness = false\n");
    let cfg = Config::parse_and_validate(&off, "t.toml").expect("valid");
    assert!(!cfg.cache.heuristic_freshness);
}

mod access_log;
mod cmcd;
mod edits;
mod origin_auth;
mod reload_docs;
mod tls;
mod token;

/// An admin API on a non-loopback address with no token is open to the network: refused
/// unless `insecure_no_token = true` says so on purpose (issue 23.8).
#[test]
fn a_non_loopback_admin_without_a_token_is_refused_unless_insecure_no_token() {
    let open = format!("{BASE}\n[admin]\naddress = \"0.0.0.0:9090\"\nallow_non_loopback = true\n");
    let ps = problems(&open);
    let p = find(&ps, "admin.token");
    assert!(p.message.contains("insecure_no_token"), "{p:?}");
    assert!(problems(&format!("{open}token = \"s3cret\"\n")).is_empty());
    assert!(problems(&format!("{open}insecure_no_token = true\n")).is_empty());
    // On loopback no token is needed.
    assert!(problems(&format!("{BASE}\n[admin]\naddress = \"127.0.0.1:9090\"\n")).is_empty());
}

#[test]
fn origin_max_connections_defaults_to_128_and_must_be_positive() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.origin_group[0].max_connections, 128);
    let text = BASE.replace("name = \"main\"\n", "name = \"main\"\nmax_connections = 0\n");
    let ps = problems(&text);
    assert!(find(&ps, "origin_group[0].max_connections").message.contains("at least 1"));
}

/// The hardening keys refuse values that would switch their bound off or cannot be read.
#[test]
fn hardening_bounds_refuse_zero_and_nonsense() {
    for (table, line, key) in [
        ("http", "send_timeout = \"0s\"", "http.send_timeout"),
        ("http", "send_timeout = \"-1s\"", "http.send_timeout"),
        ("http", "send_timeout = \"99999999999999999999s\"", "http.send_timeout"),
        ("cache", "max_misses_per_connection = 0", "cache.max_misses_per_connection"),
        ("cache", "max_misses_per_connection = -3", "cache.max_misses_per_connection"),
        ("cache", "max_misses_per_connection = \"many\"", "cache.max_misses_per_connection"),
    ] {
        let ps = problems(&format!("{BASE}\n[{table}]\n{line}\n"));
        assert!(ps.iter().any(|p| p.key == key), "{line}: {ps:#?}");
    }
}

#[test]
fn scrub_rate_is_a_size_per_second_and_zero_turns_it_off() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert_eq!(cfg.store.scrub_rate, ByteSize::mib(4));
    for (v, bytes) in [("\"0\"", 0), ("0", 0), ("\"8MiB\"", 8 << 20), ("\"100MB\"", 100_000_000)] {
        let text = format!("{BASE}\n[store]\nscrub_rate = {v}\n");
        let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
        assert_eq!(cfg.store.scrub_rate.bytes(), bytes, "{v}");
    }
    let text = format!("{BASE}\n[store]\nscrub_rate = \"8MiB/s\"\n");
    let ps = Config::parse(&text, "config/reel.toml").expect_err("not a size").problems;
    assert_eq!(ps.len(), 1, "{ps:#?}");
    let line = line_of(&text, "scrub_rate");
    let shown = ps[0].to_string();
    assert!(
        shown.starts_with(&format!(
            "config/reel.toml:{line}:14: store.scrub_rate: invalid size \"8MiB/s\": unknown unit"
        )),
        "{shown}"
    );
}
