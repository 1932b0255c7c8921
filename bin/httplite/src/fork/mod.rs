//! Process per connection (`--runtime fork`): the oldest design of all.
//! The parent accepts; for each connection it `fork()`s, and the child
//! (`child.rs`) serves that one connection with the blocking connection
//! loop, then exits. The parent never waits on a child's work.
//!
//! ```text
//!   parent (one thread): poll(listener, signalfd, stdin with --console)
//!     at start          ─▶ fork the jobs process (pool + registry; children reach it by a door)
//!     listener readable ─▶ accept4 ─▶ fork ─┬─ child: close listener + signalfd, serve, _exit
//!                                           └─ parent: close its copy of the connection
//!     SIGCHLD           ─▶ waitpid(-1, WNOHANG) until none is left: count closes and crashes
//!                          (the jobs process: start another)
//!     SIGHUP            ─▶ reopen the access log's file, read the TLS certificate again
//!                          (both for the children forked from then on)
//!     SIGUSR2           ─▶ binary upgrade: start the new process, poll its ready pipe;
//!                          on READY stop as below, without the drain delay (`upgrade`)
//!     SIGINT / SIGTERM  ─▶ with --drain-delay: set "draining" in the shared page (health 503),
//!                          go on accepting until the delay ends or a second signal comes; then
//!                       ─▶ close the listener, SIGTERM every child, wait (grace), SIGKILL the rest,
//!                          then SIGTERM the jobs process and reap it
//! ```
//!
//! - **One thread.** `fork()` copies only the calling thread, with every
//!   lock (the allocator's included) in the state the other threads left
//!   it. So the parent runs no other thread: no dispatch workers, no
//!   blocking-pool threads (its own pool is closed before the first fork),
//!   no console thread, no access-log writer thread; the flags that would
//!   start one are refused ([`incompatible_flag`]). What a thread does
//!   under the other designs, the parent's loop does here: it reopens the
//!   access log and reloads the TLS certificate on SIGHUP
//!   ([`Parent::tls`]), waits out the drain delay, waits for an upgrade's
//!   new process to report ready ([`Parent::upgrades`]), and reads the
//!   console's commands from stdin ([`Parent::console`]).
//! - **Jobs and the blocking pool live in the jobs process** ([`jobs`]),
//!   which the parent forks before any connection's child, while it is one
//!   thread. It never forks, so it runs the pool's threads and holds the
//!   one job registry; every child (and the parent's console) reaches it
//!   through a private door: an unnamed socketpair through which a process
//!   passes one end of a channel of its own (`SCM_RIGHTS`), then framed
//!   requests on that channel. A child that dies mid-request harms nothing
//!   but its channel. The parent ends the jobs process after its children
//!   (`SIGTERM`, reaped; `PR_SET_PDEATHSIG` if the parent dies first), and
//!   starts another if it dies (one that dies within a second of its start
//!   is not: jobs are answered 503 then).
//! - **HTTPS**: each child runs the TLS session on its own socket with the
//!   blocking connection loop, as `threads` does; the rustls configuration
//!   (certificate, ticket keys) is the parent's, copied at the fork, and
//!   the handshake counters are in the shared page.
//! - **The access log: each child writes its own lines** ([`log`]), as no
//!   writer thread may run. The parent opens the destination before any
//!   fork (`O_APPEND`, as the writer thread does), so every child inherits
//!   the one open file description; a child formats each request's line
//!   as the other designs do (same formats, same fields, worker 0) and
//!   writes it with one `write(2)` when the request is answered. Lines from
//!   many children never interleave: to a regular file opened `O_APPEND`,
//!   each write is positioned at the end and written in one piece; to a
//!   pipe or FIFO, a write of at most `PIPE_BUF` (4096) bytes is atomic. A
//!   line longer than that cannot go to a pipe in one piece, so it is
//!   dropped and counted (rather than cut: a cut line would break a JSON
//!   log's parser); a regular file takes it whole. "A log never stops the
//!   server" holds as elsewhere: under `--access-log-full drop` (the
//!   default) the parent makes the description non-blocking before
//!   forking, so a full pipe answers `EAGAIN` and the child drops the line
//!   (counted); under `block` the child waits in `write(2)` for the
//!   reader. Written and dropped lines are counted in the shared page, so
//!   the stats document's `access_log` member is the one every design
//!   prints, and drops are reported on stderr at most every 5 s (by the
//!   child that drops a line then) with the rest when the parent stops.
//!   SIGHUP reopens the file in the parent, onto the same fd number: the
//!   children forked from then on write to the new file, the ones already
//!   running keep the old one until their connection ends. Nothing is
//!   lost at exit, as nothing is buffered: each line is written before the
//!   next request is read (but a child still waiting in a `block`ed write
//!   when the shutdown's grace ends is killed, and that line with it).
//! - **Tracing** (`--trace`, `--trace-file`, `--trace-format chrome`) is
//!   started by the parent before any fork, so every child writes to the
//!   same stderr or the same file (opened `O_APPEND`), one `write(2)` per
//!   text line: lines from many processes interleave whole. A child labels
//!   its lines `c<pid>`, the parent `parent` (its `fork`, `reap` and
//!   `signal` lines). The timeline has no writer thread here: each process
//!   appends whole chunks of events itself, a child drops the parent's
//!   unwritten events copied into it by the fork and writes its own before
//!   `_exit`, and the parent closes the array once every child has ended
//!   (`reactor::trace::enable_chrome_direct`; docs/timeline.md).
//! - **Reaping: `SIGCHLD` through a signalfd, then `waitpid(WNOHANG)` in a
//!   loop.** Not `SA_NOCLDWAIT`: with it the kernel reaps the children
//!   itself and the parent never learns that one ended, yet it must, to
//!   bound the live children (`--max-connections`), to count closed
//!   connections and to notice a child that crashed; for the same reason
//!   the parent sets SIGCHLD back to its default action, in case it was
//!   started with the signal ignored. Signals coalesce (two
//!   children ending together can raise one `SIGCHLD`), hence the loop.
//!   A signalfd instead of a handler: the parent has one thread, so
//!   blocking the signals there makes the signalfd the only way they
//!   arrive, and the loop reads them like any other fd.
//! - **Stats**: in a `MAP_SHARED` page ([`shared`]), so that the document a
//!   child serves counts every process.
//! - **The drain delay** (`--drain-delay`): the first SIGINT/SIGTERM sets
//!   the draining flag, which is in the shared page too, so that every
//!   child, forked before or after, answers health with 503 and
//!   `Connection: close` and says `"state":"draining"` in its stats, as
//!   under the other designs. The parent goes on accepting and forking
//!   until the delay ends (its `poll` wakes then) or a second signal
//!   comes, then stops as without a delay. No thread waits out the delay,
//!   as `crate::lifecycle`'s does: the parent's `poll` timeout does.
//! - **A crash** (a signal, or a panic outside a handler) ends one child:
//!   its connection closes, the parent counts it and carries on.
//! - **A failed `fork()`** closes its connection unanswered and pauses
//!   accepting for 20 ms, as `EMFILE` pauses it.

