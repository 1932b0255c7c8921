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
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use httplite::cli::{
    BindAddr, Cli, DispatchMode, PoolPriority, ProxyOn, RuntimeKind, ThreadpoolMode, TraceFormat,
};
use httplite::config::Config;
use httplite::lifecycle::Lifecycle;
use httplite::proxy::Listeners;
use httplite::signals::{self, Reloads};
use httplite::surface::AdminListeners;
use httplite::tls::{Tls, TlsByListener};
use httplite::upgrade::{self, Upgrader};
use site::access_log::{AccessLog, LogSink};
use site::exposure::Exposure;
use site::file_features::FileFeatures;
use site::jobs::{Jobs, Retention};
use site::routes::App;
use site::static_files::StaticRoot;
use site::stats::Stats;

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

/// An `--admin` on a `--bind`'s port (or path) could not be told apart
/// from it: a connection is placed by its socket's address.
fn check_admin_binds(cli: &Cli) -> Result<(), String> {
    let default = [BindAddr::Tcp(([127, 0, 0, 1], 8080).into())];
    let binds = if cli.bind.is_empty() {
        &default[..]
    } else {
        &cli.bind
    };
    for admin in &cli.admin {
        let clash = binds.iter().find(|b| match (b, admin) {
            (BindAddr::Tcp(b), BindAddr::Tcp(a)) => {
                a.port() != 0
                    && a.port() == b.port()
                    && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
            }
            (BindAddr::Unix(b), BindAddr::Unix(a)) => a == b,
            _ => false,
        });
        if let Some(bind) = clash {
            return Err(format!(
                "--admin {admin} overlaps --bind {bind}: give the admin listener its own port"
            ));
        }
    }
    Ok(())
}

