//! Command-line interface.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use site::file_features::parse_cors_origin;
use site::header_rules::HeaderRule;

mod parsers;
mod values;

pub use parsers::{
    parse_duration, parse_error_page, parse_events_interval, parse_health_path, parse_mode,
    parse_root_file, parse_size, parse_size_or_unlimited,
};
pub use values::{
    BindAddr, DispatchMode, LogFormat, LogFull, PoolPriority, ProxyOn, RuntimeKind, ThreadpoolMode,
    TraceFormat,
};

/// A small, fast HTTP/1.1 server on a hand-written epoll runtime.
///
/// With --root it serves the files under DIR on --bind, and nothing else:
/// the operator's endpoints under /_httplite/ (stats, the dashboard, jobs,
/// echo, sleep, health, plaintext, json) are served on --admin listeners
/// only, unless --expose names some for --bind too.
///
/// Without --root it runs in demo and benchmark mode: every endpoint on
/// every listener, and the dashboard at /. That is for a first run and for
/// benchmarks on loopback, not a deployment.
#[derive(Debug, Parser)]
#[command(name = "httplite", version, about, long_about)]
pub struct Cli {
    /// Address to listen on; repeatable. IPv4 (`0.0.0.0:8080`), IPv6
    /// (`[::]:8080`, IPv6 only, so that both can be bound), or a Unix
    /// socket (`unix:/run/httplite.sock`; a stale socket file is removed
    /// if nothing listens on it). With socket activation (systemd's
    /// LISTEN_FDS) the sockets are inherited and must match the --bind
    /// given, if any [default: 127.0.0.1:8080].
    #[arg(long, short = 'b', value_name = "ADDR", value_parser = BindAddr::parse)]
    pub bind: Vec<BindAddr>,

    /// An admin listener, repeatable: `127.0.0.1:9090`, `[::1]:9090` or
    /// `unix:/run/httplite-admin.sock` (with --socket-mode). It serves the
    /// endpoints under /_httplite/ and the dashboard at /, never --root's
    /// files; plain HTTP unless --admin-tls-cert is given. Keep it off the
    /// internet (loopback, a Unix socket, a firewall): it runs jobs and
    /// publishes the server's internals.
    #[arg(long, value_name = "ADDR", value_parser = BindAddr::parse)]
    pub admin: Vec<BindAddr>,

    /// Also serve these endpoints on --bind when there is a --root
    /// (comma-separated): plaintext, json, stats, dashboard (its page and
    /// its event stream), jobs, echo, sleep, health. Logged as a warning at
    /// start-up. Without --root every endpoint is on --bind already.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = site::exposure::Endpoint::parse, requires = "root")]
    pub expose: Vec<site::exposure::Endpoint>,

    /// Answer health checks at PATH on every listener (e.g. /healthz): 200
    /// `ok` while serving, 503 with `Connection: close` while draining
    /// (see --drain-delay), as /_httplite/health does on --admin.
    #[arg(long, value_name = "PATH", value_parser = parse_health_path)]
    pub health: Option<String>,

    /// Permissions of the Unix socket files this process creates, in
    /// octal (e.g. 660) [default: what the umask leaves].
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub socket_mode: Option<u32>,

    /// Expect a PROXY protocol header (HAProxy's, v1 or v2) at the start
    /// of every connection; the client address it carries is the one the
    /// access log shows. Bare: on every --bind listener (never on --admin,
    /// which the operator reaches directly). With a value (repeatable;
    /// `=` required): on that --bind only, e.g.
    /// --proxy-protocol=127.0.0.1:8081. Needs --trusted-proxy: a
    /// connection from elsewhere, or without a valid header within
    /// --header-timeout, is closed and counted (errors.proxy_untrusted,
    /// errors.proxy_header). On the other listeners a PROXY header is a
    /// bad request (400). See docs/deploy.md.
    #[arg(long, value_name = "BIND", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_parser = ProxyOn::parse)]
    pub proxy_protocol: Vec<ProxyOn>,

    /// A proxy to believe; repeatable. An IPv4 or IPv6 network
    /// (10.0.0.0/8, ::1/128, or one address), or `unix` for peers on Unix
    /// sockets. Only these may send a PROXY header (--proxy-protocol), and
    /// a request from one has its logged address taken from
    /// X-Forwarded-For or Forwarded (for=): the rightmost hop that is not a
    /// trusted proxy. Malformed hops end the walk (never an error).
    #[arg(long, value_name = "CIDR", value_parser = crate::forwarded::TrustedArg::parse)]
    pub trusted_proxy: Vec<crate::forwarded::TrustedArg>,

    #[command(flatten)]
    pub upstream: crate::upstream::ProxyArgs,

