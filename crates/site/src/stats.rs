//! Server counters: one block of atomics per worker (each written by its own
//! worker only, so they never contend), summed when `/_httplite/stats` asks.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Why a connection ended early or a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed request (400).
    BadRequest,
    /// Request line too long (414).
    UriTooLong,
    /// Header section too large (431).
    HeadersTooLarge,
    /// Body over `--max-body` (413).
    BodyTooLarge,
    /// Unsupported HTTP version (505).
    Version,
    /// A handler panicked (500).
    Panic,
    /// A socket error (reset, broken pipe...).
    Io,
    /// Too busy (503).
    Overloaded,
    /// A connection on a `--proxy-protocol` listener whose PROXY header
    /// was missing, malformed or late (closed unanswered).
    ProxyHeader,
    /// A connection on a `--proxy-protocol` listener from a peer outside
    /// `--trusted-proxy` (closed unread).
    ProxyUntrusted,
}

const ERROR_KINDS: [(ErrorKind, &str); ERROR_KIND_COUNT] = [
    (ErrorKind::BadRequest, "bad_request"),
    (ErrorKind::UriTooLong, "uri_too_long"),
    (ErrorKind::HeadersTooLarge, "headers_too_large"),
    (ErrorKind::BodyTooLarge, "body_too_large"),
    (ErrorKind::Version, "version_not_supported"),
    (ErrorKind::Panic, "handler_panic"),
    (ErrorKind::Io, "io"),
    (ErrorKind::Overloaded, "overloaded"),
    (ErrorKind::ProxyHeader, "proxy_header"),
    (ErrorKind::ProxyUntrusted, "proxy_untrusted"),
];

/// How many [`ErrorKind`]s there are (the `errors` array's length).
pub const ERROR_KIND_COUNT: usize = 10;

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// `--header-timeout` (slow or stalled request head).
    Header,
    /// `--idle-timeout` (keep-alive with nothing to do).
    Idle,
    /// `--write-timeout` (client stopped reading).
    Write,
}

/// One worker's counters: plain atomics with no pointer in them, so that
/// a driver may keep them in memory shared between processes (the `fork`
/// design maps them `MAP_SHARED`, so that every child counts into the
/// same block; see [`Stats::with_counters`]).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Counters {
    /// Connections accepted by this worker.
    pub connections: AtomicU64,
    /// Connections closed.
    pub closed: AtomicU64,
    /// Requests whose head was parsed.
    pub requests: AtomicU64,
    /// Of the connections, those on an admin listener (`--admin`).
    pub admin_connections: AtomicU64,
    /// Responses by status class: 1xx..5xx at index 1..5.
    pub responses: [AtomicU64; 6],
    /// Timeouts: header, idle, write.
    pub timeouts: [AtomicU64; 3],
    /// Errors by kind, in `ERROR_KINDS` order.
    pub errors: [AtomicU64; ERROR_KIND_COUNT],
    /// `/_httplite/sleep` requests asleep right now (a gauge; see
    /// [`WorkerStats::sleeping`]). Tests wait on it to know the server has
    /// read their sleep requests.
    pub sleeping: AtomicU64,
    /// `/_httplite/events` streams open right now (a gauge; see
    /// [`Stats::event_viewer`]).
    pub event_viewers: AtomicU64,
    /// `/_httplite/events` streams opened since start.
    pub event_streams: AtomicU64,
}

/// Where a worker's [`Counters`] live.
#[derive(Debug)]
enum Storage {
    /// In this process's heap (every design but `fork`).
    Own(Box<Counters>),
    /// Somewhere the driver keeps alive for the whole process (a shared
    /// mapping).
    Placed(&'static Counters),
}

/// One worker's counters (reached through `Deref`: `stats.requests`), plus
/// its driver's probe.
#[derive(Debug)]
pub struct WorkerStats {
    counters: Storage,
    /// The worker's event-loop internals, once its driver has started.
    runtime: OnceLock<Box<dyn RuntimeProbe>>,
}

impl Default for WorkerStats {
    fn default() -> WorkerStats {
        WorkerStats {
            counters: Storage::Own(Box::default()),
            runtime: OnceLock::new(),
        }
    }
}

impl std::ops::Deref for WorkerStats {
    type Target = Counters;