mod accept;
mod child;
mod console;
pub mod jobs;
pub mod log;
pub mod shared;
mod signals;
mod tickets;
mod upgrade;

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use site::stats::RuntimeProbe;

use crate::blocking::conn::Ctx;

/// The command-line flags `--runtime fork` refuses (as clap ids), each
/// because it needs a thread in the parent or means nothing here.
pub const INCOMPATIBLE: &[(&str, &str)] = &[
    (
        "workers",
        "the parent is one thread and each connection its own process",
    ),
    (
        "dispatch",
        "the parent accepts; there are no workers to dispatch to",
    ),
    ("pin_workers", "there are no workers to pin"),
    ("threadpool_size", "that is --runtime threadpool's"),
    ("threadpool_queue", "that is --runtime threadpool's"),
    ("threadpool_mode", "that is --runtime threadpool's"),
    ("stack_size", "that is --runtime stackful's"),
];

/// The first flag of `given` (clap ids of the flags on the command line)
/// that `--runtime fork` refuses, and why.
pub fn incompatible_flag<'a>(mut given: impl FnMut(&str) -> bool) -> Option<(&'a str, &'a str)> {
    INCOMPATIBLE.iter().copied().find(|(id, _)| given(id))
}

/// What the parent needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Most children alive at once (accepting pauses at the bound).
    pub max_connections: Option<usize>,
    /// How long children get to finish once stopping begins.
    pub grace: Duration,
    /// The lame-duck period SIGINT/SIGTERM begins with (`--drain-delay`):
    /// health answers 503 while the parent still accepts and forks.
    pub drain_delay: Duration,
    /// No "draining" line on stderr (`--quiet`).
    pub quiet: bool,
    /// Tests only (`HTTPLITE_TEST_FORK_FAIL_MS`, honoured with the test
    /// endpoints): every `fork()` fails with `EAGAIN` for this long from
    /// the first one, as under a process limit.
    pub test_fork_failure: Option<Duration>,
}

