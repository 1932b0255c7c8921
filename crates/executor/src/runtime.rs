//! The per-thread runtime: the loop that polls the tasks of a [`Sched`] and,
//! when none is ready, turns its [`Driver`]. This is the only generic code
//! of the executor: `Runtime<Reactor>` and `Runtime<Proactor>` are two
//! monomorphised copies of the loop below, each calling its driver directly.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use driver::{Driver, Wait};
use reactor::{Reactor, trace};

use crate::sched::{Counters, Enter, Inbox, Sched, Shared, Slab};
use crate::task::JoinHandle;
use crate::{RuntimeStats, StatsHandle};

/// Polls per tick before the driver is checked (without blocking) for I/O
/// and timers, so a crowd of ready tasks cannot starve the network.
pub const DEFAULT_BUDGET: usize = 128;

/// A hook run after every driver turn (see [`Builder::on_turn`]).
type TurnHook<D> = Box<dyn Fn(&D)>;

/// The scheduler and the driver of one runtime, side by side. `repr(C)`
/// puts the scheduler at offset 0, so the run loop reaches both through one
/// pointer (measured: a pointer more spilled to the stack otherwise).
#[repr(C)]
struct Core<D: Driver> {
    sched: Sched,
    on_turn: Option<TurnHook<D>>,
    /// Last: dropped after every task (a proactor waits there for the
    /// kernel's last completions).
    driver: D,
}

/// A single-threaded runtime: a FIFO of tasks on a driver `D` (the epoll
/// [`Reactor`] unless said otherwise; see the crate docs for [`Driver`]).
///
/// Tasks never leave the thread that spawned them, so [`spawn`] accepts
/// `!Send` futures: a connection handler can hold `Rc`s and `RefCell`s
/// freely, and nothing pays for synchronisation it does not need. Spreading
/// load over cores is the dispatcher's job (one runtime per worker thread),
/// not the executor's.
///
/// [`spawn`]: crate::spawn
pub struct Runtime<D: Driver = Reactor> {
    core: Rc<Core<D>>,
}

impl<D: Driver> fmt::Debug for Runtime<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Options for a [`Runtime`] on driver `D`.
pub struct Builder<D: Driver = Reactor> {
    budget: usize,
    on_turn: Option<TurnHook<D>>,
    driver: PhantomData<D>,
}

impl<D: Driver> fmt::Debug for Builder<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("budget", &self.budget)
            .field("on_turn", &self.on_turn.is_some())
            .finish()
    }
}

impl<D: Driver> Default for Builder<D> {
    fn default() -> Self {
        Builder {
            budget: DEFAULT_BUDGET,
            on_turn: None,
            driver: PhantomData,
        }
    }
}

impl Builder<Reactor> {
    /// Default options, on the epoll reactor.
    pub fn new() -> Builder<Reactor> {
        Builder::default()
    }

    /// Creates the runtime and its reactor on this thread.
    pub fn build(self) -> io::Result<Runtime<Reactor>> {
        self.build_on(Reactor::new()?)
    }
}

impl<D: Driver> Builder<D> {
    /// Task polls between two driver checks (at least 1).
    pub fn budget(mut self, polls: usize) -> Builder<D> {
        self.budget = polls.max(1);
        self
    }

    /// A hook run after every driver turn, before the woken tasks run: the
    /// place for per-wake-up work such as refreshing a cached clock
    /// ([`Reactor::now`] is the time the turn woke up).
    pub fn on_turn(mut self, hook: impl Fn(&D) + 'static) -> Builder<D> {
        self.on_turn = Some(Box::new(hook));
        self
    }

    /// Creates the runtime on `driver` (made on this thread).
    pub fn build_on(self, driver: D) -> io::Result<Runtime<D>> {
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                tasks: Vec::new(),
                closed: false,
            }),
            inbox_len: AtomicUsize::new(0),
            notifier: Box::new(driver.notifier()),
            remote_wakes: AtomicU64::new(0),
            counters: Counters::default(),
        });
        Ok(Runtime {
            core: Rc::new(Core {
                sched: Sched {
                    queue: RefCell::new(VecDeque::with_capacity(256)),
                    owned: RefCell::new(Slab::default()),
                    shared,
                    budget: self.budget,
                    remote_seen: Cell::new(0),
                    may_spin: std::thread::available_parallelism().is_ok_and(|n| n.get() > 1),
                    next_id: Cell::new(1),
                },
                on_turn: self.on_turn,
                driver,
            }),
        })
    }
}

/// The key of `block_on`'s own future for a timeline's wake arrows (task
/// ids count up from 0 and never reach it).
const BLOCK_ON_KEY: u64 = u64::MAX;

/// The waker of `block_on`'s own future: a flag, plus the driver's notifier
/// when the wake comes from another thread.
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

impl Runtime<Reactor> {
    /// A runtime with default options on a new epoll reactor.
    pub fn new() -> io::Result<Runtime<Reactor>> {
        Builder::new().build()
    }

    /// The runtime's reactor.
    pub fn reactor(&self) -> &Reactor {
        &self.core.driver
    }
}

impl<D: Driver> Runtime<D> {
    /// A runtime with default options on `driver`.
    pub fn with_driver(driver: D) -> io::Result<Runtime<D>> {
        Builder::default().build_on(driver)
    }

    /// The runtime's driver.
    pub fn driver(&self) -> &D {
        &self.core.driver
    }

    /// Spawns a task; it first runs when `block_on` next drives the queue.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.core.sched.spawn(future)
    }

    /// Runs `future` to completion on this thread, running spawned tasks and
    /// the driver meanwhile. Spawned tasks still pending when it returns stay
    /// queued for the next `block_on` (or are dropped with the runtime).
    ///
    /// # Panics
    /// If called from inside a runtime on this thread (it would deadlock).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        // One pointer for the whole loop: the scheduler and the driver sit at
        // fixed offsets from it (two would cost a register, spilled).
        let this = &*self.core;
        let core = &this.sched;
        let _enter = Enter::new(core);
        let _driver = this.driver.enter();

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
                let wait = if idle { Wait::Block } else { Wait::Peek };
                if let Err(e) = this.driver.turn(wait) {
                    // A turn fails only on programming errors (EBADF,
                    // EFAULT); spinning on it would hide the bug.
                    panic!("driver turn failed: {e}");
                }
                since_turn = 0;
                if let Some(hook) = &this.on_turn {
                    hook(&this.driver);
                }
                core.drain_inbox();
            }
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RuntimeStats {
        self.core.sched.stats()
    }

    /// A handle that reads the counters from any thread.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.core.sched.shared.clone())
    }
}

impl<D: Driver> Drop for Runtime<D> {
    fn drop(&mut self) {
        let core = &self.core.sched;
        // Refuse further remote wakes, then drop every queued reference.
        let remote = {
            let mut inbox = core.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.closed = true;
            core.shared.inbox_len.store(0, Ordering::Relaxed);
            std::mem::take(&mut inbox.tasks)
        };
        drop(remote);
        // Cancel every live task here, on its own thread. A future's drop may
        // touch the driver (deregistering its fds, cancelling its operations),
        // so enter it.
        // (Dropped inside another runtime's block_on: cancellation wakes then
        // take the remote path, find the inbox closed, and are dropped.)
        let _driver = self.core.driver.enter();
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

/// Runs `future` on a fresh runtime on this thread and returns its output.
///
/// # Panics
/// If the runtime cannot be created (no fds left) or when nested.
pub fn block_on<F: Future>(future: F) -> F::Output {
    Runtime::new()
        .expect("failed to create runtime (epoll/eventfd)")
        .block_on(future)
}
