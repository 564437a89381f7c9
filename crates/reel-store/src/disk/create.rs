//! Whether a missing disk directory may be created. The rule: only in a store of one
//! disk, and then not when a mount point of `/etc/fstab` on its path is not mounted. The
//! directory of a disk whose file system is not mounted would otherwise be made on the
//! file system under the mount point (the root file system, most often) and fill it; in a
//! store of several disks a missing directory is a disk out of service instead, so it is
//! never created there.

use std::path::{Component, Path, PathBuf};

/// Why a missing disk directory is created, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creation {
    /// It may be created: the rule that allows it, for `reel check` to say.
    Allowed(String),
    /// It must not be created: which rule forbids it and what to do.
    Refused(String),
}

/// The rule applied to a missing directory `path` of a store of one disk (`single`) or of
/// several, with this host's `/etc/fstab` and mounts (`/proc/self/mountinfo`).
pub fn may_create(path: &Path, single: bool) -> Creation {
    let fstab = std::fs::read_to_string("/etc/fstab").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    decide(&absolute(&cwd, path), single, &fstab_points(&fstab), &mount_points(&mounts))
}

/// [`may_create`] on given mount points: `fstab` (where file systems should be mounted)
/// and `mounted` (where they are).
fn decide(path: &Path, single: bool, fstab: &[PathBuf], mounted: &[PathBuf]) -> Creation {
    if !single {
        return Creation::Refused(
            "a store of several disks creates no disk directory (a disk whose file system \
             is not mounted would fill the file system under it): create it on the \
             mounted disk"
                .into(),
        );
    }
    let unmounted = fstab
        .iter()
        .filter(|m| m.as_os_str() != "/" && path.starts_with(m) && !mounted.contains(m))
        .max_by_key(|m| m.as_os_str().len());
    match unmounted {
        Some(m) => Creation::Refused(format!(
            "{} is a mount point in /etc/fstab that is not mounted, so the directory would \
             be created on the file system under it: mount it (mount {}), or create the \
             directory by hand if it belongs there",
            m.display(),
            m.display()
        )),
        None => Creation::Allowed(
            "created at start: a store of one disk, and no mount point of /etc/fstab on \
             its path is unmounted"
                .into(),
        ),
    }
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved by name.
fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The mount points of an `/etc/fstab` (its second field; swap and `none` left out).
fn fstab_points(text: &str) -> Vec<PathBuf> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| m.starts_with('/'))
        .map(|m| PathBuf::from(unescape(m)))
        .collect()
}

/// The mount points of a `/proc/self/mountinfo` (its fifth field).
fn mount_points(text: &str) -> Vec<PathBuf> {
    text.lines().filter_map(|l| l.split(' ').nth(4)).map(|m| PathBuf::from(unescape(m))).collect()
}

/// `\040`-style octal escapes (spaces, tabs in mount points) decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(u8::is_ascii_digit));
        match oct.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FSTAB: &str = "# comment\nUUID=1 / ext4 defaults 0 1\nUUID=2 /srv/disk1 xfs \
                         defaults 0 2\n/dev/sdc1 /srv/my\\040disk ext4 defaults 0 2\n\
                         /swap none swap sw 0 0\n";
    const MOUNTINFO: &str = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                             30 22 8:17 / /srv/disk1 rw - xfs /dev/sdb1 rw\n";

    fn decide_at(path: &str, single: bool, mountinfo: &str) -> Creation {
        decide(Path::new(path), single, &fstab_points(FSTAB), &mount_points(mountinfo))
    }

    #[test]
    fn an_unmounted_mount_point_on_the_path_refuses() {
        let pts = fstab_points(FSTAB);
        assert_eq!(pts, [PathBuf::from("/"), "/srv/disk1".into(), "/srv/my disk".into()]);
        assert!(matches!(decide_at("/srv/disk1/reel", true, MOUNTINFO), Creation::Allowed(_)));
        let r = decide_at("/srv/disk1/reel", true, "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
        assert!(matches!(&r, Creation::Refused(w) if w.contains("/srv/disk1 is a mount point")));
        let r = decide_at("/srv/my disk/reel", true, MOUNTINFO);
        assert!(matches!(&r, Creation::Refused(w) if w.contains("/srv/my disk")), "{r:?}");
        assert!(matches!(decide_at("/var/cache/reel", true, ""), Creation::Allowed(_)));
        assert!(matches!(decide_at("/srv/disk10/x", true, ""), Creation::Allowed(_)));
        let r = decide_at("/srv/disk1/reel", false, MOUNTINFO);
        assert!(matches!(&r, Creation::Refused(w) if w.contains("several disks")));
    }

    #[test]
    fn relative_paths_are_resolved_by_name() {
        let cwd = Path::new("/home/u/reel");
        assert_eq!(absolute(cwd, Path::new("./var/cache")), Path::new("/home/u/reel/var/cache"));
        assert_eq!(absolute(cwd, Path::new("../x")), Path::new("/home/u/x"));
        assert_eq!(absolute(cwd, Path::new("/srv/a/./b")), Path::new("/srv/a/b"));
    }
}
