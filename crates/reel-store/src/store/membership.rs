//! Which disks were in service: `disks.state` in every disk directory in service, so
//! that a disk that comes back (after a failure, a restart without it, a replacement)
//! is known to have missed the removals and purges made meanwhile, and starts empty.
//!
//! The file holds an epoch and the paths in service at that epoch:
//!
//! ```text
//! reel-disks 1
//! epoch 7
//! disk /srv/reel/a
//! disk /srv/reel/b
//! ```
//!
//! Every change of the set of disks in service (start, a failure, a disk brought back)
//! writes epoch + 1 into every disk in service (a temporary file renamed over the old
//! one). At start the highest epoch found on any disk present names the set; a present
//! disk missing from it was out of service and is cleared. A store without any file
//! (a new store, or one written before there were several disks) clears nothing.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// File name in each disk directory.
pub(super) const FILE: &str = "disks.state";
const MAGIC: &str = "reel-disks 1";

/// The set of disks in service at an epoch.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Membership {
    pub(super) epoch: u64,
    pub(super) disks: HashSet<PathBuf>,
}

/// Reads `dir`'s file; `None` if it is missing or not one of ours.
pub(super) fn read(dir: &Path) -> Option<Membership> {
    let text = std::fs::read_to_string(dir.join(FILE)).ok()?;
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let epoch = lines.next()?.strip_prefix("epoch ")?.parse().ok()?;
    let mut disks = HashSet::new();
    for l in lines {
        disks.insert(PathBuf::from(l.strip_prefix("disk ")?));
    }
    Some(Membership { epoch, disks })
}

/// The newest membership found in any of `dirs`.
pub(super) fn newest<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Option<Membership> {
    dirs.into_iter().filter_map(read).max_by_key(|m| m.epoch)
}

/// Writes `epoch` and `disks` into `dir` (atomically: a temporary file renamed over the
/// old one, synced).
pub(super) fn write(dir: &Path, epoch: u64, disks: &[&Path]) -> std::io::Result<()> {
    let mut text = format!("{MAGIC}\nepoch {epoch}\n");
    for d in disks {
        text.push_str("disk ");
        text.push_str(&d.to_string_lossy());
        text.push('\n');
    }
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()?;
    std::fs::rename(&tmp, dir.join(FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_epoch_names_the_set() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_eq!(newest([a.path(), b.path()]), None);
        write(a.path(), 3, &[a.path(), b.path()]).unwrap();
        write(b.path(), 4, &[b.path()]).unwrap();
        let m = newest([a.path(), b.path()]).unwrap();
        assert_eq!(m.epoch, 4);
        assert!(m.disks.contains(b.path()) && !m.disks.contains(a.path()));
        std::fs::write(a.path().join(FILE), "something else\n").unwrap();
        assert_eq!(read(a.path()), None);
    }
}
