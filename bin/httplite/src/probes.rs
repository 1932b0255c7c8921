//! The event-loop drivers' internals for `/_httplite/stats`: each driver
//! fills in a [`site::stats::RuntimeProbe`] when its worker starts, so that
//! the site formats the stats document without knowing any driver. (The
//! threads driver's probe is its own thread count, in
//! [`crate::blocking::threads`].)

use std::fmt::Write as _;

use site::stats::RuntimeProbe;

/// Futures on the executor (`--runtime stackless`).
#[derive(Debug)]
pub struct Stackless {
    /// epoll, timers, fds.
    pub reactor: reactor::StatsHandle,
    /// Tasks, polls, wakes, run queue.
    pub executor: executor::StatsHandle,
}

impl RuntimeProbe for Stackless {
    fn write_json(&self, s: &mut String) {
        write_reactor(s, "stackless", self.reactor.snapshot());
        let e = self.executor.snapshot();
        let _ = write!(
            s,
            ",\"tasks_alive\":{},\"tasks_spawned\":{},\"polls\":{},\
             \"wakes_local\":{},\"wakes_remote\":{},\"run_queue_high_water\":{},\
             \"ticks\":{},\"task_panics\":{}}}",
            e.alive,
            e.spawned,
            e.polls,
            e.local_wakes,
            e.remote_wakes,
            e.queue_high_water,
            e.ticks,
            e.panicked,
        );
    }
}

/// Coroutines on the coroutine scheduler (`--runtime stackful`).
#[derive(Debug)]
pub struct Stackful {
    /// epoll, timers, fds.
    pub reactor: reactor::StatsHandle,
    /// Coroutines (stacks), resumes, wakes, run queue.
    pub coroutines: coroutine::StatsHandle,
}

impl RuntimeProbe for Stackful {
    fn write_json(&self, s: &mut String) {
        write_reactor(s, "stackful", self.reactor.snapshot());
        let c = self.coroutines.snapshot();
        let _ = write!(
            s,
            ",\"coroutines_alive\":{},\"stacks_in_use\":{},\
             \"stacks_in_use_high_water\":{},\"stack_bytes_high_water\":{},\
             \"coroutines_spawned\":{},\"resumes\":{},\"wakes_local\":{},\
             \"wakes_remote\":{},\"run_queue_high_water\":{},\"ticks\":{},\
             \"coroutine_panics\":{}}}",
            c.alive,
            c.alive,
            c.alive_high_water,
            c.stack_high_water,
            c.spawned,
            c.resumes,
            c.local_wakes,
            c.remote_wakes,
            c.queue_high_water,
            c.ticks,
            c.panicked,
        );
    }
}

/// Futures on the io_uring proactor (`--runtime uring`).
#[derive(Debug)]
pub struct Uring {
    /// The ring's counters.
    pub proactor: proactor::StatsHandle,
}

impl RuntimeProbe for Uring {
    fn write_json(&self, s: &mut String) {
        let p = self.proactor.get();
        let _ = write!(
            s,
            ",\"runtime\":{{\"kind\":\"uring\",\"sqes_submitted\":{},\"cqes_reaped\":{},\
             \"io_uring_enters\":{},\"buffer_ring_exhaustions\":{},\"cancellations\":{},\
             \"discarded_bytes\":{},\"multishot_rearms\":{},\"remote_notifies\":{},\
             \"timers_fired\":{},\"ops_parked\":{},\"ops_in_flight\":{},\"stale_cqes\":{}}}",
            p.sqes,
            p.cqes,
            p.enters,
            p.enobufs,
            p.cancels,
            p.discarded_bytes,
            p.rearms,
            p.notifies,
            p.timers_fired,
            p.parked,
            p.in_flight,
            p.stale_cqes,
        );
    }
}

/// Opens a worker's `"runtime"` object with the reactor's counters; the
/// caller adds its scheduler's and closes it.
fn write_reactor(s: &mut String, kind: &str, r: reactor::ReactorStats) {
    let _ = write!(
        s,
        ",\"runtime\":{{\"kind\":\"{kind}\",\"epoll_waits\":{},\"epoll_events\":{},\
         \"stale_events\":{},\"remote_notifies\":{},\"fds_registered\":{},\
         \"timers_pending\":{},\"timers_fired\":{},\"io_timer_wakes\":{}",
        r.waits,
        r.events,
        r.stale_events,
        r.notifies,
        r.registered,
        r.timers_pending,
        r.timers_fired,
        r.wakes,
    );
}