/// The parent: its listeners and the signalfd, not yet serving.
#[derive(Debug)]
pub struct Parent {
    /// `--bind`'s listeners, then the `--admin` ones; their connections
    /// get children alike, which tell them apart by their socket's address
    /// (see [`crate::surface`]). Empty once shutdown began.
    listeners: Vec<dispatch::Listener>,
    signals: OwnedFd,
    settings: Settings,
    children: HashSet<libc::pid_t>,
    page: &'static shared::Page,
    /// When the forks [`Settings::test_fork_failure`] fails stop failing.
    failing_until: Option<Instant>,
    /// The access log, reopened on SIGHUP (see [`Parent::log_to`]).
    log: Option<Arc<log::ForkLog>>,
    /// The certificates, read again on SIGHUP, and the ticket keys, rolled
    /// here (see [`Parent::tls`]).
    tls: crate::tls::TlsByListener,
    /// When the parent last let the ticket keys roll.
    tickets_rolled: Option<Instant>,
    /// When the drain delay ends, while draining.
    drain_until: Option<Instant>,
    /// When the children's grace ends, once stopping.
    deadline: Option<Instant>,
    /// `--console`'s stdin, read in the loop (see [`Parent::console`]).
    /// Its drop puts stdin back in blocking mode; a child's copy is never
    /// dropped (the child leaves through `_exit`), so only the parent's
    /// end does it.
    console: Option<crate::console::StdinLines>,
    /// When serving began (the console's `stats`).
    started: Instant,
    /// How to start the next copy of the executable (see
    /// [`Parent::upgrades`]).
    upgrader: Option<crate::upgrade::Upgrader>,
    /// The upgrade under way, until its new process is ready or fails.
    upgrade: Option<upgrade::Pending>,
    /// An upgrade's new process told to stop with this one.
    abandoned: Option<upgrade::Abandoned>,
    /// The jobs process (see [`jobs`]), started by [`Parent::jobs`].
    jobs: Option<jobs::JobsProcess>,
}

/// Signals the parent takes through its signalfd.
const SIGNALS: [libc::c_int; 5] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGUSR2,
];

