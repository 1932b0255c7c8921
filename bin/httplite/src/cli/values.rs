//! The types of the flags' values: what `--bind`, `--runtime`,
//! `--dispatch` and the other flags that name a choice may say, each with
//! its parser (or clap's `ValueEnum`) and, where the site has one, the
//! site's name for it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::ValueEnum;

/// `--trace-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    /// One line per event-loop step (stderr, or --trace-file).
    Text,
    /// A timeline in Chrome Trace Event JSON (--trace-file).
    Chrome,
}

/// One `--bind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindAddr {
    /// `127.0.0.1:8080`, `[::]:8080`.
    Tcp(SocketAddr),
    /// `unix:/run/httplite.sock`.
    Unix(PathBuf),
}

impl BindAddr {
    /// Parses `ADDR:PORT`, `[V6]:PORT` or `unix:PATH`.
    pub fn parse(s: &str) -> Result<BindAddr, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a path, e.g. unix:/run/httplite.sock".into());
            }
            return Ok(BindAddr::Unix(PathBuf::from(path)));
        }
        s.parse().map(BindAddr::Tcp).map_err(|_| {
            format!("{s:?} is not an address (try 127.0.0.1:8080, [::]:8080 or unix:/path)")
        })
    }
}

impl std::fmt::Display for BindAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindAddr::Tcp(a) => write!(f, "{a}"),
            BindAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One `--proxy-protocol`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyOn {
    /// Bare: every listener.
    All,
    /// `=ADDR`: the listener of that `--bind`.
    Bind(BindAddr),
}

impl ProxyOn {
    /// Parses `all` (the bare flag's value) or a `--bind` address.
    pub fn parse(s: &str) -> Result<ProxyOn, String> {
        match s {
            "all" => Ok(ProxyOn::All),
            _ => BindAddr::parse(s).map(ProxyOn::Bind),
        }
    }
}

/// `--dispatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DispatchMode {
    /// One acceptor thread hands connections to workers through pipes.
    Acceptor,
    /// Every worker has its own SO_REUSEPORT listener; the kernel balances.
    Reuseport,
}

/// `--pool-priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PoolPriority {
    /// SCHED_IDLE: pool threads run on CPU time the loops leave, and a
    /// waking loop preempts them at once (jobs crawl while CPUs are busy).
    Idle,
    /// Nice 10: the loops weigh about ten times more.
    Low,
    /// As the loops (no change).
    Normal,
}

/// `--access-log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Common Log Format.
    Clf,
    /// Combined, plus request time (µs) and worker id.
    Combined,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// The site's name for it.
    pub fn format(self) -> site::access_log::Format {
        match self {
            LogFormat::Clf => site::access_log::Format::Common,
            LogFormat::Combined => site::access_log::Format::Combined,
            LogFormat::Json => site::access_log::Format::Json,
        }
    }
}

/// `--access-log-full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFull {
    /// Drop the lines the writer has no room for (requests never wait).
    Drop,
    /// Wait for room (back-pressure: a stalled log stalls the server).
    Block,
}

impl LogFull {
    /// The site's name for it.
    pub fn when_full(self) -> site::access_log::WhenFull {
        match self {
            LogFull::Drop => site::access_log::WhenFull::Drop,
            LogFull::Block => site::access_log::WhenFull::Block,
        }
    }
}

/// `--threadpool-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThreadpoolMode {
    /// A thread per request, as Apache's event MPM: each worker thread
    /// keeps an epoll set of the connections waiting for a request head
    /// (new, idle keep-alive, head sent in part) and hands a connection to
    /// a pool thread only once a whole head has come; the thread gives it
    /// back when it would wait for the next. Idle and slow clients hold no
    /// thread; a body, read on the thread, holds it for up to
    /// --idle-timeout per read. A TLS connection goes to a thread at each
    /// readiness for one step of its session (docs/threadpool-and-fork.md).
    Event,
    /// A thread per connection, for its whole life, idle time and half-sent
    /// heads included (with every thread held, new connections wait in the
    /// queue).
    Connection,
}

/// `--runtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeKind {
    /// Rust futures on a per-thread executor (the default).
    Stackless,
    /// Stackful coroutines (own stacks, hand-written context switch).
    Stackful,
    /// An OS thread per connection over blocking sockets (the baseline).
    Threads,
    /// A fixed pool of threads (--threadpool-size) fed by one bounded
    /// queue: each serves a request whose head has come, and the worker
    /// threads wait for the next (or each serves a connection to the end:
    /// see --threadpool-mode).
    Threadpool,
    /// A process per connection: fork() after accept.
    Fork,
    /// Futures on an io_uring proactor: completion-based I/O (multishot
    /// recv on a provided-buffer ring, sends from owned buffers).
    Uring,
}

impl std::fmt::Display for DispatchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DispatchMode::Acceptor => "acceptor",
            DispatchMode::Reuseport => "reuseport",
        })
    }
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RuntimeKind::Stackless => "stackless",
            RuntimeKind::Stackful => "stackful",
            RuntimeKind::Threads => "threads",
            RuntimeKind::Threadpool => "threadpool",
            RuntimeKind::Fork => "fork",
            RuntimeKind::Uring => "uring",
        })
    }
}
