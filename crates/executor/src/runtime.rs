//! The per-thread runtime: a FIFO run queue of tasks, the loop that polls
//! them, and the reactor it sleeps in.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use reactor::{Counter, Notifier, Reactor, trace};

use crate::task::{JoinHandle, RunOutcome, TaskRef};

/// Polls per tick before the reactor is checked (without blocking) for I/O
/// and timers, so a crowd of ready tasks cannot starve the network.
pub const DEFAULT_BUDGET: usize = 128;

/// A hook run after every reactor turn (see [`Builder::on_turn`]).
type TurnHook = Box<dyn Fn(&Reactor)>;

/// How long an idle runtime spins, after a cross-thread wake, before it
/// sleeps in `epoll_wait` (see `Core::spin_for_remote_wake`).
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(20);

/// The part of a runtime other threads can reach: where remote wakes land.
pub(crate) struct Shared {
    inbox: Mutex<Inbox>,
    /// Mirrors `inbox.tasks.len()` so that the owner checks it without a lock.
    inbox_len: AtomicUsize,
    notifier: Notifier,
    remote_wakes: AtomicU64,
    /// Written by the owner thread only; read by [`StatsHandle`]s anywhere.
    counters: Counters,
}

struct Inbox {
    tasks: Vec<TaskRef>,
    /// The runtime is gone: drop remote wakes instead of queueing them.
    closed: bool,
}

impl Shared {
    /// A wake from a thread that is not running this runtime.
    fn push_remote(&self, task: TaskRef) {
        let rejected = {
            let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            if inbox.closed {
                Some(task)
            } else {
                inbox.tasks.push(task);
                self.inbox_len.store(inbox.tasks.len(), Ordering::Release);
                None
            }
        };
        // Dropped outside the lock: it may be the last reference.
        if rejected.is_none() {
            self.remote_wakes.fetch_add(1, Ordering::Relaxed);
            self.notifier.notify();
        }
    }
}

/// Counters of one runtime (single-writer: only its thread writes them).
#[derive(Default)]
struct Counters {
    spawned: Counter,
    alive: Counter,
    polls: Counter,
    completed: Counter,
    panicked: Counter,
    local_wakes: Counter,
    queue_high_water: Counter,
    ticks: Counter,
}

impl Shared {
    fn snapshot(&self) -> RuntimeStats {
        let c = &self.counters;
        RuntimeStats {
            spawned: c.spawned.get(),
            alive: c.alive.get(),
            polls: c.polls.get(),
            completed: c.completed.get(),
            panicked: c.panicked.get(),
            local_wakes: c.local_wakes.get(),
            remote_wakes: self.remote_wakes.load(Ordering::Relaxed),
            queue_high_water: c.queue_high_water.get(),
            ticks: c.ticks.get(),
        }
    }
}

/// Reads a runtime's counters from any thread (a stats page served by
/// another worker).
#[derive(Clone)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// A snapshot of the counters.
    pub fn snapshot(&self) -> RuntimeStats {
        self.0.snapshot()
    }
}

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

/// A snapshot of a runtime's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Tasks spawned.
    pub spawned: u64,
    /// Tasks alive (spawned, not finished).
    pub alive: u64,
    /// Task polls.
    pub polls: u64,
    /// Tasks finished (value, panic or cancel).
    pub completed: u64,
    /// Tasks whose future panicked.
    pub panicked: u64,
    /// Wakes from this thread.
    pub local_wakes: u64,
    /// Wakes from other threads (through the inbox and eventfd).
    pub remote_wakes: u64,
    /// Longest the run queue has been.
    pub queue_high_water: u64,
    /// Loop iterations that ended in a reactor turn.
    pub ticks: u64,
}

pub(crate) struct Core {
    reactor: Reactor,
    queue: RefCell<VecDeque<TaskRef>>,
    /// Every live task, so that dropping the runtime drops every future here,
    /// on its own thread.
    owned: RefCell<Slab>,
    shared: Arc<Shared>,
    budget: usize,
    on_turn: Option<TurnHook>,
    /// `shared.remote_wakes` when we last went idle (see `spin_for_remote_wake`).
    remote_seen: Cell<u64>,
    /// Whether spinning can help at all: not when this thread may use only
    /// one CPU, where the waking thread needs the very core we would spin on.
    may_spin: bool,
    next_id: Cell<u64>,
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<TaskRef>>,
    free: Vec<usize>,
    len: usize,
}

