//! `GET /status/history` (the one-second samples behind the dashboard) and `GET /dashboard`
//! (the page itself; the browser check in `benches/dashboard-check.sh` runs it).

use std::process::Command;

use serde_json::Value;

use crate::common::*;

fn history(reel: &Reel, since: u64) -> Value {
    let r = reel.admin_req("GET", &format!("/status/history?since={since}"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    r.json()
}

fn samples(v: &Value) -> &Vec<Value> {
    v["samples"].as_array().expect("samples")
}

/// The total over the samples of a per-second figure: each rate times its interval (a
/// late sampler makes an interval longer than a second).
fn sum(v: &Value, f: impl Fn(&Value) -> f64) -> f64 {
    let total: f64 =
        samples(v).iter().map(|s| f(s) * s["span_ms"].as_f64().unwrap_or(0.0) / 1000.0).sum();
    // Rates are rounded to 0.1/s: a count comes back within a few hundredths of itself.
    total.round()
}

#[test]
fn history_has_hits_misses_bytes_and_origin_rates_and_filters_by_since() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    for i in 0..4 {
        o.put(&format!("/h/{i}.ts"), Object::ok("x".repeat(10_000)));
    }
    // Loopback as the data interface: its bytes are charted next to latency.
    let mut conf = Conf::new(dir.path(), &o);
    conf.raw = Some(conf.render().replace("nic = []", "nic = [\"lo\"]"));
    let reel = Reel::start(&conf);
    for i in 0..4 {
        let p = format!("/h/{i}.ts");
        assert_eq!(request(reel.data, "GET", "127.0.0.1", &p, &[]).status, 200);
        eventually("a hit", || {
            let r = request(reel.data, "GET", "127.0.0.1", &p, &[]);
            (r.cache_status() == "reel; hit").then_some(())
        });
    }

    // The sampler turns the counters into per-second rates once a second.
    let v = eventually("samples with the hits and misses", || {
        let v = history(&reel, 0);
        let hits = sum(&v, |s| s["by_result"]["hit"].as_f64().unwrap_or(0.0));
        let misses = sum(&v, |s| s["by_result"]["miss"].as_f64().unwrap_or(0.0));
        (hits >= 4.0 && misses >= 4.0).then_some(v)
    });
    assert!(sum(&v, |s| s["bytes_out"].as_f64().unwrap()) >= 80_000.0, "{v}");
    assert!(sum(&v, |s| s["by_protocol"]["h1"].as_f64().unwrap()) >= 8.0, "{v}");
    assert!(samples(&v).iter().any(|s| s["hit_ratio"].as_f64().unwrap() > 0.0), "{v}");
    assert!(samples(&v).iter().any(|s| s["hit_ttfb_p99_ms"].as_f64().is_some()), "{v}");
    assert!(samples(&v).iter().any(|s| s["miss_ttfb_p50_ms"].as_f64().is_some()), "{v}");
    let origin_reqs = sum(&v, |s| {
        s["origins"].as_array().unwrap().iter().map(|h| h["requests"].as_f64().unwrap()).sum()
    });
    assert!(origin_reqs >= 4.0, "{v}");
    let last = samples(&v).last().unwrap();
    assert_eq!(last["origins"][0]["healthy"], true, "{last}");
    assert!(last["store_objects"].as_u64().unwrap() >= 4, "{last}");
    assert!(last["store_bytes"].as_u64().unwrap() >= 40_000, "{last}");
    assert_eq!(last["disks"][0]["state"], "online", "{last}");
    assert_eq!(last["worker_cpu"].as_array().unwrap().len(), reel.workers(), "{last}");
    assert!(last["connections_active"].as_u64().is_some(), "{last}");
    // The data interface (loopback) carries at least what reel sends.
    eventually("hits counted on the data interface", || {
        assert_eq!(request(reel.data, "GET", "127.0.0.1", "/h/0.ts", &[]).status, 200);
        let v = history(&reel, 0);
        (sum(&v, |s| s["net_tx_bytes"].as_f64().unwrap_or(0.0)) >= 10_000.0).then_some(())
    });
    // A process in a cgroup whose cpu.stat can be read gets throttling figures (0 here).
    if std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| !c.trim().is_empty())
        && (std::path::Path::new("/sys/fs/cgroup/cpu/cpu.stat").exists()
            || std::path::Path::new("/sys/fs/cgroup/cpu.stat").exists())
    {
        assert!(last["cpu_throttled_pct"].as_f64().is_some(), "{last}");
    }

    // The header the page shows at the top.
    assert_eq!(v["capacity"], 900);
    assert_eq!(v["interval_ms"], 1000);
    assert_eq!(v["header"]["health"], "ok", "{v}");
    assert_eq!(v["header"]["config"]["generation"], 1);
    assert_eq!(v["header"]["draining"], false);
    assert!(v["header"]["certificate"].is_null(), "no TLS listener: {v}");

    // Samples are in time order, at most the capacity, and `since` returns only newer ones.
    let ts: Vec<u64> = samples(&v).iter().map(|s| s["t"].as_u64().unwrap()).collect();
    assert!(ts.len() <= 900);
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    let newest = *ts.last().unwrap();
    let first = ts[0];
    let after_first = history(&reel, first);
    assert!(samples(&after_first).iter().all(|s| s["t"].as_u64().unwrap() > first));
    assert_eq!(samples(&after_first).len(), samples(&history(&reel, 0)).len() - 1);
    let fresh = eventually("a sample after the newest", || {
        let v = history(&reel, newest);
        (!samples(&v).is_empty()).then_some(v)
    });
    assert!(samples(&fresh).iter().all(|s| s["t"].as_u64().unwrap() > newest), "{fresh}");
    assert!(samples(&history(&reel, u64::MAX)).is_empty());

    // A drain shows in the header at once.
    assert_eq!(reel.admin_req("POST", "/admin/drain").status, 200);
    let v = history(&reel, u64::MAX);
    assert_eq!(v["header"]["draining"], true, "{v}");
    assert_eq!(v["header"]["health"], "draining", "{v}");
}

