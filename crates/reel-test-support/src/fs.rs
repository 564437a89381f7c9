//! A real file system that fails: ext4 on a loop device, mounted on a test's directory,
//! that the test shuts down. After [`ShutdownFs::shut_down`] every read and write of a
//! file on it fails with `EIO`, page cache or not, as a disk that died does (the
//! `EXT4_IOC_SHUTDOWN` ioctl, which `xfs_io -x -c shutdown` sends in the kernel's own
//! file system tests).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip;

/// `EXT4_IOC_SHUTDOWN` (`_IOR('X', 125, __u32)`, the same number as XFS's
/// `XFS_IOC_GOINGDOWN`).
const EXT4_IOC_SHUTDOWN: u64 = 0x8004_587D;
/// Shut down without flushing the journal: as abrupt as a disk that stops answering.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

/// An ext4 file system in an image file, mounted on a directory through a loop device;
/// lazily unmounted on drop (also when the test panics), which frees the loop device once
/// the last file on it is closed.
pub struct ShutdownFs {
    dir: PathBuf,
}

impl ShutdownFs {
    /// Makes an ext4 file system of `mib` MiB in `image` and mounts it on `dir` (which
    /// must exist), or says why it cannot ([`skip`]) and returns `None`.
    pub fn mount(image: &Path, dir: &Path, mib: u64) -> Option<ShutdownFs> {
        let sized = File::create(image).and_then(|f| f.set_len(mib << 20));
        if let Err(e) = sized {
            skip(&format!("cannot create {}: {e}", image.display()));
            return None;
        }
        let mkfs = Command::new("mkfs.ext4").args(["-q", "-F"]).arg(image).output();
        match mkfs {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                skip(&format!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
                return None;
            }
            Err(e) => {
                skip(&format!("cannot run mkfs.ext4: {e}"));
                return None;
            }
        }
        match Command::new("mount").args(["-t", "ext4", "-o", "loop"]).arg(image).arg(dir).output()
        {
            Ok(o) if o.status.success() => Some(ShutdownFs { dir: dir.to_owned() }),
            Ok(o) => {
                skip(&format!(
                    "cannot mount an ext4 loop device ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                skip(&format!("cannot run mount: {e}"));
                None
            }
        }
    }

    /// Shuts the file system down: from now on its files' reads and writes fail with
    /// `EIO`. Panics if the kernel refuses.
    pub fn shut_down(&self) {
        let d =
            File::open(&self.dir).unwrap_or_else(|e| panic!("open {}: {e}", self.dir.display()));
        let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
        // SAFETY: `d` is an open descriptor for the duration of the call, and the ioctl
        // reads one `u32` through the pointer, which points at `flags`, alive until it
        // returns.
        #[allow(unsafe_code)]
        let r = unsafe { libc::ioctl(d.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags as *const u32) };
        assert_eq!(r, 0, "EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    }
}

impl Drop for ShutdownFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
