//! The operator console (`--console`): commands typed on stdin, answered on
//! stdout, while the server runs.
//!
//! Stdin is read the way the server reads sockets: fd 0 is made
//! non-blocking and registered with a reactor, and a task waits for its
//! edges. The console has its own thread and executor [`Runtime`]
//! (one task), so that a worker's loop never carries it and a slow terminal
//! never slows a request. `O_NONBLOCK` belongs to the open file description,
//! which the shell that started us shares: [`Console`] puts the flag back
//! when dropped, or the shell would see `EAGAIN` on its next read.
//!
//! Stdin that epoll cannot watch (a regular file, `/dev/null`) is read on
//! the same thread with plain blocking reads, which for such files never
//! wait. End of input ends the console, not the server.

mod commands;

use std::io::{self, Write as _};
use std::os::fd::{AsFd, RawFd};

use executor::Runtime;
use reactor::{Interest, Reactor, sys};

pub use commands::{Command, ConsoleCtx, HELP, Reply, execute, jobs_table, quit_text, stats_table};

const STDIN: RawFd = 0;
/// Longest command line kept; the rest of a longer one is dropped.
const MAX_LINE: usize = 4096;

/// The running console. Dropping it restores stdin's blocking mode; the
/// thread itself ends at end of input or `quit` (or with the process).
#[derive(Debug)]
pub struct Console {
    /// Stdin's file status flags before we touched them.
    saved_flags: Option<i32>,
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(flags) = self.saved_flags {
            // SAFETY: F_SETFL with an int argument; no memory is passed.
            let _ = reactor::syscall!(unsafe { libc::fcntl(STDIN, libc::F_SETFL, flags) });
        }
    }
}

/// Starts the console thread.
pub fn start(ctx: ConsoleCtx) -> io::Result<Console> {
    // SAFETY: F_GETFL takes no pointer; a closed fd 0 only yields EBADF.
    let flags = reactor::syscall!(unsafe { libc::fcntl(STDIN, libc::F_GETFL) })?;
    let console = Console {
        saved_flags: (flags & libc::O_NONBLOCK == 0).then_some(flags),
    };
    std::thread::Builder::new()
        .name("httplite-console".into())
        .spawn(move || {
            if let Err(e) = run(&ctx) {
                eprintln!("httplite: console: {e}");
            }
        })?;
    Ok(console)
}

/// Stdin read by a loop other than the console thread's (the fork parent's
/// `poll`, which may start no thread): made non-blocking, split into
/// lines, and put back in blocking mode when dropped. `poll` reports a
/// regular file or `/dev/null` always readable, so such a stdin needs no
/// fallback here: its reads never wait, and end of input comes at once.
#[derive(Debug)]
pub struct StdinLines {
    _restore: Console,
    lines: Lines,
    open: bool,
}

impl StdinLines {
    /// Makes stdin non-blocking and says so on stdout, as the console
    /// thread does.
    pub fn open() -> io::Result<StdinLines> {
        // SAFETY: F_GETFL takes no pointer; a closed fd 0 only yields EBADF.
        let flags = reactor::syscall!(unsafe { libc::fcntl(STDIN, libc::F_GETFL) })?;
        let restore = Console {
            saved_flags: (flags & libc::O_NONBLOCK == 0).then_some(flags),
        };
        sys::set_nonblocking(io::stdin().as_fd(), true)?;
        say("console: reading commands (type help)\n");
        Ok(StdinLines {
            _restore: restore,
            lines: Lines::default(),
            open: true,
        })
    }

    /// Stdin's fd, while commands may still come (not after end of input
    /// or `quit`).
    pub fn fd(&self) -> Option<RawFd> {
        self.open.then_some(STDIN)
    }

