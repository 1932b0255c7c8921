//! The console's commands: one line in, text out. No I/O here, so every
//! command can be tested without a terminal.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use site::jobs::Jobs;
use site::stats::Stats;

/// What a console can see and do.
#[derive(Debug)]
pub struct ConsoleCtx {
    /// The server's counters.
    pub stats: Arc<Stats>,
    /// Number of workers.
    pub workers: usize,
    /// The dispatcher's counters (connections handed to each worker).
    pub dispatch: Arc<dispatch::Stats>,
    /// The jobs (and through them, the blocking pool).
    pub jobs: Jobs,
    /// Draining and shutdown, as on SIGTERM (`quit`).
    pub lifecycle: Arc<crate::lifecycle::Lifecycle>,
    /// `--shutdown-timeout`.
    pub grace: Duration,
    /// When the server started.
    pub started: Instant,
    /// The access log and TLS, for `reopen` and `reload` (as SIGHUP).
    pub reloads: crate::signals::Reloads,
    /// For `upgrade` (as SIGUSR2).
    pub upgrader: Arc<crate::upgrade::Upgrader>,
}

/// What a command asks of the console loop.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Print this and read on.
    Text(String),
    /// Print this, start draining ([`ConsoleCtx::lifecycle`]) and stop
    /// reading. Printing comes first: once shutdown starts, the
    /// process may exit at any moment.
    Quit(String),
}

/// The `help` text.
pub const HELP: &str = "\
commands:
  stats    server counters: connections, requests, responses, errors, pool
  workers  per worker: open connections, connections, requests, handoff queue
  jobs     background jobs: counts by state, and the most recent ones
  reload   read the TLS certificate and key files again (SIGHUP does it too)
  reopen   reopen the access log file, after logrotate moved it (SIGHUP too)
  upgrade  start a new copy of the binary on the same sockets, then drain
           (as SIGUSR2)
  quit     graceful shutdown (as SIGTERM: the drain delay, then in-flight
           work finishes and the server exits)
  help     this text
";

/// A command line, parsed: what [`execute`] runs here, and what the fork
/// parent runs in its own loop (`crate::fork`), where there is no
/// [`ConsoleCtx`].
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// An empty line: no answer.
    Empty,
    /// `help` or `?`.
    Help,
    /// `stats`.
    Stats,
    /// `workers`.
    Workers,
    /// `jobs`.
    Jobs,
    /// `reload`.
    Reload,
    /// `reopen`.
    Reopen,
    /// `upgrade`.
    Upgrade,
    /// `quit` or `exit`.
    Quit,
    /// Anything else: the answer, naming the commands.
    Unknown(String),
}

impl Command {
    /// The command on `line`.
    pub fn parse(line: &str) -> Command {
        match line.trim() {
            "" => Command::Empty,
            "help" | "?" => Command::Help,
            "stats" => Command::Stats,
            "workers" => Command::Workers,
            "jobs" => Command::Jobs,
            "reload" => Command::Reload,
            "reopen" => Command::Reopen,
            "upgrade" => Command::Upgrade,
            "quit" | "exit" => Command::Quit,
            other => {
                let word: String = other.chars().take(40).collect();
                Command::Unknown(format!(
                    "unknown command {word:?}: try stats, workers, jobs, reload, reopen, \
                     upgrade, quit or help\n"
                ))
            }
        }
    }
}

/// `quit`'s answer, printed before the shutdown starts.
pub fn quit_text(grace: Duration) -> String {
    format!("shutting down: in-flight requests get up to {grace:?}\n")
}

/// Runs one command line.
pub fn execute(ctx: &ConsoleCtx, line: &str) -> Reply {
    Reply::Text(match Command::parse(line) {
        Command::Empty => String::new(),
        Command::Help => HELP.to_string(),
        Command::Stats => stats_table(&ctx.stats, ctx.workers, &ctx.jobs, ctx.started),
        Command::Workers => workers_table(ctx),
        Command::Jobs => jobs_table(&ctx.jobs),
        Command::Reload => format!("{}\n", ctx.reloads.reload_tls()),
        Command::Reopen => format!("{}\n", ctx.reloads.reopen_log()),
        Command::Upgrade => format!("{}\n", ctx.upgrader.run(&ctx.lifecycle)),
        Command::Quit => return Reply::Quit(quit_text(ctx.grace)),
        Command::Unknown(answer) => answer,
    })
}

