//! The parent's signals and its reaping: what each signal read from the
//! signalfd does, and `waitpid` until no ended child is left (see the
//! module doc of [`super`] for why a signalfd and why `WNOHANG` in a loop).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::{ExitStatus, Parent};

impl Parent {
    /// Drains the signalfd, reaping on SIGCHLD; whether a stop was asked.
    pub(super) fn read_signals(&mut self) -> io::Result<bool> {
        let mut stop = false;
        loop {
            // SAFETY: signalfd_siginfo is plain data; all-zero is valid.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: `info` is writable for `size` bytes.
            let r = unsafe {
                libc::read(
                    self.signals.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            reactor::trace!("signal", "signo={}", info.ssi_signo);
            match info.ssi_signo as libc::c_int {
                libc::SIGCHLD => {}
                libc::SIGHUP => {
                    self.reopen_log();
                    if self.tls.any() {
                        eprintln!("{}", self.tls.reload());
                    }
                }
                libc::SIGUSR2 => eprintln!("httplite: {}", self.start_upgrade()),
                _ => stop = true,
            }
        }
        // However many SIGCHLDs were merged into one: reap them all.
        self.reap(libc::WNOHANG);
        Ok(stop)
    }

    /// SIGHUP: the access log's file opened again (logrotate moved it),
    /// said on stderr as the other designs say it.
    pub(super) fn reopen_log(&self) {
        if let Some(line) = self.reopen_line() {
            eprintln!("httplite: {line}");
        }
    }

    /// The access log's file opened again; how it went, if there is one.
    pub(super) fn reopen_line(&self) -> Option<String> {
        let log = self.log.as_ref()?;
        Some(match log.reopen() {
            Ok(line) => line,
            Err(e) => format!("access log: reopen failed ({e}); still writing to the old file"),
        })
    }

    /// `waitpid(-1, flags)` until no child is left to reap (with
    /// `WNOHANG`: until none has ended); how many were reaped.
    pub(super) fn reap(&mut self, flags: libc::c_int) -> usize {
        let mut reaped = 0;
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid int for waitpid to fill.
            let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
            if pid <= 0 {
                return reaped; // 0: none ended yet; -1: ECHILD (none left) or EINTR
            }
            reaped += 1;
            reactor::trace!("reap", "pid={pid} status={}", ExitStatus(status));
            if self.jobs.as_ref().is_some_and(|j| j.is(pid)) {
                let (stopping, close) = (self.deadline.is_some(), self.inherited_fds());
                if let Some(jobs) = &mut self.jobs {
                    jobs.ended(status, stopping, &close);
                }
            }
            if !self.children.remove(&pid) {
                self.reaped_other(pid, status);
                continue;
            }
            let page = self.page;
            page.counters.closed.fetch_add(1, Ordering::Relaxed);
            page.alive.fetch_sub(1, Ordering::Relaxed);
            let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            if !clean {
                page.crashed.fetch_add(1, Ordering::Relaxed);
            }
            if flags == 0 {
                return reaped;
            }
        }
    }

    pub(super) fn kill_all(&self, signal: libc::c_int) {
        for &pid in &self.children {
            // SAFETY: `pid` is our child, not yet reaped (so not recycled).
            unsafe { libc::kill(pid, signal) };
        }
    }
}
