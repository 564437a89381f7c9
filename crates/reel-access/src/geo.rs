//! Countries of addresses: a MaxMind DB (GeoLite2 / GeoIP2 Country or City, or any
//! database whose records carry `country.iso_code`) read into memory, shared by every
//! worker and swapped whole ([`arc_swap`]) when the file changes. [`Geo::refresh`] looks at
//! the file's identity (device, inode, size, modification time: one `stat`) and reads it
//! again only when that changed; a file that does not open as a database leaves the
//! database in use as it was. [`Geo::watch`] runs that check once a second on a thread of
//! its own, so requests never touch the file system.

use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Deserialize;

use crate::rules::canonical;

/// An ISO 3166-1 alpha-2 country code, uppercase ASCII (`*b"DE"`).
pub type Country = [u8; 2];

/// Why a database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a MaxMind DB.
    #[error("{} is not a MaxMind DB file: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What the reader said.
        message: String,
    },
}

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

/// One database, as read.
struct Db {
    reader: maxminddb::Reader<Vec<u8>>,
    stamp: Stamp,
}

/// The part of a record reel reads: the country's code (borrowed from the database, so a
/// lookup allocates nothing). `registered_country` stands in for an address that has no
/// `country` (anycast and satellite ranges).
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    country: Option<Named<'a>>,
    #[serde(borrow)]
    registered_country: Option<Named<'a>>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    iso_code: Option<&'a str>,
}

/// What [`Geo::refresh`] did.
#[derive(Debug)]
pub enum Refresh {
    /// The file is the one in use.
    Unchanged,
    /// The file changed and the new database is in use.
    Swapped,
    /// The file changed but does not read as a database: the old one stays in use.
    Kept(GeoError),
}

/// The shared database of one file (see the module doc).
pub struct Geo {
    path: PathBuf,
    db: ArcSwap<Db>,
    /// Serialises refreshes (the watcher's and a reload's).
    refreshing: Mutex<()>,
    swaps: AtomicU64,
    failures: AtomicU64,
}

impl std::fmt::Debug for Geo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Geo").field("path", &self.path).finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Db, GeoError> {
    let read_err = |source| GeoError::Read { path: path.to_path_buf(), source };
    let stamp = Stamp::of(path).map_err(read_err)?;
    let bytes = std::fs::read(path).map_err(read_err)?;
    let reader = maxminddb::Reader::from_source(bytes)
        .map_err(|e| GeoError::Format { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(Db { reader, stamp })
}

impl Geo {
    /// Reads the database at `path`.
    pub fn open(path: impl Into<PathBuf>) -> Result<Geo, GeoError> {
        let path = path.into();
        let db = read(&path)?;
        Ok(Geo {
            path,
            db: ArcSwap::from_pointee(db),
            refreshing: Mutex::new(()),
            swaps: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// Checks that `path` reads as a database (for `reel check`).
    pub fn check(path: &Path) -> Result<(), GeoError> {
        read(path).map(drop)
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The country of `ip` ([`canonical`]), if the database has one.
    pub fn country(&self, ip: IpAddr) -> Option<Country> {
        let db = self.db.load();
        let rec: Record<'_> = lookup(&db.reader, canonical(ip))?;
        let code = rec
            .country
            .and_then(|c| c.iso_code)
            .or_else(|| rec.registered_country.and_then(|c| c.iso_code))?;
        match code.as_bytes() {
            &[a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Some([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
            }
            _ => None,
        }
    }

    /// Reads the file again if it is not the one in use (see the module doc).
    pub fn refresh(&self) -> Refresh {
        let _one = self.refreshing.lock().unwrap_or_else(PoisonError::into_inner);
        if Stamp::of(&self.path).is_ok_and(|s| s == self.db.load().stamp) {
            return Refresh::Unchanged;
        }
        match read(&self.path) {
            Ok(db) => {
                self.db.store(Arc::new(db));
                self.swaps.fetch_add(1, Relaxed);
                Refresh::Swapped
            }
            Err(e) => {
                // The database in use keeps its stamp: the next refresh tries the file
                // again (the watcher skips a version it saw broken).
                self.failures.fetch_add(1, Relaxed);
                Refresh::Kept(e)
            }
        }
    }

    /// Databases swapped in since start.
    pub fn swaps(&self) -> u64 {
        self.swaps.load(Relaxed)
    }

    /// Changed files that did not read as a database (the old one was kept).
    pub fn failures(&self) -> u64 {
        self.failures.load(Relaxed)
    }

    /// Refreshes every `every` on a thread of its own until the last `Arc` of `geo` is
    /// dropped, logging each swap, and each broken version of the file once.
    pub fn watch(geo: &Arc<Geo>, every: Duration) -> std::io::Result<()> {
        let weak: Weak<Geo> = Arc::downgrade(geo);
        std::thread::Builder::new().name("reel-geo".into()).spawn(move || {
            let mut last_bad: Option<Stamp> = None;
            loop {
                std::thread::sleep(every);
                let Some(geo) = weak.upgrade() else { return };
                let stamp = Stamp::of(&geo.path).ok();
                if stamp.is_some() && stamp == last_bad {
                    continue;
                }
                match geo.refresh() {
                    Refresh::Unchanged => {}
                    Refresh::Swapped => {
                        last_bad = None;
                        tracing::info!(path = %geo.path.display(), "geo database reloaded");
                    }
                    Refresh::Kept(e) => {
                        last_bad = stamp;
                        tracing::error!(error = %e, "geo database not reloaded: keeping the one in use");
                    }
                }
            }
        })?;
        Ok(())
    }
}

/// The record of `ip`, if the database has one that decodes as `T` (a lookup error, such as
/// an IPv6 address in an IPv4-only database, is no record).
fn lookup<'d, T: Deserialize<'d>>(reader: &'d maxminddb::Reader<Vec<u8>>, ip: IpAddr) -> Option<T> {
    reader.lookup::<T>(ip).ok().flatten()
}
