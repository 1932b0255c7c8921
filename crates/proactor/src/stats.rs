//! The driver's counters, written by its thread, readable from any.

use std::sync::Arc;

use driver::Counter;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub sqes: Counter,
    pub cqes: Counter,
    pub enters: Counter,
    pub stale_cqes: Counter,
    pub enobufs: Counter,
    pub cancels: Counter,
    pub discarded_bytes: Counter,
    pub rearms: Counter,
    pub notifies: Counter,
    pub timers_fired: Counter,
    pub parked: Counter,
    pub in_flight: Counter,
    pub sq_full: Counter,
}

impl Counters {
    pub fn snapshot(&self) -> ProactorStats {
        ProactorStats {
            sqes: self.sqes.get(),
            cqes: self.cqes.get(),
            enters: self.enters.get(),
            stale_cqes: self.stale_cqes.get(),
            enobufs: self.enobufs.get(),
            cancels: self.cancels.get(),
            discarded_bytes: self.discarded_bytes.get(),
            rearms: self.rearms.get(),
            notifies: self.notifies.get(),
            timers_fired: self.timers_fired.get(),
            parked: self.parked.get(),
            in_flight: self.in_flight.get(),
            sq_full: self.sq_full.get(),
        }
    }
}

/// A snapshot of one proactor's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProactorStats {
    /// SQEs the kernel consumed.
    pub sqes: u64,
    /// CQEs reaped.
    pub cqes: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// CQEs for operations already freed (ignored).
    pub stale_cqes: u64,
    /// Multishot recvs ended by `-ENOBUFS` (the buffer ring ran dry).
    pub enobufs: u64,
    /// `IORING_OP_ASYNC_CANCEL`s submitted for dropped futures.
    pub cancels: u64,
    /// Bytes that arrived for cancelled reads and were dropped.
    pub discarded_bytes: u64,
    /// Multishot operations re-armed after a CQE without `F_MORE`.
    pub rearms: u64,
    /// Cross-thread wake-ups that reached the ring.
    pub notifies: u64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// Gauge: orphaned operations (future dropped, resources parked, kernel
    /// not done yet).
    pub parked: u64,
    /// Gauge: operations in flight.
    pub in_flight: u64,
    /// SQEs that found the SQ full even after a submit and waited in the
    /// overflow list for a later turn (the kernel was taking nothing).
    pub sq_full: u64,
}

/// Reads a proactor's counters from any thread (a stats page served by
/// another worker). `Send + Sync`; cloning is an `Arc` clone.
#[derive(Clone, Debug)]
pub struct StatsHandle(pub(crate) Arc<Counters>);

impl StatsHandle {
    /// The counters now.
    pub fn get(&self) -> ProactorStats {
        self.0.snapshot()
    }
}
