//! httplite: the HTTP/1.1 server binary.
//!
//! Wiring only: command line → settings → dispatcher (acceptor or
//! SO_REUSEPORT) → one worker per thread running the chosen runtime. The
//! protocol lives in `http1`, the event loop in `reactor` + `executor`, the
//! connection handoff in `dispatch`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::{Context as _, Result};
use clap::{CommandFactory, FromArgMatches};

use httplite::cli::{Cli, DispatchMode, RuntimeKind, ThreadpoolMode, TraceFormat};
use httplite::config::Config;
use httplite::lifecycle::Lifecycle;
use httplite::signals::{self, Reloads};
use httplite::surface::AdminListeners;
use httplite::upgrade::{self, Upgrader};
use site::access_log::{AccessLog, LogSink};
use site::jobs::{Jobs, Retention};
use site::routes::App;
use site::stats::Stats;

// The binary's own modules, beside `main.rs` in `main/` (the library's
// modules are the rest of `src/`).
#[path = "main/checks.rs"]
mod checks;
#[path = "main/fork.rs"]
mod fork;
#[path = "main/settings.rs"]
mod settings;
#[path = "main/trace.rs"]
mod trace;

use checks::check_runtime_flags;
use fork::run_fork;
use settings::{
    events_config, exposure, pool_builder, proxy_listeners, static_root, tls_by_listener,
};
use trace::start_trace;

