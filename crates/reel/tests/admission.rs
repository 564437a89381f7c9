//! `[store] admission`: with `second-hit` an object is stored the second time its URL misses;
//! the first fetch is served whole (ranges too) but writes nothing into the store. With
//! `always` (the default) the first fetch is stored. Stored objects that go stale are
//! revalidated and stored again whatever the policy, and the policy changes on a reload.
//! Concurrent first requests sharing one fetch: `workers::coalescing`.

use crate::common::*;

const SECOND_HIT: &str = "admission = \"second-hit\"\nadmission_window = 4096\n";

fn body(n: u32, seed: u32) -> Vec<u8> {
    (0..n).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

/// GET `path` once the fill of a previous request has ended: an answer that joined that
/// fill (`collapsed`, its last bytes were still being written) is asked again.
fn settled(reel: &Reel, path: &str) -> Resp {
    eventually("the previous fill to end", || {
        let r = get(reel.data, path);
        (!r.cache_status().contains("collapsed")).then_some(r)
    })
}

fn sample(reel: &Reel, name: &str) -> f64 {
    metric(&reel.metrics(), name).unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[test]
fn second_hit_serves_the_first_fetch_without_storing_it() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &origin);
    conf.store = SECOND_HIT.into();
    let reel = Reel::start(&conf);
    let seg = body(300_000, 1);
    origin.put("/seg1.ts", Object::ok(seg.clone()).header("cache-control", "max-age=600"));
    let written = sample(&reel, "reel_store_bytes_written_total");

    let r = get(reel.data, "/seg1.ts");
    assert_eq!(r.status, 200);
    assert!(r.body == seg, "the first fetch is served byte for byte");
    assert!(r.cache_status().contains("fwd=miss; detail=not-admitted"), "{}", r.cache_status());
    assert_eq!(origin.hits("/seg1.ts"), 1);
    assert_eq!(sample(&reel, "reel_store_admission_rejected_total"), 1.0);
    assert_eq!(sample(&reel, "reel_store_objects"), 0.0, "not stored");
    assert_eq!(sample(&reel, "reel_store_bytes_written_total"), written, "no store write");
    assert!(sample(&reel, "reel_store_spill_bytes_written_total") >= seg.len() as f64);

    let r = settled(&reel, "/seg1.ts");
    assert!(r.body == seg);
    assert!(r.cache_status().contains("fwd=miss; stored"), "{}", r.cache_status());
    assert_eq!(origin.hits("/seg1.ts"), 2, "the second request goes to the origin again");
    assert_eq!(sample(&reel, "reel_store_admission_admitted_total"), 1.0);

    let r = settled(&reel, "/seg1.ts");
    assert!(r.body == seg);
    assert!(r.cache_status().ends_with("hit"), "{}", r.cache_status());
    assert_eq!(origin.hits("/seg1.ts"), 2, "the third is a hit");
    assert_eq!(sample(&reel, "reel_store_objects"), 1.0);
    assert!(sample(&reel, "reel_store_bytes_written_total") >= written + seg.len() as f64);
}

#[test]
fn second_hit_counts_a_range_request_as_a_request_for_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &origin);
    conf.store = SECOND_HIT.into();
    let reel = Reel::start(&conf);
    let seg = body(100_000, 2);
    origin.put("/seg2.ts", Object::ok(seg.clone()).header("cache-control", "max-age=600"));
    let range = |from: usize, to: usize| {
        let r = eventually("the previous fill to end", || {
            let mut c = Conn::open(reel.data).unwrap();
            let h = format!("bytes={from}-{to}");
            let r = c.request("GET", "127.0.0.1", "/seg2.ts", &[("range", &h)]).unwrap();
            (!r.cache_status().contains("collapsed")).then_some(r)
        });
        assert_eq!(r.status, 206, "{}", r.cache_status());
        assert!(r.body == seg[from..=to], "bytes {from}-{to}");
        r
    };
    let r = range(10, 19);
    assert!(r.cache_status().contains("detail=not-admitted"), "{}", r.cache_status());
    let r = range(50_000, 99_999);
    assert!(r.cache_status().contains("stored"), "{}", r.cache_status());
    let r = range(0, 0);
    assert!(r.cache_status().ends_with("hit"), "{}", r.cache_status());
    assert_eq!(origin.hits("/seg2.ts"), 2);
}

#[test]
fn always_stores_the_first_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let reel = Reel::start(&Conf::new(dir.path(), &origin));
    let seg = body(200_000, 3);
    origin.put("/seg3.ts", Object::ok(seg.clone()).header("cache-control", "max-age=600"));
    let written = sample(&reel, "reel_store_bytes_written_total");
    let r = get(reel.data, "/seg3.ts");
    assert!(r.body == seg);
    assert!(r.cache_status().contains("fwd=miss; stored"), "{}", r.cache_status());
    let r = settled(&reel, "/seg3.ts");
    assert!(r.body == seg && r.cache_status().ends_with("hit"), "{}", r.cache_status());
    assert_eq!(origin.hits("/seg3.ts"), 1);
    assert_eq!(sample(&reel, "reel_store_admission_rejected_total"), 0.0);
    assert!(sample(&reel, "reel_store_bytes_written_total") >= written + seg.len() as f64);
    assert_eq!(sample(&reel, "reel_store_spill_bytes_written_total"), 0.0);
}

/// A stored object that went stale is fetched again as a revalidation, which admission
/// does not judge: it is stored again at once.
#[test]
fn a_stale_stored_object_is_revalidated_and_stored_whatever_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &origin);
    conf.store = SECOND_HIT.into();
    let reel = Reel::start(&conf);
    let v1 = body(20_000, 4);
    origin.put("/doc.bin", Object::ok(v1.clone()).header("cache-control", "max-age=1"));
    get(reel.data, "/doc.bin");
    let r = settled(&reel, "/doc.bin");
    assert!(r.cache_status().contains("stored"), "{}", r.cache_status());
    let v2 = body(20_000, 5);
    origin.put("/doc.bin", Object::ok(v2.clone()).header("cache-control", "max-age=600"));
    let r = eventually("the stored object to go stale and be fetched again", || {
        let r = get(reel.data, "/doc.bin");
        (r.body == v2).then_some(r)
    });
    assert!(r.cache_status().contains("fwd=stale; stored"), "{}", r.cache_status());
    let r = settled(&reel, "/doc.bin");
    assert!(r.body == v2 && r.cache_status().ends_with("hit"), "{}", r.cache_status());
    assert_eq!(origin.hits("/doc.bin"), 3);
    assert_eq!(sample(&reel, "reel_store_admission_rejected_total"), 1.0);
}

#[test]
fn the_policy_changes_on_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &origin);
    let mut reel = Reel::start(&conf);
    for p in ["/a.ts", "/b.ts"] {
        origin.put(p, Object::ok(body(5_000, 6)).header("cache-control", "max-age=600"));
    }
    assert!(get(reel.data, "/a.ts").cache_status().contains("stored"));
    conf.store = "admission = \"second-hit\"\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    let restart = st["reload"]["needs_restart"].as_array().cloned().unwrap_or_default();
    assert!(restart.is_empty(), "applied live: {restart:?}");
    let r = get(reel.data, "/b.ts");
    assert!(r.cache_status().contains("detail=not-admitted"), "{}", r.cache_status());
    assert!(settled(&reel, "/a.ts").cache_status().ends_with("hit"), "stored objects stay");
}
