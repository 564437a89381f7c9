//! CMCD (CTA-5004) player telemetry: read from the four `CMCD-*` fields and the `CMCD=`
//! query parameter into the access log and the per-site metrics, a malformed value
//! logged and the request served, never in the cache key nor (unless `forward_cmcd`) the
//! origin request, and `nor` warming the next object once (`prefetch_next`).

use serde_json::Value;

use crate::common::*;

/// The fields hls.js sends in header mode (`cmcd: { useHeaders: true }`).
const HLS_JS_FIELDS: [(&str, &str); 4] = [
    ("CMCD-Request", "bl=21300,dl=18500,mtp=48100,nor=\"seg2.ts\",su"),
    ("CMCD-Object", "br=3200,d=4004,ot=v,tb=6000"),
    ("CMCD-Status", "bs,rtp=15000"),
    ("CMCD-Session", "cid=\"movie\",sf=h,sid=\"6e2fb550\",st=v,v=1"),
];

/// The access log's lines so far.
fn lines(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Waits until `path` of `host` is stored whole (a HEAD answered as a hit), so the next
/// request for it is a hit rather than joining its fill.
fn until_stored(c: &mut Conn, host: &str, path: &str) {
    eventually(&format!("{path} stored"), || {
        let r = c.request("HEAD", host, path, &[]).unwrap();
        r.cache_status().contains("hit").then_some(())
    });
}

/// The access-log line of the request for `target`, once written.
fn line_of(dir: &std::path::Path, target: &str) -> Value {
    eventually(&format!("the access-log line of {target}"), || {
        lines(dir).into_iter().find(|v| v["path"] == target)
    })
}

#[test]
fn fields_and_query_are_logged_typed_and_counted_per_site() {
    let origin = Origin::start("cmcd");
    origin.put("/v/seg1.ts", Object::ok("segment one").header("cache-control", "max-age=600"));
    origin.put("/v/bad.ts", Object::ok("served"));
    let dir = tempfile::tempdir().unwrap();
    let reel = Reel::start(&Conf::new(dir.path(), &origin));
    let mut c = Conn::open(reel.data).unwrap();

    let r = c.request("GET", "127.0.0.1", "/v/seg1.ts", &HLS_JS_FIELDS).unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "segment one"));
    until_stored(&mut c, "127.0.0.1", "/v/seg1.ts");
    let query = "br%3D800%2Cbl%3D500%2Cmtp%3D900%2Cot%3Dv%2Csid%3D%22q-1%22%2Ccom.example-id%3D7";
    let target = format!("/v/seg1.ts?CMCD={query}");
    let r = c.get("127.0.0.1", &target).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.cache_status().contains("hit"), "the query form is the same key: {r:?}");
    // A malformed value: served all the same, and logged as such.
    let r = c
        .request("GET", "127.0.0.1", "/v/bad.ts", &[("CMCD-Object", "br=\"fast\",d=4004")])
        .unwrap();
    assert_eq!(r.status, 200);

    // The origin saw one request, without CMCD (no forward_cmcd).
    assert_eq!(origin.hits("/v/seg1.ts"), 1);
    assert_eq!(origin.target("/v/seg1.ts").as_deref(), Some("/v/seg1.ts"));
    for (name, _) in HLS_JS_FIELDS {
        assert_eq!(origin.field("/v/seg1.ts", &name.to_ascii_lowercase()), None, "{name}");
    }

    let h = line_of(dir.path(), "/v/seg1.ts");
    let m = &h["cmcd"];
    assert_eq!(m["sid"], "6e2fb550", "{h}");
    assert_eq!(m["cid"], "movie");
    assert_eq!(m["br"], 3200, "integers are numbers: {h}");
    assert_eq!(m["bl"], 21300);
    assert_eq!(m["mtp"], 48100);
    assert_eq!(m["d"], 4004);
    assert_eq!(m["bs"], true);
    assert_eq!(m["su"], true);
    assert_eq!(m["ot"], "v");
    assert_eq!(m["sf"], "h");
    assert_eq!(m["st"], "v");
    assert_eq!(m["nor"], "seg2.ts");
    assert_eq!(m["v"], 1);
    assert!(m.get("malformed").is_none(), "{h}");
    let q = line_of(dir.path(), &target);
    assert_eq!(q["cache"], "hit");
    assert_eq!(q["cmcd"]["br"], 800, "{q}");
    assert_eq!(q["cmcd"]["sid"], "q-1");
    assert_eq!(q["cmcd"]["com.example-id"], "7", "an unknown key is kept as text");
    let bad = line_of(dir.path(), "/v/bad.ts");
    assert_eq!(bad["status"], 200);
    assert_eq!(bad["cmcd"]["malformed"], true, "{bad}");
    assert_eq!(bad["cmcd"]["d"], 4004, "what was well-formed is kept: {bad}");

    let t = reel.metrics();
    let site = "{site=\"127.0.0.1\"}";
    let v = |name: &str| metric(&t, name).unwrap_or_else(|| panic!("{name} in\n{t}"));
    assert_eq!(v(&format!("reel_cmcd_requests_total{site}")), 3.0);
    assert_eq!(v(&format!("reel_cmcd_buffer_starvation_total{site}")), 1.0);
    assert_eq!(v(&format!("reel_cmcd_startup_total{site}")), 1.0);
    assert_eq!(v(&format!("reel_cmcd_malformed_total{site}")), 1.0);
    let br = "reel_cmcd_requested_bitrate_kbps";
    assert_eq!(v(&format!("{br}_bucket{{site=\"127.0.0.1\",le=\"800\"}}")), 1.0);
    assert_eq!(v(&format!("{br}_bucket{{site=\"127.0.0.1\",le=\"4500\"}}")), 2.0);
    assert_eq!(v(&format!("{br}_sum{site}")), 4000.0);
    assert_eq!(v(&format!("reel_cmcd_measured_throughput_kbps_count{site}")), 2.0);
    assert!(!t.contains("6e2fb550"), "no session id in any label");
}

