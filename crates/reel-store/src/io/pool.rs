//! The I/O thread pool of one disk lane: positional reads and writes on plain threads,
//! for disks without io_uring (or `REEL_STORE_IO=threads`) and for work the ring does not
//! take. Its threads live as long as the process.

use std::io;
use std::sync::{Arc, Mutex, mpsc};

/// Number of I/O threads in the fallback pool.
const POOL_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// The I/O thread pools, one per disk lane, started on first use.
static POOLS: Mutex<Vec<&'static Pool>> = Mutex::new(Vec::new());

/// The I/O thread pool of disk lane `lane`, started on first use. Its threads live as
/// long as the process (a pool is leaked, never dropped): a thread that exits makes
/// glibc madvise(DONTNEED) its stack, and the store promises no madvise calls. A disk
/// that is reopened (brought back into service) takes its lane's pool again.
pub(super) fn pool(lane: usize) -> io::Result<&'static Pool> {
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    while pools.len() <= lane {
        match Pool::new(POOL_THREADS) {
            Ok(p) => pools.push(Box::leak(Box::new(p))),
            Err(e) => {
                tracing::error!(error = %e, "cannot start store I/O threads");
                return Err(io::Error::other("store I/O threads unavailable"));
            }
        }
    }
    Ok(pools[lane])
}

/// Fallback I/O threads: blocking pread/pwrite off the workers, results back through
/// oneshot channels. Also runs the start-up scan.
pub(crate) struct Pool {
    tx: Mutex<mpsc::Sender<Job>>,
}

impl Pool {
    fn new(n: usize) -> io::Result<Pool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("reel-store-io-{i}")).spawn(move || {
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            })?;
        }
        Ok(Pool { tx: Mutex::new(tx) })
    }

    /// Runs `f` on a pool thread without waiting for it.
    pub(crate) fn spawn(&self, f: impl FnOnce() + Send + 'static) -> bool {
        self.tx.lock().ok().is_some_and(|tx| tx.send(Box::new(f)).is_ok())
    }

    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.tx.lock().ok()?.send(job).ok()?;
        rx.await.ok()
    }
}
