//! Access rules of a site (`[site.access]`, `[site.limits]`, `[geo]`) on the real binary:
//! clients told apart by their loopback address (a client socket bound to 127.0.0.2,
//! 127.0.0.3, ... before it connects), countries from a MaxMind DB written for the test.
//! Every refusal is answered before the cache: the origin never sees a refused request.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use reel_test_support::mmdb;

/// Connects from `from` (another loopback address is another client).
fn from(from: &str, to: SocketAddr) -> Conn {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.connect(&to.into()).unwrap();
    Conn::from_stream(s.into()).unwrap()
}

/// `GET path` from `client` on a new connection.
fn get_from(client: &str, to: SocketAddr, path: &str) -> Resp {
    from(client, to).get("127.0.0.1", path).unwrap()
}

fn denied(reel: &Reel, reason: &str) -> f64 {
    metric(&reel.metrics(), &format!("reel_denied_total{{reason=\"{reason}\"}}")).unwrap_or(0.0)
}

/// The access log's lines for `path`, once `n` are there.
fn log_lines(dir: &Path, path: &str, n: usize) -> Vec<serde_json::Value> {
    eventually("the access log lines", || {
        let text = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["path"] == path)
            .collect();
        (lines.len() >= n).then_some(lines)
    })
}

#[test]
fn address_rules_refuse_before_the_cache_and_the_origin() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put_default(Object::ok(vec![5u8; 1024]));
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = "[site.access]\nallow = [\"127.0.0.0/29\"]\ndeny = [\"127.0.0.4\"]\n".into();
    let reel = Reel::start(&conf);
    let addr = reel.data;

    let ok = get_from("127.0.0.2", addr, "/served.ts");
    assert_eq!(ok.status, 200, "{}", ok.text());
    let r = get_from("127.0.0.4", addr, "/denied.ts");
    assert_eq!((r.status, r.text().as_str()), (403, "Forbidden"));
    let r = get_from("127.0.0.9", addr, "/outside.ts");
    assert_eq!(r.status, 403, "outside the allow list");
    // A cached object is refused too: the rules come before the lookup.
    let r = get_from("127.0.0.4", addr, "/served.ts");
    assert_eq!(r.status, 403);

    assert_eq!((o.hits("/denied.ts"), o.hits("/outside.ts"), o.hits("/served.ts")), (0, 0, 1));
    assert_eq!(denied(&reel, "ip_denied"), 3.0);
    let lines = log_lines(dir.path(), "/denied.ts", 1);
    assert_eq!(
        (lines[0]["status"].as_u64(), lines[0]["denied"].as_str()),
        (Some(403), Some("ip_denied"))
    );
    assert_eq!(lines[0]["client"], "127.0.0.4");
    let served = log_lines(dir.path(), "/served.ts", 2);
    assert!(served.iter().any(|l| l["status"] == 200 && l.get("denied").is_none()), "{served:?}");
}

#[test]
fn countries_are_refused_by_address_and_follow_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("countries.mmdb");
    if mmdb::write_country_db(&db, &[("127.0.0.2/32", "DE"), ("127.0.0.3/32", "US")]).is_none() {
        return;
    }
    let o = Origin::start("o");
    o.put_default(Object::ok(vec![5u8; 1024]));
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = "[site.access]\ndeny_countries = [\"DE\"]\n".into();
    conf.extra = format!("\n[geo]\ndatabase = \"{}\"\n", db.display());
    let mut reel = Reel::start(&conf);
    let addr = reel.data;

    assert_eq!(get_from("127.0.0.2", addr, "/de.ts").status, 403, "DE is denied");
    assert_eq!(get_from("127.0.0.3", addr, "/us.ts").status, 200, "US is served");
    assert_eq!(get_from("127.0.0.4", addr, "/none.ts").status, 200, "no country: served");
    assert_eq!(o.hits("/de.ts"), 0);
    assert_eq!(denied(&reel, "country_denied"), 1.0);
    assert_eq!(log_lines(dir.path(), "/de.ts", 1)[0]["denied"], "country_denied");

    // 451 by reload.
    conf.site = "[site.access]\ndeny_countries = [\"DE\"]\ngeo_status = 451\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    let r = get_from("127.0.0.2", addr, "/de.ts");
    assert_eq!((r.status, r.text().as_str()), (451, "Unavailable For Legal Reasons"));

    // The file replaced while running: the new mapping, without a reload.
    mmdb::write_country_db(&db, &[("127.0.0.2/32", "US"), ("127.0.0.3/32", "DE")]).unwrap();
    eventually("the new database in use", || {
        (get_from("127.0.0.3", addr, "/x.ts").status == 451).then_some(())
    });
    assert_eq!(get_from("127.0.0.2", addr, "/de.ts").status, 200);
    reel.logs.wait_for("the swap logged", |v| message(v) == "geo database reloaded");

    // A broken file: logged, and the database in use stays.
    let tmp = dir.path().join("broken");
    std::fs::write(&tmp, b"no database here").unwrap();
    std::fs::rename(&tmp, &db).unwrap();
    reel.logs.wait_for("the broken file logged", |v| {
        message(v) == "geo database not reloaded: keeping the one in use"
    });
    assert_eq!(get_from("127.0.0.3", addr, "/x.ts").status, 451);
    assert_eq!(get_from("127.0.0.2", addr, "/de.ts").status, 200);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_geo_reloads_total{result=\"swapped\"}"), Some(1.0));
    assert!(metric(&m, "reel_geo_reloads_total{result=\"kept\"}").is_some_and(|k| k >= 1.0));

    // An allow list: only its countries; an address of no country is refused.
    mmdb::write_country_db(&db, &[("127.0.0.2/32", "DE"), ("127.0.0.3/32", "US")]).unwrap();
    conf.site = "[site.access]\nallow_countries = [\"US\", \"FR\"]\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(get_from("127.0.0.3", addr, "/us.ts").status, 200);
    assert_eq!(get_from("127.0.0.2", addr, "/de2.ts").status, 403);
    assert_eq!(get_from("127.0.0.4", addr, "/none2.ts").status, 403);
    assert_eq!((o.hits("/de2.ts"), o.hits("/none2.ts")), (0, 0));
}

