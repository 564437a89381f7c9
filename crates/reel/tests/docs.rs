//! Issue 44.6: `docs/operations.md` stays true to the binary. Every metric family a live
//! `/metrics` exports is a row of the metrics reference table (with its type), and every
//! key `/status` and `/status/history` answer is named in their sections. A family or key
//! added without its documentation fails here, naming it and where to add it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::common::*;
use crate::tls::{Pki, tls_conf};

const OPERATIONS: &str = "docs/operations.md";
const METRICS: &str = "## Metrics: `GET /metrics` (admin)";
const STATUS: &str = "## Status: `GET /status` (admin)";
const HISTORY: &str = "## Dashboard: `GET /dashboard` and `GET /status/history` (admin)";

/// Keys whose own keys are data (label values, names), not fields: the map is documented,
/// its keys are what the text names it by.
const DATA_KEYED: &[&str] = &[
    // The `cache` label's values, documented with `reel_requests_total`.
    "samples[].by_result",
    // Further series by name, documented as such.
    "samples[].extra",
];

fn operations() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../", "docs/operations.md"))
        .expect("docs/operations.md")
}

/// The text of the `## ` section whose heading line is `heading`, code blocks left out (an
/// example answer documents nothing by itself).
fn section(doc: &str, heading: &str) -> String {
    let start = doc.find(&format!("{heading}\n")).unwrap_or_else(|| {
        panic!("{OPERATIONS} has no heading {heading:?}: the test reads that section")
    });
    let rest = &doc[start + heading.len()..];
    let text = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut out = String::new();
    let mut code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            code = !code;
        } else if !code {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The metrics reference table: each family named (backticked) in a row's first cell, with
/// the row's type.
fn metrics_table(section: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `reel_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(names), Some(kind)) = (cells.get(1), cells.get(2)) else { continue };
        for name in names.split(',').map(|n| n.trim().trim_matches('`')) {
            out.insert(name.to_owned(), (*kind).to_owned());
        }
    }
    out
}

/// `# TYPE` lines: family and type.
fn exported(exposition: &str) -> Vec<(String, String)> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_owned(), k.to_owned()))
        .collect()
}

/// Every key path of `v`: `a.b`, with `[]` after an array's name (`disks[].path`).
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.insert(path.clone());
                if !DATA_KEYED.contains(&path.as_str()) {
                    key_paths(v, &path, out);
                }
            }
        }
        Value::Array(a) => {
            let path = format!("{prefix}[]");
            for item in a {
                key_paths(item, &path, out);
            }
        }
        _ => {}
    }
}

/// The key names `section` documents: every word inside backticks (`a`, `a.b`,
/// `origins[]`, `hit_ttfb_*_ms`, `name = value` all count their words), as patterns where
/// `*` stands for any text.
fn documented_names(section: &str) -> Vec<String> {
    section
        .split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|code| {
            code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '*'))
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// The key paths of `v` with a name `section` does not document, and what is missing of
/// each: a path is documented when each of its names is.
fn undocumented(v: &Value, section: &str) -> Vec<String> {
    let names = documented_names(section);
    let mut paths = BTreeSet::new();
    key_paths(v, "", &mut paths);
    paths
        .into_iter()
        .filter_map(|p| {
            let last = p.rsplit(['.']).next().unwrap_or(&p).trim_end_matches("[]").to_owned();
            (!names.iter().any(|n| matches(n, &last))).then_some(p)
        })
        .collect()
}

