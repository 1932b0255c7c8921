//! Counters, readable from any thread without locks.
//!
//! Each counter has one writer thread (the acceptor or the worker it belongs
//! to), so a plain atomic add is uncontended. Readers use `Relaxed` loads: a
//! stats page wants recent numbers, not a consistent snapshot across counters.
//! The one exception is `closed`, which is also half of the "paused at
//! `max_connections`" handshake and so is written with `SeqCst` (see
//! `wake.rs`).
//!
//! Each worker's block is aligned to 128 bytes so that two workers never
//! write to the same cache line (128 covers the adjacent-line prefetcher).

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU64,
    Ordering::{Acquire, Relaxed},
};

/// Counters of the acceptor thread (all zero in reuseport mode, where the
/// workers accept and count in their [`WorkerStats`]).
#[derive(Debug, Default)]
pub struct AcceptorStats {
    pub(crate) accepted: AtomicU64,
    pub(crate) emfile_events: AtomicU64,
    pub(crate) paused_at_max: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) shed: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) held: AtomicU64,
}

/// A plain copy of [`AcceptorStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcceptorSnapshot {
    /// Connections accepted (and kept: rejected ones are not counted here).
    pub accepted: u64,
    /// `accept` failures for lack of fds (`EMFILE`, `ENFILE`) or memory.
    pub emfile_events: u64,
    /// Times accepting paused because `max_connections` was reached.
    pub paused_at_max: u64,
    /// Connections closed without being served: shed while out of fds, left
    /// over at shutdown, or with no live worker to take them.
    pub rejected: u64,
    /// Of `rejected`, those shed while out of fds: accepted into the
    /// reserve fd's slot and closed at once.
    pub shed: u64,
    /// Other `accept` errors (aborted handshakes and the like).
    pub accept_errors: u64,
    /// Accepted fds currently held because every worker's pipe was full.
    pub held: u64,
}

impl AcceptorStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> AcceptorSnapshot {
        AcceptorSnapshot {
            accepted: self.accepted.load(Relaxed),
            emfile_events: self.emfile_events.load(Relaxed),
            paused_at_max: self.paused_at_max.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            shed: self.shed.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
            held: self.held.load(Relaxed),
        }
    }
}

/// Counters of one worker.
#[derive(Debug)]
#[repr(align(128))]
pub struct WorkerStats {
    /// Cleared when the worker thread leaves `worker_main` (returns or
    /// panics): the acceptor stops handing it connections.
    pub(crate) running: AtomicBool,
    pub(crate) handed_off: AtomicU64,
    pub(crate) closed: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) pipe_full: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) emfile_events: AtomicU64,
    pub(crate) shed: AtomicU64,
    pub(crate) paused_at_max: AtomicU64,
}

impl Default for WorkerStats {
    fn default() -> Self {
        WorkerStats {
            running: AtomicBool::new(true),
            handed_off: AtomicU64::default(),
            closed: AtomicU64::default(),
            batches: AtomicU64::default(),
            pipe_full: AtomicU64::default(),
            accept_errors: AtomicU64::default(),
            emfile_events: AtomicU64::default(),
            shed: AtomicU64::default(),
            paused_at_max: AtomicU64::default(),
        }
    }
}

/// A plain copy of [`WorkerStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerSnapshot {
    /// Connections given to this worker (written into its pipe, or accepted
    /// from its own listener in reuseport mode).
    pub handed_off: u64,
    /// Connections the worker reported closed.
    pub closed: u64,
    /// `handed_off - closed`.
    pub open: u64,
    /// `poll_batch` calls that delivered at least one connection.
    pub batches: u64,
    /// Times the acceptor found this worker's pipe full.
    pub pipe_full: u64,
    /// `accept` errors on this worker's listener (reuseport mode).
    pub accept_errors: u64,
    /// `EMFILE`/`ENFILE` on this worker's listener (reuseport mode).
    pub emfile_events: u64,
    /// Connections shed while out of fds on this worker's listener
    /// (reuseport mode).
    pub shed: u64,
    /// Times this worker paused at its connection share (reuseport mode).
    pub paused_at_max: u64,
}

impl WorkerStats {
    /// Whether the worker thread is still in `worker_main`.
    pub fn is_running(&self) -> bool {
        self.running.load(Acquire)
    }
    /// Connections given to this worker so far.
    pub fn handed_off(&self) -> u64 {
        self.handed_off.load(Relaxed)
    }
    /// Connections this worker reported closed so far.
    pub fn closed(&self) -> u64 {
        self.closed.load(Relaxed)
    }
    /// Connections open right now (handed off and not yet closed).
    pub fn open(&self) -> u64 {
        // The acceptor counts a handoff after its write, so a quick worker
        // can close a connection before it is counted: saturate.
        let closed = self.closed.load(Relaxed);
        self.handed_off.load(Relaxed).saturating_sub(closed)
    }
    /// Batches delivered so far.
    pub fn batches(&self) -> u64 {
        self.batches.load(Relaxed)
    }
    /// Reads every counter.
    pub fn snapshot(&self) -> WorkerSnapshot {
        WorkerSnapshot {
            handed_off: self.handed_off(),
            closed: self.closed(),
            open: self.open(),
            batches: self.batches(),
            pipe_full: self.pipe_full.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
            emfile_events: self.emfile_events.load(Relaxed),
            shed: self.shed.load(Relaxed),
            paused_at_max: self.paused_at_max.load(Relaxed),
        }
    }
}

