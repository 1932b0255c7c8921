//! What the server's parts are built from, read off the command line: the
//! static root and its file features, the blocking pool, TLS per listener,
//! the PROXY-protocol listeners, what each listener exposes, and the event
//! streams' pace. Shared by both ways to run (with dispatch, and fork).

use std::sync::Arc;

use anyhow::{Context as _, Result};

use httplite::cli::{BindAddr, Cli, PoolPriority, ProxyOn};
use httplite::proxy::Listeners;
use httplite::tls::{Tls, TlsByListener};
use site::exposure::Exposure;
use site::file_features::FileFeatures;
use site::static_files::StaticRoot;
use site::stats::Stats;

/// The listeners `--proxy-protocol` names. With `--bind` given, the
/// listeners are in its order (`listen::open`), so the n-th is the n-th
/// `--bind`'s.
pub(super) fn proxy_listeners(cli: &Cli, listeners: &[dispatch::ListenAddr]) -> Listeners {
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
pub(super) fn static_root(cli: &Cli) -> Result<Option<StaticRoot>> {
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
pub(super) fn pool_builder(cli: &Cli) -> pool::Builder {
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

/// What each listener answers: everything without a site (demo mode),
/// `--expose`'s endpoints on the public listener with one.
pub(super) fn exposure(cli: &Cli) -> Exposure {
    match cli.root {
        None => Exposure::DEMO,
        Some(_) => Exposure::site(&cli.expose),
    }
}

/// `--tls-cert` and `--admin-tls-cert`, each with its own certificate and
/// one set of counters (the stats document's `tls`) for both: in `shared`
/// when given (fork's page, which every child adds to).
pub(super) fn tls_by_listener(
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

/// `/_httplite/events`' settings from the command line.
pub(super) fn events_config(cli: &Cli) -> site::events::EventsConfig {
    site::events::EventsConfig {
        max_viewers: cli.max_event_viewers,
        interval: cli.events_interval,
    }
}