#[test]
fn every_exported_metric_family_is_in_the_reference_table() {
    // A node with most families live: a TLS listener, the access log, a data interface,
    // hits and misses, a playlist.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let o = Origin::start("o");
    o.put("/a.ts", Object::ok("a"));
    o.put("/live/index.m3u8", Object::ok("#EXTM3U\n"));
    let mut conf = tls_conf(dir.path(), &o, &pki);
    conf.raw = Some(conf.render().replace("nic = []", "nic = [\"lo\"]"));
    let reel = Reel::start(&conf);
    for p in ["/a.ts", "/a.ts", "/live/index.m3u8"] {
        assert_eq!(get(reel.data, p).status, 200);
    }
    let doc = operations();
    let table = metrics_table(&section(&doc, METRICS));
    assert!(table.len() >= 60, "the table was read: {table:?}");
    let families = exported(&reel.metrics());
    assert!(families.len() >= 60, "{families:?}");
    let mut problems = Vec::new();
    for (name, kind) in &families {
        match table.get(name) {
            None => problems.push(format!(
                "metric family `{name}` ({kind}) is exported by /metrics but is not in the \
                 reference table of {OPERATIONS}, section {METRICS:?}: add a row \
                 \"| `{name}` | {kind} | labels | meaning |\""
            )),
            Some(k) if k != kind => problems.push(format!(
                "metric family `{name}` is a {kind} in /metrics but a {k} in the reference \
                 table of {OPERATIONS}, section {METRICS:?}"
            )),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn every_status_and_history_key_is_documented() {
    // Two disks, a TLS listener and a sample with traffic: the keys of every part.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let o = Origin::start("o");
    o.put("/a.ts", Object::ok("a"));
    let mut conf = tls_conf(dir.path(), &o, &pki);
    conf.raw = Some(conf.with_disks(&[&a, &b]).replace("nic = []", "nic = [\"lo\"]"));
    let reel = Reel::start(&conf);
    for _ in 0..2 {
        assert_eq!(get(reel.data, "/a.ts").status, 200);
    }
    let doc = operations();

    let status = reel.status();
    assert!(status["store"]["disks"].as_array().is_some_and(|d| d.len() == 2), "{status}");
    let missing = undocumented(&status, &section(&doc, STATUS));
    assert!(
        missing.is_empty(),
        "/status answers keys that section {STATUS:?} of {OPERATIONS} does not name (write \
         each name in backticks there): {missing:?}"
    );

    let history = eventually("a sample with the origin's figures", || {
        let v = reel.admin_req("GET", "/status/history?since=0").json();
        let s = v["samples"].as_array()?;
        s.iter().any(|s| s["origins"].as_array().is_some_and(|o| !o.is_empty())).then_some(v)
    });
    let missing = undocumented(&history, &section(&doc, HISTORY));
    assert!(
        missing.is_empty(),
        "/status/history answers keys that section {HISTORY:?} of {OPERATIONS} does not name \
         (write each name in backticks there, e.g. in its table of fields): {missing:?}"
    );

    // The check catches a key nobody wrote down.
    let extra =
        serde_json::json!({"store": {"disks": [{"path": "/x", "not_a_documented_key": 1}]}});
    assert_eq!(
        undocumented(&extra, &section(&doc, STATUS)),
        ["store.disks[].not_a_documented_key"]
    );
}

#[test]
fn the_readers_of_the_reference_find_what_they_should() {
    let t = metrics_table(
        "| `reel_a_total` | counter | | a |\n| `reel_b`, `reel_c` | gauge | `x` | b and c |\n",
    );
    assert_eq!(t.get("reel_c").map(String::as_str), Some("gauge"));
    assert_eq!(t.len(), 3);
    let names = documented_names("the `hit_ttfb_*_ms` and `origins[]` (`group`, `a.b`)");
    for n in ["hit_ttfb_p50_ms", "origins", "group", "a", "b"] {
        assert!(names.iter().any(|p| matches(p, n)), "{n} in {names:?}");
    }
    assert!(!names.iter().any(|p| matches(p, "hit_ratio")));
    let v = serde_json::json!({"a": [{"b": 1}], "c": {"d": {"e": true}}});
    let mut paths = BTreeSet::new();
    key_paths(&v, "", &mut paths);
    assert_eq!(paths.into_iter().collect::<Vec<_>>(), ["a", "a[].b", "c", "c.d", "c.d.e"]);
}

/// Issue 40.3: the field table of "Logs" (`### Fields`) names exactly the fields the
/// access log writes, in their default order, and `reel check` accepts exactly those names.
#[test]
fn the_logs_field_table_is_the_access_logs_field_list() {
    let doc = operations();
    let logs = section(&doc, "## Logs");
    let fields = logs
        .split_once("### Fields\n")
        .map(|(_, rest)| rest.split("\n### ").next().unwrap_or(rest))
        .unwrap_or_else(|| panic!("{OPERATIONS}, \"## Logs\", has no \"### Fields\""));
    let documented: Vec<&str> = fields
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(name, _)| name))
        .collect();
    let written: Vec<&str> = reel_ops::access_log::Field::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(
        documented, written,
        "{OPERATIONS} \"### Fields\" rows, in order, must be the access log's fields"
    );
    assert_eq!(written, reel_config::ACCESS_LOG_FIELDS, "the names `reel check` accepts");
}