    /// Reads what stdin holds now and calls `line` for each complete line,
    /// until `line` returns true (`quit`: nothing more is read).
    pub fn read(&mut self, mut line: impl FnMut(&str) -> bool) -> io::Result<()> {
        let mut buf = [0u8; 1024];
        while self.open {
            match sys::read(io::stdin().as_fd(), &mut buf) {
                Ok(0) => {
                    eof();
                    self.open = false;
                }
                Ok(n) => {
                    if self.lines.feed(&buf[..n], &mut line) {
                        self.open = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.open = false;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// Prints `text` on stdout at once (a console's answer).
pub fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn run(ctx: &ConsoleCtx) -> io::Result<()> {
    let rt = Runtime::new()?;
    rt.block_on(async {
        sys::set_nonblocking(io::stdin().as_fd(), true)?;
        // SAFETY: stdin stays open for the whole process: std lends fd 0
        // out from any `Stdin` handle, and nothing here closes it.
        let reg = match unsafe { Reactor::current().register(io::stdin().as_fd()) } {
            Ok(reg) => reg,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                // Not pollable: reads of it never wait anyway.
                sys::set_nonblocking(io::stdin().as_fd(), false)?;
                say("console: reading commands (type help)\n");
                return read_lines(ctx, |buf| sys::read(io::stdin().as_fd(), buf));
            }
            Err(e) => return Err(e),
        };
        say("console: reading commands (type help)\n");
        let mut lines = Lines::default();
        let mut buf = [0u8; 1024];
        loop {
            let n = std::future::poll_fn(|cx| {
                reg.poll_io(cx, Interest::Readable, || {
                    sys::read(io::stdin().as_fd(), &mut buf)
                })
            })
            .await?;
            if n == 0 {
                eof();
                return Ok(());
            }
            if lines.feed(&buf[..n], |line| answer(ctx, line)) {
                return Ok(());
            }
        }
    })
}

/// The fallback loop over blocking reads.
fn read_lines(
    ctx: &ConsoleCtx,
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
) -> io::Result<()> {
    let mut lines = Lines::default();
    let mut buf = [0u8; 1024];
    loop {
        let n = match read(&mut buf) {
            Ok(0) => {
                eof();
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if lines.feed(&buf[..n], |line| answer(ctx, line)) {
            return Ok(());
        }
    }
}

fn eof() {
    say("console: end of input; the server carries on (stop it with SIGTERM)\n");
}

/// Runs one line; true when the console should stop (`quit`).
fn answer(ctx: &ConsoleCtx, line: &str) -> bool {
    match execute(ctx, line) {
        Reply::Text(t) => {
            say(&t);
            false
        }
        Reply::Quit(t) => {
            say(&t);
            ctx.lifecycle.drain();
            true
        }
    }
}

/// Splits input into lines, bounding how much of one line is kept.
#[derive(Debug, Default)]
struct Lines {
    partial: Vec<u8>,
    overlong: bool,
}

impl Lines {
    /// Feeds bytes; calls `line` for each complete line until it returns
    /// true (then returns true).
    fn feed(&mut self, mut bytes: &[u8], mut line: impl FnMut(&str) -> bool) -> bool {
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            self.push(&bytes[..nl]);
            bytes = &bytes[nl + 1..];
            let text = String::from_utf8_lossy(&self.partial).into_owned();
            let overlong = std::mem::take(&mut self.overlong);
            self.partial.clear();
            if overlong {
                say("console: line too long, ignored (type help)\n");
            } else if line(&text) {
                return true;
            }
        }
        self.push(bytes);
        false
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.partial.len());
        if bytes.len() > room {
            self.overlong = true;
        }
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_reads_and_stop_at_quit() {
        let mut lines = Lines::default();
        let mut seen = Vec::new();
        let mut take = |l: &str| {
            seen.push(l.to_string());
            l == "quit"
        };
        assert!(!lines.feed(b"sta", &mut take));
        assert!(!lines.feed(b"ts\r\nwork", &mut take));
        assert!(lines.feed(b"ers\nquit\nnever\n", &mut take));
        assert_eq!(seen, ["stats\r", "workers", "quit"]);
    }

    #[test]
    fn an_overlong_line_is_dropped_whole() {
        let mut lines = Lines::default();
        let mut seen = Vec::new();
        let long = vec![b'x'; MAX_LINE + 10];
        lines.feed(&long, |l| {
            seen.push(l.len());
            false
        });
        lines.feed(b"\nhelp\n", |l| {
            seen.push(l.len());
            false
        });
        assert_eq!(seen, [4], "only `help` gets through");
    }
}
