//! Issue 26.8: a CPU quota hides behind the affinity mask. Under a real cgroup with a
//! one-CPU quota, `reel plan` and `reel serve` run one worker, `/metrics` exposes the
//! quota and the throttling counters (and the data interfaces' bytes), and `/healthz`'s
//! load carries the throttling figures. Needs a cgroup this test can create (the v1 `cpu`
//! controller, or a delegated v2 subtree); skipped with the reason otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use reel_test_support::skip;

use crate::common::*;

/// A cgroup made for one test, removed when dropped (once its processes are gone).
struct Group {
    dir: PathBuf,
}

impl Group {
    /// A new group with a quota of one CPU, or why none can be made here.
    fn one_cpu() -> Result<Group, String> {
        let name = format!("reel-test-{}-{}", std::process::id(), line!());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = Path::new("/sys/fs/cgroup");
        let (dir, files): (PathBuf, &[(&str, &str)]) = if v1.join("cpu.cfs_quota_us").exists() {
            (v1.join(&name), &[("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", "100000")])
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"))
        {
            (v2.join(&name), &[("cpu.max", "100000 100000")])
        } else {
            return Err("no cgroup v1 cpu controller and no v2 root delegating cpu".into());
        };
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let g = Group { dir };
        for (f, v) in files {
            std::fs::write(g.dir.join(f), v).map_err(|e| format!("{f}: {e}"))?;
        }
        Ok(g)
    }

    /// A wrapper script that joins the group and execs the binary under test.
    fn wrapper(&self, dir: &Path) -> PathBuf {
        let w = dir.join("in-cgroup.sh");
        let procs = self.dir.join("cgroup.procs");
        let text = format!("#!/bin/sh\necho $$ > {}\nexec {BIN} \"$@\"\n", procs.display());
        // Written by a child (an open file being exec'd elsewhere gives ETXTBSY).
        let st = Command::new("sh")
            .arg("-c")
            .arg("cat > \"$1\" && chmod 755 \"$1\"")
            .arg("sh")
            .arg(&w)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(text.as_bytes())?;
                c.wait()
            })
            .unwrap();
        assert!(st.success());
        w
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The processes are gone by now (killed and reaped); a group empties at once.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[test]
fn under_a_one_cpu_quota_one_worker_runs_and_throttling_is_exported() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return skip("one CPU: a one-CPU quota changes nothing");
    }
    let group = match Group::one_cpu() {
        Ok(g) => g,
        Err(why) => return skip(&format!("cannot make a cgroup with a CPU quota: {why}")),
    };
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put("/a.ts", Object::ok("a"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.raw = Some(conf.render().replace("nic = []", "nic = [\"lo\"]"));
    conf.write();
    let wrapper = group.wrapper(dir.path());

    // The plan: one worker, the quota named, the other CPUs left out because of it.
    let out = Command::new(&wrapper).arg("plan").arg("--config").arg(conf.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("workers (1): "), "{text}");
    assert!(text.contains("cpu quota: 1.00 cpus (cgroup "), "{text}");
    assert!(text.contains("left out: the cgroup CPU quota allows 1.00 cpus"), "{text}");

    // Serving inside it.
    let reel = Reel::start_with(&conf, &wrapper, &[]);
    assert_eq!(reel.workers(), 1);
    assert_eq!(get(reel.data, "/a.ts").status, 200);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_cgroup_cpu_quota_cpus"), Some(1.0), "{m}");
    for name in [
        "reel_cgroup_cpu_periods_total",
        "reel_cgroup_cpu_throttled_periods_total",
        "reel_cgroup_cpu_throttled_seconds_total",
    ] {
        assert!(metric(&m, name).is_some_and(|v| v >= 0.0), "{name} in\n{m}");
    }
    // The group's periods count while reel's threads run: they rise.
    let periods = |m: &str| metric(m, "reel_cgroup_cpu_periods_total").unwrap_or(0.0);
    let first = periods(&m);
    eventually("the group's periods to rise", || {
        let _ = get(reel.data, "/a.ts");
        (periods(&reel.metrics()) > first).then_some(())
    });
    assert!(metric(&m, "reel_net_transmit_bytes_total{interface=\"lo\"}").is_some_and(|v| v > 0.0));
    assert!(metric(&m, "reel_net_receive_bytes_total{interface=\"lo\"}").is_some_and(|v| v > 0.0));
    // /healthz's load figures carry the throttling.
    let h = get(reel.data, "/healthz").json();
    assert!(h["load"]["throttled_ratio"].as_f64().is_some(), "{h}");
    assert!(h["load"]["throttled_ms_per_sec"].as_f64().is_some(), "{h}");
    drop(reel);
}

#[test]
fn without_a_quota_no_quota_is_exported_and_workers_take_every_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let conf = Conf::new(dir.path(), &o);
    // This test process's own group: a CI runner may have a quota of its own, in which
    // case the other test covers it.
    conf.write();
    let out = Command::new(BIN).arg("plan").arg("--config").arg(conf.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("cpu quota:") {
        return skip("this test runs under a CPU quota already");
    }
    let reel = Reel::start(&conf);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_cgroup_cpu_quota_cpus"), None, "{m}");
    assert!(metric(&m, "reel_process_open_fds").is_some_and(|v| v > 3.0), "{m}");
    assert!(metric(&m, "reel_process_max_fds").is_some_and(|v| v > 3.0), "{m}");
    assert_eq!(metric(&m, "reel_healthy"), Some(1.0), "{m}");
    assert_eq!(metric(&m, "reel_health_status{status=\"ok\"}"), Some(1.0), "{m}");
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(reel.workers(), allowed);
}