    /// Worker threads, each with its own event loop [default: number of CPUs].
    #[arg(long, short = 'w', value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,

    /// How connections reach workers [default: acceptor; with one worker,
    /// reuseport: a lone worker accepts from the listener itself].
    #[arg(long, value_enum)]
    pub dispatch: Option<DispatchMode>,

    /// Concurrency design that runs the connections.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Stackless)]
    pub runtime: RuntimeKind,

    /// Threads of --runtime threadpool, each serving one request (event
    /// mode) or one connection (connection mode) at a time [default: 4 per
    /// CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=10000))]
    pub threadpool_size: Option<u16>,

    /// How --runtime threadpool gives its threads to connections.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ThreadpoolMode::Event)]
    pub threadpool_mode: ThreadpoolMode,

    /// Connections of --runtime threadpool that may wait in its queue for
    /// a thread (event mode: with a whole request head; connection mode:
    /// just accepted). While the queue is this long, a new connection is
    /// answered 503 and closed, its request never parsed (what the client
    /// sent is drained for a few ms first). In event mode a connection
    /// already accepted is never refused: its next request waits its turn,
    /// beyond the bound if need be. At least 1: with no room, every
    /// connection would be refused even with threads idle.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub threadpool_queue: usize,

    /// Stack size of each coroutine with --runtime stackful (a guard page
    /// is added below it).
    #[arg(long, value_name = "BYTES", default_value = "64KiB", value_parser = parse_size)]
    pub stack_size: u64,

    /// Serve static files from this directory.
    #[arg(long, short = 'r', value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// List directory contents when a directory has no index.html.
    #[arg(long)]
    pub list_dirs: bool,

    /// Keep up to N open files (fd, metadata, headers) between requests;
    /// 0 turns the cache off [default: 10,000, at most a quarter of the
    /// open-file limit].
    #[arg(long, value_name = "N")]
    pub file_cache: Option<usize>,

    /// Trust a cached file this long before checking it again with one
    /// `fstatat` (a change on disk is served at most this late; 0 checks on
    /// every request).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub file_cache_valid: Duration,

    /// Show dotfiles (names starting with '.') in directory listings.
    #[arg(long, requires = "list_dirs")]
    pub show_hidden: bool,

    /// Add a header to the static files whose URL path matches GLOB ('*'
    /// any characters but '/', '**' any, '?' one; a GLOB without '/'
    /// matches the last segment), on 200, 206 and 304 answers; repeatable.
    /// E.g. '*.woff2: Cache-Control: public, max-age=31536000, immutable'.
    #[arg(long = "header", value_name = "'GLOB: Name: value'", value_parser = HeaderRule::parse, requires = "root")]
    pub headers: Vec<HeaderRule>,

    /// Add `Access-Control-Allow-Origin: ORIGIN` to static files and answer
    /// CORS preflight OPTIONS requests with 204.
    #[arg(long, value_name = "ORIGIN", num_args = 0..=1, default_missing_value = "*", value_parser = parse_cors_origin, requires = "root")]
    pub cors: Option<String>,

    /// Serve this file (relative to --root) with 200 for GET/HEAD of paths
    /// that do not exist and whose last segment has no extension (a
    /// single-page app's client-side routes).
    #[arg(long, value_name = "FILE", value_parser = parse_root_file, requires = "root")]
    pub fallback: Option<String>,

    /// Answer status CODE with the body of PAGE (a path under --root), the
    /// status kept; repeatable. E.g. 404=/404.html.
    #[arg(long, value_name = "CODE=PAGE", value_parser = parse_error_page, requires = "root")]
    pub error_page: Vec<(u16, String)>,

    /// Serve x.br, x.zst or x.gz for a request of x when they exist and the
    /// client's Accept-Encoding allows them (made beforehand: nothing is
    /// compressed on the fly).
    #[arg(long, requires = "root")]
    pub precompressed: bool,

    /// Stop accepting while this many connections are open [default: no limit].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// Dashboard viewers (/_httplite/events streams) open at once; one more
    /// is answered 503 and the page polls /_httplite/stats instead. Each
    /// holds what a connection holds in the runtime: a task, a coroutine,
    /// a thread or a process (docs/dashboard.md).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub max_event_viewers: u64,

    /// Time between two /_httplite/events events.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_events_interval)]
    pub events_interval: Duration,

    /// Close a connection that has not sent a complete request head in time.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,

    /// Close a keep-alive connection idle for this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Close a connection whose client stops reading for this long.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: Duration,

