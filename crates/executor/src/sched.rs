//! Where tasks live and wakes land: the run queue, the slab of live tasks,
//! the inbox for wakes from other threads, and the thread-local that says
//! which runtime this thread is running. None of it knows the driver: the
//! loop that polls these tasks and then waits is `runtime.rs`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use driver::Notify;
use reactor::{Counter, trace};

use crate::task::{JoinHandle, RunOutcome, TaskRef};

/// How long an idle runtime spins, after a cross-thread wake, before it
/// sleeps in its driver (see `Sched::spin_for_remote_wake`).
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(20);

/// The part of a runtime other threads can reach: where remote wakes land.
pub(crate) struct Shared {
    pub(crate) inbox: Mutex<Inbox>,
    /// Mirrors `inbox.tasks.len()` so that the owner checks it without a lock.
    pub(crate) inbox_len: AtomicUsize,
    /// The driver's cross-thread wake-up. Behind a `dyn`: it is called only on
    /// the remote path (after a mutex), and the task cells, which point here,
    /// then need no type parameter.
    pub(crate) notifier: Box<dyn Notify>,
    pub(crate) remote_wakes: AtomicU64,
    /// Written by the owner thread only; read by [`StatsHandle`]s anywhere.
    pub(crate) counters: Counters,
}

pub(crate) struct Inbox {
    pub(crate) tasks: Vec<TaskRef>,
    /// The runtime is gone: drop remote wakes instead of queueing them.
    pub(crate) closed: bool,
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
pub(crate) struct Counters {
    pub(crate) spawned: Counter,
    pub(crate) alive: Counter,
    pub(crate) polls: Counter,
    pub(crate) completed: Counter,
    pub(crate) panicked: Counter,
    pub(crate) local_wakes: Counter,
    pub(crate) queue_high_water: Counter,
    pub(crate) ticks: Counter,
}

impl Shared {
    pub(crate) fn snapshot(&self) -> RuntimeStats {
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
pub struct StatsHandle(pub(crate) Arc<Shared>);

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
    /// Wakes from other threads (through the inbox and the driver's notifier).
    pub remote_wakes: u64,
    /// Longest the run queue has been.
    pub queue_high_water: u64,
    /// Loop iterations that ended in a driver turn.
    pub ticks: u64,
}

/// The driver-independent part of a runtime: its tasks and where their wakes
/// land. The run loop (`Runtime::block_on`) owns one beside its driver.
pub(crate) struct Sched {
    pub(crate) queue: RefCell<VecDeque<TaskRef>>,
    /// Every live task, so that dropping the runtime drops every future here,
    /// on its own thread.
    pub(crate) owned: RefCell<Slab>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) budget: usize,
    /// `shared.remote_wakes` when we last went idle (see `spin_for_remote_wake`).
    pub(crate) remote_seen: Cell<u64>,
    /// Whether spinning can help at all: not when this thread may use only
    /// one CPU, where the waking thread needs the very core we would spin on.
    pub(crate) may_spin: bool,
    pub(crate) next_id: Cell<u64>,
}

#[derive(Default)]
pub(crate) struct Slab {
    pub(crate) entries: Vec<Option<TaskRef>>,
    pub(crate) free: Vec<usize>,
    pub(crate) len: usize,
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
    /// The scheduler running on this thread, set for the duration of `block_on`.
    static CURRENT: Cell<*const Sched> = const { Cell::new(std::ptr::null()) };
}

/// Queues a woken task: on its own runtime's thread straight into the local
/// FIFO, from anywhere else through that runtime's locked inbox and its
/// driver's notifier.
#[inline]
pub(crate) fn schedule(task: TaskRef) {
    // try_with: a waker may fire while this thread's locals are torn down.
    let local = CURRENT.try_with(|c| c.get()).unwrap_or(std::ptr::null());
    if !local.is_null() {
        // SAFETY: CURRENT is non-null only while `block_on` runs on this
        // thread, and it points at the scheduler that `block_on` keeps alive.
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

impl Sched {
    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    #[inline]
    fn push_local(&self, task: TaskRef) {
        self.counters().local_wakes.bump();
        let mut q = self.queue.borrow_mut();
        q.push_back(task);
        self.counters().queue_high_water.raise(q.len() as u64);
    }

    pub(crate) fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
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
    pub(crate) fn drain_inbox(&self) {
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
    pub(crate) fn run_tasks(&self, limit: usize) -> usize {
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

    pub(crate) fn stats(&self) -> RuntimeStats {
        self.shared.snapshot()
    }

    /// Before sleeping in the driver, spins briefly if another thread woke
    /// us since we last went idle: cross-thread wakes come in bursts
    /// (request/response with another thread), and a thread that is still
    /// awake answers in well under a microsecond, where waking one from
    /// a sleeping driver costs several. Purely local workloads (a server's
    /// connections) never spin, nor does a thread limited to one CPU
    /// (affinity or a cgroup quota): there the spin would only delay the
    /// thread it waits for. Returns true if work arrived.
    #[inline(always)]
    pub(crate) fn spin_for_remote_wake(&self, main_woken: &AtomicBool) -> bool {
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

    pub(crate) fn has_work(&self) -> bool {
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

/// Marks this thread as running `core`; restores the previous state on drop.
pub(crate) struct Enter {
    prev: *const Sched,
}

impl Enter {
    /// Enters `core`, or returns `None` if a runtime already runs here.
    pub(crate) fn try_new(core: &Sched) -> Option<Enter> {
        let prev = CURRENT.with(|c| c.get());
        if !prev.is_null() {
            return None;
        }
        CURRENT.with(|c| c.set(core as *const Sched));
        Some(Enter { prev })
    }

    pub(crate) fn new(core: &Sched) -> Enter {
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
        // thread, and it points at the scheduler that `block_on` keeps alive.
        unsafe { &*local }.wake_all();
    }
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
    // SAFETY: non-null CURRENT points at the scheduler kept alive by `block_on`.
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
