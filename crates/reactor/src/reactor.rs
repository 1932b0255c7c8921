//! The reactor: one epoll instance, its waker registry, its timers and its
//! notifier, owned by one thread.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use driver::Counter;

use crate::clock::{self, Clock, Nanos, Tick};
use crate::epoll::{Epoll, Events};
use crate::notify::Notifier;
use crate::registry::{NOTIFY_TOKEN, Registry};
use crate::timer::{TimerHeap, TimerKey};

/// How many events one `epoll_wait` can return.
const EVENTS_PER_WAIT: usize = 1024;

/// A per-thread event loop core. Cloning gives another handle to the same
/// reactor (it is reference-counted, and `!Send`: it never leaves its thread).
#[derive(Clone)]
pub struct Reactor {
    inner: Rc<Inner>,
}

struct Inner {
    epoll: Epoll,
    registry: RefCell<Registry>,
    timers: RefCell<TimerHeap>,
    notifier: Notifier,
    events: RefCell<Events>,
    /// Wakers of fired timers, woken after the heap's borrow is released.
    wake_buf: Cell<Vec<Waker>>,
    clock: Clock,
    /// The time after the last `epoll_wait`, on the reactor's clock: a
    /// clock for coarse deadlines that costs no `clock_gettime` per
    /// request. Kept as nanoseconds only: converting it to an `Instant`
    /// every turn cost ~20 instructions per request on the plaintext path,
    /// for a value most turns never read ([`Reactor::now`] converts).
    now_ns: Cell<Nanos>,
    /// `now_ns` as an `Instant`, converted at the first [`Reactor::now`]
    /// after a turn (cleared by the turn: one store).
    now: Cell<Option<Instant>>,
    stats: Arc<Counters>,
}

/// Written by the reactor's thread only; readable anywhere through
/// [`StatsHandle`].
#[derive(Default)]
struct Counters {
    waits: Counter,
    events: Counter,
    stale_events: Counter,
    notifies: Counter,
    timers_fired: Counter,
    wakes: Counter,
    /// Gauges, refreshed whenever they change.
    registered: Counter,
    timers: Counter,
    timers_pending: Counter,
}

impl Counters {
    fn snapshot(&self) -> ReactorStats {
        ReactorStats {
            waits: self.waits.get(),
            events: self.events.get(),
            stale_events: self.stale_events.get(),
            notifies: self.notifies.get(),
            timers_fired: self.timers_fired.get(),
            wakes: self.wakes.get(),
            registered: self.registered.get(),
            timers: self.timers.get(),
            timers_pending: self.timers_pending.get(),
        }
    }
}

/// Reads a reactor's counters from any thread (a stats page served by
/// another worker). Values may lag the reactor by the step it is running.
#[derive(Clone)]
pub struct StatsHandle(Arc<Counters>);

impl StatsHandle {
    /// A snapshot of the counters.
    pub fn snapshot(&self) -> ReactorStats {
        self.0.snapshot()
    }
}

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

/// A snapshot of a reactor's counters, for stats pages and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReactorStats {
    /// `epoll_wait` calls.
    pub waits: u64,
    /// Events returned by them.
    pub events: u64,
    /// Events for a freed or reused slot, ignored.
    pub stale_events: u64,
    /// Cross-thread notifications received.
    pub notifies: u64,
    /// Timers that reached their deadline.
    pub timers_fired: u64,
    /// Wakers woken by I/O events and timers.
    pub wakes: u64,
    /// fds registered now.
    pub registered: u64,
    /// Timers alive now (pending or fired but not yet dropped).
    pub timers: u64,
    /// Timers still waiting for their deadline.
    pub timers_pending: u64,
}

thread_local! {
    static CURRENT: RefCell<Option<Reactor>> = const { RefCell::new(None) };
}

impl Reactor {
    /// Creates a reactor: an epoll instance with the notifier's eventfd in it.
    pub fn new() -> io::Result<Reactor> {
        let epoll = Epoll::new()?;
        let notifier = Notifier::new()?;
        // Read side only: an eventfd is always writable, and an EPOLLOUT edge
        // would read as a notification.
        let notify_flags = (libc::EPOLLIN | libc::EPOLLET) as u32;
        epoll.add(notifier.fd(), notify_flags, NOTIFY_TOKEN)?;
        let clock = Clock::new();
        let now_ns = clock::read();
        Ok(Reactor {
            inner: Rc::new(Inner {
                epoll,
                registry: RefCell::new(Registry::default()),
                timers: RefCell::new(TimerHeap::default()),
                notifier,
                events: RefCell::new(Events::with_capacity(EVENTS_PER_WAIT)),
                wake_buf: Cell::new(Vec::new()),
                now_ns: Cell::new(now_ns),
                now: Cell::new(None),
                clock,
                stats: Arc::default(),
            }),
        })
    }

