//! MaxMind DB files for tests of country rules: a database written by MaxMind's format
//! with a maintained writer (PyPI's `mmdb-writer`, from `netaddr` sets), mapping the
//! networks a test names to countries in a GeoLite2-Country-shaped record
//! (`country.iso_code`), and the real GeoLite2 City database PyPI's `maxminddb-geolite2`
//! ships. The Python tools go into a virtual environment under the workspace's
//! `target/test-tools/`, made once and kept; a machine that cannot make it (no Python, no
//! registry) gets `None`, and the calling test reports itself skipped ([`skip`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use crate::skip;

/// Serialises the making of the environment within one test process.
static MAKING: Mutex<()> = Mutex::new(());

/// The workspace's `target/test-tools`.
fn tools_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("test-tools")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr)))
    }
}

/// The Python of a virtual environment with `mmdb-writer` and `netaddr`, made if need be.
fn python() -> Result<PathBuf, String> {
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = tools_dir().join("mmdb-venv");
    let py = venv.join("bin/python");
    if venv.join(".ready").is_file() {
        return Ok(py);
    }
    let python3 = crate::which("python3").ok_or("python3 is not installed")?;
    // A venv names its own path in its scripts, so it is made where it lives; `.ready`
    // says it is whole (one left half made is made again).
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(tools_dir()).map_err(|e| e.to_string())?;
    run(Command::new(python3).arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(["mmdb-writer==0.2.7", "netaddr"]))?;
    std::fs::write(venv.join(".ready"), b"").map_err(|e| e.to_string())?;
    Ok(py)
}

const WRITER: &str = r#"
import json, sys
from netaddr import IPSet
from mmdb_writer import MMDBWriter
w = MMDBWriter(ip_version=6, database_type="GeoLite2-Country", languages=["en"],
               description={"en": "reel test countries"}, ipv4_compatible=True)
for net, code in json.loads(sys.argv[2]):
    w.insert_network(IPSet([net]), {"country": {"iso_code": code, "names": {"en": code}}})
w.to_db_file(sys.argv[1])
"#;

/// Writes a GeoLite2-Country-shaped database at `path` mapping each network
/// (`"127.0.0.2/32"`) to its country (`"DE"`); written beside and renamed over `path`, as
/// `geoipupdate` replaces a database. `None` (the test reported skipped) when the writer
/// cannot be installed; a failure to write panics.
pub fn write_country_db(path: &Path, networks: &[(&str, &str)]) -> Option<()> {
    let py = match python() {
        Ok(p) => p,
        Err(e) => {
            skip(&format!("cannot install mmdb-writer (pip): {e}"));
            return None;
        }
    };
    let list: Vec<String> = networks.iter().map(|(n, c)| format!("[\"{n}\", \"{c}\"]")).collect();
    let tmp = path.with_extension("writing");
    run(Command::new(py).arg("-c").arg(WRITER).arg(&tmp).arg(format!("[{}]", list.join(","))))
        .expect("mmdb-writer writes the database");
    std::fs::rename(&tmp, path).expect("rename the database into place");
    Some(())
}

/// The GeoLite2 City database (2018) PyPI's `maxminddb-geolite2` ships, downloaded once
/// into `target/test-tools/`; `None` (the test reported skipped) when it cannot be had.
pub fn geolite2_city() -> Option<PathBuf> {
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tools_dir().join("geolite2");
    let db = dir.join("GeoLite2-City.mmdb");
    if db.is_file() {
        return Some(db);
    }
    let got = (|| -> Result<(), String> {
        let python3 = crate::which("python3").ok_or("python3 is not installed")?;
        let dl = tools_dir().join(format!("geolite2-dl.{}", std::process::id()));
        std::fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
        run(Command::new(python3)
            .args(["-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"])
            .args(["--disable-pip-version-check", "maxminddb-geolite2==2018.703", "-d"])
            .arg(&dl))?;
        run(Command::new("tar")
            .arg("-xzf")
            .arg(dl.join("maxminddb-geolite2-2018.703.tar.gz"))
            .arg("-C")
            .arg(&dl)
            .args(["--wildcards", "*/GeoLite2-City.mmdb", "--strip-components=2"]))?;
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::rename(dl.join("GeoLite2-City.mmdb"), &db).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(&dl);
        Ok(())
    })();
    match got {
        Ok(()) => Some(db),
        Err(e) => {
            skip(&format!("cannot get GeoLite2-City.mmdb (pip download maxminddb-geolite2): {e}"));
            None
        }
    }
}
