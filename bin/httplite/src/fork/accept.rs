//! Accepting connections and forking a child for each: the parent takes
//! what the listener's queue holds up to `--max-connections`, forks, and
//! keeps only the child's pid; a failed `fork()` closes its connection
//! unanswered and pauses accepting.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Parent, child};
use crate::blocking::conn::Ctx;

/// How long the parent stops accepting after a failed `fork()` (`EAGAIN`
/// at the process limit, `ENOMEM`): the connection it was for is closed
/// unanswered, and the ones behind it wait in the kernel's queue for a
/// child to end rather than be accepted and closed as fast as they come.
const FORK_BACKOFF: Duration = Duration::from_millis(20);

impl Parent {
    /// Accepts and forks until the queue is empty, the bound is reached or
    /// accepting or forking fails; a time to retry after if it failed for
    /// lack of fds, memory or processes.
    pub(super) fn accept_some(&mut self, listener: RawFd, ctx: &Ctx) -> Option<Instant> {
        for _ in 0..64 {
            if self
                .settings
                .max_connections
                .is_some_and(|m| self.children.len() >= m)
            {
                self.page.paused_at_max.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            // SAFETY: `listener` is the number of one of `self.listeners`,
            // which stay open while this runs (they are closed only by
            // `Parent::stop`).
            match reactor::sys::accept_fd(unsafe { BorrowedFd::borrow_raw(listener) }) {
                Ok(conn) => {
                    if let Err(retry) = self.spawn(conn, ctx) {
                        return Some(retry);
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return None,
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                        return Some(Instant::now() + Duration::from_millis(10));
                    }
                    _ => continue, // that connection's own failure
                },
            }
        }
        None
    }

    /// Forks a child for `conn`; the parent's copy closes on return. If
    /// the fork fails, `conn` is closed unanswered and the time to try
    /// again after is returned.
    fn spawn(&mut self, conn: OwnedFd, ctx: &Ctx) -> Result<(), Instant> {
        let page = self.page;
        page.counters.connections.fetch_add(1, Ordering::Relaxed);
        self.roll_ticket_keys();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let fd = conn.as_raw_fd();
        match self.fork() {
            -1 => {
                reactor::trace!("fork", "failed fd={fd}");
                page.fork_failed.fetch_add(1, Ordering::Relaxed);
                page.counters.closed.fetch_add(1, Ordering::Relaxed);
                Err(Instant::now() + FORK_BACKOFF)
            }
            0 => child::run(conn, &self.inherited_fds(), parent, ctx),
            pid => {
                reactor::trace!("fork", "pid={pid} fd={fd}");
                self.children.insert(pid);
                let alive = page.alive.fetch_add(1, Ordering::Relaxed) + 1;
                page.high_water.fetch_max(alive, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// The parent's fds a forked process must close: the listeners (all
    /// open while the parent forks) and the signalfd.
    pub(super) fn inherited_fds(&self) -> Vec<RawFd> {
        let listeners = self.listeners.iter().map(|l| l.fds()[0].as_raw_fd());
        listeners.chain([self.signals.as_raw_fd()]).collect()
    }

    /// `fork()`, or the failure [`Settings::test_fork_failure`] asks for.
    fn fork(&mut self) -> libc::pid_t {
        if let Some(failing) = self.settings.test_fork_failure {
            let until = *self
                .failing_until
                .get_or_insert_with(|| Instant::now() + failing);
            if Instant::now() < until {
                return -1;
            }
        }
        // SAFETY: this process has one thread (see the module doc), so the
        // child is a complete copy with no lock held by a vanished thread.
        unsafe { libc::fork() }
    }
}
