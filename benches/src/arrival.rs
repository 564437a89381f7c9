//! When received bytes arrived, by the kernel's clock: `SO_TIMESTAMPNS` on a socket makes
//! every `recvmsg` carry the Unix time at which the last of the bytes it returns was
//! received (socket(7)). The generator reads hundreds of connections from one task, so the
//! time it gets round to a response can be milliseconds after the response arrived.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

/// Asks the kernel to report when received bytes arrived (`SO_TIMESTAMPNS`, Unix time)
/// with each read; false when the socket does not.
pub fn enable(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: `fd` is an open socket owned by the caller's stream; the option value is a
    // live c_int whose size is passed along.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// One non-blocking `recvmsg` into `buf`: the byte count and, when the kernel attached one,
/// when the last of those bytes arrived (Unix µs).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    // Room for one SCM_TIMESTAMPNS control message, 8-byte aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero msghdr is a valid empty header; every pointer set below points
    // at a live local (`iov`, `control`) or at `buf`, with its true length.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` describes `buf` and `control` as above; the kernel writes at most their
    // lengths and updates `msg_controllen` / `msg_flags`. Control messages are then read
    // from a copy of `control`, by bounds-checked field offsets.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut bytes = [0u8; 64];
    for (chunk, w) in bytes.chunks_exact_mut(8).zip(control) {
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
    let used = (msg.msg_controllen as usize).min(bytes.len());
    Ok((n as usize, timestamp(&bytes[..used])))
}

/// The `SCM_TIMESTAMPNS` time (Unix µs) among the control messages `control` holds
/// (cmsg(3): each a `cmsghdr`, then its data, padded to the word size).
fn timestamp(control: &[u8]) -> Option<u64> {
    const WORD: usize = std::mem::size_of::<usize>();
    let header = std::mem::size_of::<libc::cmsghdr>().next_multiple_of(WORD);
    let field = |at: usize, n: usize| control.get(at..at + n);
    let mut at = 0;
    while let Some(len) = field(at, WORD) {
        let len = usize::from_ne_bytes(len.try_into().ok()?);
        let level = i32::from_ne_bytes(field(at + WORD, 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(field(at + WORD + 4, 4)?.try_into().ok()?);
        if len < header {
            return None;
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
            let sec = i64::from_ne_bytes(field(at + header, 8)?.try_into().ok()?);
            let nsec = i64::from_ne_bytes(field(at + header + 8, 8)?.try_into().ok()?);
            return (sec > 0).then(|| sec as u64 * 1_000_000 + nsec as u64 / 1000);
        }
        at += len.next_multiple_of(WORD);
    }
    None
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    #[test]
    fn malformed_control_messages_give_no_time() {
        assert_eq!(timestamp(&[]), None);
        assert_eq!(timestamp(&[0u8; 7]), None);
        // A length shorter than the header, and a message cut short.
        let mut m = vec![0u8; 32];
        m[..8].copy_from_slice(&4usize.to_ne_bytes());
        assert_eq!(timestamp(&m), None);
        m[..8].copy_from_slice(&32usize.to_ne_bytes());
        m[8..12].copy_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
        m[12..16].copy_from_slice(&libc::SCM_TIMESTAMPNS.to_ne_bytes());
        m[16..24].copy_from_slice(&7i64.to_ne_bytes());
        m[24..32].copy_from_slice(&5_000i64.to_ne_bytes());
        assert_eq!(timestamp(&m), Some(7_000_005));
        assert_eq!(timestamp(&m[..28]), None);
    }

    fn unix_us() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
    }

    #[test]
    fn reads_carry_the_time_the_bytes_arrived() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        assert!(enable(rx.as_raw_fd()));
        // The kernel turns receive timestamps on for the system in the background: the
        // first bytes after the first socket asks may come unstamped.
        let mut buf = [0u8; 16];
        tx.write_all(b"w").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(recv(rx.as_raw_fd(), &mut buf).unwrap().0, 1);
        let before = unix_us();
        tx.write_all(b"hello").unwrap();
        let sent = unix_us();
        // Arrived before this thread reads it, well before.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (n, at) = loop {
            match recv(rx.as_raw_fd(), &mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                r => break r.unwrap(),
            }
        };
        let read = unix_us();
        assert_eq!(&buf[..n], b"hello");
        let at = at.expect("a kernel timestamp");
        assert!(before <= at && at <= sent + 1000, "{before} <= {at} <= {sent}");
        assert!(read >= at + 50_000, "the read came later: {at} vs {read}");
        // Without the option nothing is attached.
        let (mut tx2, rx2) =
            (std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap(), l.accept().unwrap().0);
        tx2.write_all(b"x").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert_eq!(recv(rx2.as_raw_fd(), &mut buf).unwrap(), (1, None));
    }
}
