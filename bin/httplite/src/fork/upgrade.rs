//! The binary upgrade (SIGUSR2, or the console's `upgrade`) in the fork
//! parent: the same hand-over as under the other designs
//! ([`crate::upgrade`]: the new process takes copies of the listening
//! sockets, says `READY` on a pipe, and this process then stops accepting
//! and drains), driven by the parent's `poll` loop instead of a thread, as
//! no thread may run beside a fork.
//!
//! ```text
//!   SIGUSR2 ─▶ spawn the new process ─▶ its ready pipe joins the poll set
//!     pipe says READY        ─▶ stop as on SIGTERM (no drain delay): close the
//!                               listeners, SIGTERM the children, wait the grace
//!     it exits, or is silent
//!     for READY_TIMEOUT      ─▶ (killed) "upgrade failed: ...; still serving"
//!     SIGTERM/SIGINT/`quit`  ─▶ the stop wins: the new process gets SIGTERM, and
//!                               the parent waits for it (SIGKILL after
//!                               CHILD_STOP_WAIT) before it exits
//! ```
//!
//! The new process is this one's child, so its end arrives as a SIGCHLD
//! and the reaping loop ([`Parent::reap`]) collects its status, like a
//! connection child's but not counted as one. Once the hand-over is done,
//! nothing waits for it: the parent exits when its own children have, and
//! the new process is adopted by init (or the nearest subreaper, such as
//! systemd).

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Instant;

use crate::upgrade::{CHILD_STOP_WAIT, Heard, READY_TIMEOUT, ReadyPipe, STOPPING, Upgrader};

use super::Parent;

/// An upgrade under way: the new process, not yet ready.
#[derive(Debug)]
pub(super) struct Pending {
    pid: libc::pid_t,
    /// `None` once it closed without saying `READY`.
    ready: Option<ReadyPipe>,
    deadline: Instant,
    exited: Option<ExitStatus>,
}

/// A new process sent SIGTERM because this one is stopping: the parent
/// exits only after it has.
#[derive(Debug)]
pub(super) struct Abandoned {
    pid: libc::pid_t,
    deadline: Instant,
}

impl Parent {
    /// Lets SIGUSR2 and the console's `upgrade` start a new copy of the
    /// executable (recorded at start-up: see [`Upgrader::new`]).
    pub fn upgrades(&mut self, upgrader: Upgrader) {
        self.upgrader = Some(upgrader);
    }

    /// SIGUSR2 or `upgrade`: starts the new process; the line that says so
    /// (or why not). The outcome comes later, on stderr.
    pub(super) fn start_upgrade(&mut self) -> String {
        let Some(upgrader) = &self.upgrader else {
            return "upgrade: not available".to_string();
        };
        if self.deadline.is_some() {
            return "upgrade: not while stopping".to_string();
        }
        if self.drain_until.is_some() {
            return "upgrade: not while draining".to_string();
        }
        if self.upgrade.is_some() || self.abandoned.is_some() {
            return "upgrade: one is already under way".to_string();
        }
        match upgrader.spawn(&self.listeners) {
            Ok((child, ready)) => {
                let pid = child.id() as libc::pid_t;
                // Waited for through the reaping loop, not through `child`.
                drop(child);
                reactor::trace!("upgrade", "pid={pid}");
                self.upgrade = Some(Pending {
                    pid,
                    ready: Some(ready),
                    deadline: Instant::now() + READY_TIMEOUT,
                    exited: None,
                });
                format!("upgrade: started new process {pid} (waiting for it to report ready)")
            }
            Err(why) => format!("upgrade failed: {why}; still serving"),
        }
    }

    /// The ready pipe to poll, while an upgrade waits on it.
    pub(super) fn upgrade_fd(&self) -> Option<std::os::fd::RawFd> {
        self.upgrade.as_ref()?.ready.as_ref().map(ReadyPipe::fd)
    }

    /// The next time the loop must wake for an upgrade's timeout.
    pub(super) fn upgrade_wake(&self) -> Option<Instant> {
        let pending = self.upgrade.as_ref().map(|p| p.deadline);
        let abandoned = self.abandoned.as_ref().map(|a| a.deadline);
        pending.into_iter().chain(abandoned).min()
    }