/// The "Store disks" table: each disk's row carries that disk's own bytes, capacity and
/// objects (as `/status` reports them per disk), not the whole store's.
#[test]
fn each_disk_row_has_its_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let o = Origin::start("o");
    const N: usize = 24;
    for i in 0..N {
        o.put(&format!("/d/{i}.ts"), Object::ok("y".repeat(20_000)));
    }
    let mut conf = Conf::new(dir.path(), &o);
    conf.raw = Some(conf.with_disks(&[&a, &b]));
    let reel = Reel::start(&conf);
    for i in 0..N {
        assert_eq!(request(reel.data, "GET", "127.0.0.1", &format!("/d/{i}.ts"), &[]).status, 200);
    }
    let st = eventually("all objects stored", || {
        let st = reel.status();
        (st["store"]["objects"].as_u64() == Some(N as u64)).then_some(st)
    });
    let per_disk = |p: &std::path::Path, st: &Value| {
        let d = st["store"]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["path"] == p.display().to_string())
            .cloned()
            .expect("the disk in /status");
        d["objects"].as_u64().unwrap()
    };
    let (on_a, on_b) = (per_disk(&a, &st), per_disk(&b, &st));
    assert!(on_a > 0 && on_b > 0, "spread over both disks: {}", st["store"]);
    let sample = eventually("a sample with every object", || {
        let v = reel.admin_req("GET", "/status/history?since=0").json();
        let last = v["samples"].as_array()?.last()?.clone();
        (last["store_objects"].as_u64() == Some(N as u64)).then_some(last)
    });
    let rows = sample["disks"].as_array().expect("disks");
    assert_eq!(rows.len(), 2, "{sample}");
    let row = |p: &std::path::Path| {
        rows.iter().find(|d| d["path"] == p.display().to_string()).expect("a row").clone()
    };
    for (p, objects) in [(&a, on_a), (&b, on_b)] {
        let r = row(p);
        assert_eq!(r["objects"].as_u64(), Some(objects), "{r}");
        assert!(r["bytes_used"].as_u64().unwrap() >= objects * 20_000, "{r}");
        assert!(r["bytes_used"].as_u64() < sample["store_bytes"].as_u64(), "{r} vs {sample}");
        assert!(r["capacity"].as_u64() < sample["store_capacity"].as_u64(), "{r} vs {sample}");
    }
    let total = |f: &str| rows.iter().map(|d| d[f].as_u64().unwrap()).sum::<u64>();
    assert_eq!(total("objects"), N as u64);
    assert_eq!(Some(total("bytes_used")), sample["store_bytes"].as_u64());
    assert_eq!(Some(total("capacity")), sample["store_capacity"].as_u64());
    // The page fills the rows from each disk's own figures.
    let page = reel.admin_req("GET", "/dashboard").text();
    assert!(page.contains("fmtNum(d.objects)") && page.contains("fmtBytes(d.bytes_used)"));
}

#[test]
fn dashboard_is_one_page_without_external_assets() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let r = reel.admin_req("GET", "/dashboard");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let csp = r.header("content-security-policy").expect("a CSP");
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
    let page = r.text();
    assert!(page.contains("/status/history"), "the page reads the history");
    // The page's own check is an attribute the browser check reads, not a line on the page.
    assert!(page.contains("setAttribute(\"data-selfcheck\""), "the browser check reads it");
    assert!(
        !page.contains("id=\"selfcheck\"") && !page.contains("\"selfcheck: \""),
        "no debug line"
    );
    // The segments' and the playlists' hit ratios, apart.
    assert!(page.contains("s.hit_ratio_segments") && page.contains("s.hit_ratio_playlists"));
    for bad in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!page.contains(bad), "the page must load nothing else: found {bad:?}");
    }

    // The same rules as every admin endpoint.
    let evil = request(reel.admin, "GET", "evil.example", "/dashboard", &[]);
    assert_eq!(evil.status, 421);
    assert_eq!(reel.admin_req("POST", "/dashboard").status, 405);
    assert_eq!(reel.admin_req("POST", "/status/history").status, 405);
    for bad in ["abc", "-1", "1.5", ""] {
        let r = reel.admin_req("GET", &format!("/status/history?since={bad}"));
        assert_eq!(r.status, 400, "since={bad}: {}", r.text());
        assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("since")));
    }
}

