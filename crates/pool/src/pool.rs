//! The pool itself: one lock around a bounded queue and a few counts, one
//! condition variable that idle threads wait on.
//!
//! ```text
//!   spawn_blocking(f)          lock; then the first that applies:
//!     an idle thread not yet notified?   queue f, notify one
//!     fewer than max_threads alive?      start a thread that runs f first
//!     fewer than queue_bound queued?     queue f (a busy thread takes it next)
//!     otherwise                          Err(Full): the caller decides (503...)
//!
//!   pool thread: loop { run a task; take the next from the queue, or wait
//!                       idle_timeout for one; nothing came → retire }
//! ```
//!
//! `notified` counts wake-ups sent but not yet consumed, so a burst of
//! submissions never counts the same idle thread twice; a thread that wakes
//! and finds a notification but no task (another thread was quicker) simply
//! waits again.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use crate::handle::{Completion, JoinError, JoinHandle};

type Task = Box<dyn FnOnce() + Send + 'static>;

/// The error of [`Pool::spawn_blocking`] when the pool is at capacity:
/// every thread busy and the queue at its bound (or the pool shut down).
/// Nothing was queued; the closure was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("blocking pool full: all threads busy and the queue at its bound")
    }
}

impl std::error::Error for Full {}

impl From<Full> for io::Error {
    fn from(e: Full) -> io::Error {
        io::Error::new(io::ErrorKind::WouldBlock, e)
    }
}

/// A snapshot of a pool's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Tasks waiting for a thread.
    pub queued: usize,
    /// Threads alive (busy or idle).
    pub alive: usize,
    /// Threads running a task.
    pub busy: usize,
    /// Tasks finished (returned or panicked; cancelled ones are not run).
    pub completed: u64,
    /// Tasks whose closure panicked.
    pub panicked: u64,
    /// Submissions refused with [`Full`].
    pub rejected: u64,
    /// Threads started so far (a high number with few alive means threads
    /// retire and restart: the idle timeout may be too short).
    pub threads_started: u64,
    /// The configured thread limit.
    pub max_threads: usize,
    /// The configured queue bound.
    pub queue_bound: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Task>,
    alive: usize,
    /// Threads waiting on the condition variable.
    idle: usize,
    /// Wake-ups sent and not yet consumed.
    notified: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    config: Config,
    completed: AtomicU64,
    panicked: AtomicU64,
    rejected: AtomicU64,
    threads_started: AtomicU64,
}

#[derive(Debug, Clone)]
struct Config {
    max_threads: usize,
    queue_bound: usize,
    idle_timeout: Duration,
    name: String,
    stack_size: Option<usize>,
    nice: Option<i32>,
    sched_idle: bool,
    /// The builder's thread's affinity, given to every pool thread.
    affinity: Option<crate::sys::CpuSet>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Tasks run outside the lock, so it cannot be poisoned by them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A bounded pool of threads for blocking and CPU-heavy work. Cheap to
/// clone (all clones are the same pool); see the crate docs.
///
/// Dropping the last clone shuts the pool down: queued tasks still run,
/// then the threads exit (nobody waits for them).
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
    /// Held by `Pool` clones only (not by the threads): its drop is the last
    /// user's goodbye.
    _owner: Arc<Owner>,
}

struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.lock().shutdown = true;
        self.0.work.notify_all();
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.shared.config.name)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Configures a [`Pool`]: `Pool::builder().max_threads(8).build()`.
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
}

impl Default for Builder {
    fn default() -> Builder {
        let cpus = thread::available_parallelism().map_or(2, |n| n.get());
        Builder {
            config: Config {
                max_threads: (cpus * 4).max(4),
                queue_bound: 1024,
                idle_timeout: Duration::from_secs(10),
                name: "pool".into(),
                stack_size: None,
                nice: None,
                sched_idle: false,
                affinity: None,
            },
        }
    }
}

