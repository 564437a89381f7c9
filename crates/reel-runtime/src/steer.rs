//! Optional CPU steering of new connections inside a `SO_REUSEPORT` group with a classic BPF
//! program (`SO_ATTACH_REUSEPORT_CBPF`, see `socket(7)`).
//!
//! Without a program the kernel picks the socket by hashing the 4-tuple. The program instead
//! loads the CPU that is processing the incoming SYN (`ld #cpu`, `SKF_AD_OFF + SKF_AD_CPU`) and
//! returns an index into the group. The group index is the order in which the sockets started
//! listening, which [`crate::start`] makes equal to the worker index. Worker CPUs map to their
//! own worker; CPUs that only service NIC interrupts are spread round-robin over the workers;
//! any other CPU maps to `cpu % n_workers`. A returned index past the end of the group makes
//! the kernel fall back to the hash silently, so a shrunken group degrades rather than fails.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `BPF_LD | BPF_W | BPF_ABS`.
const LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const JEQ_K: u16 = 0x05 | 0x10;
/// `BPF_RET | BPF_K`.
const RET_K: u16 = 0x06;
/// `BPF_RET | BPF_A`.
const RET_A: u16 = 0x06 | 0x10;
/// `BPF_ALU | BPF_MOD | BPF_K`.
const MOD_K: u16 = 0x04 | 0x90;
/// Kernel limit on classic BPF program length (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;

/// One classic BPF instruction (layout of `struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant operand.
    pub k: u32,
}

/// The CPU -> worker index table for steering: worker CPUs map to their own index, IRQ-only CPUs
/// round-robin over the workers. Returned sorted by CPU.
pub fn cpu_table(workers: &[usize], irq_cpus: &[usize]) -> Vec<(usize, u32)> {
    let mut t: Vec<(usize, u32)> =
        workers.iter().enumerate().map(|(i, &c)| (c, i as u32)).collect();
    if !workers.is_empty() {
        let mut rr = 0usize;
        for &c in irq_cpus {
            if !workers.contains(&c) {
                t.push((c, (rr % workers.len()) as u32));
                rr += 1;
            }
        }
    }
    t.sort_unstable();
    t.dedup_by_key(|e| e.0);
    t
}

/// Builds the steering program for a group of `n_workers` sockets. `None` if `n_workers` is 0
/// or the table does not fit the kernel's instruction limit.
pub fn cpu_program(table: &[(usize, u32)], n_workers: usize) -> Option<Vec<Insn>> {
    if n_workers == 0 || 2 * table.len() + 3 > MAX_INSNS {
        return None;
    }
    let mut p = Vec::with_capacity(2 * table.len() + 3);
    // SKF_AD_OFF + SKF_AD_CPU as an unsigned 32-bit offset.
    let cpu_off = (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32;
    p.push(Insn { code: LD_W_ABS, jt: 0, jf: 0, k: cpu_off });
    for &(cpu, idx) in table {
        p.push(Insn { code: JEQ_K, jt: 0, jf: 1, k: u32::try_from(cpu).ok()? });
        p.push(Insn { code: RET_K, jt: 0, jf: 0, k: idx });
    }
    p.push(Insn { code: MOD_K, jt: 0, jf: 0, k: u32::try_from(n_workers).ok()? });
    p.push(Insn { code: RET_A, jt: 0, jf: 0, k: 0 });
    Some(p)
}

/// Attaches `prog` to the reuseport group that `sock` belongs to.
pub fn attach(sock: &impl AsFd, prog: &[Insn]) -> io::Result<()> {
    let mut filters: Vec<libc::sock_filter> = prog
        .iter()
        .map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k })
        .collect();
    let len = u16::try_from(filters.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    // The kernel copies the program during the call and keeps no pointer to `filters`.
    let fprog = libc::sock_fprog { len, filter: filters.as_mut_ptr() };
    set_socket_option(sock, libc::SO_ATTACH_REUSEPORT_CBPF, &fprog)
}

/// Detaches whatever program the reuseport group of `sock` has: the kernel's hash routes
/// its packets again. A group without one is left as it is.
pub fn detach(sock: &impl AsFd) -> io::Result<()> {
    let ignored: libc::c_int = 0;
    match set_socket_option(sock, libc::SO_DETACH_REUSEPORT_BPF, &ignored) {
        // ENOENT: no program was attached.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r,
    }
}

/// `setsockopt(SOL_SOCKET, opt)` with `value`.
// Neither rustix nor socket2 wraps the reuseport BPF options (socket2 has only
// `SO_ATTACH_FILTER`), and neither offers a raw setsockopt: the call is made here.
#[allow(unsafe_code)]
fn set_socket_option<T>(sock: &impl AsFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a live, initialised `T` of `size_of::<T>()` bytes for the
    // whole call, and the kernel only reads it (what it points at in turn, a BPF program,
    // is the caller's to keep alive, which it does past the call). The fd is a valid open
    // socket borrowed for the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (value as *const T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a program made of the opcodes [`cpu_program`] emits, with the given CPU as input.
    fn run(prog: &[Insn], cpu: u32) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => a = cpu,
                JEQ_K => pc += if a == i.k { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                RET_A => return a,
                MOD_K => a %= i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn table_maps_workers_to_themselves_and_irqs_round_robin() {
        let t = cpu_table(&[2, 3, 6, 7], &[0, 1, 4, 5, 6]);
        assert_eq!(t, vec![(0, 0), (1, 1), (2, 0), (3, 1), (4, 2), (5, 3), (6, 2), (7, 3)]);
        let p = cpu_program(&t, 4).unwrap();
        for (cpu, idx) in &t {
            assert_eq!(run(&p, *cpu as u32), *idx, "cpu {cpu}");
        }
        // Unlisted CPUs fall through to cpu % n.
        assert_eq!(run(&p, 13), 1);
        assert_eq!(p[0].k, 0xffff_f000 + 36);
    }

    #[test]
    fn program_limits() {
        assert!(cpu_program(&[], 0).is_none());
        let big: Vec<(usize, u32)> = (0..3000).map(|c| (c, 0)).collect();
        assert!(cpu_program(&big, 1).is_none());
        let p = cpu_program(&[], 3).unwrap();
        assert_eq!(run(&p, 7), 1);
    }

    #[test]
    fn kernel_rejects_attach_on_non_reuseport_socket_cleanly() {
        // A UDP socket without SO_REUSEPORT: the kernel validates the program and refuses the
        // group attach; the error must surface as io::Error, not crash.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = cpu_program(&cpu_table(&[0], &[]), 1).unwrap();
        let r = attach(&s, &p);
        // Kernels differ here (some accept and only use it once a group forms); both are fine.
        if let Err(e) = r {
            assert!(e.raw_os_error().is_some());
        }
        // An invalid program (jump past the end) is rejected by the verifier with EINVAL.
        let bad = [Insn { code: JEQ_K, jt: 5, jf: 5, k: 0 }];
        assert!(attach(&s, &bad).is_err());
    }
}