#[test]
fn the_combined_format_appends_the_chosen_keys() {
    let origin = Origin::start("cmcd");
    origin.put("/c/seg.ts", Object::ok("x"));
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.access_log =
        "flush_interval = \"100ms\"\nformat = \"combined\"\ncmcd_keys = [\"sid\", \"br\", \"bs\", \"mtp\"]\n"
            .into();
    // The Conf writes `format = "json"` before these lines: one format key only.
    let text = conf.render().replace("format = \"json\"\nflush_interval", "flush_interval");
    assert!(text.contains("format = \"combined\"") && !text.contains("format = \"json\"\nflush"));
    conf.raw = Some(text);
    let reel = Reel::start(&conf);
    let r = request(reel.data, "GET", "127.0.0.1", "/c/seg.ts", &HLS_JS_FIELDS);
    assert_eq!(r.status, 200);
    let line = eventually("the combined line", || {
        let text = std::fs::read_to_string(dir.path().join("access.log")).unwrap_or_default();
        text.lines().find(|l| l.contains("/c/seg.ts")).map(str::to_owned)
    });
    assert!(
        line.ends_with(" cmcd_sid=\"6e2fb550\" cmcd_br=3200 cmcd_bs=true cmcd_mtp=48100"),
        "{line}"
    );
}

