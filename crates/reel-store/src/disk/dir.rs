//! The store directory: its exclusive lock, the files that are the store's (volume
//! files, the checkpoint, spill files) cleared when a disk comes back, and the probe
//! write a disk must pass before it is put in service.

use std::fs::File;

use crate::StoreError;

/// The checkpoint's file name in the store directory (module `checkpoint`).
pub(super) const CHECKPOINT_FILE: &str = "index.ckpt";

/// How long [`lock_dir`] waits for another holder (in this process: a store being
/// dropped while its last maintenance pass ends) before giving up.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the exclusive lock of a store directory (`flock` on `DIR/lock`, which then
/// holds our PID): two stores must never write the same volumes, not from two
/// processes and not from one that reopens the store while an old handle lives on.
/// The lock goes with the returned file, also when the process dies.
pub(super) fn lock_dir(dir: &std::path::Path) -> Result<File, StoreError> {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    let path = dir.join("lock");
    let open_err = |source| StoreError::Open { path: path.clone(), source };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(open_err)?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(e) => return Err(open_err(e.into())),
        }
        if std::time::Instant::now() >= deadline {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            return Err(StoreError::Locked { path: dir.to_owned(), pid: pid.trim().to_owned() });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Fixed width, written in place: truncating the file would wait for the journal.
    let pid = format!("{:<19}\n", std::process::id());
    f.write_all_at(pid.as_bytes(), 0).map_err(open_err)?;
    Ok(f)
}

/// Deletes the volume files and the checkpoint of a disk directory (a disk that comes
/// back after it was out of service starts empty). Other files are left alone.
pub(super) fn clear_dir(dir: &std::path::Path) -> std::io::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ours = (name.starts_with("vol-") && name.ends_with(".dat"))
            || name.starts_with(CHECKPOINT_FILE)
            || (name.starts_with("spill-") && name.ends_with(".tmp"));
        if ours {
            std::fs::remove_file(e.path())?;
            n += 1;
        }
    }
    Ok(n)
}

/// Checks that the directory takes a write that reads back the same and survives a
/// sync: a disk that fails this is not put in service.
pub(super) fn probe(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("probe.tmp");
    let data: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    let r = (|| {
        f.write_all_at(&data, 0)?;
        f.sync_data()?;
        let mut back = vec![0u8; data.len()];
        f.read_exact_at(&mut back, 0)?;
        if back != data {
            return Err(std::io::Error::other("probe write read back different bytes"));
        }
        Ok(())
    })();
    let removed = std::fs::remove_file(&path);
    r.and(removed)
}
