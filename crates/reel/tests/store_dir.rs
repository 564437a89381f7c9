//! Issue 44.1: a store of one disk creates its missing directory, except under a mount
//! point of `/etc/fstab` that is not mounted (the directory would fill the file system
//! under it). Run for real in a mount namespace of its own (`unshare -m`), where a test
//! `/etc/fstab` is bind-mounted over the host's and a tmpfs mounted on the mount point
//! or not; the host's mounts are never touched.

use std::path::Path;
use std::process::Command;

use reel_test_support::{skip, which};

use crate::common::*;

/// Runs `reel <sub> --config conf` in a new mount namespace whose `/etc/fstab` is `fstab`,
/// with a tmpfs mounted on `mount` first when given: exit code and stderr.
fn in_namespace(
    fstab: &Path,
    mount: Option<&Path>,
    sub: &str,
    conf: &Path,
) -> (Option<i32>, String) {
    let script = "mount --bind \"$FSTAB\" /etc/fstab || exit 99
        if [ -n \"$MNT\" ]; then mount -t tmpfs -o size=256m tmpfs \"$MNT\" || exit 99; fi
        exec \"$BIN\" \"$SUB\" --config \"$CONF\"";
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", script])
        .env("FSTAB", fstab)
        .env("MNT", mount.map(|m| m.as_os_str()).unwrap_or_default())
        .env("BIN", BIN)
        .env("SUB", sub)
        .env("CONF", conf)
        .env_remove("NOTIFY_SOCKET")
        .current_dir(conf.parent().unwrap())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_store_directory_is_not_created_under_an_unmounted_fstab_mount_point() {
    if which("unshare").is_none() || which("mount").is_none() {
        return skip("no unshare or mount (util-linux)");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mnt = d.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let fstab = d.join("fstab");
    std::fs::write(&fstab, format!("# test\ntmpfs {} tmpfs defaults 0 0\n", mnt.display()))
        .unwrap();
    let probe = Command::new("unshare")
        .args(["-m", "mount", "--bind"])
        .arg(&fstab)
        .arg("/etc/fstab")
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let why = probe.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned());
        return skip(&format!("cannot bind-mount in a new mount namespace: {why:?}"));
    }
    let o = Origin::start("o");
    let mut c = Conf::new(d, &o);
    let store = mnt.join("reel/cache");
    c.raw = Some(c.render().replace(
        &format!("path = \"{}/store\"", d.display()),
        &format!("path = \"{}\"", store.display()),
    ));
    c.write();
    let file = c.path().display().to_string();

    // Not mounted: refused by both, with the rule, and nothing is created.
    for sub in ["check", "serve"] {
        let (code, err) = in_namespace(&fstab, None, sub, &c.path());
        assert_eq!(code, Some(64), "{sub}: {err}");
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("{file}:")) && l.contains(": store.path: "))
            .unwrap_or_else(|| panic!("{sub}: no store.path line:\n{err}"));
        assert!(
            line.contains(&format!(
                "{} is a mount point in /etc/fstab that is not mounted",
                mnt.display()
            )),
            "{sub}: {line}"
        );
        assert!(line.contains("not created"), "{line}");
        assert!(!mnt.join("reel").exists(), "{sub} created the directory on the wrong file system");
    }

    // Mounted: `check` says the directory will be created, and by which rule.
    let (code, err) = in_namespace(&fstab, Some(&mnt), "check", &c.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with(&format!("note: {file}:"))
            && l.contains(": store.path: ")
            && l.contains("created at start: a store of one disk")),
        "{err}"
    );
}

/// The store of one disk of the shipped config's kind (no mount point on its path) is
/// created, and `check` says so first.
#[test]
fn a_store_directory_with_no_mount_point_on_its_path_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let c = Conf::new(dir.path(), &o);
    c.write();
    let out = Command::new(BIN).arg("check").arg("--config").arg(c.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("does not exist: created at start"), "{err}");
    assert!(!dir.path().join("store").exists(), "check creates nothing");
    let reel = Reel::start(&c);
    assert!(dir.path().join("store").is_dir());
    drop(reel);
}

/// In a store of several disks a missing directory is never created: `check` passes (the
/// other disk serves) and says which rule left the disk out.
#[test]
fn a_missing_disk_of_several_is_not_created_and_check_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    let mut c = Conf::new(dir.path(), &o);
    c.raw = Some(c.with_disks(&[&a, &b]));
    c.write();
    let out = Command::new(BIN).arg("check").arg("--config").arg(c.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("note: ")
            && l.contains(": store.disk[1].path: ")
            && l.contains("a store of several disks creates no disk directory")
            && l.contains("serve starts without this disk")),
        "{err}"
    );
    assert!(!b.exists());
}