/// The fork design's numbers for the stats document.
#[derive(Debug)]
struct Probe(&'static shared::Page);

impl RuntimeProbe for Probe {
    fn write_json(&self, s: &mut String) {
        use std::fmt::Write as _;
        let p = self.0;
        let _ = write!(
            s,
            ",\"runtime\":{{\"kind\":\"fork\",\"children_alive\":{},\"children_high_water\":{},\
             \"children_crashed\":{},\"fork_failed\":{},\"paused_at_max\":{},\"jobs_restarts\":{}}}",
            p.alive.load(Ordering::Relaxed),
            p.high_water.load(Ordering::Relaxed),
            p.crashed.load(Ordering::Relaxed),
            p.fork_failed.load(Ordering::Relaxed),
            p.paused_at_max.load(Ordering::Relaxed),
            p.jobs_restarts.load(Ordering::Relaxed),
        );
    }
}

impl Parent {
    /// The parent of `listeners` (bound, or inherited by socket
    /// activation: `--bind`'s, then `--admin`'s, one socket each); blocks
    /// SIGCHLD/SIGINT/SIGTERM/SIGHUP into a signalfd. Call on the
    /// process's only thread.
    pub fn new(listeners: Vec<dispatch::Listener>, settings: Settings) -> io::Result<Parent> {
        // An ignored SIGCHLD survives exec (a supervisor, or a shell's
        // `trap '' CHLD`, can leave it so) and makes the kernel reap the
        // children itself: the parent would never learn that one ended.
        // SAFETY: SIG_DFL installs no handler code.
        if unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
        let set = child::sigset(&SIGNALS);
        // SAFETY: `set` is an initialised sigset_t; the old mask is not
        // asked for. The process has one thread, so this is its mask.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SIGHUP and SIGUSR2 are ignored from the process's start
        // (`run_fork`), so that a logrotate's SIGHUP never ends it. Now that
        // they are blocked, their default action can never run: set back
        // to it, a signal is queued for the signalfd instead of being
        // discarded as an ignored one may be. The children ignore them
        // again (`child::run`).
        for signal in [libc::SIGHUP, libc::SIGUSR2] {
            // SAFETY: SIG_DFL installs no handler code.
            if unsafe { libc::signal(signal, libc::SIG_DFL) } == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `set` is valid; -1 asks for a new fd.
        let fd = reactor::syscall!(unsafe {
            libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC)
        })?;
        // SAFETY: signalfd succeeded, so the fd is new and ours alone.
        let signals = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        Ok(Parent {
            listeners,
            signals,
            settings,
            children: HashSet::new(),
            page: shared::page()?,
            failing_until: None,
            log: None,
            tls: Default::default(),
            tickets_rolled: None,
            drain_until: None,
            deadline: None,
            console: None,
            started: Instant::now(),
            upgrader: None,
            upgrade: None,
            abandoned: None,
            jobs: None,
        })
    }

    /// Reopens `log` on SIGHUP and reports its dropped lines as it stops;
    /// the children write to it through `ctx`'s access log (see [`run`]).
    ///
    /// [`run`]: Parent::run
    pub fn log_to(&mut self, log: Arc<log::ForkLog>) {
        self.log = Some(log);
    }

    /// Serves until SIGINT/SIGTERM and the children's end: every accepted
    /// connection gets a child running `ctx` (whose stats must be the
    /// [`shared::page`]'s counters, and whose access log, if any, must
    /// write to the [`log::ForkLog`] given to [`Parent::log_to`]).
    pub fn run(mut self, ctx: &Ctx) -> io::Result<()> {
        let result = self.serve(ctx);
        // After the children: those still draining may have needed it.
        if let Some(jobs) = &mut self.jobs {
            jobs.stop();
        }
        if let Some(log) = &self.log {
            log.report(true);
        }
        result
    }

    fn serve(&mut self, ctx: &Ctx) -> io::Result<()> {
        ctx.stats.set_runtime(Box::new(Probe(self.page)));
        let mut backoff: Option<Instant> = None;
        loop {
            if self.drain_until.is_some_and(|d| Instant::now() >= d) {
                self.stop();
            }
            if self.deadline.is_some() && self.children.is_empty() && !self.upgrade_outstanding() {
                return Ok(());
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.kill_all(libc::SIGKILL);
                self.kill_abandoned();
                while !self.children.is_empty() && self.reap(0) > 0 {}
                return Ok(());
            }
            let at_max = self
                .settings
                .max_connections
                .is_some_and(|m| self.children.len() >= m);
            let backing_off = backoff.is_some_and(|b| Instant::now() < b);
            let accepting = !self.listeners.is_empty() && !at_max && !backing_off;
            let mut pfds = vec![pollfd(self.signals.as_raw_fd())];
            let stdin = self.console.as_ref().and_then(|c| c.fd());
            pfds.extend(stdin.map(pollfd));
            let ready_pipe = self.upgrade_fd();
            pfds.extend(ready_pipe.map(pollfd));
            let first_listener = pfds.len();
            if accepting {
                let fds = self.listeners.iter().map(|l| l.fds()[0].as_raw_fd());
                pfds.extend(fds.map(pollfd));
            }
            let n = pfds.len();
            let wake = [
                self.deadline,
                self.drain_until,
                backoff.filter(|_| backing_off),
                self.upgrade_wake(),
            ]
            .into_iter()
            .flatten()
            .min();
            let ms = wake.map_or(-1, |w| {
                crate::blocking::poll_timeout_ms(w.saturating_duration_since(Instant::now()))
            });
            // SAFETY: `pfds` holds `n` valid pollfds for the call.
            match reactor::syscall!(unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, ms) })
            {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            if pfds[0].revents != 0 && self.read_signals()? {
                self.stop_asked();
            }
            if stdin.is_some() && pfds[1].revents != 0 {
                self.read_console(ctx);
            }
            let pipe_readable = ready_pipe.is_some() && pfds[first_listener - 1].revents != 0;
            self.step_upgrade(pipe_readable);
            for ready in &pfds[first_listener..] {
                // Stopping (a signal or `quit` just now) closed them.
                if self.listeners.is_empty() {
                    break;
                }
                if ready.revents != 0
                    && let Some(later) = self.accept_some(ready.fd, ctx)
                {
                    backoff = Some(later);
                }
            }
        }
    }

    /// SIGINT, SIGTERM or the console's `quit`: the first begins the
    /// drain delay if there is one, and stopping otherwise; a second ends
    /// the delay at once. Once stopping, nothing more is done.
    fn stop_asked(&mut self) {
        if self.deadline.is_some() {
            return;
        }
        self.abandon_upgrade();
        let delay = self.settings.drain_delay;
        if self.drain_until.is_none() && !delay.is_zero() {
            self.drain(delay);
        } else {
            self.stop();
        }
    }

    /// The first SIGINT/SIGTERM with a drain delay: every child's health
    /// answers 503 from now on (those already running too: the flag is in
    /// the shared page), while the parent goes on accepting and forking
    /// until the returned time.
    fn drain(&mut self, delay: Duration) {
        self.page.draining.store(true, Ordering::SeqCst);
        if !self.settings.quiet {
            eprintln!("httplite: draining: health checks now fail; stopping in {delay:?}");
        }
        self.drain_until = Some(Instant::now() + delay);
    }

    /// Stopping: closes the listeners (the queued connections get a
    /// reset), asks every child to finish, and gives them the grace.
    fn stop(&mut self) {
        self.page.draining.store(true, Ordering::SeqCst);
        self.listeners.clear();
        self.kill_all(libc::SIGTERM);
        self.drain_until = None;
        self.deadline = Some(Instant::now() + self.settings.grace);
    }
}

impl Parent {
    /// Starts `process` (see [`jobs`]) now, before any connection's child,
    /// and ends it once the children have ended ([`Parent::run`]).
    pub fn jobs(&mut self, mut process: jobs::JobsProcess) -> io::Result<()> {
        process.start(&self.inherited_fds())?;
        self.jobs = Some(process);
        Ok(())
    }
}

/// A `waitpid` status in a trace line: `exit:N` or `signal:N`.
struct ExitStatus(libc::c_int);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0;
        if libc::WIFSIGNALED(s) {
            write!(f, "signal:{}", libc::WTERMSIG(s))
        } else {
            write!(f, "exit:{}", libc::WEXITSTATUS(s))
        }
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}
