//! CPU steering of new connections with the classic BPF program.

use std::sync::atomic::Ordering;

use reel_runtime::{RuntimeError, RuntimeOptions, Steer, start};

use crate::support::{
    connect, echo_factory, listening_sockets, roundtrip, skip, spec, worker_cpus,
};

#[test]
fn cpu_steering_attached_and_accepting() {
    let cpus = worker_cpus();
    let rt = start(
        &cpus,
        vec![spec("http", "127.0.0.1:0"), spec("v6", "[::1]:0")],
        RuntimeOptions { steer: Steer::Cpu, irq_cpus: vec![0], ..Default::default() },
        echo_factory,
    );
    let rt = match rt {
        Ok(rt) => rt,
        // No IPv6 loopback in this environment: steer the IPv4 listener only.
        Err(RuntimeError::Bind { ref name, .. }) if name == "v6" => start(
            &cpus,
            vec![spec("http", "127.0.0.1:0")],
            RuntimeOptions { steer: Steer::Cpu, irq_cpus: vec![0], ..Default::default() },
            echo_factory,
        )
        .unwrap(),
        Err(e) => panic!("{e}"),
    };
    for name in ["http", "v6"] {
        let Some(addr) = rt.local_addr(name) else {
            continue;
        };
        for i in 0..20 {
            let mut s = connect(addr);
            let line = roundtrip(&mut s, &format!("m{i}"));
            assert!(line.ends_with(&format!(":{name}:m{i}\n")), "{line}");
        }
    }
    // Listeners added later get the program too.
    rt.set_listeners(vec![spec("http", "127.0.0.1:0"), spec("late", "127.0.0.1:0")]).unwrap();
    let late = rt.local_addr("late").unwrap();
    assert!(roundtrip(&mut connect(late), "x").ends_with(":late:x\n"));
    drop(rt);
    assert_eq!(listening_sockets(late.port()), 0);
}

#[test]
fn cpu_steering_picks_the_worker_of_the_processing_cpu() {
    let allowed = reel_runtime::core_plan::allowed_cpus().unwrap();
    if allowed.len() < 2 {
        return skip("needs two allowed CPUs");
    }
    let cpus = allowed[..2].to_vec();
    let rt = start(
        &cpus,
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { steer: Steer::Cpu, ..Default::default() },
        echo_factory,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    for (index, &cpu) in cpus.iter().enumerate() {
        // On loopback the SYN is processed by the connecting thread's CPU.
        let pinned = std::thread::spawn(move || {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                return None;
            }
            Some(
                (0..10)
                    .map(|i| roundtrip(&mut connect(addr), &format!("s{i}")))
                    .collect::<Vec<_>>(),
            )
        })
        .join()
        .unwrap();
        let Some(lines) = pinned else {
            return skip(&format!("cannot pin a client thread to cpu {cpu}"));
        };
        for line in lines {
            assert!(line.starts_with(&format!("{index}:http:")), "cpu {cpu}: {line}");
        }
    }
    let per_worker: Vec<u64> =
        rt.stats().iter().map(|s| s.accepted.load(Ordering::Relaxed)).collect();
    assert_eq!(per_worker, vec![10, 10]);
}