/// All counters of one server: the acceptor's and each worker's. Shared as
/// an `Arc` by the [`Server`](crate::Server) and every
/// [`WorkerPort`](crate::WorkerPort), so a stats page served by any worker
/// can read all of them.
#[derive(Debug)]
pub struct Stats {
    acceptor: AcceptorStats,
    workers: Box<[WorkerStats]>,
    /// Who accepts: the workers (reuseport) or the acceptor thread.
    workers_accept: bool,
    /// The errno of the last `accept` failure that made accepting back
    /// off (0: none yet).
    last_accept_errno: AtomicI32,
}

/// How accepting went, whoever accepts (the acceptor thread or, in
/// reuseport mode, each worker): the figures an operator watches when the
/// process runs out of fds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcceptSummary {
    /// Connections accepted and kept.
    pub accepted: u64,
    /// Connections shed while out of fds (the client saw a close).
    pub shed: u64,
    /// `accept` calls that failed for lack of fds or memory.
    pub emfile_events: u64,
    /// Other `accept` errors.
    pub accept_errors: u64,
    /// Times accepting paused at `max_connections`.
    pub paused_at_max: u64,
}

impl Stats {
    pub(crate) fn new(workers: usize, workers_accept: bool) -> Stats {
        Stats {
            acceptor: AcceptorStats::default(),
            workers: (0..workers).map(|_| WorkerStats::default()).collect(),
            workers_accept,
            last_accept_errno: AtomicI32::new(0),
        }
    }

    pub(crate) fn set_last_accept_error(&self, e: &std::io::Error) {
        self.last_accept_errno
            .store(e.raw_os_error().unwrap_or(-1), Relaxed);
    }

    /// The last `accept` failure that made accepting back off (out of fds
    /// with nothing to shed, out of memory, a broken listener), if any: what
    /// an operator needs when `emfile` keeps growing.
    pub fn last_accept_error(&self) -> Option<std::io::Error> {
        match self.last_accept_errno.load(Relaxed) {
            0 => None,
            -1 => Some(std::io::Error::other("accept failed")),
            n => Some(std::io::Error::from_raw_os_error(n)),
        }
    }

    /// Accepting's counters, summed over whoever accepts in this mode.
    pub fn accepting(&self) -> AcceptSummary {
        if self.workers_accept {
            let t = self.total();
            AcceptSummary {
                accepted: t.handed_off,
                shed: t.shed,
                emfile_events: t.emfile_events,
                accept_errors: t.accept_errors,
                paused_at_max: t.paused_at_max,
            }
        } else {
            let a = self.acceptor.snapshot();
            AcceptSummary {
                accepted: a.accepted,
                shed: a.shed,
                emfile_events: a.emfile_events,
                accept_errors: a.accept_errors,
                paused_at_max: a.paused_at_max,
            }
        }
    }

    /// The acceptor's counters.
    pub fn acceptor(&self) -> &AcceptorStats {
        &self.acceptor
    }

    /// Every worker's counters, indexed by worker id.
    pub fn workers(&self) -> &[WorkerStats] {
        &self.workers
    }

    /// The sum of all workers' counters.
    pub fn total(&self) -> WorkerSnapshot {
        self.workers
            .iter()
            .map(WorkerStats::snapshot)
            .fold(WorkerSnapshot::default(), |a, b| WorkerSnapshot {
                handed_off: a.handed_off + b.handed_off,
                closed: a.closed + b.closed,
                open: a.open + b.open,
                batches: a.batches + b.batches,
                pipe_full: a.pipe_full + b.pipe_full,
                accept_errors: a.accept_errors + b.accept_errors,
                emfile_events: a.emfile_events + b.emfile_events,
                shed: a.shed + b.shed,
                paused_at_max: a.paused_at_max + b.paused_at_max,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_do_not_share_cache_lines() {
        let s = Stats::new(3, false);
        let a = &s.workers()[0] as *const WorkerStats as usize;
        let b = &s.workers()[1] as *const WorkerStats as usize;
        assert!(b - a >= 128);
        assert_eq!(a % 128, 0);
    }

    #[test]
    fn totals_add_up() {
        let s = Stats::new(2, true);
        s.workers()[0].handed_off.fetch_add(5, Relaxed);
        s.workers()[1].handed_off.fetch_add(3, Relaxed);
        s.workers()[1].closed.fetch_add(1, Relaxed);
        let t = s.total();
        assert_eq!((t.handed_off, t.closed, t.open), (8, 1, 7));
        assert_eq!(s.workers()[1].open(), 2);
        assert_eq!(s.accepting().accepted, 8, "reuseport: the workers accept");
    }
}
