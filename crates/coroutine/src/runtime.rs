//! The public face of the scheduler: [`Builder`], [`Runtime`] (with
//! `block_on` and shutdown by cancellation), and the free functions [`run`],
//! [`spawn`], [`try_spawn`] that find the runtime of the current thread.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use reactor::Reactor;

use crate::scheduler::{
    CORE, Core, Counters, DEFAULT_BUDGET, Enter, Inbox, Refused, RuntimeStats, Shared, Slab,
    StatsHandle, TurnHook,
};
use crate::stack::{self, DEFAULT_STACK_SIZE};
use crate::task::{JoinError, JoinHandle};
use crate::watermark;

/// Options for a [`Runtime`].
pub struct Builder {
    stack_size: usize,
    watermarks: bool,
    budget: usize,
    pool_capacity: Option<usize>,
    on_turn: Option<TurnHook>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("stack_size", &self.stack_size)
            .field("watermarks", &self.watermarks)
            .field("budget", &self.budget)
            .field("pool_capacity", &self.pool_capacity)
            .field("on_turn", &self.on_turn.is_some())
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            stack_size: DEFAULT_STACK_SIZE,
            watermarks: false,
            budget: DEFAULT_BUDGET,
            pool_capacity: None,
            on_turn: None,
        }
    }
}

impl Builder {
    /// Default options.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Usable bytes per coroutine stack (rounded up to whole pages, at least
    /// two). Default: [`DEFAULT_STACK_SIZE`], which explains the choice.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = bytes;
        self
    }

    /// Measures every coroutine's stack high-water mark (see `watermark.rs`):
    /// readable with [`JoinHandle::stack_high_water`] and, as a maximum, in
    /// [`RuntimeStats::stack_high_water`]. Costs a fill of each stack per
    /// coroutine: a debugging aid. The `COROUTINE_WATERMARKS` environment
    /// variable turns it on for every runtime and prints a line per
    /// coroutine.
    pub fn stack_watermarks(mut self, on: bool) -> Builder {
        self.watermarks = on;
        self
    }

    /// Resumes between two reactor checks (at least 1).
    pub fn budget(mut self, resumes: usize) -> Builder {
        self.budget = resumes.max(1);
        self
    }

    /// Free stacks this thread's pool keeps (see [`crate::set_pool_capacity`]).
    pub fn pool_capacity(mut self, stacks: usize) -> Builder {
        self.pool_capacity = Some(stacks);
        self
    }

    /// A hook run after every reactor turn, before the woken coroutines run
    /// (e.g. to refresh a cached clock from [`Reactor::now`]).
    pub fn on_turn(mut self, hook: impl Fn(&Reactor) + 'static) -> Builder {
        self.on_turn = Some(Box::new(hook));
        self
    }

    /// Creates the runtime (and its reactor) on this thread.
    pub fn build(self) -> io::Result<Runtime> {
        if let Some(n) = self.pool_capacity {
            stack::set_pool_capacity(n);
        }
        let reactor = Reactor::new()?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                keys: Vec::new(),
                closed: false,
            }),
            inbox_len: AtomicUsize::new(0),
            notifier: reactor.notifier(),
            remote_wakes: AtomicU64::new(0),
            counters: Counters::default(),
        });
        let report = watermark::from_env();
        Ok(Runtime {
            core: Rc::new(Core {
                reactor,
                queue: RefCell::new(VecDeque::with_capacity(256)),
                slab: RefCell::new(Slab::default()),
                shared,
                stack_size: self.stack_size,
                watermarks: self.watermarks || report,
                report_watermarks: report,
                budget: self.budget,
                on_turn: self.on_turn,
                running: Cell::new(false),
            }),
        })
    }
}

/// A single-threaded coroutine runtime: a reactor, a run queue, and the
/// coroutines in it. `!Send`: it and its coroutines stay on this thread.
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

impl Runtime {
    /// A runtime with default options.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Options for a runtime.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The runtime's reactor.
    pub fn reactor(&self) -> &Reactor {
        &self.core.reactor
    }

    /// Spawns a coroutine; it first runs when `block_on` next drives the
    /// queue.
    ///
    /// # Panics
    /// If no stack can be mapped.
    pub fn spawn<F, T>(&self, body: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        self.core
            .spawn(body)
            .expect("failed to map a coroutine stack")
    }