impl Slab {
    fn insert(&mut self, task: TaskRef) -> usize {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            self.entries[i] = Some(task);
            i
        } else {
            self.entries.push(Some(task));
            self.entries.len() - 1
        }
    }

    fn remove(&mut self, i: usize) -> Option<TaskRef> {
        let t = self.entries.get_mut(i)?.take()?;
        self.free.push(i);
        self.len -= 1;
        Some(t)
    }
}

thread_local! {
    /// The core running on this thread, set for the duration of `block_on`.
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Queues a woken task: on its own runtime's thread straight into the local
/// FIFO, from anywhere else through that runtime's locked inbox + eventfd.
#[inline]
pub(crate) fn schedule(task: TaskRef) {
    // try_with: a waker may fire while this thread's locals are torn down.
    let local = CURRENT.try_with(|c| c.get()).unwrap_or(std::ptr::null());
    if !local.is_null() {
        // SAFETY: CURRENT is non-null only while `block_on` runs on this
        // thread, and it points at the core that `block_on` keeps alive.
        let core = unsafe { &*local };
        if Arc::ptr_eq(&core.shared, &task.header().shared) {
            if trace::chrome::on() {
                let id = task.header().id;
                trace::chrome::wake(id, format_args!("\"task\":{id},\"from\":\"local\""));
            } else {
                reactor::trace!("wake", "task={} local", task.header().id);
            }
            core.push_local(task);
            return;
        }
    }
    if trace::chrome::on() {
        let id = task.header().id;
        let owner = Arc::as_ptr(&task.header().shared).addr();
        trace::chrome::remote_wake(owner, id, format_args!("\"task\":{id},\"from\":\"remote\""));
    } else {
        reactor::trace!("wake", "task={} remote", task.header().id);
    }
    let shared = task.header().shared.clone();
    shared.push_remote(task);
}

impl Core {
    fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    #[inline]
    fn push_local(&self, task: TaskRef) {
        self.counters().local_wakes.bump();
        let mut q = self.queue.borrow_mut();
        q.push_back(task);
        self.counters().queue_high_water.raise(q.len() as u64);
    }

    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.counters().spawned.bump();
        reactor::trace!("spawn", "task={id}");
        let task = TaskRef::new(future, self.shared.clone(), id);
        // `new` counted three references; hand them out.
        // SAFETY: the count includes the owned slab's and the queue's.
        let (for_owned, for_queue) = unsafe { (task.alias(), task.alias()) };
        let index = self.owned.borrow_mut().insert(for_owned);
        self.counters().alive.bump();
        task.header().owned_index.set(index);
        self.push_local(for_queue);
        JoinHandle::new(task)
    }

    /// Queues every live task once (see [`wake_all`]).
    fn wake_all(&self) {
        let owned = self.owned.borrow();
        for task in owned.entries.iter().flatten() {
            crate::task::wake_by_ref(task);
        }
    }

    /// Moves remote wakes into the local queue (no lock if there are none).
    /// Inlined: it runs several times per loop and is nearly always a no-op.
    #[inline(always)]
    fn drain_inbox(&self) {
        if self.shared.inbox_len.load(Ordering::Acquire) != 0 {
            self.drain_inbox_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn drain_inbox_slow(&self) {
        let tasks = {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.inbox_len.store(0, Ordering::Relaxed);
            std::mem::take(&mut inbox.tasks)
        };
        reactor::trace!("inbox", "remote_wakes={}", tasks.len());
        let mut q = self.queue.borrow_mut();
        q.extend(tasks);
        self.counters().queue_high_water.raise(q.len() as u64);
    }

    /// Runs queued tasks until the queue is empty or `limit` polls are done.
    /// Inlined into the loop of `block_on`, its only caller.
    #[inline(always)]
    fn run_tasks(&self, limit: usize) -> usize {
        let mut polled = 0;
        while polled < limit {
            // The borrow ends before the poll: the task may wake others.
            let Some(task) = self.queue.borrow_mut().pop_front() else {
                break;
            };
            polled += 1;
            let index = task.header().owned_index.get();
            let traced = trace::active().then(|| (task.header().id, std::time::Instant::now()));
            if let Some((id, _)) = traced.filter(|_| trace::chrome::on()) {
                trace::chrome::begin(&format!("poll task={id}"), format_args!("\"task\":{id}"));
                trace::chrome::woken_poll(Arc::as_ptr(&self.shared).addr(), id);
            }
            let (outcome, requeue) = task.run();
            if let Some((id, start)) = traced {
                trace_poll(id, outcome, start.elapsed());
            }
            match (outcome, requeue) {
                (RunOutcome::Requeue, Some(task)) => self.queue.borrow_mut().push_back(task),
                (RunOutcome::Complete | RunOutcome::Panicked, _) => {
                    self.counters().completed.bump();
                    if outcome == RunOutcome::Panicked {
                        self.counters().panicked.bump();
                    }
                    let owned = self.owned.borrow_mut().remove(index);
                    if owned.is_some() {
                        self.counters().alive.add(u64::MAX); // -1
                    }
                    drop(owned); // outside the borrow: may free the task
                }
                _ => {}
            }
        }
        self.counters().polls.add(polled as u64);
        polled
    }

    fn stats(&self) -> RuntimeStats {
        self.shared.snapshot()
    }

    /// Before sleeping in `epoll_wait`, spins briefly if another thread woke
    /// us since we last went idle: cross-thread wakes come in bursts
    /// (request/response with another thread), and a thread that is still
    /// awake answers in well under a microsecond, where waking one from
    /// `epoll_wait` costs several. Purely local workloads (a server's
    /// connections) never spin, nor does a thread limited to one CPU
    /// (affinity or a cgroup quota): there the spin would only delay the
    /// thread it waits for. Returns true if work arrived.
    #[inline(always)]
    fn spin_for_remote_wake(&self, main_woken: &AtomicBool) -> bool {
        let remote = self.shared.remote_wakes.load(Ordering::Relaxed);
        if remote == self.remote_seen.get() || !self.may_spin {
            return false;
        }
        self.remote_seen.set(remote);
        self.spin(main_woken)
    }

    #[inline(never)]
    fn spin(&self, main_woken: &AtomicBool) -> bool {
        let start = std::time::Instant::now();
        loop {
            for _ in 0..32 {
                if self.shared.inbox_len.load(Ordering::Acquire) != 0
                    || main_woken.load(Ordering::Acquire)
                {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= SPIN_BEFORE_PARK {
                return false;
            }
        }
    }

    fn has_work(&self) -> bool {
        !self.queue.borrow().is_empty() || self.shared.inbox_len.load(Ordering::Acquire) != 0
    }
}

/// The `poll` trace line: which task, what it returned, how long it ran.
fn trace_poll(id: u64, outcome: RunOutcome, took: Duration) {
    let what = match outcome {
        RunOutcome::Idle => "Pending",
        RunOutcome::Requeue => "Pending(woke itself)",
        RunOutcome::Complete => "Ready",
        RunOutcome::Panicked => "Panicked",
    };
    if trace::chrome::on() {
        trace::chrome::end(format_args!("\"result\":\"{what}\""));
        return;
    }
    trace::emit(
        "poll",
        format_args!("task={id} {what} {}", trace::Short(took)),
    );
}

/// A single-threaded runtime: a reactor plus a FIFO of tasks.
///
/// Tasks never leave the thread that spawned them, so [`spawn`] accepts
/// `!Send` futures: a connection handler can hold `Rc`s and `RefCell`s
/// freely, and nothing pays for synchronisation it does not need. Spreading
/// load over cores is the dispatcher's job (one runtime per worker thread),
/// not the executor's.
pub struct Runtime {
    core: Rc<Core>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Options for a [`Runtime`].
pub struct Builder {
    budget: usize,
    on_turn: Option<TurnHook>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("budget", &self.budget)
            .field("on_turn", &self.on_turn.is_some())
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            budget: DEFAULT_BUDGET,
            on_turn: None,
        }
    }
}

impl Builder {
    /// Default options.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Task polls between two reactor checks (at least 1).
    pub fn budget(mut self, polls: usize) -> Builder {
        self.budget = polls.max(1);
        self
    }

    /// A hook run after every reactor turn, before the woken tasks run: the
    /// place for per-wake-up work such as refreshing a cached clock
    /// ([`Reactor::now`] is the time the turn woke up).
    pub fn on_turn(mut self, hook: impl Fn(&Reactor) + 'static) -> Builder {
        self.on_turn = Some(Box::new(hook));
        self
    }

    /// Creates the runtime (and its reactor) on this thread.
    pub fn build(self) -> io::Result<Runtime> {
        let reactor = Reactor::new()?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                tasks: Vec::new(),
                closed: false,
            }),
            inbox_len: AtomicUsize::new(0),
            notifier: reactor.notifier(),
            remote_wakes: AtomicU64::new(0),
            counters: Counters::default(),
        });
        Ok(Runtime {
            core: Rc::new(Core {
                reactor,
                queue: RefCell::new(VecDeque::with_capacity(256)),
                owned: RefCell::new(Slab::default()),
                shared,
                budget: self.budget,
                on_turn: self.on_turn,
                remote_seen: Cell::new(0),
                may_spin: std::thread::available_parallelism().is_ok_and(|n| n.get() > 1),
                next_id: Cell::new(1),
            }),
        })
    }
}