    #[inline]
    fn deref(&self) -> &Counters {
        match &self.counters {
            Storage::Own(c) => c,
            Storage::Placed(c) => c,
        }
    }
}

/// A driver's view of its own internals (epoll waits, tasks, coroutines,
/// threads...), for the stats document. Each driver implements it and
/// hands one to [`WorkerStats::set_runtime`] when its worker starts: the
/// site formats the document without knowing any driver, and a new design
/// adds its counters without touching this file.
///
/// Read from any thread: the stats page may be served by another worker.
pub trait RuntimeProbe: Send + Sync + std::fmt::Debug {
    /// Appends the worker's `,"runtime":{"kind":...}` member (leading
    /// comma included) to the JSON object being built.
    fn write_json(&self, s: &mut String);
}

impl WorkerStats {
    /// Counts a response by its status class.
    pub fn response(&self, status: u16) {
        let class = usize::from(status / 100).min(5);
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a timeout.
    pub fn timeout(&self, kind: TimeoutKind) {
        self.timeouts[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an error.
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Open connections right now.
    pub fn open(&self) -> u64 {
        let c = self.connections.load(Ordering::Relaxed);
        c.saturating_sub(self.closed.load(Ordering::Relaxed))
    }

    /// Marks a `/_httplite/sleep` as asleep until the guard is dropped
    /// (when the sleep ends, or its connection is dropped mid-sleep).
    pub fn sleeping(&self) -> SleepingGuard<'_> {
        self.sleeping.fetch_add(1, Ordering::Relaxed);
        SleepingGuard(&self.sleeping)
    }

    /// Counts a request.
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection on an admin listener (besides the driver's
    /// count of every connection): once per connection, off the request
    /// path.
    #[cold]
    pub fn admin_connection(&self) {
        self.admin_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Publishes this worker's runtime counters (once, when it starts).
    pub fn set_runtime(&self, probe: Box<dyn RuntimeProbe>) {
        let _ = self.runtime.set(probe);
    }
}

/// Holds one unit of the `sleeping` gauge; see [`WorkerStats::sleeping`].
#[derive(Debug)]
#[must_use = "the sleep counts only while the guard lives"]
pub struct SleepingGuard<'a>(&'a AtomicU64);

impl Drop for SleepingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Holds one unit of the `event_viewers` gauge; see [`Stats::event_viewer`].
#[derive(Debug)]
#[must_use = "the viewer counts only while the guard lives"]
pub struct ViewerGuard(Arc<WorkerStats>);

impl Drop for ViewerGuard {
    fn drop(&mut self) {
        self.0.event_viewers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// All workers' counters plus the start time.
pub struct Stats {
    started: Instant,
    workers: Vec<Arc<WorkerStats>>,
    /// Server-wide members the layers around the site add (TLS handshakes,
    /// the access log's writer), at start-up; see [`Stats::add_extra`].
    extra: Mutex<Vec<ExtraStats>>,
    /// Draining: `/_httplite/health` answers 503 (see [`Stats::set_draining`]).
    draining: Flag,
}

/// The draining flag: in this process's heap, or where the driver placed
/// it (`fork`'s shared page, so that a child forked before the drain began
/// sees it set by the parent).
#[derive(Debug)]
enum Flag {
    Own(std::sync::atomic::AtomicBool),
    Placed(&'static std::sync::atomic::AtomicBool),
}

impl Flag {
    fn get(&self) -> &std::sync::atomic::AtomicBool {
        match self {
            Flag::Own(f) => f,
            Flag::Placed(f) => f,
        }
    }
}

/// Appends server-wide members to the stats document (see
/// [`Stats::add_extra`]).
pub type ExtraStats = Box<dyn Fn(&mut String) + Send + Sync>;

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field("started", &self.started)
            .field("workers", &self.workers)
            .field("extra", &self.extra.lock().map_or(0, |e| e.len()))
            .finish()
    }
}

impl Stats {
    /// Counters for `n` workers.
    pub fn new(n: usize) -> Stats {
        Stats {
            started: Instant::now(),
            workers: (0..n).map(|_| Arc::default()).collect(),
            extra: Mutex::new(Vec::new()),
            draining: Flag::Own(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// One worker per block of `counters`, and the draining flag
    /// `draining`, which the caller placed where it wants them (the `fork`
    /// design: a `MAP_SHARED` page that every child process writes into,
    /// so that the document any child serves counts them all, and the
    /// parent's drain reaches every child's health answer). The site
    /// never knows where they are.
    pub fn with_counters(
        counters: Vec<&'static Counters>,
        draining: &'static std::sync::atomic::AtomicBool,
    ) -> Stats {
        Stats {
            started: Instant::now(),
            workers: counters
                .into_iter()
                .map(|c| {
                    Arc::new(WorkerStats {
                        counters: Storage::Placed(c),
                        runtime: OnceLock::new(),
                    })
                })
                .collect(),
            extra: Mutex::new(Vec::new()),
            draining: Flag::Placed(draining),
        }
    }

    /// Marks the server as draining (a lame-duck period before shutdown,
    /// or an upgrade handing over): from now on `/_httplite/health`
    /// answers 503 and the stats say `"state":"draining"`.
    pub fn set_draining(&self) {
        (self.draining.get()).store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`set_draining`](Stats::set_draining) was called.
    pub fn is_draining(&self) -> bool {
        self.draining
            .get()
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Adds server-wide members to the document: `f` appends them, each
    /// with its leading comma (`,"tls":{...}`), after `errors`. The site
    /// formats them without knowing the layer they come from, as it does
    /// a driver's [`RuntimeProbe`]. Members come in the order added.
    pub fn add_extra(&self, f: ExtraStats) {
        self.extra.lock().unwrap_or_else(|e| e.into_inner()).push(f);
    }

    /// Worker `i`'s block.
    pub fn worker(&self, i: usize) -> Arc<WorkerStats> {
        self.workers[i].clone()
    }

    /// Admits one more `/_httplite/events` viewer on worker `w` if fewer
    /// than `max` are open server-wide: the guard holds one unit of the
    /// `event_viewers` gauge until dropped (however the stream ends: the
    /// client left, a write timed out, shutdown). `None` when full, or if
    /// `w` is not one of these workers.
    ///
    /// Counted first and checked after, so that two workers admitting at
    /// once can both refuse but never both exceed `max` (the counters may
    /// be in memory shared between processes: no lock covers them all).
    pub fn event_viewer(&self, w: &WorkerStats, max: u64) -> Option<ViewerGuard> {
        let own = self
            .workers
            .iter()
            .find(|x| std::ptr::eq(&***x, w))?
            .clone();
        own.event_viewers.fetch_add(1, Ordering::SeqCst);
        let guard = ViewerGuard(own);
        if self.total(|w| &w.event_viewers) > max {
            return None; // the guard gives the unit back
        }
        guard.0.event_streams.fetch_add(1, Ordering::Relaxed);
        Some(guard)
    }

    /// Sum of one counter over all workers.
    pub fn total(&self, f: impl Fn(&WorkerStats) -> &AtomicU64) -> u64 {
        self.workers
            .iter()
            .map(|w| f(w).load(Ordering::Relaxed))
            .sum()
    }

    /// The `/_httplite/stats` document.
    pub fn to_json(&self, extra_per_worker: &dyn Fn(usize, &mut String)) -> String {
        let mut s = String::with_capacity(1024);
        let open: u64 = self.workers.iter().map(|w| w.open()).sum();
        let _ = write!(
            s,
            "{{\"state\":\"{}\",\"uptime_seconds\":{:.3},\"connections\":{{\"open\":{open},\"total\":{}}},\"events\":{{\"viewers\":{},\"total\":{}}},\"requests\":{},\"sleeping\":{},",
            if self.is_draining() {
                "draining"
            } else {
                "serving"
            },
            self.started.elapsed().as_secs_f64(),
            self.total(|w| &w.connections),
            self.total(|w| &w.event_viewers),
            self.total(|w| &w.event_streams),
            self.total(|w| &w.requests),
            self.total(|w| &w.sleeping),
        );
        let admin = self.total(|w| &w.admin_connections);
        let _ = write!(
            s,
            "\"listeners\":{{\"public\":{{\"connections\":{}}},\"admin\":{{\"connections\":{admin}}}}},",
            self.total(|w| &w.connections).saturating_sub(admin)
        );
        s.push_str("\"responses\":{");
        for class in 1..=5 {
            let _ = write!(
                s,
                "{}\"{class}xx\":{}",
                if class > 1 { "," } else { "" },
                self.total(|w| &w.responses[class])
            );
        }
        let _ = write!(
            s,
            "}},\"timeouts\":{{\"header\":{},\"idle\":{},\"write\":{}}},\"errors\":{{",
            self.total(|w| &w.timeouts[0]),
            self.total(|w| &w.timeouts[1]),
            self.total(|w| &w.timeouts[2]),
        );
        for (i, (kind, name)) in ERROR_KINDS.iter().enumerate() {
            let _ = write!(
                s,
                "{}\"{name}\":{}",
                if i > 0 { "," } else { "" },
                self.total(|w| &w.errors[*kind as usize])
            );
        }
        s.push('}');
        for extra in self.extra.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            extra(&mut s);
        }
        s.push_str(",\"workers\":[");
        for (i, w) in self.workers.iter().enumerate() {
            let _ = write!(
                s,
                "{}{{\"id\":{i},\"open\":{},\"connections\":{},\"requests\":{}",
                if i > 0 { "," } else { "" },
                w.open(),
                w.connections.load(Ordering::Relaxed),
                w.requests.load(Ordering::Relaxed),
            );
            if let Some(probe) = w.runtime.get() {
                probe.write_json(&mut s);
            }
            extra_per_worker(i, &mut s);
            s.push('}');
        }
        s.push_str("]}");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_sums_workers() {
        let st = Stats::new(2);
        st.worker(0).connections.fetch_add(3, Ordering::Relaxed);
        st.worker(1).connections.fetch_add(2, Ordering::Relaxed);
        st.worker(1).closed.fetch_add(1, Ordering::Relaxed);
        st.worker(0).response(200);
        st.worker(1).response(404);
        st.worker(1).error(ErrorKind::Panic);
        st.worker(0).timeout(TimeoutKind::Write);
        let j = st.to_json(&|_, _| {});
        assert!(
            j.contains("\"connections\":{\"open\":4,\"total\":5}"),
            "{j}"
        );
        assert!(j.contains("\"2xx\":1") && j.contains("\"4xx\":1"), "{j}");
        assert!(j.contains("\"handler_panic\":1"), "{j}");
        assert!(j.contains("\"write\":1"), "{j}");
        st.worker(1).admin_connection();
        let j = st.to_json(&|_, _| {});
        assert!(
            j.contains(
                "\"listeners\":{\"public\":{\"connections\":4},\"admin\":{\"connections\":1}}"
            ),
            "{j}"
        );
        assert!(j.starts_with('{') && j.ends_with('}'));
    }

    #[test]
    fn placed_counters_are_the_ones_counted() {
        let block: &'static Counters = Box::leak(Box::default());
        let draining: &'static std::sync::atomic::AtomicBool = Box::leak(Box::default());
        let st = Stats::with_counters(vec![block], draining);
        st.worker(0).response(200);
        block.requests.fetch_add(2, Ordering::Relaxed);
        assert_eq!(block.responses[2].load(Ordering::Relaxed), 1);
        let j = st.to_json(&|_, _| {});
        assert!(
            j.contains("\"requests\":2,") && j.contains("\"2xx\":1"),
            "{j}"
        );
        // The placed flag is the one read: set elsewhere, seen here.
        draining.store(true, Ordering::SeqCst);
        assert!(st.is_draining());
        assert!(st.to_json(&|_, _| {}).contains("\"state\":\"draining\""));
    }

    #[test]
    fn extra_members_follow_errors() {
        let st = Stats::new(1);
        st.add_extra(Box::new(|s: &mut String| s.push_str(",\"tls\":{\"n\":1}")));
        let j = st.to_json(&|_, _| {});
        assert!(
            j.contains("\"proxy_untrusted\":0},\"tls\":{\"n\":1},\"workers\":["),
            "{j}"
        );
    }

    #[test]
    fn event_viewers_are_bounded_server_wide_and_given_back() {
        let st = Stats::new(2);
        let (w0, w1) = (st.worker(0), st.worker(1));
        let a = st.event_viewer(&w0, 2).expect("first");
        let b = st.event_viewer(&w1, 2).expect("second");
        assert!(
            st.event_viewer(&w0, 2).is_none(),
            "a third is over the bound"
        );
        let j = st.to_json(&|_, _| {});
        assert!(j.contains("\"events\":{\"viewers\":2,\"total\":2}"), "{j}");
        drop(a);
        let c = st.event_viewer(&w1, 2).expect("room again");
        drop((b, c));
        let j = st.to_json(&|_, _| {});
        assert!(j.contains("\"events\":{\"viewers\":0,\"total\":3}"), "{j}");
        // A block from another `Stats` is not admitted.
        let other = Stats::new(1);
        assert!(st.event_viewer(&other.worker(0), 9).is_none());
    }

    #[test]
    fn sleeping_is_a_gauge_summed_over_workers() {
        let st = Stats::new(2);
        let w0 = st.worker(0);
        let w1 = st.worker(1);
        let a = w0.sleeping();
        let b = w1.sleeping();
        let c = w1.sleeping();
        assert!(st.to_json(&|_, _| {}).contains("\"sleeping\":3,"));
        drop((a, b));
        assert!(st.to_json(&|_, _| {}).contains("\"sleeping\":1,"));
        drop(c);
        let j = st.to_json(&|_, _| {});
        assert!(
            j.contains("\"requests\":0,\"sleeping\":0,\"listeners\":{"),
            "{j}"
        );
    }
}