    /// Runs `main` as a coroutine on this thread until it returns, running
    /// the other coroutines and the reactor meanwhile, and returns its value.
    /// A panic in `main` is re-raised here. Coroutines still alive when it
    /// returns stay for the next `block_on` (or are cancelled when the
    /// runtime is dropped).
    ///
    /// `main` may borrow from the caller: it is finished, or cancelled and
    /// unwound, before `block_on` returns or unwinds.
    ///
    /// # Panics
    /// Inside a coroutine or another runtime's `block_on` on this thread,
    /// and when this runtime is running on this thread already (from the
    /// body of a generator that one of its coroutines resumed).
    pub fn block_on<F, T>(&self, main: F) -> T
    where
        F: FnOnce() -> T,
    {
        let core = &*self.core;
        let _enter = match Enter::try_new(core) {
            Ok(enter) => enter,
            Err(refused) => block_on_refused(refused),
        };
        let _reactor = core.reactor.enter();
        let mut out: Option<T> = None;
        let out_ptr: *mut Option<T> = &mut out;
        let body: Box<dyn FnOnce() + '_> = Box::new(move || {
            let v = main();
            // SAFETY: `out` outlives the coroutine (see below).
            unsafe { *out_ptr = Some(v) };
        });
        // SAFETY: only the lifetime changes. The coroutine runs `body` and is
        // finished before this function returns, or cancelled and run to its
        // end by `MainGuard` if it unwinds: nothing borrowed by `main`, nor
        // `out`, is used after this frame is gone.
        let body: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(body) };
        let handle = core
            .spawn(body)
            .expect("failed to map the main coroutine's stack");
        let guard = MainGuard {
            core,
            key: handle.cell_key(),
        };
        core.run_until(|| handle.is_finished());
        std::mem::forget(guard);
        match handle.join() {
            Ok(()) => out.take().expect("main returned a value"),
            Err(JoinError::Panicked(p)) => std::panic::resume_unwind(p),
            Err(JoinError::Cancelled) => panic!("the main coroutine was cancelled"),
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

#[cold]
#[inline(never)]
fn block_on_refused(refused: Refused) -> ! {
    match refused {
        Refused::Nested => panic!(
            "cannot block_on inside a runtime on the same thread: it would block the \
             scheduler that is running the caller (spawn instead)"
        ),
        Refused::Reentered => panic!(
            "cannot block_on a runtime that is already running on this thread (from a \
             generator's body resumed by one of its coroutines): its loop would resume a \
             coroutine that is running"
        ),
    }
}

/// Cancels and unwinds `block_on`'s main coroutine if `block_on` itself
/// unwinds before it finished (its borrows would dangle otherwise).
struct MainGuard<'a> {
    core: &'a Core,
    key: u64,
}

impl Drop for MainGuard<'_> {
    fn drop(&mut self) {
        self.core.cancel_now(self.key);
    }
}

impl<T> JoinHandle<T> {
    fn cell_key(&self) -> u64 {
        self.header().key
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let core = &*self.core;
        // Refuse further remote wakes.
        {
            let mut inbox = core.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.closed = true;
            core.shared.inbox_len.store(0, Ordering::Relaxed);
            inbox.keys.clear();
        }
        // Cancel every live coroutine here, on its own thread, with the
        // reactor entered (their destructors deregister fds). A destructor
        // may spawn, so go round until the slab stays empty.
        let _reactor = core.reactor.enter();
        let _enter = Enter::try_new(core).ok();
        loop {
            let keys = core.slab.borrow().keys();
            if keys.is_empty() {
                break;
            }
            for key in keys {
                core.cancel_now(key);
            }
        }
        core.queue.borrow_mut().clear();
    }
}

fn with_core<R>(f: impl FnOnce(&Core) -> R) -> R {
    let core = CORE.with(Cell::get);
    assert!(
        !core.is_null(),
        "spawn called outside a runtime: use coroutine::run or Runtime::block_on"
    );
    // SAFETY: non-null CORE points at the core kept alive by `block_on`.
    f(unsafe { &*core })
}

/// Runs `main` on a new runtime on this thread; see [`Runtime::block_on`].
///
/// # Panics
/// If the runtime cannot be created (no fds left), or when nested.
pub fn run<F, T>(main: F) -> T
where
    F: FnOnce() -> T,
{
    Runtime::new()
        .expect("failed to create a coroutine runtime (epoll/eventfd)")
        .block_on(main)
}

/// Spawns a coroutine on the runtime running this thread.
///
/// # Panics
/// Outside a runtime, or if no stack can be mapped (see [`try_spawn`]).
pub fn spawn<F, T>(body: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    try_spawn(body).expect("failed to map a coroutine stack")
}

/// Like [`spawn`], returning the error if no stack can be mapped (out of
/// memory, or `vm.max_map_count` reached).
///
/// # Panics
/// Outside a runtime.
pub fn try_spawn<F, T>(body: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    with_core(|core| core.spawn(body))
}

/// Like [`try_spawn`] with no handle: the coroutine is detached from the
/// start, as if its [`JoinHandle`] were dropped at once, and costs a
/// smaller allocation (no room for a result). For coroutines nobody joins,
/// such as a server's one per connection.
///
/// # Panics
/// Outside a runtime.
pub fn try_spawn_detached<F>(body: F) -> io::Result<()>
where
    F: FnOnce() + 'static,
{
    with_core(|core| core.spawn_detached(body))
}

/// Stats of the runtime running this thread, if any.
pub fn current_stats() -> Option<RuntimeStats> {
    let core = CORE.with(Cell::get);
    // SAFETY: as in `with_core`.
    (!core.is_null()).then(|| unsafe { &*core }.stats())
}
