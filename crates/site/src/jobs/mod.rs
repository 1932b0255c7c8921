//! Background jobs: work submitted over HTTP, run on the blocking pool, its
//! result fetched later.
//!
//! ```text
//!   POST /_httplite/jobs?type=T ─▶ registry: id → queued ─▶ pool queue (full → 503)
//!                                                              │ pool thread
//!   GET /_httplite/jobs/{id}   ◀─ registry: queued → running → done / failed
//!   DELETE (while queued)      ─▶ cancelled: the pool thread skips it
//! ```
//!
//! A job never runs on an event loop: the connection only reads the input
//! and registers it (a few microseconds under one lock); the computation
//! happens on a pool thread, and nobody waits for it, so no wake-up is
//! needed either. An expected failure (input that is not UTF-8) fails the
//! job at once; a panic is unexpected and retried, up to [`MAX_RETRIES`]
//! times, on the same thread. Finished jobs stay readable up to a count and
//! an age, oldest evicted first.
//!
//! The registry is local (in this process, beside its pool) or remote
//! ([`Jobs::remote`]): a driver whose connections cannot share one process
//! (a process per connection) keeps a local registry in a process of its
//! own and hands every other process a remote one, whose calls travel as
//! messages over the driver's [`Transport`] and are answered there by
//! [`Jobs::answer`]. The HTTP side ([`http`]) is the same for both; a
//! remote registry that cannot be reached is answered 503.

pub mod http;
pub mod kinds;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pool::{Full, Pool, PoolStats};

pub use kinds::{JobKind, JobValue};
pub use wire::Transport;

/// Retries after an unexpected failure (a panic): a job runs at most
/// `1 + MAX_RETRIES` times.
pub const MAX_RETRIES: u32 = 3;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for a pool thread.
    Queued,
    /// On a pool thread.
    Running,
    /// Finished with a value.
    Done,
    /// Finished without one (bad input, or every attempt panicked).
    Failed,
    /// Cancelled while queued.
    Cancelled,
}

impl JobState {
    /// The name the JSON uses.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// A copy of one job's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// Its id.
    pub id: u64,
    /// Its type.
    pub kind: JobKind,
    /// Its state.
    pub state: JobState,
    /// Runs started so far.
    pub attempts: u32,
    /// The value once done.
    pub value: Option<JobValue>,
    /// Why it failed.
    pub error: Option<String>,
}

/// How many finished jobs are kept, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// At most this many finished jobs (oldest evicted first).
    pub max_count: usize,
    /// None older than this (counted from when it finished).
    pub max_age: Duration,
}

/// Counters for the stats endpoint and the console.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobStats {
    /// Accepted submissions.
    pub submitted: u64,
    /// Refused because the pool's queue was full.
    pub rejected: u64,
    /// Waiting for a thread now.
    pub queued: u64,
    /// Running now.
    pub running: u64,
    /// Finished with a value.
    pub done: u64,
    /// Finished failed.
    pub failed: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Re-runs after a panic.
    pub retries: u64,
    /// Finished jobs held now.
    pub retained: u64,
    /// Finished jobs dropped by the retention limits.
    pub evicted: u64,
}

/// What [`Jobs::cancel`] did.
#[derive(Debug)]
pub enum Cancel {
    /// Cancelled; its record now.
    Cancelled(JobInfo),
    /// Too late (running or finished); its record.
    NotQueued(JobInfo),
    /// No such job (never, or evicted).
    NotFound,
}

/// Why [`Jobs::submit`] kept nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The pool's queue is at its bound.
    Full,
    /// The registry could not be reached (see [`Unavailable`]).
    Unavailable,
}

/// The registry could not be reached: it lives in another process (a
/// [`Transport`] leads there) that is gone, restarting or not answering.
/// A local registry is always reachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// The job registry; cheap to clone. Either local (the registry and the
/// pool jobs run on are in this process) or remote (every call goes
/// through a [`Transport`] to a process that holds a local one and answers
/// with [`Jobs::answer`]); the callers cannot tell which.
#[derive(Debug, Clone)]
pub struct Jobs {
    /// This process's pool: where jobs run if local, and what
    /// [`Jobs::pool`] lends to directory listings either way.
    pool: Pool,
    test_kinds: bool,
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Local(Arc<Local>),
    Remote(Arc<dyn Transport>),
}

