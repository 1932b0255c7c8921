//! `--runtime fork`'s wiring: one thread that accepts and forks a child
//! process per connection, so none of the dispatcher's threads; the
//! blocking pool lives in a jobs process of its own.

use std::sync::Arc;

use anyhow::{Context as _, Result};

use httplite::cli::Cli;
use httplite::config::Config;
use httplite::surface::AdminListeners;
use httplite::upgrade::{self, Upgrader};
use site::access_log::AccessLog;
use site::jobs::{Jobs, Retention};
use site::routes::App;
use site::static_files::StaticRoot;
use site::stats::Stats;

use super::settings::{events_config, exposure, pool_builder, proxy_listeners, tls_by_listener};
use super::trace::start_trace;
use super::{BACKLOG, admin_urls, warn_exposure};

/// `--runtime fork`: one thread, a child process per connection (see
/// `httplite::fork`). No dispatch, no log writer thread (each child writes
/// its own access-log lines), and the blocking pool in the jobs process.
pub(super) fn run_fork(cli: &Cli, root: Option<StaticRoot>) -> Result<()> {
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
