//! The state every thread of one server can see. Nothing here is touched per
//! request: workers read the shutdown flag once per batch and ring a doorbell
//! only when the acceptor is paused at `max_connections`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::config::Mode;
use crate::shutdown::ShutdownState;
use crate::stats::Stats;
use crate::wake::Wake;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) mode: Mode,
    pub(crate) stats: Arc<Stats>,
    pub(crate) shutdown: ShutdownState,
    /// The acceptor's (or control thread's) doorbell.
    pub(crate) control: Arc<Wake>,
    /// Per worker: whom to ring when that worker's close makes room. The
    /// acceptor's doorbell in acceptor mode, the worker's own port in
    /// reuseport mode.
    pub(crate) rooms: Box<[Arc<Wake>]>,
    /// Which workers are ready (have polled their port once) or left
    /// before that; see [`Shared::wait_ready`].
    started: Mutex<Started>,
    started_cv: Condvar,
}

/// Per worker: `Some(true)` ready, `Some(false)` ended before it was ready,
/// `None` neither yet.
#[derive(Debug)]
struct Started(Vec<Option<bool>>);

impl Shared {
    pub(crate) fn new(mode: Mode, workers: usize) -> std::io::Result<Shared> {
        let control = Arc::new(Wake::new()?);
        let rooms = (0..workers)
            .map(|_| match mode {
                Mode::Acceptor => Ok(control.clone()),
                Mode::ReusePort => Ok(Arc::new(Wake::new()?)),
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Shared {
            mode,
            stats: Arc::new(Stats::new(workers, matches!(mode, Mode::ReusePort))),
            shutdown: ShutdownState::default(),
            control,
            rooms,
            started: Mutex::new(Started(vec![None; workers])),
            started_cv: Condvar::new(),
        })
    }

    /// Records the request and rings everyone who accepts connections.
    pub(crate) fn request_shutdown(&self, grace: Duration) {
        if self.shutdown.request(grace) {
            self.control.ring();
            if self.mode == Mode::ReusePort {
                for room in self.rooms.iter() {
                    room.ring();
                }
            }
        }
    }

    pub(crate) fn workers(&self) -> usize {
        self.stats.workers().len()
    }

    pub(crate) fn is_alive(&self, worker: usize) -> bool {
        self.stats.workers()[worker].is_running()
    }

    /// Marks a worker gone and lets the acceptor know, so that it reclaims
    /// the worker's pipe and open count even while paused.
    pub(crate) fn worker_exited(&self, worker: usize) {
        self.stats.workers()[worker]
            .running
            .store(false, Ordering::Release);
        self.control.ring();
        self.mark_started(worker, false);
    }

    /// A worker's first `poll_batch`: its runtime is set up (its epoll or
    /// ring, its timers: whatever fds it needs exist).
    pub(crate) fn worker_ready(&self, worker: usize) {
        self.mark_started(worker, true);
    }

    fn mark_started(&self, worker: usize, ready: bool) {
        let mut s = self.started.lock().unwrap_or_else(|e| e.into_inner());
        if s.0[worker].is_none() {
            s.0[worker] = Some(ready);
            self.started_cv.notify_all();
        }
    }

    /// Waits until every worker is ready; fails if one ended first, or
    /// after `limit`.
    pub(crate) fn wait_ready(&self, limit: Duration) -> std::io::Result<()> {
        let end = Instant::now() + limit;
        let mut s = self.started.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(id) = s.0.iter().position(|w| *w == Some(false)) {
                return Err(std::io::Error::other(format!(
                    "worker {id} ended before it was ready"
                )));
            }
            if s.0.iter().all(|w| *w == Some(true)) {
                return Ok(());
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the workers were not ready within {limit:?}"),
                ));
            }
            s = (self.started_cv.wait_timeout(s, left))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