/// The key of `block_on`'s own future for a timeline's wake arrows (task
/// ids count up from 0 and never reach it).
const BLOCK_ON_KEY: u64 = u64::MAX;

/// The waker of `block_on`'s own future: a flag, plus an eventfd write when
/// the wake comes from another thread.
struct MainWaker {
    woken: AtomicBool,
    shared: Arc<Shared>,
    owner: std::thread::ThreadId,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if trace::chrome::on() {
            let args = format_args!("\"task\":\"block_on\"");
            if std::thread::current().id() == self.owner {
                trace::chrome::wake(BLOCK_ON_KEY, args);
            } else {
                let owner = Arc::as_ptr(&self.shared).addr();
                trace::chrome::remote_wake(owner, BLOCK_ON_KEY, args);
            }
        } else {
            reactor::trace!("wake", "block_on");
        }
        if !self.woken.swap(true, Ordering::AcqRel) && std::thread::current().id() != self.owner {
            self.shared.remote_wakes.fetch_add(1, Ordering::Relaxed);
            self.shared.notifier.notify();
        }
    }
}

impl Runtime {
    /// A runtime with default options.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// The runtime's reactor.
    pub fn reactor(&self) -> &Reactor {
        &self.core.reactor
    }

    /// Spawns a task; it first runs when `block_on` next drives the queue.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.core.spawn(future)
    }

    /// Runs `future` to completion on this thread, running spawned tasks and
    /// the reactor meanwhile. Spawned tasks still pending when it returns stay
    /// queued for the next `block_on` (or are dropped with the runtime).
    ///
    /// # Panics
    /// If called from inside a runtime on this thread (it would deadlock).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let core = &*self.core;
        let _enter = Enter::new(core);
        let _reactor = core.reactor.enter();

        let main = Arc::new(MainWaker {
            woken: AtomicBool::new(true),
            shared: core.shared.clone(),
            owner: std::thread::current().id(),
        });
        let waker = Waker::from(main.clone());
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);

        let mut since_turn = 0;
        loop {
            if main.woken.swap(false, Ordering::AcqRel) {
                since_turn += 1;
                let start = trace::active().then(std::time::Instant::now);
                if start.is_some() && trace::chrome::on() {
                    trace::chrome::begin("poll block_on", format_args!(""));
                    trace::chrome::woken_poll(Arc::as_ptr(&core.shared).addr(), BLOCK_ON_KEY);
                }
                let poll = future.as_mut().poll(&mut cx);
                if let Some(start) = start {
                    let what = if poll.is_ready() { "Ready" } else { "Pending" };
                    if trace::chrome::on() {
                        trace::chrome::end(format_args!("\"result\":\"{what}\""));
                    } else {
                        let took = trace::Short(start.elapsed());
                        trace::emit("poll", format_args!("block_on {what} {took}"));
                    }
                }
                if let Poll::Ready(v) = poll {
                    return v;
                }
            }
            since_turn += core.run_tasks(core.budget.saturating_sub(since_turn));
            core.drain_inbox();

            let mut idle = !core.has_work() && !main.woken.load(Ordering::Acquire);
            if idle && core.spin_for_remote_wake(&main.woken) {
                idle = false;
                core.drain_inbox();
                if since_turn < core.budget {
                    continue;
                }
            }
            if idle || since_turn >= core.budget {
                core.counters().ticks.bump();
                // Idle: sleep until I/O, a timer or a remote wake. Busy: only
                // peek, so that I/O and timers keep flowing under load.
                let timeout = if idle { None } else { Some(Duration::ZERO) };
                if let Err(e) = core.reactor.turn(timeout) {
                    // epoll_wait fails only on programming errors (EBADF,
                    // EFAULT); spinning on it would hide the bug.
                    panic!("reactor failed: {e}");
                }
                since_turn = 0;
                if let Some(hook) = &core.on_turn {
                    hook(&core.reactor);
                }
                core.drain_inbox();
            }
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RuntimeStats {
        self.core.stats()
    }

    /// A handle that reads the counters from any thread.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.core.shared.clone())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let core = &*self.core;
        // Refuse further remote wakes, then drop every queued reference.
        let remote = {
            let mut inbox = core.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.closed = true;
            core.shared.inbox_len.store(0, Ordering::Relaxed);
            std::mem::take(&mut inbox.tasks)
        };
        drop(remote);
        // Cancel every live task here, on its own thread. A future's drop may
        // touch the reactor (deregistering its fds), so enter it.
        // (Dropped inside another runtime's block_on: cancellation wakes then
        // take the remote path, find the inbox closed, and are dropped.)
        let _reactor = core.reactor.enter();
        let _enter = Enter::try_new(core);
        // A cancelled future's destructor may drop other handles or even
        // spawn, so take the whole slab in rounds until it stays empty.
        loop {
            let batch = {
                let mut owned = core.owned.borrow_mut();
                owned.free.clear();
                owned.len = 0;
                std::mem::take(&mut owned.entries)
            };
            if batch.is_empty() {
                break;
            }
            for task in batch.into_iter().flatten() {
                task.cancel_now();
            }
        }
        core.counters().alive.set(0);
        let queued = std::mem::take(&mut *core.queue.borrow_mut());
        drop(queued);
    }
}

