//! `--runtime fork`'s access log: the destination the parent opens before
//! any fork, and each child's write of its own lines to it (the design and
//! why it is safe are in the module doc of [`super`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use site::access_log::{LineWriter, WhenFull};

/// The most a pipe or FIFO takes in one piece from one `write(2)`: a
/// longer line could be cut by another child's.
pub const PIPE_BUF: usize = libc::PIPE_BUF;
/// How often at most stderr hears about dropped lines.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// What the destination is, which decides how a line is written.
/// A regular file: any line in one `write(2)`.
const FILE: u8 = 0;
/// A pipe, FIFO, terminal or device: a line of at most [`PIPE_BUF`] bytes
/// in one `write(2)`.
const PIPE: u8 = 1;
/// A socket (stdout under systemd's journal): as a pipe, with `send(2)`,
/// which takes `MSG_DONTWAIT` per call.
const SOCKET: u8 = 2;

/// The log's counters, in the stats page every process shares
/// ([`super::shared::Page::log`]): each child adds its lines to them.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Counts {
    /// Lines written whole.
    pub written: AtomicU64,
    /// Lines dropped: the destination full (under `--access-log-full
    /// drop`), a write failed, or a line too long for a pipe.
    pub dropped: AtomicU64,
    /// How many of `dropped` stderr has been told about.
    reported: AtomicU64,
    /// Why the last line was dropped: its errno (`EMSGSIZE`: too long for
    /// a pipe).
    last_errno: AtomicI32,
    /// When stderr was last told, in milliseconds after [`ForkLog`]'s
    /// epoch plus one (0: never).
    last_report_ms: AtomicU64,
}

impl Counts {
    /// The `access_log` member of the stats document, as every design
    /// writes it.
    pub fn stats_members(&self, s: &mut String) {
        let (written, dropped) = (self.written.load(Relaxed), self.dropped.load(Relaxed));
        site::access_log::stats_members(s, written, dropped);
    }
}

/// The access log's destination, opened by the parent and inherited by
/// every child, which writes its own lines to it ([`LineWriter`]).
#[derive(Debug)]
pub struct ForkLog {
    /// The destination; its fd number stays the same when the parent
    /// reopens the file ([`ForkLog::reopen`]).
    out: File,
    /// The file's path (`None`: stdout).
    path: Option<PathBuf>,
    when_full: WhenFull,
    /// [`FILE`], [`PIPE`] or [`SOCKET`]: what `out` is now (a reopened
    /// path may have become another kind).
    kind: AtomicU8,
    counts: &'static Counts,
    /// The parent's start: the reports' clock in every process (an
    /// `Instant` is `CLOCK_MONOTONIC`, one clock for the whole system).
    epoch: Instant,
}

impl ForkLog {
    /// Opens `path` for appending (stdout for `-`), non-blocking under
    /// `drop`, counting into `counts` (which must be the shared page's).
    /// Call in the parent, before the first fork.
    pub fn open(path: &Path, when_full: WhenFull, counts: &'static Counts) -> io::Result<ForkLog> {
        let (out, own, path) = match path == Path::new("-") {
            true => {
                let (out, own) = stdout_for(when_full)?;
                (out, own, None)
            }
            false => (open_append(path)?, true, Some(path.to_path_buf())),
        };
        // Set on the open file description, so every child's copy of the
        // fd has it (and only ever on one of our own: see `stdout_for`).
        if own && when_full == WhenFull::Drop {
            reactor::sys::set_nonblocking(out.as_fd(), true)?;
        }
        Ok(ForkLog {
            kind: AtomicU8::new(kind_of(&out)?),
            out,
            path,
            when_full,
            counts,
            epoch: Instant::now(),
        })
    }

    /// Opens the log's path again (logrotate renamed the file) and puts it
    /// in the old one's place under the same fd number: the children forked
    /// from now on write to the new file, the ones already running keep
    /// the old one until they exit. Stdout is left as it is; an error (the
    /// directory is gone, no permission) leaves the old file in place. Call
    /// in the parent.
    pub fn reopen(&self) -> io::Result<String> {
        let Some(path) = &self.path else {
            return Ok("access log: on stdout, nothing to reopen".to_string());
        };
        let file = open_append(path)?;
        if self.when_full == WhenFull::Drop {
            reactor::sys::set_nonblocking(file.as_fd(), true)?;
        }
        let kind = kind_of(&file)?;
        // SAFETY: both fds are open and this process's; `dup3` closes the
        // old file under `self.out`'s number and puts the new one there in
        // one step, so `self.out` still owns one open fd (and `file` its
        // own, closed when it drops).
        reactor::syscall!(unsafe {
            libc::dup3(file.as_raw_fd(), self.out.as_raw_fd(), libc::O_CLOEXEC)
        })?;
        self.kind.store(kind, Relaxed);
        Ok(format!("access log: reopened {}", path.display()))
    }

    /// Tells stderr how many lines were dropped since it was last told,
    /// and why: at most every `REPORT_EVERY` (by whichever process drops
    /// a line once that long has passed), or now with `last` (the parent,
    /// as it stops).
    pub fn report(&self, last: bool) {
        let c = self.counts;
        if !last {
            let now = (self.epoch.elapsed().as_millis() as u64).saturating_add(1);
            let prev = c.last_report_ms.load(Relaxed);
            if prev != 0 && now.saturating_sub(prev) < REPORT_EVERY.as_millis() as u64 {
                return;
            }
            // Of the processes that find the period over, the one that
            // moves its start on reports.
            if (c
                .last_report_ms
                .compare_exchange(prev, now, Relaxed, Relaxed))
            .is_err()
            {
                return;
            }
        }
        let dropped = c.dropped.load(Relaxed);
        let before = c.reported.fetch_max(dropped, Relaxed);
        if dropped <= before {
            return;
        }
        let why = match c.last_errno.load(Relaxed) {
            libc::EAGAIN => "the log's destination is not keeping up".to_string(),
            libc::EMSGSIZE => {
                format!("a line longer than {PIPE_BUF} bytes cannot go to a pipe in one write")
            }
            e => format!("writing failed: {}", io::Error::from_raw_os_error(e)),
        };
        // Not `eprintln!`, which panics if stderr fails.
        let _ = writeln!(
            io::stderr(),
            "httplite: access log: {} lines dropped ({why})",
            dropped - before
        );
    }