    /// Largest file body sent with `sendfile(2)` (zero copy); a larger one
    /// is copied through a buffer of the worker's (`pread` + `send`).
    /// `unlimited`: always sendfile. A limit such as `512KiB` costs server
    /// CPU for every byte above it, which pays only when the clients are on
    /// the same machine: over loopback they receive copied bytes faster
    /// (docs/static-files.md, "The copy path"). TLS always copies.
    #[arg(long, value_name = "BYTES", default_value = "unlimited", value_parser = parse_size_or_unlimited)]
    pub sendfile_max: u64,

    /// Largest accepted request body (413 beyond it).
    #[arg(long, value_name = "BYTES", default_value = "1MiB", value_parser = parse_size)]
    pub max_body: u64,

    /// On SIGINT/SIGTERM, how long in-flight requests get to finish.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Lame-duck period on SIGINT/SIGTERM: for this long the server keeps
    /// accepting and serving while /_httplite/health answers 503, so that
    /// a balancer's health check takes it out before it stops accepting;
    /// then the graceful shutdown starts. A second signal ends the period
    /// early.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub drain_delay: Duration,

    /// Write an access log in Common Log Format to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub access_log: Option<PathBuf>,

    /// The access log's lines: Common Log Format; Apache's combined
    /// format plus the request time (µs) and the worker id; or JSON lines
    /// with every field.
    #[arg(long, value_enum, default_value_t = LogFormat::Clf, requires = "access_log")]
    pub access_log_format: LogFormat,

    /// When the access log's destination falls behind: drop lines (counted
    /// in the stats and reported on stderr) or block (the workers, or
    /// fork's children, wait).
    #[arg(long, value_enum, default_value_t = LogFull::Drop, requires = "access_log")]
    pub access_log_full: LogFull,

    /// Pin worker N to CPU N.
    #[arg(long)]
    pub pin_workers: bool,

    /// Threads of the blocking pool that runs jobs and blocking work
    /// [default: number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub pool_threads: Option<u16>,

    /// Tasks that may wait for a pool thread (beyond: 503 with Retry-After).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub pool_queue: usize,

    /// How the pool threads are scheduled against the event loops when
    /// both want a CPU (measured by scripts/bench-jobs-latency.sh).
    #[arg(long, value_enum, default_value_t = PoolPriority::Idle)]
    pub pool_priority: PoolPriority,

    /// A pool thread idle this long exits.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub pool_idle_timeout: Duration,

    /// Finished jobs kept for GET /_httplite/jobs/{id} (oldest evicted first).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub jobs_retain: usize,

    /// Finished jobs older than this are evicted.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub jobs_ttl: Duration,

    /// Serve HTTPS on --bind with this certificate: a PEM file with the
    /// server's certificate first, then its chain. Needs --tls-key. SIGHUP
    /// (or the console's `reload`) reads both files again.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert: a PEM file (PKCS#8, or PKCS#1 RSA, or
    /// SEC1 EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS on --admin with this certificate (a PEM file, as
    /// --tls-cert). Needs --admin-tls-key. Without it --admin is plain
    /// HTTP, even when --bind is HTTPS.
    #[arg(long, value_name = "FILE", requires_all = ["admin_tls_key", "admin"])]
    pub admin_tls_cert: Option<PathBuf>,

    /// The private key of --admin-tls-cert (a PEM file, as --tls-key).
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    pub admin_tls_key: Option<PathBuf>,

    /// With TLS: answer a plain HTTP request sent to the HTTPS port with
    /// 308 to its https:// URL instead of 400.
    #[arg(long, requires = "tls_cert")]
    pub redirect_http: bool,

    /// Read operator commands from stdin (stats, workers, jobs, reload,
    /// reopen, upgrade, quit, help).
    #[arg(long)]
    pub console: bool,

    /// Print nothing but errors (no start-up line).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Print every event-loop step to stderr (epoll_wait, wakes, polls,
    /// handoffs, timers, coroutine switches, requests). Needs a build with
    /// `--features trace`.
    #[arg(long)]
    pub trace: bool,

    /// Most trace lines (or timeline events) per second per thread; the
    /// rest are counted and reported (0: no limit).
    #[arg(long, value_name = "LINES", default_value_t = 200)]
    pub trace_rate: u32,

    /// What the trace writes: `text` lines, or a `chrome` timeline (Chrome
    /// Trace Event JSON for ui.perfetto.dev, needs --trace-file). Implies
    /// --trace.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub trace_format: Option<TraceFormat>,

    /// Write the trace to FILE (created or truncated) instead of stderr.
    /// A process started by an upgrade (SIGUSR2) writes FILE.PID instead,
    /// with its own pid, and says so on stderr: the old process is still
    /// writing FILE. Implies --trace.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
