//! The state every thread of one server can see. Nothing here is touched per
//! request: workers read the shutdown flag once per batch and ring a doorbell
//! only when the acceptor is paused at `max_connections`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
}

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
    }
}