impl Builder {
    /// Threads alive at most (at least 1). Default: four per CPU, at least 4
    /// (blocking calls mostly wait, so a few more than CPUs keeps them busy;
    /// for purely CPU-bound work, use the number of CPUs).
    pub fn max_threads(mut self, n: usize) -> Builder {
        self.config.max_threads = n.max(1);
        self
    }

    /// Tasks that may wait for a thread at most (0: none wait; a submission
    /// succeeds only if a thread is free or can be started). Default 1024.
    pub fn queue_bound(mut self, n: usize) -> Builder {
        self.config.queue_bound = n;
        self
    }

    /// How long an idle thread waits for work before it exits. Default 10 s.
    pub fn idle_timeout(mut self, d: Duration) -> Builder {
        self.config.idle_timeout = d;
        self
    }

    /// The threads' name (shown by `top -H`, debuggers, panic messages).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.config.name = name.into();
        self
    }

    /// The threads' stack size (default: the standard library's).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.config.stack_size = Some(bytes);
        self
    }

    /// The threads' nice value (Linux, per thread): above 0 they yield the
    /// CPU to the event loops whenever both want it, so background work
    /// cannot add latency to requests. Default: inherited.
    pub fn nice(mut self, nice: i32) -> Builder {
        self.config.nice = Some(nice);
        self
    }

    /// Puts the threads in the `SCHED_IDLE` scheduling class (Linux): they
    /// run only on CPU time no other thread wants, and an event loop that
    /// wakes up preempts them at once. The strongest protection of request
    /// latency from background work; the price is that pool work crawls
    /// while the CPUs are saturated. Default: off.
    pub fn sched_idle(mut self, on: bool) -> Builder {
        self.config.sched_idle = on;
        self
    }

    /// The pool. No thread starts until the first task. Pool threads get
    /// the CPU affinity of the thread calling `build`, not that of the
    /// (perhaps pinned) thread whose submission starts them.
    pub fn build(mut self) -> Pool {
        self.config.affinity = crate::sys::current_affinity().ok();
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            work: Condvar::new(),
            config: self.config,
            completed: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            threads_started: AtomicU64::new(0),
        });
        Pool {
            _owner: Arc::new(Owner(shared.clone())),
            shared,
        }
    }
}

impl Pool {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Refuses every submission from now on ([`Full`]) and lets idle
    /// threads exit; queued tasks still run. A server that may not start
    /// threads at all (one that `fork`s per connection) closes its pool
    /// before the first task, so that no thread ever starts.
    pub fn close(&self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
    }

