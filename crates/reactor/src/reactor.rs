//! The reactor: one epoll instance, its waker registry, its timers and its
//! notifier, owned by one thread.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use driver::Counter;

use crate::clock::{self, Clock, Nanos, Tick};
use crate::epoll::{self, ALL_EDGE, Epoll, Events};
use crate::interest::{Interest, Readiness};
use crate::notify::Notifier;
use crate::registry::{NOTIFY_TOKEN, Registry, SlotKey};
use crate::timer::{TimerHeap, TimerKey};
use crate::trace::{self, EpollFlags, Short};

/// Timers further off than this are waited for with the cached clock.
const COARSE_HORIZON: Nanos = 250_000_000;

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

    /// Registers `fd` (edge-triggered, both directions) and returns the
    /// registration that owns the slot.
    ///
    /// The registration keeps the fd's number past this call: it reads,
    /// sends and deregisters through it ([`Registration::try_read`],
    /// [`Registration::poll_send`], its `Drop`), so a borrow for the call
    /// alone cannot cover it. Safe code cannot register an fd:
    ///
    /// ```compile_fail,E0133
    /// use std::os::fd::AsFd;
    /// let reactor = reactor::Reactor::new().unwrap();
    /// let (r, _w) = reactor::sys::pipe().unwrap();
    /// let _ = reactor.register(r.as_fd());
    /// ```
    ///
    /// # Safety
    /// `fd` must stay open, and refer to the same open file, until the
    /// returned [`Registration`] is dropped. The I/O types of the runtimes
    /// keep the registration beside the fd they own and drop it first.
    pub unsafe fn register(&self, fd: BorrowedFd<'_>) -> io::Result<Registration> {
        let key = self.inner.registry.borrow_mut().insert(fd.as_raw_fd());
        if let Err(e) = self.inner.epoll.add(fd, ALL_EDGE, key.token()) {
            drop(self.inner.registry.borrow_mut().remove(key));
            return Err(e);
        }
        // SAFETY: this function's contract is `registration`'s.
        Ok(unsafe { self.registration(key, fd) })
    }

    /// [`Reactor::register`] for a socket just accepted, whose owner tries
    /// its first read without asking (as the stackless connection does):
    /// the fd enters epoll only at its first wait, so a connection that is
    /// answered and closed on the bytes it brought with it (a
    /// `Connection: close` request that arrived before the accept) never
    /// costs an `EPOLL_CTL_ADD`, nor the removal at its close, nor an
    /// event. Adding it at that wait loses nothing to a race: with edge
    /// triggering, `EPOLL_CTL_ADD` reports what is ready at that moment,
    /// bytes that came after an `EAGAIN` included. Until then the
    /// registration knows no readiness: an owner that asks before it reads
    /// waits, and that wait adds the fd at once (no gain, no loss).
    ///
    /// Should the late `EPOLL_CTL_ADD` fail (out of memory, or the
    /// per-user watch limit), the wait never ends by readiness: the
    /// caller's own timeout ends the connection.
    ///
    /// # Safety
    /// As [`Reactor::register`].
    pub unsafe fn register_accepted(&self, fd: BorrowedFd<'_>) -> Registration {
        let key = self
            .inner
            .registry
            .borrow_mut()
            .insert_unwatched(fd.as_raw_fd());
        // SAFETY: this function's contract is `registration`'s.
        unsafe { self.registration(key, fd) }
    }

    /// The registration of `fd` under `key`, a slot just taken for it.
    ///
    /// # Safety
    /// `fd` must stay open, and refer to the same open file, until the
    /// registration is dropped.
    unsafe fn registration(&self, key: SlotKey, fd: BorrowedFd<'_>) -> Registration {
        self.sync_registered();
        Registration {
            reactor: self.clone(),
            key,
            // SAFETY: the caller keeps `fd` open until the registration is
            // dropped (this function's contract). `borrowed_fd` shortens
            // each use to a borrow of the registration.
            fd: unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) },
        }
    }

    /// Waits for I/O events or the nearest timer, at most `timeout` (`None`:
    /// no limit but the timers), then wakes every task they concern. Returns
    /// how many wakers were woken.
    pub fn turn(&self, timeout: Option<Duration>) -> io::Result<usize> {
        let inner = &*self.inner;
        let timeout_ms = match (timeout, inner.timers.borrow().next_deadline()) {
            (t, None) => epoll::timeout_ms(t),
            // A busy runtime only peeking: no clock read needed.
            (Some(Duration::ZERO), Some(_)) => 0,
            // A blocking wait whose nearest timer is far off (a connection's
            // idle timeout): the cached clock is good enough and saves a
            // clock read per turn. It can only lag, so the wait is at most
            // one loop iteration too long, never too short.
            (None, Some(deadline)) if deadline >= inner.now_ns.get() + COARSE_HORIZON => {
                clock::ms_until(deadline, inner.now_ns.get())
            }
            (t, Some(deadline)) => {
                let until = clock::ms_until(deadline, clock::read());
                until.min(epoll::timeout_ms(t.or(Some(Duration::MAX))))
            }
        };

        let slept_from = trace::active().then(Instant::now);
        // A timeline's `epoll_wait` slice spans the sleep and the wakes it
        // causes (the wakes' arrows start inside it); it ends below.
        let mut chrome_end = None;
        if slept_from.is_some() && trace::chrome::on() {
            trace::chrome::begin("epoll_wait", format_args!("\"timeout_ms\":{timeout_ms}"));
        }
        let mut woken = 0;
        {
            let mut events = inner.events.borrow_mut();
            let n = match inner.epoll.wait_ms(&mut events, timeout_ms) {
                Ok(n) => n,
                Err(e) => {
                    if slept_from.is_some() && trace::chrome::on() {
                        trace::chrome::end(format_args!(""));
                    }
                    return Err(e);
                }
            };
            inner.stats.waits.bump();
            inner.stats.events.add(n as u64);
            if let Some(from) = slept_from {
                chrome_end = trace_wait(
                    &events,
                    &inner.registry.borrow(),
                    from.elapsed(),
                    timeout_ms,
                );
            }
            // Wakers are woken by reference with the registry borrowed (see
            // `Registry::dispatch`): they only queue their tasks.
            let mut registry = inner.registry.borrow_mut();
            for ev in events.iter() {
                if ev.token == NOTIFY_TOKEN {
                    inner.notifier.reset();
                    inner.stats.notifies.bump();
                    continue;
                }
                match registry.dispatch(ev.token, ev.flags) {
                    Some(n) => woken += n,
                    None => inner.stats.stale_events.bump(),
                }
            }
        }
        let now = clock::read();
        inner.now_ns.set(now);
        inner.now.set(None);
        if inner
            .timers
            .borrow()
            .next_deadline()
            .is_some_and(|d| d <= now)
        {
            woken += self.fire_timers(now);
        }
        inner.stats.wakes.add(woken as u64);
        if let Some(args) = chrome_end {
            trace::chrome::end(format_args!("{args}"));
        }
        Ok(woken)
    }

    /// Fires the timers due at `now` and wakes their tasks; returns how many
    /// wakers were woken.
    #[cold]
    fn fire_timers(&self, now: Nanos) -> usize {
        let inner = &*self.inner;
        let mut wakers = inner.wake_buf.take();
        let fired = inner.timers.borrow_mut().fire_expired(now, &mut wakers);
        inner.stats.timers_fired.add(fired as u64);
        self.sync_timers();
        crate::trace!(
            "timer",
            "fired={fired} wakers={} pending={}",
            wakers.len(),
            inner.stats.timers_pending.get()
        );
        let woken = wakers.len();
        // No borrow is held here: a waker may register, drop or re-arm freely.
        for w in wakers.drain(..) {
            w.wake();
        }
        inner.wake_buf.set(wakers);
        woken
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

/// The `epoll` trace line: how many events, for which fds, and how long the
/// thread slept (the timeout it asked for in brackets). On a timeline, the
/// same as the JSON members for the end of the `epoll_wait` slice, returned.
fn trace_wait(
    events: &Events,
    registry: &Registry,
    slept: Duration,
    timeout_ms: i32,
) -> Option<String> {
    use std::fmt::Write as _;
    let mut fds = String::new();
    for (i, ev) in events.iter().enumerate() {
        if i == 16 {
            fds.push_str(" ...");
            break;
        }
        let sep = if i == 0 { "" } else { " " };
        match ev.token {
            NOTIFY_TOKEN => {
                let _ = write!(fds, "{sep}notify");
            }
            token => match registry.fd_of(token) {
                Some(fd) => {
                    let _ = write!(fds, "{sep}{fd}:{}", EpollFlags(ev.flags));
                }
                None => {
                    let _ = write!(fds, "{sep}stale");
                }
            },
        }
    }
    if trace::chrome::on() {
        return Some(format!(
            "\"n\":{},\"slept_us\":{:.1},\"fds\":{}",
            events.len(),
            slept.as_secs_f64() * 1e6,
            trace::chrome::Json(&fds)
        ));
    }
    let timeout = match u64::try_from(timeout_ms) {
        Err(_) => "none".to_owned(),
        Ok(ms) => Short(Duration::from_millis(ms)).to_string(),
    };
    trace::emit(
        "epoll",
        format_args!(
            "n={} slept={} timeout={timeout} fds=[{fds}]",
            events.len(),
            Short(slept)
        ),
    );
    None
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

/// One fd's place in the reactor. Dropping it removes the fd from epoll, so
/// drop the registration *before* closing the fd (I/O types do this by
/// declaring the registration before the fd field).
pub struct Registration {
    reactor: Reactor,
    key: SlotKey,
    /// Borrowed once, at registration, so that each syscall does not check
    /// the number again (see [`Registration::borrowed_fd`]).
    fd: BorrowedFd<'static>,
}

impl Registration {
    /// Ready when an operation in `interest`'s direction is worth trying.
    /// Ready at once while readiness is set; it stays set until
    /// [`Registration::clear_readiness`] after an `EAGAIN`. Always inlined:
    /// it is every wait of the hot path, and LLVM otherwise keeps it out
    /// of line since it may add the fd to epoll (its first wait).
    #[inline(always)]
    pub fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<Readiness> {
        let (poll, watch) =
            (self.reactor.inner.registry.borrow_mut()).poll_wait(self.key, cx, interest);
        if watch {
            self.watch();
        }
        poll
    }

    /// The first wait of a [`Reactor::register_accepted`] socket: into
    /// epoll now, which reports whatever is ready already. A failure leaves
    /// the wait to the caller's timeout (see there). Out of line: every
    /// other wait skips it, and inlined it made the per-request path
    /// longer.
    #[cold]
    #[inline(never)]
    fn watch(&self) {
        let _ = (self.reactor.inner.epoll).add(self.fd, ALL_EDGE, self.key.token());
    }

    /// Forgets readiness in one direction. Call it only when the operation
    /// returned `EAGAIN`: that is what guarantees another edge will come.
    #[inline]
    pub fn clear_readiness(&self, interest: Interest) {
        self.reactor
            .inner
            .registry
            .borrow_mut()
            .clear(self.key, interest);
    }

    /// The current readiness bits.
    #[inline]
    pub fn readiness(&self) -> Readiness {
        self.reactor.inner.registry.borrow().readiness(self.key)
    }

    /// Runs a non-blocking operation when the fd is ready: tries `op`; on
    /// `EAGAIN` clears readiness and waits for the next edge; retries on
    /// `EINTR`. This is the whole edge-triggered contract in one function.
    pub fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            if self.poll_ready(cx, interest).is_pending() {
                return Poll::Pending;
            }
            match self.try_io(interest, &mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                res => return Poll::Ready(res),
            }
        }
    }

    /// One non-blocking attempt at an operation, without waiting: an
    /// `EAGAIN` clears readiness (the edge-triggered contract), anything else
    /// is returned as is. For callers that wait their own way. Always
    /// inlined: it is every read and write of the hot path, and with the
    /// borrowed fd's check in its closure LLVM kept it out of line (~45
    /// instructions per request).
    #[inline(always)]
    pub fn try_io<R>(
        &self,
        interest: Interest,
        op: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        let res = op();
        if matches!(&res, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.clear_readiness(interest);
        }
        res
    }

    /// Records what a read of `requested` bytes from a stream (a socket or
    /// a pipe) returned. A short read means the receive queue is empty: as
    /// good as `EAGAIN`, one syscall cheaper, so readiness is cleared. Any
    /// byte that arrives later raises a new edge, so this loses nothing.
    #[inline]
    pub fn after_read(&self, res: &io::Result<usize>, requested: usize) {
        if let Ok(n) = res
            && *n > 0
            && *n < requested
        {
            self.clear_readiness(Interest::Readable);
        }
    }

    /// Records what a write of `requested` bytes to a stream returned: a
    /// short write means the send buffer is full, the same reasoning.
    #[inline]
    pub fn after_write(&self, res: &io::Result<usize>, requested: usize) {
        if let Ok(n) = res
            && *n < requested
        {
            self.clear_readiness(Interest::Writable);
        }
    }

    /// The registered fd.
    #[inline]
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The registered fd, borrowed for a call into [`crate::sys`].
    #[inline(always)]
    pub(crate) fn borrowed_fd(&self) -> BorrowedFd<'_> {
        // Shortened to `&self`'s lifetime: `register` requires the fd to
        // stay open until the registration is dropped.
        self.fd
    }

    /// The reactor this fd is registered with.
    pub fn reactor(&self) -> &Reactor {
        &self.reactor
    }

    /// Declares that the fd is closed as soon as this registration is
    /// dropped, and that no other fd refers to its open file (no `dup`, no
    /// child process holding it): closing it then takes it out of epoll,
    /// so the drop skips `EPOLL_CTL_DEL`, one system call fewer per
    /// connection. Were a duplicate to exist after all, epoll would keep
    /// reporting its events under this registration's token, whose
    /// generation the freed slot no longer matches: they are ignored, as
    /// any stale token is.
    pub fn deregister_by_close(&self) {
        (self.reactor.inner.registry.borrow_mut()).set_closed_by_owner(self.key);
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("fd", &self.fd.as_raw_fd())
            .field("token", &self.key.token())
            .field("readiness", &self.readiness())
            .finish()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Deregister first: the fd is still open here (its owner closes it
        // after us), so epoll forgets it before the number can be reused;
        // unless the owner's close will (`deregister_by_close`), or it
        // never entered epoll (`register_accepted`).
        let mut registry = self.reactor.inner.registry.borrow_mut();
        if registry.needs_delete(self.key) {
            let _ = self.reactor.inner.epoll.delete(self.fd);
        }
        let woken = registry.remove(self.key);
        drop(registry);
        self.reactor.sync_registered();
        drop(woken);
    }
}