    /// Counts a line as dropped for `errno`, and reports if it is time.
    fn drop_line(&self, errno: i32) {
        self.counts.dropped.fetch_add(1, Relaxed);
        self.counts.last_errno.store(errno, Relaxed);
        self.report(false);
    }

    /// One `write(2)` (or `send(2)`) of `buf`.
    fn write_some(&self, kind: u8, buf: &[u8]) -> io::Result<usize> {
        if kind != SOCKET {
            return (&self.out).write(buf);
        }
        let mut flags = libc::MSG_NOSIGNAL;
        if self.when_full == WhenFull::Drop {
            // The description is shared with the process's stdout, so it
            // cannot be made non-blocking: the call is, instead.
            flags |= libc::MSG_DONTWAIT;
        }
        // SAFETY: `buf` is readable for its length during the call.
        let n = reactor::syscall!(unsafe {
            libc::send(self.out.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags)
        })?;
        Ok(n as usize)
    }
}

impl LineWriter for ForkLog {
    /// Writes `line` with one `write(2)`: positioned and written in one
    /// piece among the other children's, as the module doc of [`super`]
    /// says; a full pipe under `drop` (`EAGAIN`), a failure or a line too
    /// long for a pipe drops it, counted.
    fn write_line(&self, line: &[u8]) {
        let kind = self.kind.load(Relaxed);
        if kind != FILE && line.len() > PIPE_BUF {
            return self.drop_line(libc::EMSGSIZE);
        }
        let mut rest = line;
        while !rest.is_empty() {
            match self.write_some(kind, rest) {
                // Only a file that fills up part-way (the next write then
                // fails) or a socket takes part of a line.
                Ok(0) => return self.drop_line(libc::EIO),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.drop_line(e.raw_os_error().unwrap_or(libc::EIO)),
            }
        }
        self.counts.written.fetch_add(1, Relaxed);
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Stdout for `--access-log -`, and whether its file description is ours
/// alone. A copy of fd 1 shares the description the process prints
/// through (and its shell may hold): made non-blocking, a full pipe would
/// fail `println!` and leave the shell's terminal non-blocking after we
/// exit. So under `drop` a pipe, FIFO or terminal is opened again through
/// `/proc/self/fd`, for a description of our own. A regular file is
/// shared (its writes never wait for a reader, and one description keeps
/// one offset: the kernel orders writes through it), and so is a socket,
/// written with `MSG_DONTWAIT`.
fn stdout_for(when_full: WhenFull) -> io::Result<(File, bool)> {
    let shared = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let t = shared.metadata()?.file_type();
    if when_full == WhenFull::Block || t.is_file() || t.is_socket() {
        return Ok((shared, false));
    }
    let again = format!("/proc/self/fd/{}", shared.as_raw_fd());
    Ok((OpenOptions::new().append(true).open(again)?, true))
}

/// [`FILE`], [`PIPE`] or [`SOCKET`].
fn kind_of(out: &File) -> io::Result<u8> {
    let t = out.metadata()?.file_type();
    Ok(if t.is_file() {
        FILE
    } else if t.is_socket() {
        SOCKET
    } else {
        PIPE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters that outlive the test (as the shared page's do).
    fn counts() -> &'static Counts {
        Box::leak(Box::default())
    }

    #[test]
    fn a_full_pipe_drops_and_counts_and_a_long_line_is_dropped_whole() {
        let (r, w) = reactor::sys::pipe().unwrap();
        let out = File::from(w);
        let counts = counts();
        let log = ForkLog {
            kind: AtomicU8::new(kind_of(&out).unwrap()),
            out,
            path: None,
            when_full: WhenFull::Drop,
            counts,
            epoch: Instant::now(),
        };
        assert_eq!(log.kind.load(Relaxed), PIPE);
        log.write_line(&[b'x'; PIPE_BUF + 1]);
        assert_eq!(counts.dropped.load(Relaxed), 1, "too long for one write");
        assert_eq!(counts.last_errno.load(Relaxed), libc::EMSGSIZE);
        // 200 KB into a 64 KiB pipe nobody reads: the rest is dropped.
        let line = [b'y'; 1000];
        for _ in 0..200 {
            log.write_line(&line);
        }
        let written = counts.written.load(Relaxed);
        assert!(written > 0 && written < 200, "{written}");
        assert_eq!(counts.dropped.load(Relaxed), 1 + 200 - written);
        assert_eq!(counts.last_errno.load(Relaxed), libc::EAGAIN);
        // What is in the pipe is whole lines only.
        let mut got = vec![0u8; 1 << 20];
        let n = reactor::sys::read(r.as_fd(), &mut got).unwrap();
        assert_eq!(n as u64, written * 1000);
        assert!(got[..n].iter().all(|&b| b == b'y'));
        let mut s = String::new();
        counts.stats_members(&mut s);
        let dropped = 201 - written;
        assert_eq!(
            s,
            format!(",\"access_log\":{{\"written\":{written},\"dropped\":{dropped}}}")
        );
    }
}
