//! The access log's writer: one thread owns the destination, and workers
//! hand it batches through a bounded queue, so a log that stalls (a pipe
//! nobody reads, a collector that stopped) or fails (`ENOSPC`, `EIO`) never
//! stops an event loop. With `--access-log-full drop` (the default) a batch
//! that finds the queue full is dropped and counted; with `block` the worker
//! waits for room (back-pressure instead of loss). Dropped lines are counted
//! in `/_httplite/stats` and reported on stderr at most every few seconds,
//! with the reason; writing resumes when the destination recovers.
//!
//! The writer itself never blocks for long either: before each write it
//! waits for the destination with `poll(2)` for at most a second, and to a
//! pipe or socket it writes at most `PIPE_BUF` bytes at a time (a pipe that
//! polls writable takes that much without blocking), so a stalled reader
//! leaves it free to report.
//!
//! Log rotation: `LogSink::reopen` (SIGHUP, the console's `reopen`) opens
//! the path again, in the caller's thread, and hands the new file to the
//! writer, which switches to it before its next batch; the old file is
//! closed then. A failed open changes nothing and is reported to the caller.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Batches waiting for the writer at most (each up to the per-worker
/// flush size, 16 KiB): about a megabyte of log.
const QUEUE: usize = 64;
/// How often at most stderr hears about dropped lines.
const REPORT_EVERY: Duration = Duration::from_secs(5);
/// One wait for a stalled destination.
const POLL_MS: libc::c_int = 1000;
/// Bytes per write to a pipe or socket (Linux's `PIPE_BUF`).
const PIPE_CHUNK: usize = 4096;

/// What a worker does with a batch when the writer is behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Drop it and count its lines (requests never wait for the log).
    Drop,
    /// Wait for room: the log slows the server down instead of losing lines.
    Block,
}

/// Where the log goes: the sending side of the writer's queue, shared by
/// all workers.
#[derive(Clone)]
pub struct LogSink {
    tx: SyncSender<Batch>,
    when_full: WhenFull,
    counters: Arc<Counters>,
    /// A file opened again for the writer to switch to.
    next_file: Arc<Mutex<Option<File>>>,
    /// The file's path (`None`: stdout or a file given open).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink")
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}

/// The writer thread, for waiting until it has written what was queued.
#[derive(Debug)]
pub struct LogWriter {
    done: Receiver<()>,
}

struct Batch {
    bytes: Vec<u8>,
    lines: u64,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    /// Dropped because the queue was full (the writer is behind).
    dropped_behind: AtomicU64,
    /// Dropped because a write failed.
    dropped_failed: AtomicU64,
}

impl LogSink {
    /// Opens `path` for appending (stdout for `-`) and starts the writer.
    pub fn open(path: &Path, when_full: WhenFull) -> io::Result<(LogSink, LogWriter)> {
        let (out, path) = if path == Path::new("-") {
            (File::from(io::stdout().as_fd().try_clone_to_owned()?), None)
        } else {
            (open_append(path)?, Some(path.to_path_buf()))
        };
        let (mut sink, writer) = LogSink::start(out, when_full)?;
        sink.path = path;
        Ok((sink, writer))
    }

    /// Opens the log's path again (after logrotate renamed the file) and
    /// has the writer switch to the new file before its next batch. Stdout
    /// is left as it is. An error (the directory is gone, no permission)
    /// leaves the writer on the old file.
    pub fn reopen(&self) -> io::Result<String> {
        let Some(path) = &self.path else {
            return Ok("access log: on stdout, nothing to reopen".to_string());
        };
        let file = open_append(path)?;
        *self.next_file.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
        // Wake the writer (an empty batch); a full queue wakes it anyway.
        let _ = self.tx.try_send(Batch {
            bytes: Vec::new(),
            lines: 0,
        });
        Ok(format!("access log: reopened {}", path.display()))
    }

    /// Starts the writer thread on an open destination.
    pub fn start(out: File, when_full: WhenFull) -> io::Result<(LogSink, LogWriter)> {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel();
        let counters = Arc::new(Counters::default());
        let next_file = Arc::new(Mutex::new(None));
        let (c, next) = (counters.clone(), next_file.clone());
        std::thread::Builder::new()
            .name("httplite-log".into())
            .spawn(move || {
                Writer::new(out, c, next).run(&rx);
                let _ = done_tx.send(());
            })?;
        let sink = LogSink {
            tx,
            when_full,
            counters,
            next_file,
            path: None,
        };
        Ok((sink, LogWriter { done }))
    }

    /// Queues a batch of whole lines (see [`WhenFull`]).
    pub(crate) fn write_batch(&self, buf: &[u8]) {
        let lines = buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let batch = Batch {
            bytes: buf.to_vec(),
            lines,
        };
        let sent = match self.when_full {
            WhenFull::Drop => match self.tx.try_send(batch) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            WhenFull::Block => self.tx.send(batch).is_ok(),
        };
        if !sent {
            self.counters.dropped_behind.fetch_add(lines, Relaxed);
        }
    }

