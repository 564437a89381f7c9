//! Origin tiers: tier 0 down sends traffic to tier 1; tier 0 back takes it again.

use std::time::{Duration, Instant};

use crate::client::{GUARD, get};
use crate::origin::{Origin, Route};
use crate::server::{Opts, Server};

#[test]
fn tier_one_answers_while_tier_zero_is_down_and_tier_zero_is_used_again_when_back() {
    let t0 = Origin::start();
    let t1 = Origin::start();
    for (o, name) in [(&t0, "tier0"), (&t1, "tier1")] {
        o.route("/f", Route::ok(name, &[("cache-control", "no-store")]));
    }
    let mut opts = Opts::new(t0.addr);
    opts.tiers = vec![vec![t0.addr], vec![t1.addr]];
    opts.health_interval = Some(Duration::from_millis(100));
    let s = Server::start(opts);

    assert_eq!(get(&s, "/f", &[]).body, b"tier0");
    assert_eq!(t1.count("/f"), 0, "tier 1 idle while tier 0 is up");

    t0.down();
    let r = get(&s, "/f", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"tier1", "tier 1 answers while tier 0 is down");
    for _ in 0..3 {
        assert_eq!(get(&s, "/f", &[]).body, b"tier1");
    }

    t0.up();
    let deadline = Instant::now() + GUARD;
    loop {
        let r = get(&s, "/f", &[]);
        assert_eq!(r.status, 200);
        if r.body == b"tier0" {
            break;
        }
        assert!(Instant::now() < deadline, "tier 0 never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = t1.count("/f");
    for _ in 0..3 {
        assert_eq!(get(&s, "/f", &[]).body, b"tier0");
    }
    assert_eq!(t1.count("/f"), before, "tier 0 preferred again");
}