    /// Whether an abandoned upgrade's new process still has to end.
    pub(super) fn upgrade_outstanding(&self) -> bool {
        self.abandoned.is_some()
    }

    /// A process the reaping loop collected that was no connection's: the
    /// upgrade's new process, perhaps.
    pub(super) fn reaped_other(&mut self, pid: libc::pid_t, status: libc::c_int) {
        let status = ExitStatus::from_raw(status);
        if let Some(p) = self.upgrade.as_mut().filter(|p| p.pid == pid) {
            p.exited = Some(status);
        } else if self.abandoned.as_ref().is_some_and(|a| a.pid == pid) {
            self.abandoned = None;
            say(format!(
                "upgrade abandoned: {STOPPING}; new process {pid} was sent SIGTERM and exited \
                 ({status})"
            ));
        }
    }

    /// Moves an upgrade on: reads the ready pipe if `readable`, hands over
    /// on `READY`, gives up on an exit or a timeout, and kills an abandoned
    /// new process that outstays [`CHILD_STOP_WAIT`].
    pub(super) fn step_upgrade(&mut self, readable: bool) {
        if let Some(a) = self
            .abandoned
            .as_ref()
            .filter(|a| Instant::now() >= a.deadline)
        {
            let pid = a.pid;
            // SAFETY: kill(2) touches no memory; `pid` is our child, not
            // yet reaped (the reaping loop clears `abandoned` when it is).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            self.abandoned = None;
            say(format!(
                "upgrade abandoned: {STOPPING}; new process {pid} was sent SIGTERM and killed \
                 after {CHILD_STOP_WAIT:?}"
            ));
        }
        let Some(p) = self.upgrade.as_mut() else {
            return;
        };
        let heard = match (readable, p.ready.as_mut()) {
            (true, Some(pipe)) => pipe.read(),
            _ => Ok(Heard::Nothing),
        };
        let failed = match heard {
            Ok(Heard::Ready) => {
                let pid = p.pid;
                self.upgrade = None;
                say(format!(
                    "upgrade: new process {pid} is ready; process {} stops accepting and drains",
                    std::process::id()
                ));
                self.stop();
                return;
            }
            Ok(Heard::Closed) => {
                // Its exit follows; the timeout still bounds the wait.
                p.ready = None;
                None
            }
            Ok(Heard::Nothing) => None,
            Err(e) => Some(format!("reading the ready pipe: {e}")),
        };
        let why = failed
            .or_else(|| {
                p.exited
                    .map(|s| format!("new process {} exited ({s})", p.pid))
            })
            .or_else(|| {
                (Instant::now() >= p.deadline)
                    .then(|| crate::upgrade::not_ready_in_time(p.pid as u32))
            });
        if let Some(why) = why {
            if p.exited.is_none() {
                // SAFETY: as above: our child, not yet reaped. The reaping
                // loop collects it later (as no connection's).
                unsafe { libc::kill(p.pid, libc::SIGKILL) };
            }
            self.upgrade = None;
            say(format!("upgrade failed: {why}; still serving"));
        }
    }

    /// A stop (SIGTERM, SIGINT, `quit`) during an upgrade: the stop wins,
    /// and the new process is told to stop too.
    pub(super) fn abandon_upgrade(&mut self) {
        let Some(p) = self.upgrade.take() else {
            return;
        };
        if let Some(status) = p.exited {
            say(format!(
                "upgrade abandoned: {STOPPING}; new process {} had already exited ({status})",
                p.pid
            ));
            return;
        }
        // SAFETY: kill(2) touches no memory; `p.pid` is our child, not yet
        // reaped.
        unsafe { libc::kill(p.pid, libc::SIGTERM) };
        self.abandoned = Some(Abandoned {
            pid: p.pid,
            deadline: Instant::now() + CHILD_STOP_WAIT,
        });
    }

    /// The last resort when the grace is over: an abandoned new process
    /// still running is killed.
    pub(super) fn kill_abandoned(&mut self) {
        if let Some(a) = self.abandoned.take() {
            // SAFETY: as in `abandon_upgrade`.
            unsafe { libc::kill(a.pid, libc::SIGKILL) };
        }
    }
}

/// One line on stderr, as the other designs' upgrade thread says it.
fn say(line: String) {
    eprintln!("httplite: {line}");
}
