//! Shutdown: a flag, a deadline, and the handle that sets them.
//!
//! Shutdown is a request, not a kill. [`ShutdownHandle::shutdown`] records the
//! deadline (the first request wins), raises the flag and rings the doorbells
//! of whoever accepts connections. What happens next is in-band, so that no
//! connection is ever left in between:
//!
//! - acceptor mode: the acceptor first accepts what is already in the
//!   kernel's accept queue (those clients may have sent a request; closing
//!   the listener would reset them), then closes its listener (a later
//!   client is refused at connect), passes on the fds it held as pipes
//!   drain (until the deadline; only what is left then is closed), and
//!   closes the write ends of the handoff pipes. Each
//!   worker reads the fds still in its pipe, then end-of-file, which
//!   [`WorkerPort::poll_batch`](crate::WorkerPort::poll_batch) reports as
//!   [`Batch::Shutdown`](crate::Batch::Shutdown). Every fd written before the
//!   pipe closed is delivered first: ordering comes free with the pipe.
//! - reuseport mode: each port sees the flag on its next `poll_batch` (its
//!   doorbell was rung, so there is a next one), closes its listener and
//!   reports `Shutdown`.
//!
//! The worker loop then stops taking new requests, finishes in-flight ones
//! until the deadline, closes its connections and returns;
//! [`Server::join`](crate::Server::join) joins the threads.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::shared::Shared;

/// Whether shutdown was requested, and until when in-flight work may run.
#[derive(Debug, Default)]
pub(crate) struct ShutdownState {
    requested: AtomicBool,
    /// A successor accepts on the same sockets (see `hand_over`).
    handover: AtomicBool,
    deadline: OnceLock<Instant>,
}

impl ShutdownState {
    /// Records the request; returns `false` if one was already recorded.
    pub(crate) fn request(&self, grace: Duration) -> bool {
        let now = Instant::now();
        // `checked_add` guards against `Duration::MAX` as "no deadline".
        let deadline = now
            .checked_add(grace)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        self.deadline.get_or_init(|| deadline);
        !self.requested.swap(true, SeqCst)
    }

    pub(crate) fn set_handover(&self) {
        self.handover.store(true, SeqCst);
    }

    /// Whether queued connections are left to a successor.
    pub(crate) fn is_handover(&self) -> bool {
        self.handover.load(SeqCst)
    }

    pub(crate) fn is_requested(&self) -> bool {
        self.requested.load(SeqCst)
    }

    /// The deadline of the first request (now, if none was made: the
    /// acceptor died, so there is nothing to wait for).
    pub(crate) fn deadline(&self) -> Instant {
        *self.deadline.get_or_init(Instant::now)
    }
}

/// Starts a graceful shutdown from any thread. Cheap to clone; the signal
/// handler (if enabled) and a worker's admin endpoint can hold one alike.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    pub(crate) shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Stops accepting and tells every worker to finish in-flight requests
    /// within `grace`. Returns at once; [`Server::join`](crate::Server::join)
    /// waits. Calling it again is harmless: the first deadline stays.
    pub fn shutdown(&self, grace: Duration) {
        self.shared.request_shutdown(grace);
    }

    /// Shutdown for a successor that holds the same listening sockets (a
    /// binary upgrade): as [`shutdown`](ShutdownHandle::shutdown), except
    /// that nothing more is accepted, not even what is already in the
    /// kernel's accept queue: the sockets stay open in the successor,
    /// which accepts it, so nothing is reset.
    pub fn hand_over(&self, grace: Duration) {
        self.shared.shutdown.set_handover();
        self.shared.request_shutdown(grace);
    }

    /// Whether shutdown has been requested (by this handle, another one, or a
    /// signal).
    pub fn is_shutdown_requested(&self) -> bool {
        self.shared.shutdown.is_requested()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_deadline_wins() {
        let s = ShutdownState::default();
        assert!(!s.is_requested());
        assert!(s.request(Duration::from_secs(5)));
        let d = s.deadline();
        assert!(!s.request(Duration::ZERO));
        assert_eq!(s.deadline(), d);
        assert!(d > Instant::now() + Duration::from_secs(4));
        assert!(s.is_requested());
    }

    #[test]
    fn huge_grace_does_not_overflow() {
        let s = ShutdownState::default();
        s.request(Duration::MAX);
        assert!(s.deadline() > Instant::now());
    }
}