/// Marks this thread as running `core`; restores the previous state on drop.
struct Enter {
    prev: *const Core,
}

impl Enter {
    /// Enters `core`, or returns `None` if a runtime already runs here.
    fn try_new(core: &Core) -> Option<Enter> {
        let prev = CURRENT.with(|c| c.get());
        if !prev.is_null() {
            return None;
        }
        CURRENT.with(|c| c.set(core as *const Core));
        Some(Enter { prev })
    }

    fn new(core: &Core) -> Enter {
        Self::try_new(core).expect(
            "cannot block_on inside a runtime on the same thread: it would block the \
             runtime that is polling the caller (spawn the future instead)",
        )
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Wakes every live task of this thread's runtime once: a broadcast, for
/// events that concern all tasks (a server's shutdown) and that would
/// otherwise need every task to register a waker for them on every wait.
/// Tasks that find nothing changed simply return `Pending` again: the
/// `Future` contract allows spurious wakes. A no-op outside a runtime.
pub fn wake_all() {
    let local = CURRENT.try_with(|c| c.get()).unwrap_or(std::ptr::null());
    if !local.is_null() {
        // SAFETY: CURRENT is non-null only while `block_on` runs on this
        // thread, and it points at the core that `block_on` keeps alive.
        unsafe { &*local }.wake_all();
    }
}

/// Runs `future` on a fresh runtime on this thread and returns its output.
///
/// # Panics
/// If the runtime cannot be created (no fds left) or when nested.
pub fn block_on<F: Future>(future: F) -> F::Output {
    Runtime::new()
        .expect("failed to create runtime (epoll/eventfd)")
        .block_on(future)
}

/// Spawns a task on the runtime running this thread.
///
/// # Panics
/// Outside `block_on`.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let core = CURRENT.with(|c| c.get());
    assert!(!core.is_null(), "spawn called outside of a runtime");
    // SAFETY: non-null CURRENT points at the core kept alive by `block_on`.
    unsafe { &*core }.spawn(future)
}

/// Stats of the runtime running this thread, if any.
pub fn current_stats() -> Option<RuntimeStats> {
    let core = CURRENT.with(|c| c.get());
    if core.is_null() {
        return None;
    }
    // SAFETY: as in `spawn`.
    Some(unsafe { &*core }.stats())
}

/// Gives other tasks a turn: the task goes to the back of the run queue.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
