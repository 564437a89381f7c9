//! The kTLS system calls std, tokio and rustix do not expose: `setsockopt(SOL_TLS)` with
//! the kernel's crypto-info structures, `recvmsg` that learns a record's content type
//! (`TLS_GET_RECORD_TYPE`), and `sendmsg` that sends a record of another type
//! (`TLS_SET_RECORD_TYPE`, for alerts).

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::record::{Cipher, DirectionKeys, Version};

/// `TLS_TX` / `TLS_RX` (linux/tls.h).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dir {
    Tx = 1,
    Rx = 2,
}

const SOL_TLS: libc::c_int = 282;
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;
const TLS_1_2_VERSION: u16 = 0x0303;
const TLS_1_3_VERSION: u16 = 0x0304;
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// `struct tls12_crypto_info_aes_gcm_128` and friends: one layout with the key length as
/// a parameter (16 or 32 for GCM; ChaCha20 has a 32-byte key, a 12-byte IV, no salt).
#[repr(C)]
struct GcmInfo<const K: usize> {
    version: u16,
    cipher: u16,
    iv: [u8; 8],
    key: [u8; K],
    salt: [u8; 4],
    rec_seq: [u8; 8],
}

#[repr(C)]
struct ChachaInfo {
    version: u16,
    cipher: u16,
    iv: [u8; 12],
    key: [u8; 32],
    rec_seq: [u8; 8],
}

