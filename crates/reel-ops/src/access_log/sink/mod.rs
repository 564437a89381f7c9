//! Where lines go: what each kind of sink needs to be started ([`SinkSpec`]) and the
//! [`Out`](super::writer::Out) of each kind, run on its own thread by the writer.

mod file;
mod http;
mod syslog;

use std::path::PathBuf;
use std::time::Duration;

use super::AccessLogError;
use super::writer::{Out, SinkHandle};

pub use http::Collector;
pub use syslog::SyslogTarget;

/// One destination of the access log.
#[derive(Debug, Clone, PartialEq)]
pub enum SinkSpec {
    /// A file (`-`: standard output), reopened on SIGUSR1.
    File {
        /// Its name (the `sink` label).
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// RFC 5424 messages to a syslog receiver.
    Syslog {
        /// Its name.
        name: String,
        /// Where to.
        target: SyslogTarget,
        /// The facility code (0-23).
        facility: u8,
        /// The APP-NAME.
        app_name: String,
        /// TCP connect and write timeout.
        timeout: Duration,
    },
    /// NDJSON batches POSTed to a collector.
    Http {
        /// Its name.
        name: String,
        /// Where to, and how.
        collector: Collector,
    },
}

impl SinkSpec {
    /// Its name (the `sink` label).
    pub fn name(&self) -> &str {
        match self {
            SinkSpec::File { name, .. }
            | SinkSpec::Syslog { name, .. }
            | SinkSpec::Http { name, .. } => name,
        }
    }

    /// Starts its thread. A file is opened here (so a bad path fails the start); a
    /// syslog receiver or a collector is reached from the thread, and one that is down
    /// costs dropped lines only.
    pub(crate) fn start(self) -> Result<SinkHandle, AccessLogError> {
        let name = self.name().to_owned();
        let (kind, out): (&'static str, Box<dyn Out>) = match self {
            SinkSpec::File { path, .. } => ("file", Box::new(file::FileOut::open(path)?)),
            SinkSpec::Syslog { target, facility, app_name, timeout, .. } => (
                "syslog",
                Box::new(syslog::SyslogOut::new(
                    name.clone(),
                    target,
                    facility,
                    &app_name,
                    timeout,
                )),
            ),
            SinkSpec::Http { collector, .. } => {
                ("http", Box::new(http::HttpOut::new(name.clone(), collector)))
            }
        };
        SinkHandle::spawn(name, kind, out)
            .map_err(|source| AccessLogError::Open { path: PathBuf::from("<thread>"), source })
    }
}