/// The flags the chosen runtime cannot honour, refused in one line.
fn check_runtime_flags(cli: &Cli, matches: &clap::ArgMatches) -> Result<(), String> {
    let chrome = cli.trace_format == Some(TraceFormat::Chrome);
    if chrome && cli.trace_file.is_none() {
        return Err("--trace-format chrome needs --trace-file FILE".to_string());
    }
    check_admin_binds(cli)?;
    cli.upstream.settings(cli.runtime.place())?;
    if !cli.proxy_protocol.is_empty() && cli.trusted_proxy.is_empty() {
        return Err(
            "--proxy-protocol needs --trusted-proxy: the proxies allowed to send \
                    the header (every other peer is refused)"
                .to_string(),
        );
    }
    for on in &cli.proxy_protocol {
        if let ProxyOn::Bind(b) = on
            && !cli.bind.contains(b)
        {
            return Err(format!(
                "--proxy-protocol={b}: no --bind {b} (name one of the --bind values, \
                 or give --proxy-protocol alone for every listener)"
            ));
        }
    }
    if cli.runtime != RuntimeKind::Fork {
        return Ok(());
    }
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    match httplite::fork::incompatible_flag(given) {
        Some((id, why)) => Err(format!(
            "--runtime fork does not take --{}: {why} (see docs/threadpool-and-fork.md)",
            id.replace('_', "-")
        )),
        None => Ok(()),
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

/// `--trace`, `--trace-format`, `--trace-file` (each of the last two
/// implies the first). `upgraded`: this process was started by an upgrade
/// (see [`trace_file`]).
fn start_trace(cli: &Cli, upgraded: bool) -> Result<()> {
    if !cli.trace && cli.trace_format.is_none() && cli.trace_file.is_none() {
        return Ok(());
    }
    let rate = cli.trace_rate;
    let file = cli.trace_file.as_deref().map(|f| trace_file(f, upgraded));
    let compiled = match (cli.trace_format, &file) {
        (Some(TraceFormat::Chrome), Some(path)) if reactor::trace::COMPILED => {
            // Fork's parent may start no thread: every process appends its
            // own events to the file (see reactor::trace::enable_chrome_direct).
            let started = match cli.runtime {
                RuntimeKind::Fork => {
                    reactor::trace::enable_chrome_direct(path, rate, "httplite fork parent")
                }
                _ => reactor::trace::enable_chrome(path, rate),
            };
            started.with_context(|| format!("--trace-file {}: cannot create", path.display()))?
        }
        (_, Some(path)) if reactor::trace::COMPILED => reactor::trace::enable_text_file(path, rate)
            .with_context(|| format!("--trace-file {}: cannot create", path.display()))?,
        _ => reactor::trace::enable(rate),
    };
    if let (Some(asked), Some(path)) = (&cli.trace_file, &file)
        && asked != path
        && compiled
    {
        eprintln!(
            "httplite: started by an upgrade: the trace goes to {} ({} is the old process's)",
            path.display(),
            asked.display()
        );
    }
    if !compiled {
        anyhow::bail!(
            "--trace: this build has no tracing compiled in; rebuild with \
             `cargo run --release -p httplite --features trace -- --trace`"
        );
    }
    if reactor::trace::chrome::on() {
        httplite::pool_timeline::install();
        if cli.runtime == RuntimeKind::Uring {
            httplite::uring::trace::install();
        }
    }
    Ok(())
}

/// The file `--trace-file FILE` means for this process: FILE, or, in a
/// process started by an upgrade, `FILE.PID` with this process's pid. The
/// upgrade passes the same flags, and the old process is still writing
/// FILE until it has drained: opening it again would truncate the old
/// process's timeline under its writer.
fn trace_file(asked: &std::path::Path, upgraded: bool) -> std::path::PathBuf {
    if !upgraded {
        return asked.to_path_buf();
    }
    let mut name = asked.as_os_str().to_owned();
    name.push(format!(".{}", std::process::id()));
    name.into()
}

/// The listeners `--proxy-protocol` names. With `--bind` given, the
/// listeners are in its order (`listen::open`), so the n-th is the n-th
/// `--bind`'s.
fn proxy_listeners(cli: &Cli, listeners: &[dispatch::ListenAddr]) -> Listeners {
    if cli.proxy_protocol.is_empty() {
        return Listeners::None;
    }
    if cli.proxy_protocol.contains(&ProxyOn::All) {
        return Listeners::All;
    }
    let on = |b: &BindAddr| cli.proxy_protocol.contains(&ProxyOn::Bind(b.clone()));
    let addrs: Vec<_> = (cli.bind.iter().zip(listeners))
        .filter(|(b, _)| on(b))
        .map(|(_, l)| l.clone())
        .collect();
    match addrs.len() == listeners.len() {
        true => Listeners::All,
        false => Listeners::Some(addrs),
    }
}

/// `--file-cache`, or its default: 10,000 entries, but never more than a
/// quarter of the open-file limit, so that cached files cannot take the fds
/// that connections need.
fn file_cache_entries(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| {
        let limit = dispatch::sys::nofile_limit().map_or(1024, |(soft, _)| soft);
        usize::try_from(limit / 4).unwrap_or(usize::MAX).min(10_000)
    })
}

/// `--root` and the file features, if a root is given.
fn static_root(cli: &Cli) -> Result<Option<StaticRoot>> {
    Ok(match &cli.root {
        Some(dir) => Some(
            StaticRoot::new(dir, cli.list_dirs)
                .with_context(|| format!("--root {}: not a readable directory", dir.display()))?
                .show_hidden(cli.show_hidden)
                .with_features(FileFeatures {
                    rules: cli.headers.clone(),
                    cors: cli.cors.clone(),
                    fallback: cli.fallback.clone(),
                    error_pages: cli.error_page.clone(),
                })
                .precompressed(cli.precompressed)
                .with_file_cache(file_cache_entries(cli.file_cache), cli.file_cache_valid),
        ),
        None => None,
    })
}

/// The blocking pool `--pool-threads`, `--pool-queue`, `--pool-priority`
/// and `--pool-idle-timeout` ask for (not yet built: under fork the jobs
/// process builds it).
fn pool_builder(cli: &Cli) -> pool::Builder {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let builder = match cli.pool_priority {
        PoolPriority::Idle => pool::Pool::builder().sched_idle(true),
        PoolPriority::Low => pool::Pool::builder().nice(10),
        PoolPriority::Normal => pool::Pool::builder(),
    };
    builder
        .name("httplite-pool")
        .max_threads(cli.pool_threads.map_or(cpus, usize::from))
        .queue_bound(cli.pool_queue)
        .idle_timeout(cli.pool_idle_timeout)
}

/// `--runtime fork`: one thread, a child process per connection (see
/// `httplite::fork`). No dispatch, no log writer thread (each child writes
/// its own access-log lines), and the blocking pool in the jobs process.
fn run_fork(cli: &Cli, root: Option<StaticRoot>) -> Result<()> {
    // SIGHUP (reopen, reload) and SIGUSR2 (upgrade) are the parent's
    // signalfd's once it is set up; ignored until then, as their default
    // action ends the process (a logrotate's `kill -HUP` must not).
    // SAFETY: SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGUSR2, libc::SIG_IGN);
    }
    // Started by an upgrade: the old process waits on this pipe.
    let ready_fd = upgrade::take_ready_fd();
    let upgrader = Upgrader::new(cli.console).context("cannot find our executable")?;
    // Before any fork: the children inherit the trace's open file (or
    // stderr), and each labels its own lines (`fork::child`).
    reactor::trace::set_thread_label("parent");
    start_trace(cli, ready_fd.is_some())?;
    // `--bind` (several, TCP and Unix) and `--admin`, or the sockets of
    // socket activation: one socket each (the parent accepts on all).
    let opened = httplite::listen::open(&cli.bind, &cli.admin, cli.socket_mode, 1, BACKLOG)?;
    let page = httplite::fork::shared::page().context("cannot map the shared stats page")?;
    let stats = Arc::new(Stats::with_counters(vec![&page.counters], &page.draining));
    // Opened before any fork: every child writes to the one description.
    let log = (cli.access_log.as_deref())
        .map(|path| {
            httplite::fork::log::ForkLog::open(path, cli.access_log_full.when_full(), &page.log)
                .with_context(|| format!("--access-log {}: cannot open", path.display()))
        })
        .transpose()?
        .map(Arc::new);
    if log.is_some() {
        stats.add_extra(Box::new(move |s: &mut String| page.log.stats_members(s)));
    }
    // The pool runs in the jobs process (`httplite::fork::jobs`), forked
    // as serving begins; every other process reaches its registry through
    // the door. This process's own pool is closed before any task, so that
    // no thread ever starts here (a child lists directories itself).
    let local_pool = pool::Pool::builder().name("httplite-pool").build();
    local_pool.close();
    let test_endpoints = std::env::var_os("HTTPLITE_TEST_ENDPOINTS").is_some();
    let (jobs_process, door) = httplite::fork::jobs::JobsProcess::new(
        httplite::fork::jobs::Settings {
            pool: pool_builder(cli),
            retention: Retention {
                max_count: cli.jobs_retain,
                max_age: cli.jobs_ttl,
            },
            test_kinds: test_endpoints,
        },
        page,
    )
    .context("cannot make the jobs process's door")?;
    let app = Arc::new(App {
        root,
        stats: stats.clone(),
        worker_extra: Box::new(|_, _: &mut String| {}),
        test_endpoints,
        jobs: Jobs::remote(local_pool, test_endpoints, door),
        events: events_config(cli),
        exposure: exposure(cli),
        health_path: cli.health.clone(),
        // No sleep is bounded by the pool here (there is none): the
        // connection bound (--max-connections) holds the children.
        max_sleeping: u64::MAX,
        proxy: cli
            .upstream
            .settings(cli.runtime.place())
            .unwrap_or_default()
            .routes,
    });
    let public_count = opened.listeners.len() - opened.admin;
    let addrs: Vec<_> = opened.listeners.iter().map(|l| l.addr().clone()).collect();
    let (public, admin_addrs) = addrs.split_at(public_count);
    let mut parent = httplite::fork::Parent::new(
        opened.listeners,
        httplite::fork::Settings {
            max_connections: cli.max_connections,
            grace: cli.shutdown_timeout,
            drain_delay: cli.drain_delay,
            quiet: cli.quiet,
            test_fork_failure: test_endpoints
                .then(|| std::env::var("HTTPLITE_TEST_FORK_FAIL_MS").ok())
                .flatten()
                .and_then(|ms| ms.parse().ok())
                .map(std::time::Duration::from_millis),
        },
    )
    .context("cannot set up the fork parent")?;
    parent
        .jobs(jobs_process)
        .context("cannot start the jobs process")?;
    let mut config = Config::from_cli(cli);
    config.reverse_proxy.add_stats(&stats);
    config.proxy.listeners = proxy_listeners(cli, public);
    config.admin = AdminListeners::new(admin_addrs.to_vec(), public);
    let format = cli.access_log_format.format();
    let access_log = (log.clone()).map(|l| AccessLog::direct(l, format, 0));
    if let Some(log) = log {
        parent.log_to(log);
    }
    let tls = tls_by_listener(cli, &stats, Some(&page.tls))?;
    parent.tls(tls.clone());
    let ctx = httplite::blocking::conn::Ctx {
        app: app.clone(),
        config: Arc::new(config),
        stats: stats.worker(0),
        access_log,
        idle: httplite::blocking::IdleSet::default(),
        tls: tls.clone(),
    };
    warn_exposure(cli, &app, public);
    if !cli.quiet {
        let urls: Vec<String> = (public.iter())
            .map(|a| httplite::listen::url(a, tls.public.is_some()))
            .collect();
        println!(
            "httplite listening on {}{}{} (processes: one per connection, runtime: fork{})",
            urls.join(", "),
            admin_urls(admin_addrs, tls.admin.is_some()),
            opened
                .inherited
                .map(|how| format!(" [inherited: {how}]"))
                .unwrap_or_default(),
            app.root
                .as_ref()
                .map(|r| format!(", root: {}", r.path().display()))
                .unwrap_or_default()
        );
    }
    if cli.console {
        let stdin =
            httplite::console::StdinLines::open().context("--console: cannot read stdin")?;
        parent.console(stdin);
    }
    parent.upgrades(upgrader);
    upgrade::notify_ready(ready_fd);
    parent.run(&ctx).context("server stopped with an error")?;
    if !cli.quiet {
        println!("httplite: shut down cleanly");
    }
    Ok(())
}

