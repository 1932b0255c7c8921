//! A runtime's counters: bumped by its own thread, read as a
//! [`RuntimeStats`] snapshot from any thread through a [`StatsHandle`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use reactor::Counter;

use super::Shared;

/// Single-writer counters (see [`reactor::Counter`]).
#[derive(Default)]
pub(crate) struct Counters {
    pub(super) spawned: Counter,
    pub(super) alive: Counter,
    pub(super) alive_high_water: Counter,
    pub(super) resumes: Counter,
    pub(super) completed: Counter,
    pub(super) panicked: Counter,
    pub(super) cancelled: Counter,
    pub(super) local_wakes: Counter,
    pub(super) ticks: Counter,
    pub(super) queue_high_water: Counter,
    pub(super) stack_high_water: Counter,
}

/// A snapshot of a runtime's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Coroutines spawned (the main one included).
    pub spawned: u64,
    /// Coroutines alive now: each holds one stack.
    pub alive: u64,
    /// Most coroutines (so stacks) alive at once.
    pub alive_high_water: u64,
    /// Resumes (each is a switch in and, later, one out).
    pub resumes: u64,
    /// Coroutines finished (returned, panicked or cancelled).
    pub completed: u64,
    /// Coroutines that panicked.
    pub panicked: u64,
    /// Coroutines that were cancelled.
    pub cancelled: u64,
    /// Wakes from this thread.
    pub local_wakes: u64,
    /// Wakes from other threads (through the inbox and eventfd).
    pub remote_wakes: u64,
    /// Loop iterations that ended in a reactor turn.
    pub ticks: u64,
    /// Longest the run queue has been.
    pub queue_high_water: u64,
    /// Deepest stack use of any finished coroutine, in bytes (0 unless
    /// [`crate::Builder::stack_watermarks`] is on).
    pub stack_high_water: u64,
}

impl Shared {
    pub(super) fn snapshot(&self) -> RuntimeStats {
        let c = &self.counters;
        RuntimeStats {
            spawned: c.spawned.get(),
            alive: c.alive.get(),
            alive_high_water: c.alive_high_water.get(),
            resumes: c.resumes.get(),
            completed: c.completed.get(),
            panicked: c.panicked.get(),
            cancelled: c.cancelled.get(),
            local_wakes: c.local_wakes.get(),
            remote_wakes: self.remote_wakes.load(Ordering::Relaxed),
            ticks: c.ticks.get(),
            queue_high_water: c.queue_high_water.get(),
            stack_high_water: c.stack_high_water.get(),
        }
    }
}

/// Reads a runtime's counters from any thread (a stats page served by
/// another worker).
#[derive(Clone)]
pub struct StatsHandle(pub(crate) Arc<Shared>);

impl StatsHandle {
    /// A snapshot of the counters.
    pub fn snapshot(&self) -> RuntimeStats {
        self.0.snapshot()
    }
}

impl std::fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}