    /// Runs `f` on a pool thread; its value (or panic) comes back through
    /// the [`JoinHandle`]. Never blocks: when every thread is busy and the
    /// queue is at its bound, returns [`Full`] at once, so an overloaded
    /// server can say so (503) instead of piling work up without limit.
    pub fn spawn_blocking<F, T>(&self, f: F) -> Result<JoinHandle<T>, Full>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_blocking_as("task", f)
    }

    /// [`Pool::spawn_blocking`] of a task that an [`Observer`](crate::Observer)
    /// sees as `what` (`"listing"`, `"sha256"`...).
    pub fn spawn_blocking_as<F, T>(&self, what: &'static str, f: F) -> Result<JoinHandle<T>, Full>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let completion = Completion::new();
        let observer = crate::observe::observer();
        let token = observer.map_or(0, |o| o.submit(what));
        let task: Task = {
            let completion = completion.clone();
            let shared = self.shared.clone();
            Box::new(move || {
                if let Some(o) = observer {
                    o.start(what, token);
                }
                if completion.start() {
                    let result = catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
                        shared.panicked.fetch_add(1, Relaxed);
                        JoinError::Panicked(p)
                    });
                    shared.completed.fetch_add(1, Relaxed);
                    completion.finish(result);
                } // else cancelled while queued
                if let Some(o) = observer {
                    o.finish();
                }
            })
        };
        self.submit(task)?;
        Ok(JoinHandle::new(completion))
    }

    fn submit(&self, task: Task) -> Result<(), Full> {
        let shared = &self.shared;
        let cfg = &shared.config;
        let mut st = shared.lock();
        if st.shutdown {
            shared.rejected.fetch_add(1, Relaxed);
            return Err(Full);
        }
        if st.idle > st.notified {
            st.queue.push_back(task);
            st.notified += 1;
            drop(st);
            shared.work.notify_one();
            return Ok(());
        }
        if st.alive < cfg.max_threads {
            st.alive += 1;
            drop(st);
            return match self.start_thread(task) {
                Ok(()) => Ok(()),
                Err(task) => {
                    // Out of threads (memory, RLIMIT_NPROC): queue it if a
                    // thread is left to take it, refuse it otherwise.
                    let mut st = shared.lock();
                    st.alive -= 1;
                    if st.alive > 0 && st.queue.len() < cfg.queue_bound {
                        st.queue.push_back(task);
                        return Ok(());
                    }
                    shared.rejected.fetch_add(1, Relaxed);
                    Err(Full)
                }
            };
        }
        if st.queue.len() < cfg.queue_bound {
            st.queue.push_back(task);
            return Ok(());
        }
        shared.rejected.fetch_add(1, Relaxed);
        Err(Full)
    }

    /// Starts a thread whose first task is `first`; gives it back on failure.
    fn start_thread(&self, first: Task) -> Result<(), Task> {
        let cfg = &self.shared.config;
        let mut b = thread::Builder::new().name(cfg.name.clone());
        if let Some(size) = cfg.stack_size {
            b = b.stack_size(size);
        }
        // The task travels through a slot so that a failed spawn (which
        // drops the closure) cannot lose it.
        let slot = Arc::new(Mutex::new(Some(first)));
        let (shared, thread_slot) = (self.shared.clone(), slot.clone());
        let spawned = b.spawn(move || {
            // Best effort: a thread that cannot change its scheduling still
            // does its work.
            if let Some(set) = &shared.config.affinity {
                let _ = crate::sys::set_affinity(set);
            }
            if let Some(nice) = shared.config.nice {
                let _ = crate::sys::set_nice(nice);
            }
            if shared.config.sched_idle {
                let _ = crate::sys::set_sched_idle();
            }
            let first = thread_slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(thread_slot);
            worker(&shared, first);
        });
        match spawned {
            Ok(_) => {
                self.shared.threads_started.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(_) => Err(slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .expect("a thread that never started took no task")),
        }
    }

    /// The counters now.
    pub fn stats(&self) -> PoolStats {
        let shared = &self.shared;
        let st = shared.lock();
        PoolStats {
            queued: st.queue.len(),
            alive: st.alive,
            busy: st.alive - st.idle,
            completed: shared.completed.load(Relaxed),
            panicked: shared.panicked.load(Relaxed),
            rejected: shared.rejected.load(Relaxed),
            threads_started: shared.threads_started.load(Relaxed),
            max_threads: shared.config.max_threads,
            queue_bound: shared.config.queue_bound,
        }
    }
}

/// A pool thread's life: run tasks until idle for `idle_timeout`, or until
/// the pool shuts down and the queue is empty.
fn worker(shared: &Shared, first: Option<Task>) {
    if let Some(task) = first {
        task();
    }
    let mut st = shared.lock();
    loop {
        if let Some(task) = st.queue.pop_front() {
            drop(st);
            // Tasks catch their closure's panic themselves; nothing unwinds
            // out of `task()`.
            task();
            st = shared.lock();
            continue;
        }
        if st.shutdown {
            break;
        }
        st.idle += 1;
        let (guard, waited) = shared
            .work
            .wait_timeout(st, shared.config.idle_timeout)
            .unwrap_or_else(|e| e.into_inner());
        st = guard;
        st.idle -= 1;
        if st.notified > 0 {
            st.notified -= 1;
            continue;
        }
        if waited.timed_out() && st.queue.is_empty() {
            break;
        }
    }
    st.alive -= 1;
}