    /// The reactor entered on this thread.
    ///
    /// # Panics
    /// If none is: I/O objects and timers must be created inside a runtime.
    pub fn current() -> Reactor {
        Self::try_current().expect(
            "no reactor on this thread: create I/O objects and timers inside a runtime \
             (executor::block_on or coroutine::run)",
        )
    }

    /// The reactor entered on this thread, if any.
    pub fn try_current() -> Option<Reactor> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Makes this reactor the thread's current one until the guard drops.
    pub fn enter(&self) -> EnterGuard {
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        EnterGuard { prev }
    }

    /// A handle that wakes this reactor from any thread.
    pub fn notifier(&self) -> Notifier {
        self.inner.notifier.clone()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ReactorStats {
        self.sync_timers();
        self.inner.stats.snapshot()
    }

    /// A handle that reads the counters from any thread.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.inner.stats.clone())
    }

    fn sync_timers(&self) {
        let timers = self.inner.timers.borrow();
        self.inner.stats.timers.set(timers.len() as u64);
        self.inner.stats.timers_pending.set(timers.pending() as u64);
    }

    fn sync_registered(&self) {
        let n = self.inner.registry.borrow().len();
        self.inner.stats.registered.set(n as u64);
    }

    /// The time the last [`Reactor::turn`] woke up: a cached clock, at most
    /// one loop iteration old, for deadlines that need no precision finer
    /// than that (idle and header timeouts). Converted from the reactor's
    /// own clock at the first call after a turn: code on a per-request path
    /// that only keeps and compares the time should take [`Reactor::tick`]
    /// instead.
    #[inline]
    pub fn now(&self) -> Instant {
        match self.inner.now.get() {
            Some(now) => now,
            None => self.convert_now(),
        }
    }

    #[inline(never)]
    fn convert_now(&self) -> Instant {
        let now = self.inner.clock.instant(self.inner.now_ns.get());
        self.inner.now.set(Some(now));
        now
    }

    /// [`Reactor::now`] as the reactor's own clock reading: a copy of one
    /// word, no conversion.
    #[inline]
    pub fn tick(&self) -> Tick {
        Tick(self.inner.now_ns.get())
    }

    /// The `Instant` of a [`Tick`].
    #[inline]
    pub fn instant_at(&self, t: Tick) -> Instant {
        self.inner.clock.instant(t.0)
    }

    /// The [`Tick`] of an `Instant` (exact: `instant_at(tick_of(i))` is
    /// `i` for any instant since the reactor was made).
    pub fn tick_of(&self, at: Instant) -> Tick {
        Tick(self.inner.clock.nanos(at))
    }

    /// The earliest pending timer deadline.
    pub fn next_timer(&self) -> Option<Instant> {
        let next = self.inner.timers.borrow().next_deadline();
        next.map(|ns| self.inner.clock.instant(ns))
    }

    /// Arms a timer. Drop it with [`Reactor::remove_timer`].
    pub fn insert_timer(&self, deadline: Instant) -> TimerKey {
        let deadline = self.inner.clock.nanos(deadline);
        let key = self.inner.timers.borrow_mut().insert(deadline);
        self.sync_timers();
        key
    }

    /// Ready once the timer has fired; stores the waker otherwise.
    #[inline]
    pub fn poll_timer(&self, key: TimerKey, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.timers.borrow_mut().poll(key, cx)
    }

    /// Moves a timer to a new deadline (re-arming it if it had fired).
    pub fn reset_timer(&self, key: TimerKey, deadline: Instant) {
        let deadline = self.inner.clock.nanos(deadline);
        self.inner.timers.borrow_mut().reset(key, deadline);
        self.sync_timers();
    }

    /// Whether the timer has fired.
    pub fn timer_fired(&self, key: TimerKey) -> bool {
        self.inner.timers.borrow().has_fired(key)
    }

    /// Cancels and frees a timer.
    pub fn remove_timer(&self, key: TimerKey) {
        let waker = self.inner.timers.borrow_mut().remove(key);
        self.sync_timers();
        drop(waker); // outside the borrow: dropping a waker may run user code
    }
}

impl fmt::Debug for Reactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reactor")
            .field("epoll", &self.inner.epoll)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Restores the previously current reactor when dropped.
#[derive(Debug)]
pub struct EnterGuard {
    prev: Option<Reactor>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

mod registration;
mod turn;

pub use registration::Registration;
