//! Every key has a reload class, and the docs say it.

use super::*;

/// Every key path of a config (arrays of tables as `name[]`), leaves only. A table whose
/// keys the operator names (`request_headers`: field names) is one key.
fn leaf_keys(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::Table(_) if prefix.ends_with(".request_headers") => {
            out.push(prefix.to_owned())
        }
        toml::Value::Table(t) => {
            for (k, v) in t {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaf_keys(&path, v, out);
            }
        }
        toml::Value::Array(items) if !items.is_empty() && items.iter().all(|i| i.is_table()) => {
            for item in items {
                leaf_keys(&format!("{prefix}[]"), item, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

/// A config with every array of tables populated, so every key of the schema appears.
fn every_key() -> Config {
    let text = BASE
        .replace(
            "origin_group = \"main\"",
            "origin_group = \"main\"\nname = \"main-site\"\nheuristic_freshness = true",
        )
        .replace(
            "heuristic_freshness = true\n",
            "heuristic_freshness = true\n\n[site.cors]\nallow_origins = [\"https://p.example\"]\n\
             allow_credentials = true\n\n[[site.header]]\naction = \"set\"\nname = \"Cache-Control\"\n\
             value = \"max-age=1\"\npath = \"*.m3u8\"\nstatus = [200]\n",
        )
        + "\n[[cache.rule]]\nmatch = \"*.ts\"\nttl = \"1h\"\n\n[origin_group.health]\npath = \"/h\"\n"
        + "\n[[listener]]\nname = \"https\"\naddress = \"127.0.0.1:8443\"\ntls_cert = \"c.pem\"\n"
        + "tls_key = \"c.key\"\nsni_strict = true\nhttp2 = false\nmin_tls_version = \"1.3\"\nktls = \"off\"\n"
        + "http3 = true\nalt_svc_max_age = \"1h\"\nquic_retry = \"always\"\nproxy_protocol = true\n"
        + "\n[[certificate]]\nnames = [\"a.example\"]\ncert = \"a.pem\"\nkey = \"a.key\"\n"
        + "\n[http]\ntrusted_proxies = [\"10.0.0.0/8\"]\n"
        + "\n[site.token]\nformat = \"edgeauth\"\nkeys = [\"00112233445566778899aabbccddeeff\"]\n"
        + "keys_env = \"REEL_TEST_EVERY_KEY_TOKEN_KEYS\"\nsalt = \"s\"\n"
        + "\n[[access_log.sink]]\nkind = \"http\"\nurl = \"http://127.0.0.1:9/\"\n";
    // SAFETY: a variable of this test's own, set before it is read; the tests of this
    // binary read the environment through std only, whose lock orders the two.
    unsafe {
        std::env::set_var("REEL_TEST_EVERY_KEY_TOKEN_KEYS", "ffeeddccbbaa99887766554433221100")
    };
    Config::parse_and_validate(&text, "t.toml").expect("valid")
}

#[test]
fn every_key_has_a_reload_class_and_every_class_a_key() {
    let mut keys = Vec::new();
    leaf_keys("", &toml::Value::try_from(every_key()).expect("serialize"), &mut keys);
    keys.sort();
    keys.dedup();
    let mut table: Vec<String> = RELOAD_KEYS.iter().map(|k| k.key.to_owned()).collect();
    table.sort();
    let unclassified: Vec<&String> = keys.iter().filter(|k| !table.contains(k)).collect();
    let unknown: Vec<&String> = table.iter().filter(|k| !keys.contains(k)).collect();
    assert!(unclassified.is_empty(), "keys missing from RELOAD_KEYS: {unclassified:?}");
    assert!(unknown.is_empty(), "RELOAD_KEYS entries that are not keys: {unknown:?}");
    assert_eq!(table.len(), RELOAD_KEYS.len(), "a key is listed twice");
    for k in RELOAD_KEYS.iter().filter(|k| k.reload == Reload::Restart) {
        assert!(!k.key.contains("[]"), "{}: restart keys cannot be inside arrays", k.key);
    }
}

/// Splits a Markdown table row into trimmed cells (`\|` inside a cell is not a separator).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    row.replace("\\|", "\u{0}")
        .split('|')
        .map(|c| c.replace('\u{0}', "|").trim().to_owned())
        .collect()
}

#[test]
fn the_configuration_docs_show_each_keys_reload_class() {
    let docs =
        std::fs::read_to_string(config_dir().join("../docs/configuration.md")).expect("docs");
    let mut documented = BTreeMap::new();
    let mut section = String::new();
    let mut reload_col = None;
    for line in docs.lines() {
        if let Some(h) = line.strip_prefix("## ").or_else(|| line.strip_prefix("### ")) {
            section = h.trim_matches(|c| c == '`' || c == '[' || c == ']').to_owned();
            reload_col = None;
            continue;
        }
        if !line.starts_with('|') {
            continue;
        }
        let row = cells(line);
        if row.first().is_some_and(|c| c == "key") {
            reload_col = row.iter().position(|c| c == "reload");
            continue;
        }
        let (Some(col), Some(key)) = (reload_col, row.first()) else { continue };
        let Some(key) = key.strip_prefix('`').and_then(|k| k.strip_suffix('`')) else { continue };
        documented.insert(format!("{section}.{key}"), row.get(col).cloned().unwrap_or_default());
    }
    let table: BTreeMap<String, String> = RELOAD_KEYS
        .iter()
        .map(|k| (k.key.replace("[]", ""), k.reload.as_str().to_owned()))
        .collect();
    let keys: std::collections::BTreeSet<&String> = table.keys().chain(documented.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| table.get(*k) != documented.get(*k))
        .map(|k| format!("{k}: table {:?}, docs {:?}", table.get(k), documented.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "docs/configuration.md disagrees with RELOAD_KEYS:\n{}",
        differ.join("\n")
    );
}

#[test]
fn the_operations_docs_list_the_restart_keys() {
    let docs = std::fs::read_to_string(config_dir().join("../docs/operations.md")).expect("docs");
    // Sections whose every key needs a restart are named as the section.
    let mut expected: Vec<String> = Vec::new();
    for k in RELOAD_KEYS.iter().filter(|k| k.reload == Reload::Restart) {
        let section = k.key.split('.').next().unwrap_or(k.key);
        let whole = RELOAD_KEYS
            .iter()
            .filter(|o| o.key.split('.').next() == Some(section))
            .all(|o| o.reload == Reload::Restart);
        let name = if whole { format!("`[{section}]`") } else { format!("`{}`", k.key) };
        if !expected.contains(&name) {
            expected.push(name);
        }
    }
    let expected = expected.join(", ");
    let (start, end) = ("<!-- restart-keys -->", "<!-- /restart-keys -->");
    let listed = docs
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(list, _)| list.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("docs/operations.md has no {start} ... {end} list"));
    assert_eq!(listed, expected, "docs/operations.md restart list; expected:\n{expected}");
}
