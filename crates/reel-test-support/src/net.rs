//! Sockets as the kernel lists them.

/// Inodes of the sockets listening on 127.0.0.1:`port` (from `/proc/net/tcp`), sorted.
/// Equal lists before and after a restart mean the very same sockets were kept.
pub fn listening_inodes(port: u16) -> Vec<u64> {
    // Local address as /proc prints it (little-endian hex address), state 0A = LISTEN.
    let want = format!("0100007F:{port:04X}");
    let mut v: Vec<u64> = std::fs::read_to_string("/proc/net/tcp")
        .expect("read /proc/net/tcp")
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && f[1] == want && f[3] == "0A").then(|| f[9].parse().unwrap())
        })
        .collect();
    v.sort_unstable();
    v
}