#[derive(Debug)]
struct Local {
    retention: Retention,
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    next_id: u64,
    jobs: HashMap<u64, JobInfo>,
    /// Finished jobs by finishing time, oldest first.
    finished: VecDeque<(u64, Instant)>,
    stats: JobStats,
}

impl Jobs {
    /// A registry running jobs on `pool`; `test_kinds` enables the test-only
    /// job types (`panic`, `sleep`).
    pub fn new(pool: Pool, retention: Retention, test_kinds: bool) -> Jobs {
        Jobs {
            pool,
            test_kinds,
            backend: Backend::Local(Arc::new(Local {
                retention,
                registry: Mutex::default(),
            })),
        }
    }

    /// A registry in another process, reached through `transport`, whose
    /// other end answers with [`Jobs::answer`] on a local one. `pool` is
    /// this process's, for [`Jobs::pool`] only (directory listings).
    pub fn remote(pool: Pool, test_kinds: bool, transport: Arc<dyn Transport>) -> Jobs {
        Jobs {
            pool,
            test_kinds,
            backend: Backend::Remote(transport),
        }
    }

    /// This process's pool (the server's blocking pool, which also builds
    /// directory listings; a local registry's jobs run there).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Parses a `type=` value (test kinds only if enabled).
    pub fn kind(&self, name: &str) -> Option<JobKind> {
        JobKind::parse(name, self.test_kinds)
    }

    /// Registers a job and queues it on the pool; its id, or why nothing
    /// was kept.
    pub fn submit(&self, kind: JobKind, input: Vec<u8>) -> Result<u64, Refused> {
        match &self.backend {
            Backend::Local(local) => local.submit(&self.pool, kind, input),
            Backend::Remote(t) => wire::submit(&**t, kind, &input),
        }
    }

    /// A copy of job `id`'s record (`Ok(None)`: unknown or evicted).
    pub fn get(&self, id: u64) -> Result<Option<JobInfo>, Unavailable> {
        match &self.backend {
            Backend::Local(local) => Ok(local.get(id)),
            Backend::Remote(t) => wire::get(&**t, id),
        }
    }

    /// Cancels job `id` if it is still queued.
    pub fn cancel(&self, id: u64) -> Result<Cancel, Unavailable> {
        match &self.backend {
            Backend::Local(local) => Ok(local.cancel(id)),
            Backend::Remote(t) => wire::cancel(&**t, id),
        }
    }

    /// The jobs' counters and those of the pool they run on, now.
    pub fn stats(&self) -> Result<(JobStats, PoolStats), Unavailable> {
        match &self.backend {
            Backend::Local(local) => Ok((local.stats(), self.pool.stats())),
            Backend::Remote(t) => wire::stats(&**t),
        }
    }

    /// The most recent `n` jobs, newest first (for the console).
    pub fn recent(&self, n: usize) -> Result<Vec<JobInfo>, Unavailable> {
        match &self.backend {
            Backend::Local(local) => Ok(local.recent(n)),
            Backend::Remote(t) => wire::recent(&**t, n),
        }
    }

    /// The serving side of a [`Transport`]: runs one request's bytes on
    /// this registry and returns the reply's. A request that cannot be
    /// decoded gets a reply the caller reads as [`Unavailable`].
    pub fn answer(&self, request: &[u8]) -> Vec<u8> {
        wire::answer(self, request)
    }

    /// The highest id given out so far (0 before the first job).
    pub fn last_id(&self) -> u64 {
        match &self.backend {
            Backend::Local(local) => local.lock().next_id,
            Backend::Remote(_) => 0,
        }
    }

    /// Makes the next ids follow `last`: a registry that replaces one that
    /// ended (its process died) never gives out an id the old one did, so
    /// that a client polling an old job gets a 404, not another's result.
    pub fn continue_after(&self, last: u64) {
        if let Backend::Local(local) = &self.backend {
            let mut r = local.lock();
            r.next_id = r.next_id.max(last);
        }
    }
}