fn row(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "  {name:<24} {value:>12}");
}

/// `stats`: the server's counters over its `workers` workers, and the
/// blocking pool's.
pub fn stats_table(s: &Stats, workers: usize, jobs: &Jobs, started: Instant) -> String {
    let open: u64 = (0..workers).map(|i| s.worker(i).open()).sum();
    let mut out = String::from("server\n");
    row(
        &mut out,
        "uptime (s)",
        format!("{:.1}", started.elapsed().as_secs_f64()),
    );
    row(&mut out, "connections open", open);
    row(&mut out, "connections total", s.total(|w| &w.connections));
    row(&mut out, "requests", s.total(|w| &w.requests));
    for class in 1..=5 {
        row(
            &mut out,
            &format!("responses {class}xx"),
            s.total(|w| &w.responses[class]),
        );
    }
    let timeouts: u64 = (0..3).map(|k| s.total(|w| &w.timeouts[k])).sum();
    let errors: u64 = (0..site::stats::ERROR_KIND_COUNT)
        .map(|k| s.total(|w| &w.errors[k]))
        .sum();
    row(&mut out, "timeouts", timeouts);
    row(&mut out, "errors", errors);
    let (_, p) = jobs.stats().unwrap_or_default();
    out.push_str("blocking pool\n");
    row(
        &mut out,
        "queued",
        format!("{}/{}", p.queued, p.queue_bound),
    );
    row(
        &mut out,
        "threads alive/busy",
        format!("{}/{}", p.alive, p.busy),
    );
    row(&mut out, "threads max", p.max_threads);
    row(&mut out, "completed", p.completed);
    row(&mut out, "rejected", p.rejected);
    row(&mut out, "panicked", p.panicked);
    out
}

fn workers_table(ctx: &ConsoleCtx) -> String {
    let mut out = format!(
        "{:>6} {:>10} {:>12} {:>12} {:>8}\n",
        "worker", "open", "connections", "requests", "queue"
    );
    let dispatched = ctx.dispatch.workers();
    for i in 0..ctx.workers {
        let w = ctx.stats.worker(i);
        let taken = w.connections.load(std::sync::atomic::Ordering::Relaxed);
        // Handed to the worker but not yet taken from its pipe.
        let queue = dispatched
            .get(i)
            .map_or(0, |d| d.handed_off().saturating_sub(taken));
        let _ = writeln!(
            out,
            "{i:>6} {:>10} {taken:>12} {:>12} {queue:>8}",
            w.open(),
            w.requests.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
    out
}

/// `jobs`: the registry's counters and its most recent jobs (one line
/// instead when the registry cannot be reached).
pub fn jobs_table(jobs: &Jobs) -> String {
    let (Ok((j, _)), Ok(recent)) = (jobs.stats(), jobs.recent(10)) else {
        return "jobs: the job registry cannot be reached\n".to_string();
    };
    let mut out = String::from("jobs\n");
    row(&mut out, "submitted", j.submitted);
    row(&mut out, "rejected (queue full)", j.rejected);
    row(&mut out, "queued", j.queued);
    row(&mut out, "running", j.running);
    row(&mut out, "done", j.done);
    row(&mut out, "failed", j.failed);
    row(&mut out, "cancelled", j.cancelled);
    row(&mut out, "retries", j.retries);
    row(&mut out, "finished, kept", j.retained);
    row(&mut out, "finished, evicted", j.evicted);
    if !recent.is_empty() {
        let _ = writeln!(
            out,
            "most recent\n  {:>8} {:<12} {:<10} {:>8}",
            "id", "type", "state", "attempts"
        );
        for job in recent {
            let _ = writeln!(
                out,
                "  {:>8} {:<12} {:<10} {:>8}",
                job.id,
                job.kind.name(),
                job.state.name(),
                job.attempts
            );
        }
    }
    out
}