/// Exit code for bad usage (flags, unusable --root or --bind), as clap uses.
const EXIT_USAGE: u8 = 2;
/// Listen backlog (capped by `net.core.somaxconn`).
const BACKLOG: i32 = 4096;

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((cli, matches)) => {
            if let Err(line) = check_runtime_flags(&cli, &matches) {
                eprintln!("httplite: error: {line}");
                return ExitCode::from(EXIT_USAGE);
            }
            cli
        }
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line: clap's first line names the
            // problem; the usage block that follows is what --help is for.
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("httplite: error: {first} (see --help)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = run(cli);
    // Whatever ended the run (a signal, `quit`, an error), a timeline is
    // closed: the file is valid JSON once this returns.
    if let Some(summary) = reactor::trace::finish()
        && !summary.complete
    {
        eprintln!("httplite: the trace file could not be completed");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("httplite: error: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    // A peer that vanishes mid-write gives EPIPE, never a fatal signal (Rust
    // already ignores SIGPIPE; sendfile(2) has no MSG_NOSIGNAL, so say it).
    // SAFETY: installing SIG_IGN for SIGPIPE is async-signal-safe and has no
    // handler code to be unsound.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // Fork's parent is one thread that takes its signals through its own
    // signalfd and binds its one listener itself: none of what follows.
    if cli.runtime == RuntimeKind::Fork {
        return run_fork(&cli, static_root(&cli)?);
    }
    // Before any thread starts: SIGTERM, SIGINT, SIGHUP and SIGUSR2 go to
    // the signal thread alone.
    signals::block().context("cannot block signals")?;
    // Inherited sockets and the upgrade's pipe are taken (and their
    // variables removed) before any thread starts, too.
    let ready_fd = upgrade::take_ready_fd();
    let workers = cli
        .workers
        .map_or_else(dispatch::default_workers, usize::from);
    // A lone worker has no one to share with: unless told otherwise, it
    // accepts from the listener itself (reuseport's path with one socket,
    // which sets no SO_REUSEPORT), and a new connection skips the
    // acceptor's hop: a second thread on the same core, the pipe, a wake.
    let dispatch_mode = cli.dispatch.unwrap_or(match workers {
        1 => DispatchMode::Reuseport,
        _ => DispatchMode::Acceptor,
    });
    let copies = match dispatch_mode {
        DispatchMode::Acceptor => 1,
        DispatchMode::Reuseport => workers,
    };
    let opened = httplite::listen::open(&cli.bind, &cli.admin, cli.socket_mode, copies, BACKLOG)?;
    let public_count = opened.listeners.len() - opened.admin;
    let upgrader = Arc::new(Upgrader::new(cli.console).context("cannot find our executable")?);

    if cli.runtime == RuntimeKind::Uring {
        // Before any worker: no silent fallback to another runtime.
        httplite::uring::setup::check().map_err(anyhow::Error::msg)?;
    }
    start_trace(&cli, ready_fd.is_some())?;
    if reactor::trace::active()
        && cli.runtime == RuntimeKind::Uring
        && cli.trace_format != Some(TraceFormat::Chrome)
    {
        // The ring's `sqe`/`cqe`/`enter` lines through the reactor's writer:
        // its columns, its destination (`--trace-file`) and its per-thread
        // `--trace-rate` budget, shared with the worker's other lines. (On
        // a timeline they are events, see `uring::trace`.)
        proactor::trace::enable_lines(reactor::trace::emit);
    }

    let root = static_root(&cli)?;
    let (sink, log_writer) = match &cli.access_log {
        Some(path) => {
            let (sink, writer) = LogSink::open(path, cli.access_log_full.when_full())
                .with_context(|| format!("--access-log {}: cannot open", path.display()))?;
            (Some(sink), Some(writer))
        }
        None => (None, None),
    };
    let stats = Arc::new(Stats::new(workers));
    if let Some(counters) = sink.as_ref().map(LogSink::counters) {
        stats.add_extra(Box::new(move |s: &mut String| counters.stats_members(s)));
    }
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let blocking_pool = pool_builder(&cli).build();
    let test_endpoints = std::env::var_os("HTTPLITE_TEST_ENDPOINTS").is_some();
    let retention = Retention {
        max_count: cli.jobs_retain,
        max_age: cli.jobs_ttl,
    };
    let jobs = Jobs::new(blocking_pool, retention, test_endpoints);
    let dispatch_stats: Arc<OnceLock<Arc<dispatch::Stats>>> = Arc::default();
    stats.add_extra({
        let ds = dispatch_stats.clone();
        Box::new(move |out: &mut String| {
            if let Some(s) = ds.get() {
                let a = s.accepting();
                let _ = write!(
                    out,
                    ",\"accept\":{{\"accepted\":{},\"shed\":{},\"emfile\":{},\"errors\":{},\"paused_at_max\":{},\"last_error\":",
                    a.accepted, a.shed, a.emfile_events, a.accept_errors, a.paused_at_max
                );
                match s.last_accept_error() {
                    Some(e) => {
                        // An OS error's text has no quote or backslash; replaced anyway.
                        let text = e.to_string().replace(['"', '\\'], "'");
                        let _ = write!(out, "\"{text}\"}}");
                    }
                    None => out.push_str("null}"),
                }
            }
        })
    });
    let app = Arc::new(App {
        root,
        stats: stats.clone(),
        worker_extra: {
            let ds = dispatch_stats.clone();
            Box::new(move |i, out: &mut String| {
                if let Some(w) = ds.get().and_then(|s| s.workers().get(i)) {
                    let s = w.snapshot();
                    let _ = write!(
                        out,
                        ",\"handed_off\":{},\"batches\":{},\"pipe_full\":{},\
                         \"accept\":{{\"shed\":{},\"emfile\":{},\"errors\":{},\"paused_at_max\":{}}}",
                        s.handed_off,
                        s.batches,
                        s.pipe_full,
                        s.shed,
                        s.emfile_events,
                        s.accept_errors,
                        s.paused_at_max
                    );
                }
            })
        },
        test_endpoints,
        jobs: jobs.clone(),
        events: events_config(&cli),
        exposure: exposure(&cli),
        health_path: cli.health.clone(),
        max_sleeping: cli.pool_queue as u64,
        proxy: cli
            .upstream
            .settings(cli.runtime.place())
            .unwrap_or_default()
            .routes,
    });
    let mut config = Config::from_cli(&cli);
    config.reverse_proxy.add_stats(&stats);
    let addrs: Vec<_> = opened.listeners.iter().map(|l| l.addr().clone()).collect();
    let (public, admin) = addrs.split_at(public_count);
    config.proxy.listeners = proxy_listeners(&cli, public);
    config.admin = AdminListeners::new(admin.to_vec(), public);
    let config = Arc::new(config);
    let tls = tls_by_listener(&cli, &stats, None)?;

    let dconfig = dispatch::Config {
        workers,
        mode: match dispatch_mode {
            DispatchMode::Acceptor => dispatch::Mode::Acceptor,
            DispatchMode::Reuseport => dispatch::Mode::ReusePort,
        },
        max_connections: cli.max_connections,
        pin_workers: cli.pin_workers,
        backlog: BACKLOG,
        // Our signal thread takes them (see `signals`).
        handle_signals: false,
        signal_grace: cli.shutdown_timeout,
        // Not used: the listeners are made above.
        ..dispatch::Config::new(([127, 0, 0, 1], 0).into())
    };
    let handover = (opened.listeners.iter())
        .map(dispatch::Listener::try_clone)
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot keep copies of the listening sockets")?;
    let reloads = Reloads {
        log: sink.clone(),
        tls: tls.clone(),
    };
    warn_exposure(
        &cli,
        &app,
        opened.listeners[..public_count].iter().map(|l| l.addr()),
    );
    let runtime = cli.runtime;
    let threadpool = httplite::blocking::threadpool::ThreadPool::new(
        cli.threadpool_size.map_or(4 * cpus, usize::from),
        cli.threadpool_queue,
        match cli.threadpool_mode {
            ThreadpoolMode::Event => httplite::blocking::threadpool::Mode::Event,
            ThreadpoolMode::Connection => httplite::blocking::threadpool::Mode::Connection,
        },
    );
    let log_format = cli.access_log_format;
    let stack_size = usize::try_from(cli.stack_size).context("--stack-size: too large")?;
    // Tests only (with the test endpoints): this worker's set-up fails.
    let test_fail_worker = std::env::var("HTTPLITE_TEST_FAIL_WORKER")
        .ok()
        .filter(|_| test_endpoints)
        .and_then(|v| v.parse::<usize>().ok());
    let worker_main = {
        let tls = tls.clone();
        let app = app.clone();
        let config = config.clone();
        let stats = stats.clone();
        move |port: dispatch::WorkerPort| {
            let id = port.id();
            if test_fail_worker == Some(id) {
                eprintln!(
                    "httplite: worker {id} failed: set-up refused (HTTPLITE_TEST_FAIL_WORKER)"
                );
                return;
            }
            let format = log_format.format();
            let log = (sink.clone()).map(|s| AccessLog::with_format(s, format, id));
            let blocking_ctx = |access_log| httplite::blocking::conn::Ctx {
                app: app.clone(),
                config: config.clone(),
                stats: stats.worker(id),
                access_log,
                idle: httplite::blocking::IdleSet::default(),
                tls: tls.clone(),
            };
            let result = match runtime {
                RuntimeKind::Stackless => httplite::stackless::run(
                    port,
                    app.clone(),
                    config.clone(),
                    stats.worker(id),
                    log,
                    tls.clone(),
                ),
                RuntimeKind::Threads => httplite::blocking::threads::run(port, blocking_ctx(log)),
                RuntimeKind::Stackful => {
                    httplite::blocking::stackful::run(port, blocking_ctx(log), stack_size)
                }
                RuntimeKind::Threadpool => {
                    httplite::blocking::threadpool::run(port, blocking_ctx(log), threadpool.clone())
                }
                RuntimeKind::Uring => httplite::uring::run(
                    port,
                    app.clone(),
                    config.clone(),
                    stats.worker(id),
                    log,
                    tls.clone(),
                ),
                RuntimeKind::Fork => unreachable!("--runtime fork runs without dispatch"),
            };
            if let Err(e) = result {
                eprintln!("httplite: worker {id} failed: {e}");
            }
        }
    };
    let server = dispatch::Server::start_with(dconfig, opened.listeners, worker_main)
        .context("cannot start the workers")?;
    // Announced (and an upgrade's old process told) only once every worker
    // has its runtime: one that failed would leave its share of a reuseport
    // address unserved, and one set up late could find the fd table full.
    server
        .wait_ready(std::time::Duration::from_secs(10))
        .context("the workers did not start")?;
    let _ = dispatch_stats.set(server.stats().clone());
    let lifecycle = Lifecycle::new(
        stats.clone(),
        server.shutdown_handle(),
        cli.shutdown_timeout,
        cli.drain_delay,
        handover,
        cli.quiet,
    );
    signals::start(lifecycle.clone(), reloads.clone(), upgrader.clone())
        .context("cannot start the signal thread")?;
    if !cli.quiet {
        let (public, admin) = server.listen_addrs().split_at(public_count);
        let urls: Vec<String> = (public.iter())
            .map(|a| httplite::listen::url(a, tls.public.is_some()))
            .collect();
        println!(
            "httplite listening on {}{}{} (workers: {workers}, runtime: {}, dispatch: {}{})",
            urls.join(", "),
            admin_urls(admin, tls.admin.is_some()),
            opened
                .inherited
                .map(|how| format!(" [inherited: {how}]"))
                .unwrap_or_default(),
            cli.runtime,
            dispatch_mode,
            app.root
                .as_ref()
                .map(|r| format!(", root: {}", r.path().display()))
                .unwrap_or_default()
        );
    }
    let console = match cli.console {
        true => Some(
            httplite::console::start(httplite::console::ConsoleCtx {
                stats: stats.clone(),
                workers,
                dispatch: server.stats().clone(),
                jobs,
                lifecycle: lifecycle.clone(),
                grace: cli.shutdown_timeout,
                started: std::time::Instant::now(),
                reloads,
                upgrader: upgrader.clone(),
            })
            .context("--console: cannot read stdin")?,
        ),
        false => None,
    };
    // Only now serving: an old process waiting on an upgrade may drain.
    upgrade::notify_ready(ready_fd);
    server.join().context("server stopped with an error")?;
    // An upgrade abandoned by this stop is still stopping its new process.
    upgrader.wait_idle(upgrade::READY_TIMEOUT + upgrade::CHILD_STOP_WAIT);
    drop(console); // stdin back to blocking mode
    // The workers' logs are flushed into the writer's queue; let it write
    // them, but never wait long for a destination that stalled.
    if let Some(writer) = log_writer {
        writer.finish(std::time::Duration::from_secs(2));
    }
    if !cli.quiet {
        println!("httplite: shut down cleanly");
    }
    Ok(())
}

/// `; admin on URL, ...` for the start-up line (nothing without `--admin`).
fn admin_urls(admin: &[dispatch::ListenAddr], https: bool) -> String {
    if admin.is_empty() {
        return String::new();
    }
    let urls: Vec<String> = admin
        .iter()
        .map(|a| httplite::listen::url(a, https))
        .collect();
    format!("; admin on {}", urls.join(", "))
}

/// One warning line on stderr when the public listener answers the
/// operator's endpoints: in demo mode on an address other hosts can
/// reach, and whenever `--expose` names some.
fn warn_exposure<'a>(
    cli: &Cli,
    app: &App,
    public: impl IntoIterator<Item = &'a dispatch::ListenAddr>,
) {
    let names = app.exposure.public_names().join(", ");
    if cli.root.is_none() {
        let reachable: Vec<String> = (public.into_iter())
            .filter(|a| matches!(a, dispatch::ListenAddr::Tcp(a) if !a.ip().is_loopback()))
            .map(ToString::to_string)
            .collect();
        if !reachable.is_empty() {
            eprintln!(
                "httplite: warning: demo mode (no --root) on {}: {names} and the dashboard at / \
                 are served to anyone who reaches it (give --root to serve a site, --admin for these)",
                reachable.join(", ")
            );
        }
    } else if !cli.expose.is_empty() {
        eprintln!("httplite: warning: --expose serves {names} on the public listener");
    }
}
