//! Per-site metrics on `/metrics`: requests by status class, hits and bytes under a
//! `site` label (the site's `name`, or its first host; `_none` for what no site answered)
//! that add up to the node's totals; and a reload that adds a site, moves another and
//! renames it keeps every remaining name's counters monotonic.

use std::collections::BTreeMap;
use std::io::Write;

use crate::common::*;

/// A second site on the test's origin group, named by its host.
const B_SITE: &str = "\n[[site]]\nhosts = [\"b.test\"]\norigin_group = \"o\"\n";

/// The samples of `family`: labels and value.
fn series(text: &str, family: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = l.strip_prefix(family) else { continue };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ").expect("labels"),
            None => ("", rest.trim_start()),
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let labels = labels
            .split("\",")
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once("=\"").expect("label");
                (k.to_string(), v.trim_end_matches('"').to_string())
            })
            .collect();
        out.push((labels, value.trim().parse().expect("value")));
    }
    out
}

/// The sum of `family`'s samples whose labels include `want`.
fn total(text: &str, family: &str, want: &[(&str, &str)]) -> f64 {
    series(text, family)
        .iter()
        .filter(|(l, _)| want.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
        .map(|(_, v)| v)
        .sum()
}

/// Requests counted per (site, status class) as the test makes them.
#[derive(Default)]
struct Expected(BTreeMap<(String, String), f64>);

impl Expected {
    fn get(&mut self, c: &mut Conn, site: &str, host: &str, path: &str) -> Resp {
        let r = c.get(host, path).unwrap();
        self.count(site, r.status);
        r
    }

    fn count(&mut self, site: &str, status: u16) {
        *self.0.entry((site.into(), format!("{}xx", status / 100))).or_default() += 1.0;
    }

    /// `/metrics` once it shows every request counted so far.
    fn settled(&self, reel: &Reel) -> String {
        eventually("the per-site counters to catch up", || {
            let m = reel.metrics();
            self.0
                .iter()
                .all(|((site, class), n)| {
                    total(&m, "reel_site_requests_total", &[("site", site), ("status", class)])
                        == *n
                })
                .then_some(m)
        })
    }
}

/// Per-site requests, hits and bytes add up to the node's totals.
fn assert_adds_up(m: &str) {
    let requests = total(m, "reel_requests_total", &[]);
    assert_eq!(total(m, "reel_site_requests_total", &[]), requests, "{m}");
    let hits = total(m, "reel_requests_total", &[("cache", "hit")])
        + total(m, "reel_requests_total", &[("cache", "stale")]);
    assert_eq!(total(m, "reel_site_hits_total", &[]), hits, "{m}");
    let bytes = total(m, "reel_bytes_out_total", &[]);
    assert_eq!(total(m, "reel_site_bytes_out_total", &[]), bytes, "{m}");
    assert!(bytes > 0.0);
}

/// `promtool check metrics` on the per-site families, where promtool is installed.
fn promtool_check(m: &str) {
    let Ok(mut child) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        println!("SKIPPED promtool check of the per-site families: no promtool");
        return;
    };
    let ours: String =
        m.lines().filter(|l| l.contains("reel_site_")).flat_map(|l| [l, "\n"]).collect();
    child.stdin.take().expect("stdin").write_all(ours.as_bytes()).expect("to promtool");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{ours}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn per_site_counts_add_up_and_survive_a_reload_that_renames() {
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(vec![b'a'; 1024]));
    origin.put("/bad.ts", Object { status: 502, ..Object::ok("bad gateway") });
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.site = "name = \"tenant-a\"\n".into();
    conf.extra = B_SITE.into();
    let mut reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();
    let mut want = Expected::default();

    for (site, host) in [("tenant-a", "127.0.0.1"), ("b.test", "b.test")] {
        assert!(want.get(&mut c, site, host, "/a.ts").cache_status().contains("miss"));
        eventually("a hit", || {
            want.get(&mut c, site, host, "/a.ts").cache_status().contains("hit").then_some(())
        });
        assert_eq!(want.get(&mut c, site, host, "/missing.ts").status, 404);
    }
    assert_eq!(want.get(&mut c, "tenant-a", "127.0.0.1", "/bad.ts").status, 502);
    // What no site answers: an unknown Host, the health probe, a head the codec refuses.
    assert_eq!(want.get(&mut c, "_none", "nobody.invalid", "/a.ts").status, 421);
    assert_eq!(want.get(&mut c, "_none", "127.0.0.1", "/healthz").status, 200);
    let mut raw = Conn::open(reel.data).unwrap();
    raw.w.write_all(b"GET /a.ts HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n").unwrap();
    let refused = raw.read_response().unwrap();
    assert_eq!(refused.status, 400);
    want.count("_none", 400);

    let m = want.settled(&reel);
    assert_adds_up(&m);
    assert!(total(&m, "reel_site_hits_total", &[("site", "tenant-a")]) >= 1.0, "{m}");
    assert!(total(&m, "reel_site_hits_total", &[("site", "b.test")]) >= 1.0, "{m}");
    assert_eq!(
        total(&m, "reel_site_requests_total", &[("site", "tenant-a"), ("status", "5xx")]),
        1.0
    );
    assert_eq!(
        total(&m, "reel_site_requests_total", &[("site", "b.test"), ("status", "5xx")]),
        0.0
    );
    let a_bytes = total(&m, "reel_site_bytes_out_total", &[("site", "tenant-a")]);
    assert!(a_bytes >= 2048.0, "two bodies of 1 KiB at least: {a_bytes}");
    promtool_check(&m);

    // A new site before b.test (so b.test's place in the list moves) and b.test renamed.
    conf.extra = format!(
        "\n[[site]]\nhosts = [\"c.test\"]\norigin_group = \"o\"\n{}name = \"bee\"\n",
        B_SITE
    );
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    let b_before = total(&m, "reel_site_requests_total", &[("site", "b.test")]);
    want.get(&mut c, "tenant-a", "127.0.0.1", "/a.ts");
    want.get(&mut c, "bee", "b.test", "/a.ts");
    want.get(&mut c, "c.test", "c.test", "/a.ts");
    let after = want.settled(&reel);
    assert_adds_up(&after);
    // Every series of the first scrape is there still, never lower.
    for family in ["reel_site_requests_total", "reel_site_hits_total", "reel_site_bytes_out_total"]
    {
        for (labels, v) in series(&m, family) {
            let now = series(&after, family)
                .into_iter()
                .find(|(l, _)| *l == labels)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("{family}{labels:?} went away: {after}"));
            assert!(now >= v, "{family}{labels:?} went down from {v} to {now}");
        }
    }
    assert_eq!(total(&after, "reel_site_requests_total", &[("site", "b.test")]), b_before);
    assert_eq!(total(&after, "reel_site_requests_total", &[("site", "bee")]), 1.0);
    assert_eq!(total(&after, "reel_site_requests_total", &[("site", "c.test")]), 1.0);
    assert!(total(&after, "reel_site_bytes_out_total", &[("site", "tenant-a")]) > a_bytes);
    promtool_check(&after);
}

#[test]
fn check_refuses_bad_and_clashing_site_names() {
    let origin = Origin::start("o");
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    for (name, why) in [
        ("_none", "kept for reel's own labels"),
        ("a b", "letters, digits"),
        ("b.test", "already site[0]'s"),
    ] {
        conf.site = format!("name = \"{name}\"\n");
        conf.extra = B_SITE.into();
        conf.write();
        let out = std::process::Command::new(BIN)
            .args(["check", "--config"])
            .arg(conf.path())
            .output()
            .expect("reel check");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(err.contains("name") && err.contains(why), "{name}: {err}");
    }
    conf.site = "[site.cmsd]\nenabled = true\nid = \"caf\u{e9}\"\n".into();
    conf.write();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(conf.path())
        .output()
        .expect("reel check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("site[0].cmsd.id"), "{err}");
    assert!(err.contains("printable ASCII"), "{err}");
}
