//! Issue 26.7: the Prometheus alert rules and the Grafana board in `contrib/` name only
//! metrics this binary exports. Every PromQL expression of both is read from the files and
//! every `reel_*` name in it is looked up in a live `/metrics` (families that appear only on
//! some hosts are looked up in the metrics table of `docs/operations.md` instead).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::tls::{Pki, tls_conf};

fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib")
}

/// The `expr:` values of a rules file: one line, or a `>-`/`|` block of deeper lines.
fn rule_exprs(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else { continue };
        let rest = rest.trim();
        if rest.starts_with('>') || rest.starts_with('|') {
            let indent = line.len() - line.trim_start().len();
            let block: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
                .map(|l| l.trim())
                .collect();
            out.push(block.join(" "));
        } else {
            out.push(rest.to_owned());
        }
    }
    out
}

/// Every `expr` (panel targets) and query definition (template variables) of a board.
fn board_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    ("expr" | "definition", Some(s)) => out.push(s.to_owned()),
                    _ => board_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| board_exprs(v, out)),
        _ => {}
    }
}

/// The `reel_*` metric names an expression uses (outside quoted label values).
fn names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut quoted = false;
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            quoted = !quoted;
        }
        let starts = !quoted
            && expr[i..].starts_with("reel_")
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        if starts {
            let end = expr[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(b.len(), |e| i + e);
            out.insert(expr[i..end].to_owned());
            i = end;
            continue;
        }
        i += 1;
    }
    out
}

/// The names of `used` that neither the exposition (`# TYPE` lines; a histogram's
/// `_bucket`/`_sum`/`_count` series count as its family) nor `documented` has.
fn missing(used: &BTreeSet<String>, exposition: &str, documented: &str) -> Vec<String> {
    let families: BTreeSet<(&str, &str)> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let exported = |n: &str| {
        families.iter().any(|(f, kind)| {
            *f == n
                || *kind == "histogram"
                    && ["_bucket", "_sum", "_count"].iter().any(|s| n.strip_suffix(s) == Some(*f))
        })
    };
    used.iter()
        .filter(|n| !exported(n) && !documented.contains(&format!("`{n}`")))
        .cloned()
        .collect()
}

/// Families that only some hosts have: a cgroup's `cpu.stat`, a CPU quota.
const HOST_DEPENDENT: &[&str] = &["reel_cgroup_"];

#[test]
fn alert_rules_and_the_grafana_board_use_only_exported_metrics() {
    let rules = std::fs::read_to_string(contrib().join("prometheus/reel-alerts.yml")).unwrap();
    let board: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(contrib().join("grafana/reel-dashboard.json")).unwrap(),
    )
    .expect("the board is JSON");
    let mut exprs = rule_exprs(&rules);
    assert!(exprs.len() >= 10, "alert expressions: {exprs:?}");
    let mut panel_exprs = Vec::new();
    board_exprs(&board, &mut panel_exprs);
    assert!(panel_exprs.len() >= 20, "board expressions: {panel_exprs:?}");
    exprs.extend(panel_exprs);
    let used: BTreeSet<String> = exprs.iter().flat_map(|e| names(e)).collect();
    assert!(used.len() >= 20, "{used:?}");

    // A node with a TLS listener (certificate expiry), a data interface (its bytes), an
    // origin, and a hit and a miss behind it.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let o = Origin::start("o");
    o.put("/a.ts", Object::ok("a"));
    let mut conf = tls_conf(dir.path(), &o, &pki);
    conf.raw = Some(conf.render().replace("nic = []", "nic = [\"lo\"]"));
    let reel = Reel::start(&conf);
    for _ in 0..2 {
        assert_eq!(get(reel.data, "/a.ts").status, 200);
    }
    let exposition = reel.metrics();
    let docs = std::fs::read_to_string(contrib().join("../docs/operations.md")).unwrap();
    // Host-dependent families must at least be documented; the rest must be live.
    let live_only: BTreeSet<String> =
        used.iter().filter(|n| !HOST_DEPENDENT.iter().any(|p| n.starts_with(p))).cloned().collect();
    let gone = missing(&live_only, &exposition, "");
    assert!(gone.is_empty(), "not in the live /metrics: {gone:?}\n{exposition}");
    let gone = missing(&used, &exposition, &docs);
    assert!(gone.is_empty(), "neither exported nor documented: {gone:?}");

    // The check itself catches a misspelt name, a suffix on a non-histogram and a name
    // inside a label value is not taken for one.
    let typo = names("rate(reel_requests_totl[5m]) + reel_store_bytes_count");
    assert_eq!(missing(&typo, &exposition, &docs).len(), 2, "{typo:?}");
    assert!(names("x{job=\"reel_not_a_metric\"}").is_empty());
}

#[test]
fn block_expressions_are_read_whole() {
    let text = "      - alert: A\n        expr: >-\n          sum(reel_a)\n          / sum(reel_b)\n        for: 5m\n      - alert: B\n        expr: reel_c == 0\n";
    assert_eq!(rule_exprs(text), vec!["sum(reel_a) / sum(reel_b)", "reel_c == 0"]);
}

/// Issue 44.5: a key the alert texts tell on-call to change (`[http] max_connections_per_worker`)
/// is a key of the config: `[section] key` in a description names a key of that section.
#[test]
fn alert_texts_name_only_config_keys() {
    let text = std::fs::read_to_string(contrib().join("prometheus/reel-alerts.yml")).unwrap();
    let defaults = serde_json::to_value(reel_config::Config::default()).unwrap();
    let mut named = 0;
    for (i, _) in text.match_indices('[') {
        let rest = &text[i + 1..];
        let Some((section, after)) = rest.split_once("] ") else { continue };
        if !section.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') || section.is_empty() {
            continue;
        }
        let key: String =
            after.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        assert!(
            defaults[section].get(&key).is_some(),
            "contrib/prometheus/reel-alerts.yml names [{section}] {key}, which the config lacks"
        );
        named += 1;
    }
    assert!(named >= 1, "the descriptor alert names the key to lower");
}
