//! `/healthz` for load balancers: drain and resume through the admin API, and the
//! overload hysteresis on open connections (thresholds changed by a reload).

use crate::common::*;

fn healthz_on(c: &mut Conn) -> (u16, serde_json::Value) {
    let r = c.get("127.0.0.1", "/healthz").expect("healthz");
    let j = r.json();
    (r.status, j)
}

#[test]
fn drain_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let reel = Reel::start(&Conf::new(dir.path(), &a));
    assert_eq!(get(reel.data, "/healthz").status, 200);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_draining"), Some(0.0));

    let r = reel.admin_req("POST", "/admin/drain");
    assert_eq!(r.status, 200, "{}", r.text());
    let h = get(reel.data, "/healthz");
    assert_eq!(h.status, 503);
    assert_eq!(h.json()["status"], "draining");
    assert_eq!(metric(&reel.metrics(), "reel_draining"), Some(1.0));
    assert_eq!(reel.status()["health"]["status"], "draining");
    // Draining only changes the health answer: requests are still served.
    assert_eq!(get(reel.data, "/x.ts").status, 404);

    let r = reel.admin_req("POST", "/admin/resume");
    assert_eq!(r.status, 200);
    let h = get(reel.data, "/healthz");
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["status"], "ok");
    assert_eq!(metric(&reel.metrics(), "reel_draining"), Some(0.0));

    // Wrong methods on admin endpoints.
    assert_eq!(reel.admin_req("GET", "/admin/drain").status, 405);
    assert_eq!(reel.admin_req("GET", "/nope").status, 404);
}

#[test]
fn overload_on_connections_with_hysteresis() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    let reel_conf = conf.clone();
    let mut reel = Reel::start(&reel_conf);

    // Low thresholds arrive by reload; CPU and latency limits are out of reach.
    conf.health = "max_connections = 5\nresume_connections = 2\nmax_cpu_percent = 100\n\
                   resume_cpu_percent = 99\nmax_hit_p99 = \"1h\"\nresume_hit_p99 = \"30m\"\n"
        .into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);

    // Probes go over the first held connection, so they add no connection of their own.
    let mut conns: Vec<Conn> = (0..6).map(|_| Conn::open(reel.data).unwrap()).collect();
    for c in conns.iter_mut() {
        // Make sure every connection was accepted by a worker.
        let s = c.get("127.0.0.1", "/healthz").unwrap().status;
        assert!(s == 200 || s == 503, "{s}");
    }
    let j = eventually("503 with six connections", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (s == 503).then_some(j)
    });
    assert_eq!(j["status"], "overloaded");
    assert!(j["reasons"][0].as_str().unwrap_or_default().contains("connections"), "{j}");

    // Three connections: under max but not under resume, still overloaded.
    conns.truncate(3);
    let (s, j) = eventually("the sampler to see three connections", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (j["load"]["connections"] == 3).then_some((s, j))
    });
    assert_eq!(s, 503, "{j}");
    assert_eq!(j["status"], "overloaded");

    // One connection: under resume, healthy again.
    conns.truncate(1);
    let j = eventually("200 with one connection", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (s == 200).then_some(j)
    });
    assert_eq!(j["status"], "ok");
    assert_eq!(j["load"]["connections"], 1);
}
