//! The file sink: batches appended as they come, the file opened again on SIGUSR1
//! (logrotate's `postrotate`), `-` for standard output.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;

use crate::access_log::AccessLogError;
use crate::access_log::writer::{Batch, Out, SinkStats};

enum Dest {
    Stdout,
    File(File),
}

impl Dest {
    fn open(path: &PathBuf) -> std::io::Result<Dest> {
        if path.as_os_str() == "-" {
            return Ok(Dest::Stdout);
        }
        Ok(Dest::File(OpenOptions::new().create(true).append(true).open(path)?))
    }
}

pub(super) struct FileOut {
    path: PathBuf,
    dest: Dest,
}

impl FileOut {
    pub(super) fn open(path: PathBuf) -> Result<FileOut, AccessLogError> {
        let dest = Dest::open(&path)
            .map_err(|source| AccessLogError::Open { path: path.clone(), source })?;
        Ok(FileOut { path, dest })
    }
}

impl Out for FileOut {
    fn put(&mut self, b: &Batch, st: &SinkStats) {
        let r = match &mut self.dest {
            Dest::Stdout => std::io::stdout().lock().write_all(&b.bytes),
            Dest::File(f) => f.write_all(&b.bytes),
        };
        match r {
            Ok(()) => {
                st.written.fetch_add(b.lines, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => st.failed(&self.path.display().to_string(), b.lines, &e.to_string()),
        }
    }

    fn reopen(&mut self) {
        match Dest::open(&self.path) {
            Ok(d) => self.dest = d,
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "access log reopen failed; keeping the old file")
            }
        }
    }
}