impl Local {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(
        self: &Arc<Self>,
        pool: &Pool,
        kind: JobKind,
        input: Vec<u8>,
    ) -> Result<u64, Refused> {
        let id = {
            let mut r = self.lock();
            r.next_id += 1;
            let id = r.next_id;
            r.jobs.insert(
                id,
                JobInfo {
                    id,
                    kind,
                    state: JobState::Queued,
                    attempts: 0,
                    value: None,
                    error: None,
                },
            );
            r.stats.queued += 1;
            id
        };
        let local = self.clone();
        match pool.spawn_blocking_as(kind.name(), move || local.run(id, kind, &input)) {
            Ok(_detached) => {
                self.lock().stats.submitted += 1;
                Ok(id)
            }
            Err(Full) => {
                let mut r = self.lock();
                r.jobs.remove(&id);
                r.stats.queued -= 1;
                r.stats.rejected += 1;
                Err(Refused::Full)
            }
        }
    }

    /// Runs job `id` on the calling pool thread, retrying panics.
    fn run(&self, id: u64, kind: JobKind, input: &[u8]) {
        {
            let mut r = self.lock();
            match r.jobs.get_mut(&id) {
                Some(job) if job.state == JobState::Queued => job.state = JobState::Running,
                _ => return, // cancelled (or gone) while queued
            }
            r.stats.queued -= 1;
            r.stats.running += 1;
        }
        let mut attempt = 0;
        let outcome = loop {
            attempt += 1;
            if let Some(job) = self.lock().jobs.get_mut(&id) {
                job.attempts = attempt;
            }
            match catch_unwind(AssertUnwindSafe(|| kind.run(input))) {
                Ok(result) => break result,
                Err(_) if attempt <= MAX_RETRIES => self.lock().stats.retries += 1,
                Err(payload) => {
                    let msg = payload
                        .downcast_ref::<&str>()
                        .copied()
                        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                        .unwrap_or("no message");
                    break Err(format!("panicked on all {attempt} attempts: {msg}"));
                }
            }
        };
        let mut r = self.lock();
        r.stats.running -= 1;
        let state = match outcome {
            Ok(value) => {
                r.stats.done += 1;
                if let Some(job) = r.jobs.get_mut(&id) {
                    job.value = Some(value);
                }
                JobState::Done
            }
            Err(reason) => {
                r.stats.failed += 1;
                if let Some(job) = r.jobs.get_mut(&id) {
                    job.error = Some(reason);
                }
                JobState::Failed
            }
        };
        self.finished(&mut r, id, state);
    }

    /// Marks `id` finished and applies the retention limits.
    fn finished(&self, r: &mut Registry, id: u64, state: JobState) {
        if let Some(job) = r.jobs.get_mut(&id) {
            job.state = state;
        }
        let now = Instant::now();
        r.finished.push_back((id, now));
        self.evict(r, now);
    }

    /// Drops finished jobs beyond the count or age limit, oldest first.
    fn evict(&self, r: &mut Registry, now: Instant) {
        let Retention { max_count, max_age } = self.retention;
        while let Some(&(id, at)) = r.finished.front() {
            if r.finished.len() <= max_count && now.saturating_duration_since(at) < max_age {
                break;
            }
            r.finished.pop_front();
            r.jobs.remove(&id);
            r.stats.evicted += 1;
        }
    }

    fn get(&self, id: u64) -> Option<JobInfo> {
        let mut r = self.lock();
        self.evict(&mut r, Instant::now());
        r.jobs.get(&id).cloned()
    }

    fn cancel(&self, id: u64) -> Cancel {
        let mut r = self.lock();
        self.evict(&mut r, Instant::now());
        let Some(job) = r.jobs.get(&id) else {
            return Cancel::NotFound;
        };
        if job.state != JobState::Queued {
            return Cancel::NotQueued(job.clone());
        }
        r.stats.queued -= 1;
        r.stats.cancelled += 1;
        self.finished(&mut r, id, JobState::Cancelled);
        // `finished` may have evicted it at once (a retention of zero).
        match r.jobs.get(&id) {
            Some(job) => Cancel::Cancelled(job.clone()),
            None => Cancel::NotFound,
        }
    }

    fn stats(&self) -> JobStats {
        let mut r = self.lock();
        self.evict(&mut r, Instant::now());
        JobStats {
            retained: r.finished.len() as u64,
            ..r.stats
        }
    }

    fn recent(&self, n: usize) -> Vec<JobInfo> {
        let r = self.lock();
        let mut ids: Vec<u64> = r.jobs.keys().copied().collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.truncate(n);
        ids.iter()
            .filter_map(|id| r.jobs.get(id).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests;