/// Attaches the `tls` upper-layer protocol to a connected TCP socket.
pub(crate) fn set_ulp(fd: BorrowedFd<'_>) -> io::Result<()> {
    const ULP: &[u8] = b"tls";
    // SAFETY: `ULP` is a live static byte string of the length given; the kernel only
    // reads it. `fd` is a borrowed open socket.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            ULP.as_ptr().cast(),
            ULP.len() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

fn setsockopt<T>(fd: BorrowedFd<'_>, dir: Dir, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live, initialised `#[repr(C)]` value of `size_of::<T>()`
    // bytes for the whole call; the kernel only reads it. `fd` is a borrowed open socket.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_TLS,
            dir as libc::c_int,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Hands one direction's keys to the kernel (`TLS_TX` or `TLS_RX`).
pub(crate) fn set_keys(
    fd: BorrowedFd<'_>,
    dir: Dir,
    version: Version,
    k: &DirectionKeys,
) -> io::Result<()> {
    let version = match version {
        Version::Tls12 => TLS_1_2_VERSION,
        Version::Tls13 => TLS_1_3_VERSION,
    };
    let rec_seq = k.seq.to_be_bytes();
    let mut salt = [0u8; 4];
    salt.copy_from_slice(&k.iv[..4]);
    let mut iv = [0u8; 8];
    iv.copy_from_slice(&k.iv[4..]);
    let bad = || io::Error::from_raw_os_error(libc::EINVAL);
    match k.cipher {
        Cipher::Aes128Gcm => {
            let key: [u8; 16] = k.key.as_slice().try_into().map_err(|_| bad())?;
            let info = GcmInfo { version, cipher: TLS_CIPHER_AES_GCM_128, iv, key, salt, rec_seq };
            setsockopt(fd, dir, &info)
        }
        Cipher::Aes256Gcm => {
            let key: [u8; 32] = k.key.as_slice().try_into().map_err(|_| bad())?;
            let info = GcmInfo { version, cipher: TLS_CIPHER_AES_GCM_256, iv, key, salt, rec_seq };
            setsockopt(fd, dir, &info)
        }
        Cipher::Chacha20Poly1305 => {
            let key: [u8; 32] = k.key.as_slice().try_into().map_err(|_| bad())?;
            let info = ChachaInfo {
                version,
                cipher: TLS_CIPHER_CHACHA20_POLY1305,
                iv: k.iv,
                key,
                rec_seq,
            };
            setsockopt(fd, dir, &info)
        }
    }
}

/// Room for one `cmsghdr` carrying one byte, aligned as the kernel wants.
#[repr(C, align(8))]
struct Cmsg([u8; 32]);

/// What one `recvmsg(2)` on a kTLS socket took: `n` bytes of records of content type
/// `typ` (application data when the kernel attached none), and the first bytes again,
/// for a control record's few bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    pub(crate) n: usize,
    pub(crate) typ: u8,
    pub(crate) head: [u8; 8],
}

/// [`recv_record`] into an initialised buffer.
pub(crate) fn recv_record_init(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have one layout, and `recv_record` only
    // writes initialised bytes (what the kernel copies) into it, never uninitialised ones.
    let buf = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
    recv_record(fd, buf)
}

/// `recvmsg(2)` on a kTLS socket (non-blocking) into `buf`, initialised or not; on success
/// its first `n` bytes are initialised.
pub(crate) fn recv_record(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> io::Result<Received> {
    let mut cbuf = Cmsg([0; 32]);
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: zeroed `msghdr` is a valid "no name, no control" value; fields set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = cbuf.0.len() as _;
    // SAFETY: `msg` points to `iov` (over `buf`, writable for its length) and `cbuf`, both
    // live across the call; the kernel writes at most the lengths given.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    let used = (msg.msg_controllen as usize).min(cbuf.0.len());
    let typ = record_type(&cbuf.0[..used]).unwrap_or(crate::record::content::APPLICATION_DATA);
    let mut head = [0u8; 8];
    for (d, b) in head.iter_mut().zip(&buf[..n]) {
        // SAFETY: the kernel initialised the first `n` bytes of `buf` (its return value).
        *d = unsafe { b.assume_init() };
    }
    Ok(Received { n, typ, head })
}

/// `sendmsg(2)` of `data` as one record of content type `typ` (non-blocking).
pub(crate) fn send_record(fd: BorrowedFd<'_>, typ: u8, data: &[u8]) -> io::Result<usize> {
    let mut cbuf = Cmsg([0; 32]);
    let space = put_record_type(&mut cbuf.0, typ);
    let mut iov = libc::iovec { iov_base: data.as_ptr().cast_mut().cast(), iov_len: data.len() };
    // SAFETY: zeroed `msghdr` is a valid "no name, no control" value; fields set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points to `iov` (over `data`, which the kernel only reads; the
    // `cast_mut` is for the iovec type) and to `space` bytes of `cbuf`, all live across
    // the call.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// `CMSG_ALIGN`: control messages are aligned to `size_t`.
fn cmsg_align(n: usize) -> usize {
    let a = size_of::<usize>();
    (n + a - 1) & !(a - 1)
}

/// Where a control message's data starts (`CMSG_LEN(0)`).
fn cmsg_data_at() -> usize {
    cmsg_align(size_of::<libc::cmsghdr>())
}

/// The content type in a `TLS_GET_RECORD_TYPE` control message of `ctl` (the bytes the
/// kernel filled), read field by field from the `cmsghdr` layout without pointers.
fn record_type(ctl: &[u8]) -> Option<u8> {
    let (lvl, ty) = (
        std::mem::offset_of!(libc::cmsghdr, cmsg_level),
        std::mem::offset_of!(libc::cmsghdr, cmsg_type),
    );
    let int = |at: usize| -> Option<i32> {
        Some(i32::from_ne_bytes(ctl.get(at..at + 4)?.try_into().ok()?))
    };
    let mut off = 0;
    while off + cmsg_data_at() <= ctl.len() {
        let len_bytes = ctl.get(off..off + size_of::<usize>())?;
        let len = usize::from_ne_bytes(len_bytes.try_into().ok()?);
        if len < cmsg_data_at() || len > ctl.len() - off {
            return None;
        }
        if int(off + lvl)? == SOL_TLS && int(off + ty)? == TLS_GET_RECORD_TYPE {
            return ctl.get(off + cmsg_data_at()).copied();
        }
        off += cmsg_align(len);
    }
    None
}

/// Writes one `TLS_SET_RECORD_TYPE` control message carrying `typ` at the start of `ctl`;
/// returns its space (`CMSG_SPACE(1)`).
fn put_record_type(ctl: &mut [u8], typ: u8) -> usize {
    let (lvl, ty) = (
        std::mem::offset_of!(libc::cmsghdr, cmsg_level),
        std::mem::offset_of!(libc::cmsghdr, cmsg_type),
    );
    let len = cmsg_data_at() + 1;
    ctl[..size_of::<usize>()].copy_from_slice(&len.to_ne_bytes());
    ctl[lvl..lvl + 4].copy_from_slice(&SOL_TLS.to_ne_bytes());
    ctl[ty..ty + 4].copy_from_slice(&TLS_SET_RECORD_TYPE.to_ne_bytes());
    ctl[cmsg_data_at()] = typ;
    cmsg_align(len)
}

/// Whether the kernel has the `tls` upper-layer protocol registered now (the module is
/// loaded or built in): `/proc/sys/net/ipv4/tcp_available_ulp` names it.
pub fn kernel_has_tls() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|s| s.split_whitespace().any(|w| w == "tls"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_garbage_is_no_type() {
        let mut ctl = [0u8; 32];
        let space = put_record_type(&mut ctl, 21);
        assert_eq!(space, cmsg_align(cmsg_data_at() + 1));
        // What the kernel hands back for a record has the same layout, GET instead of SET.
        let ty = std::mem::offset_of!(libc::cmsghdr, cmsg_type);
        ctl[ty..ty + 4].copy_from_slice(&TLS_GET_RECORD_TYPE.to_ne_bytes());
        assert_eq!(record_type(&ctl[..space]), Some(21));
        assert_eq!(record_type(&[]), None);
        assert_eq!(record_type(&[0xff; 32]), None);
        assert_eq!(record_type(&ctl[..cmsg_data_at()]), None);
    }

    #[test]
    fn crypto_info_layouts_are_the_kernels() {
        // linux/tls.h: 2+2+8+16+4+8, 2+2+8+32+4+8, 2+2+12+32+8.
        assert_eq!(size_of::<GcmInfo<16>>(), 40);
        assert_eq!(size_of::<GcmInfo<32>>(), 56);
        assert_eq!(size_of::<ChachaInfo>(), 56);
    }

    #[test]
    fn a_socket_without_kernel_tls_refuses_keys_with_an_error_not_a_crash() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let k = DirectionKeys { cipher: Cipher::Aes128Gcm, key: vec![1; 16], iv: [2; 12], seq: 0 };
        let fd = std::os::fd::AsFd::as_fd(&c);
        if kernel_has_tls() {
            set_ulp(fd).unwrap();
            set_keys(fd, Dir::Tx, Version::Tls13, &k).unwrap();
        } else {
            assert!(set_ulp(fd).is_err());
            // Without the ULP the TLS socket option level does not exist.
            assert!(set_keys(fd, Dir::Tx, Version::Tls13, &k).is_err());
        }
    }
}