/// What each listener answers: everything without a site (demo mode),
/// `--expose`'s endpoints on the public listener with one.
fn exposure(cli: &Cli) -> Exposure {
    match cli.root {
        None => Exposure::DEMO,
        Some(_) => Exposure::site(&cli.expose),
    }
}

/// `--tls-cert` and `--admin-tls-cert`, each with its own certificate and
/// one set of counters (the stats document's `tls`) for both: in `shared`
/// when given (fork's page, which every child adds to).
fn tls_by_listener(
    cli: &Cli,
    stats: &Stats,
    shared: Option<&'static httplite::tls::stats::TlsCounts>,
) -> Result<TlsByListener> {
    let load =
        |cert: &Option<std::path::PathBuf>, key: &Option<std::path::PathBuf>, redirect| match (
            cert, key,
        ) {
            (Some(cert), Some(key)) => Tls::new(cert.clone(), key.clone(), redirect)
                .map(Some)
                .map_err(anyhow::Error::msg),
            _ => Ok(None),
        };
    let in_shared = |tls: Option<Tls>| match shared {
        Some(counts) => tls.map(|t| t.counting_in_shared(counts)),
        None => tls,
    };
    let public = in_shared(load(&cli.tls_cert, &cli.tls_key, cli.redirect_http)?);
    let admin = load(&cli.admin_tls_cert, &cli.admin_tls_key, false)?;
    let admin = match (&public, admin) {
        (None, admin) => in_shared(admin),
        (Some(public), Some(admin)) => Some(admin.counting_into(public.stats.clone())),
        (Some(_), None) => None,
    };
    if let Some(counters) = (public.as_ref().or(admin.as_ref())).map(|t| t.stats.clone()) {
        stats.add_extra(Box::new(move |s: &mut String| counters.write_json(s)));
    }
    Ok(TlsByListener {
        public: public.map(Arc::new),
        admin: admin.map(Arc::new),
    })
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

/// `/_httplite/events`' settings from the command line.
fn events_config(cli: &Cli) -> site::events::EventsConfig {
    site::events::EventsConfig {
        max_viewers: cli.max_event_viewers,
        interval: cli.events_interval,
    }
}