/// With a token, a browser opens the page: its `401` asks for Basic authentication (the
/// token is the password, any user), and the page's own requests carry the same
/// credentials; the API's `401`s keep asking for a bearer token.
#[test]
fn the_dashboard_takes_the_token_by_basic_authentication() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &o);
    conf.admin = "token = \"tok:en\"\n".into();
    let reel = Reel::start(&conf);
    let basic = |user_pass: &str| {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_pass))
    };
    let at = |path: &str, auth: Option<&str>| {
        let h: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
        request(reel.admin, "GET", "127.0.0.1", path, &h)
    };
    let r = at("/dashboard", None);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Basic realm=\"reel\""));
    let r = at("/status/history", None);
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer")));

    for path in ["/dashboard", "/status/history", "/status", "/metrics", "/status/config"] {
        for user in ["admin", "", "any one"] {
            let r = at(path, Some(&basic(&format!("{user}:tok:en"))));
            assert_eq!(r.status, 200, "{path} as {user:?}: {}", r.text());
        }
        assert_eq!(at(path, Some("Bearer tok:en")).status, 200, "{path}");
        for bad in [basic("admin:tok"), basic("tok:en"), basic("admin:tok:en2"), "Basic".into()] {
            assert_eq!(at(path, Some(&bad)).status, 401, "{path} with {bad}");
        }
    }
    // A state-changing request still needs its header, Basic or not.
    let auth = basic("admin:tok:en");
    let r = request(reel.admin, "POST", "127.0.0.1", "/admin/drain", &[("authorization", &auth)]);
    assert_eq!(r.status, 403, "{}", r.text());

    // curl, as a person would use it.
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED the_dashboard_takes_the_token_by_basic_authentication (curl part): no curl"
        );
        return;
    }
    let url = format!("http://{}/dashboard", reel.admin);
    let code = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .arg(&url)
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(code(&["-u", "me:tok:en"]), "200");
    assert_eq!(code(&["-u", "me:wrong"]), "401");
}

/// A disk out of service has one name, `offline`, in `/status` and in the history the
/// dashboard draws (which lists every disk).
#[test]
fn a_disk_out_of_service_is_offline_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.raw = Some(conf.with_disks(&[&a, &b]));
    let reel = Reel::start(&conf);
    let target = format!("/admin/store/disk?path={}&online=0", b.display());
    let r = reel.admin_req("POST", &target);
    assert_eq!(r.status, 200, "{}", r.text());
    let state_in = |disks: &Value, p: &std::path::Path| {
        disks.as_array().and_then(|d| {
            d.iter().find(|d| d["path"] == p.display().to_string()).map(|d| d["state"].clone())
        })
    };
    assert_eq!(state_in(&reel.status()["store"]["disks"], &b), Some("offline".into()));
    let sample = eventually("a sample with the disk out", || {
        let v = reel.admin_req("GET", "/status/history?since=0").json();
        let last = v["samples"].as_array()?.last()?.clone();
        (state_in(&last["disks"], &b) == Some("offline".into())).then_some(last)
    });
    assert_eq!(sample["disks"].as_array().map(Vec::len), Some(2), "every disk: {sample}");
    assert_eq!(state_in(&sample["disks"], &a), Some("online".into()), "{sample}");
}

/// Live playlists and segments are counted apart: the page draws the hit ratio of each.
#[test]
fn playlists_and_segments_have_their_own_hit_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/live/seg.ts", Object::ok("s".repeat(1000)));
    // A live playlist the cache may not keep: every request goes to the origin.
    o.put("/live/index.m3u8", Object::ok("#EXTM3U\n").header("cache-control", "no-store"));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    for _ in 0..5 {
        assert_eq!(get(reel.data, "/live/seg.ts").status, 200);
        assert_eq!(get(reel.data, "/live/index.m3u8").status, 200);
    }
    let v = eventually("samples with all ten requests", || {
        let v = reel.admin_req("GET", "/status/history?since=0").json();
        (sum(&v, |s| s["requests"].as_f64().unwrap_or(0.0)) >= 10.0).then_some(v)
    });
    assert_eq!(sum(&v, |s| s["playlist_requests"].as_f64().unwrap_or(0.0)), 5.0, "{v}");
    let ratios =
        |f: &str| -> Vec<f64> { samples(&v).iter().filter_map(|s| s[f].as_f64()).collect() };
    // Segments: one miss, then hits. Playlists: never from the cache.
    assert!(ratios("hit_ratio_segments").iter().any(|r| *r > 0.5), "{v}");
    assert!(!ratios("hit_ratio_playlists").is_empty(), "{v}");
    assert!(ratios("hit_ratio_playlists").iter().all(|r| *r == 0.0), "{v}");
    let m = reel.metrics();
    let lists: f64 = m
        .lines()
        .filter(|l| l.starts_with("reel_playlist_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(lists, 5.0, "{m}");
}