    /// Its counters, for the stats document (without holding the queue
    /// open: the writer stops once every sink is gone).
    pub fn counters(&self) -> LogCounters {
        LogCounters(self.counters.clone())
    }
}

/// The writer's counters (see [`LogSink::counters`]).
#[derive(Debug, Clone)]
pub struct LogCounters(Arc<Counters>);

impl LogCounters {
    /// The log's members of the stats document
    /// (`,"access_log":{"written":…,"dropped":…}`): lines written, and
    /// lines dropped (the writer behind, or a write failed).
    pub fn stats_members(&self, s: &mut String) {
        let c = &self.0;
        let dropped = c.dropped_behind.load(Relaxed) + c.dropped_failed.load(Relaxed);
        stats_members(s, c.written.load(Relaxed), dropped);
    }
}

/// The log's members of the stats document for `written` and `dropped`
/// lines, as [`LogCounters::stats_members`] writes them: for a log that
/// counts its lines elsewhere (`--runtime fork` counts them in memory its
/// processes share), so that the document reads the same.
pub fn stats_members(s: &mut String, written: u64, dropped: u64) {
    use std::fmt::Write as _;
    let _ = write!(
        s,
        ",\"access_log\":{{\"written\":{written},\"dropped\":{dropped}}}"
    );
}

impl LogWriter {
    /// Waits at most `within` for the writer to write what is queued and
    /// stop (it stops once every [`LogSink`] is dropped); `false` if it did
    /// not (a stalled destination must not hold up the server's exit).
    pub fn finish(self, within: Duration) -> bool {
        self.done.recv_timeout(within).is_ok()
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The writer thread's state.
struct Writer {
    out: File,
    next_file: Arc<Mutex<Option<File>>>,
    /// A pipe, FIFO or socket: written `PIPE_CHUNK` bytes at a time.
    stream: bool,
    counters: Arc<Counters>,
    last_report: Option<Instant>,
    reported: u64,
    last_error: Option<String>,
}

impl Writer {
    fn new(out: File, counters: Arc<Counters>, next_file: Arc<Mutex<Option<File>>>) -> Writer {
        Writer {
            stream: is_stream(&out),
            out,
            next_file,
            counters,
            last_report: None,
            reported: 0,
            last_error: None,
        }
    }

    fn run(&mut self, rx: &Receiver<Batch>) {
        loop {
            let got = rx.recv_timeout(Duration::from_secs(1));
            self.switch_file();
            match got {
                Ok(batch) if batch.bytes.is_empty() => {}
                Ok(batch) => match self.write_all(&batch.bytes) {
                    Ok(()) => {
                        self.counters.written.fetch_add(batch.lines, Relaxed);
                    }
                    Err(e) => {
                        self.counters.dropped_failed.fetch_add(batch.lines, Relaxed);
                        self.last_error = Some(e.to_string());
                    }
                },
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.report(false);
        }
        self.report(true);
    }

    /// Switches to a reopened file, if one is waiting.
    fn switch_file(&mut self) {
        let next = self
            .next_file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(file) = next {
            self.stream = is_stream(&file);
            self.out = file;
        }
    }

    /// Writes `buf`, waiting for a stalled destination a second at a time
    /// (reporting drops meanwhile).
    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            if !self.writable()? {
                self.report(false);
                continue;
            }
            let n = if self.stream {
                buf.len().min(PIPE_CHUNK)
            } else {
                buf.len()
            };
            match self.out.write(&buf[..n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether a write would not block, waiting up to `POLL_MS`.
    fn writable(&self) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.out.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        match rc {
            -1 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    return Ok(false);
                }
                Err(e)
            }
            // POLLERR/POLLHUP: the write reports the error.
            _ => Ok(rc > 0),
        }
    }

    /// One stderr line about lines dropped since the last one, at most
    /// every `REPORT_EVERY` (or now, at the end).
    fn report(&mut self, last: bool) {
        let c = &self.counters;
        let dropped = c.dropped_behind.load(Relaxed) + c.dropped_failed.load(Relaxed);
        if dropped == self.reported {
            return;
        }
        if !last && self.last_report.is_some_and(|t| t.elapsed() < REPORT_EVERY) {
            return;
        }
        let why = match self.last_error.take() {
            Some(e) => format!("writing failed: {e}"),
            None => "the log's destination is not keeping up".to_string(),
        };
        eprintln!(
            "httplite: access log: {} lines dropped ({why})",
            dropped - self.reported
        );
        self.reported = dropped;
        self.last_report = Some(Instant::now());
    }
}

/// A pipe, FIFO or socket (written `PIPE_CHUNK` bytes at a time).
fn is_stream(out: &File) -> bool {
    out.metadata().is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_socket()
    })
}