#[test]
fn a_burst_from_one_client_gets_429_while_another_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put_default(Object::ok(vec![5u8; 1024]));
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = "[site.limits]\nrate = 0.2\nburst = 3\n".into();
    let reel = Reel::start(&conf);
    let addr = reel.data;

    let mut a = from("127.0.0.2", addr);
    let mut b = from("127.0.0.3", addr);
    let mut statuses = Vec::new();
    for i in 0..8 {
        let r = a.get("127.0.0.1", &format!("/a{i}.ts")).unwrap();
        if r.status == 429 {
            let secs: u64 = r.header("retry-after").expect("Retry-After").parse().unwrap();
            assert!((1..=5).contains(&secs), "Retry-After {secs}");
        }
        statuses.push(r.status);
        // The other client is served all along, on its own budget.
        if i < 3 {
            assert_eq!(b.get("127.0.0.1", &format!("/b{i}.ts")).unwrap().status, 200);
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429]);
    for i in 3..8 {
        assert_eq!(o.hits(&format!("/a{i}.ts")), 0, "a refused request reached the origin");
    }
    assert_eq!(denied(&reel, "rate_limited"), 5.0);
    assert_eq!(log_lines(dir.path(), "/a3.ts", 1)[0]["denied"], "rate_limited");
    // A connection from another port of the same address is the same client.
    assert_eq!(get_from("127.0.0.2", addr, "/a9.ts").status, 429);
    assert_eq!(metric(&reel.metrics(), "reel_rate_limit_clients"), Some(2.0));
}

#[test]
fn one_client_on_several_workers_has_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put_default(Object::ok(vec![5u8; 1024]));
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = "[site.limits]\nrate = 0.01\nburst = 4\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "2")]);
    let addr = reel.data;
    assert_eq!(reel.workers(), 2);

    // Connections of one address, until both workers hold some (SO_REUSEPORT spreads them
    // by port).
    let mut conns: Vec<Conn> = Vec::new();
    let open_on = |w: usize| {
        metric(&reel.metrics(), &format!("reel_connections_open{{worker=\"{w}\"}}")).unwrap_or(0.0)
    };
    while conns.len() < 64 {
        conns.push(from("127.0.0.2", addr));
        if conns.len() >= 8 {
            let c = conns.len() as f64;
            let (w0, w1) = eventually("the connections counted", || {
                let (w0, w1) = (open_on(0), open_on(1));
                (w0 + w1 >= c).then_some((w0, w1))
            });
            if w0 >= 1.0 && w1 >= 1.0 {
                break;
            }
        }
    }
    assert!(open_on(0) >= 1.0 && open_on(1) >= 1.0, "one client's connections on both workers");
    let mut ok = 0;
    for (i, c) in conns.iter_mut().enumerate() {
        ok += usize::from(c.get("127.0.0.1", &format!("/c{i}.ts")).unwrap().status == 200);
    }
    assert_eq!(ok, 4, "the burst of one budget, whatever worker answered");
    assert_eq!(denied(&reel, "rate_limited"), (conns.len() - 4) as f64);
    let fetched: u64 = (0..conns.len()).map(|i| o.hits(&format!("/c{i}.ts"))).sum();
    assert_eq!(fetched, 4, "only admitted requests reach the origin");
}

#[test]
fn check_refuses_bad_rules_at_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    let check = |conf: &Conf| {
        conf.write();
        let out = Command::new(BIN).arg("check").arg("--config").arg(conf.path()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let file = conf.path().display().to_string();
    let at = |err: &str, key: &str, says: &str| {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("{file}:")) && l.contains(key) && l.contains(says)),
            "{key}: {says}\n{err}"
        );
    };
    conf.site = "[site.access]\ndeny_countries = [\"de\"]\ngeo_status = 404\n\
                 [site.limits]\nrate = -1\nmax_clients = 1\n"
        .into();
    let (code, err) = check(&conf);
    assert_eq!(code, Some(64), "{err}");
    at(&err, "site[0].access.deny_countries[0]", "two uppercase letters");
    at(&err, "site[0].access.deny_countries", "[geo] database");
    at(&err, "site[0].access.geo_status", "403 or 451");
    at(&err, "site[0].limits.rate", "0 (no limit) or more");
    at(&err, "site[0].limits.max_clients", "between 64");

    // Checks the binary makes: CIDRs by the server's parser, the database read.
    let not_db = dir.path().join("not.mmdb");
    std::fs::write(&not_db, b"nothing").unwrap();
    conf.site =
        "[site.access]\nallow = [\"10.0.0.0/8\", \"10.0.0.0/33\"]\ndeny = [\"10.1.2.3/8\"]\n"
            .into();
    conf.extra = format!("\n[geo]\ndatabase = \"{}\"\n", not_db.display());
    let (code, err) = check(&conf);
    assert_eq!(code, Some(64), "{err}");
    at(&err, "site[0].access.allow[1]", "prefix length");
    at(&err, "site[0].access.deny[0]", "host bits");
    at(&err, "geo.database", "not a MaxMind DB");
}