#[test]
fn cmcd_never_keys_and_reaches_the_origin_only_where_forwarded() {
    let origin = Origin::start("cmcd");
    origin.put_default(Object::ok("segment").header("cache-control", "max-age=600"));
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra =
        "\n[[site]]\nhosts = [\"fwd.test\"]\norigin_group = \"o\"\nforward_cmcd = true\n".into();
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();

    for (i, sid) in ["a", "b", "c"].iter().enumerate() {
        let t = format!("/k/seg.ts?v=1&CMCD=bl%3D{i}00%2Csid%3D%22{sid}%22");
        let r = c.request("GET", "127.0.0.1", &t, &[("CMCD-Session", "sid=\"x\"")]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.cache_status().contains("hit"), i > 0, "{t}: {r:?}");
        until_stored(&mut c, "127.0.0.1", "/k/seg.ts?v=1");
    }
    assert_eq!(origin.hits("/k/seg.ts"), 1, "one key whatever the CMCD");
    assert_eq!(origin.target("/k/seg.ts").as_deref(), Some("/k/seg.ts?v=1"));
    assert_eq!(origin.field("/k/seg.ts", "cmcd-session"), None);

    // A site that forwards it: the origin gets the parameter and the fields as sent, and
    // the key still leaves it out.
    let t = "/f/seg.ts?CMCD=bl%3D100%2Csid%3D%22a%22&v=1";
    let r = c.request("GET", "fwd.test", t, &[("CMCD-Session", "sid=\"a\"")]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(origin.target("/f/seg.ts").as_deref(), Some(t));
    assert_eq!(origin.field("/f/seg.ts", "cmcd-session").as_deref(), Some("sid=\"a\""));
    until_stored(&mut c, "fwd.test", "/f/seg.ts?v=1");
    let r = c.get("fwd.test", "/f/seg.ts?v=1&CMCD=bl%3D900").unwrap();
    assert!(r.cache_status().contains("hit"), "{r:?}");
    assert_eq!(origin.hits("/f/seg.ts"), 1);
}

#[test]
fn nor_warms_the_next_segment_once_joined_by_its_viewer() {
    let origin = Origin::start("cmcd");
    let gate = Gate::default();
    let seg = |b: &str| Object::ok(b).header("cache-control", "max-age=600");
    origin.put("/n/seg1.ts", seg("one"));
    origin.put("/n/seg2.ts", seg("two").gated(&gate));
    for p in ["/n/seg3.ts", "/n/seg9.ts", "/elsewhere/seg.ts"] {
        origin.put(p, seg("never asked"));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra =
        "\n[[site]]\nhosts = [\"warm.test\"]\norigin_group = \"o\"\nprefetch_next = true\n".into();
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();
    let nor = |n: &str| format!("nor=\"{n}\"");

    // Refused: a nor on another host, and any nor on a site without prefetch_next.
    let off_site = nor("//elsewhere.test/n/seg9.ts");
    let r = c.request("GET", "warm.test", "/n/seg1.ts", &[("CMCD-Request", &off_site)]).unwrap();
    assert_eq!(r.status, 200);
    let r = c.request("GET", "127.0.0.1", "/n/seg1.ts", &[("cmcd-request", &nor("seg3.ts"))]);
    assert_eq!(r.unwrap().status, 200);

    // The query form, as hls.js sends it by default: seg2 is warmed, held at the origin.
    let q = "/n/seg1.ts?CMCD=bl%3D4000%2Cnor%3D%22seg2.ts%22%2Csid%3D%22s%22";
    assert_eq!(c.get("warm.test", q).unwrap().status, 200);
    eventually("the warm's origin request", || (origin.hits("/n/seg2.ts") == 1).then_some(()));
    // A viewer asks for it meanwhile: it waits on the warm's fetch rather than fetch again.
    let addr = reel.data;
    let viewer = std::thread::spawn(move || request(addr, "GET", "warm.test", "/n/seg2.ts", &[]));
    eventually("the viewer waiting on the warm", || {
        (metric(&reel.metrics(), "reel_coalesced_waiters") >= Some(1.0)).then_some(())
    });
    gate.open();
    let r = viewer.join().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "two"));
    until_stored(&mut c, "warm.test", "/n/seg2.ts");

    assert_eq!(origin.hits("/n/seg2.ts"), 1, "one origin fetch: the warm's");
    assert_eq!(origin.target("/n/seg2.ts").as_deref(), Some("/n/seg2.ts"), "no CMCD on it");
    assert_eq!(origin.hits("/n/seg9.ts") + origin.hits("/elsewhere/seg.ts"), 0, "off-site");
    assert_eq!(origin.hits("/n/seg3.ts"), 0, "prefetch_next is per site, off by default");
}
