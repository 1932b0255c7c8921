//! Binary upgrade without refusing a connection (SIGUSR2, or the console's
//! `upgrade`), as nginx does it:
//!
//! 1. start a new copy of the executable, with the same arguments, passing
//!    it this process's listening sockets (copies of the same kernel
//!    sockets: `HTTPLITE_LISTEN_FDS`, see [`crate::listen`]) and the write
//!    end of a pipe (`HTTPLITE_READY_FD`);
//! 2. the new process binds nothing, takes the sockets, starts its workers
//!    and writes `READY` into the pipe ([`notify_ready`]);
//! 3. this process then stops accepting and drains as on SIGTERM (without
//!    the drain delay: the sockets stay open in the new process, which is
//!    accepting already, so a client that connects meanwhile waits in the
//!    kernel's queue and is accepted by one of the two, never refused).
//!
//! If the new process fails (it exits, or says nothing for
//! [`READY_TIMEOUT`]), it is killed if still running, this process keeps
//! serving with its sockets, and one line on stderr says why.
//!
//! If this process is told to stop (SIGTERM, SIGINT, the console's `quit`)
//! while an upgrade is under way, before the new process has reported
//! ready or as it does, the operator's stop wins: there is no hand-over,
//! the new process is sent SIGTERM (it drains and exits as this one does;
//! [`CHILD_STOP_WAIT`] bounds the wait, then SIGKILL), and this process
//! carries on with its own stop, which waits for that before exiting
//! ([`Upgrader::wait_idle`]). Without this the new process would take over
//! and keep serving after the stop. Whether stop or hand-over came first
//! is decided under one lock ([`Lifecycle::hand_over_unless_draining`]).

use std::ffi::OsString;
use std::io::Read as _;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dispatch::Listener;

use crate::lifecycle::Lifecycle;
use crate::listen::UPGRADE_FDS_VAR;

/// The pipe the new process reports on.
pub const READY_FD_VAR: &str = "HTTPLITE_READY_FD";
/// How long the new process may take to report ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a new process sent SIGTERM (an upgrade abandoned because this
/// process is stopping) may take to exit before it is killed.
pub const CHILD_STOP_WAIT: Duration = Duration::from_secs(30);
/// Why an upgrade was abandoned for a stop (said by every design).
pub const STOPPING: &str = "this process is stopping (a signal or `quit` came during the upgrade)";

/// Writes `httplite: LINE` to stderr in one `write`: `eprintln!` writes
/// its pieces one by one, and a reader (a test, a supervisor) may see a
/// partial line.
fn report_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("httplite: {line}\n").as_bytes());
}

/// How to start the next copy of ourselves.
#[derive(Debug)]
pub struct Upgrader {
    exe: PathBuf,
    args: Vec<OsString>,
    /// With `--console`, the new process must not read our stdin too.
    stdin_null: bool,
    busy: AtomicBool,
}

impl Upgrader {
    /// Records the executable and arguments now: after the file is
    /// replaced, `/proc/self/exe` says "(deleted)".
    pub fn new(stdin_null: bool) -> std::io::Result<Upgrader> {
        let mut exe = std::env::current_exe()?;
        if let Some(s) = exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            exe = PathBuf::from(s);
        }
        Ok(Upgrader {
            exe,
            args: std::env::args_os().skip(1).collect(),
            stdin_null,
            busy: AtomicBool::new(false),
        })
    }

    /// Runs an upgrade in its own thread (it waits up to
    /// [`READY_TIMEOUT`]); the outcome goes to stderr.
    pub fn start(self: &Arc<Self>, lifecycle: &Arc<Lifecycle>) {
        let (me, lc) = (self.clone(), lifecycle.clone());
        let spawned = std::thread::Builder::new()
            .name("httplite-upgrade".into())
            .spawn(move || me.run_reporting(&lc, report_line));
        if let Err(e) = spawned {
            eprintln!("httplite: upgrade failed: no thread for it ({e}); still serving");
        }
    }

    /// Waits (at most `limit`) until no upgrade is under way: the process
    /// must not exit while one still has a new process to stop.
    pub fn wait_idle(&self, limit: Duration) {
        let end = Instant::now() + limit;
        while self.busy.load(Ordering::SeqCst) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One upgrade, start to end; returns the line to report.
    pub fn run(&self, lifecycle: &Lifecycle) -> String {
        let mut line = String::new();
        self.run_reporting(lifecycle, |l| line = l.to_string());
        line
    }

    /// [`run`](Self::run), handing the line to `report` while the upgrade
    /// still counts as under way: after a hand-over this process drains
    /// and exits as soon as [`wait_idle`](Self::wait_idle) lets it, which
    /// would otherwise cut the report short.
    fn run_reporting(&self, lifecycle: &Lifecycle, report: impl FnOnce(&str)) {
        if self.busy.swap(true, Ordering::SeqCst) {
            report("upgrade: one is already under way");
            return;
        }
        report(&self.attempt(lifecycle));
        self.busy.store(false, Ordering::SeqCst);
    }

    fn attempt(&self, lifecycle: &Lifecycle) -> String {
        if lifecycle.is_draining() {
            return "upgrade: not while draining".to_string();
        }
        let Some(listeners) = lifecycle.take_handover() else {
            return "upgrade: not while stopping".to_string();
        };
        match self.spawn_and_wait(&listeners, lifecycle) {
            Ok(mut child) => {
                let pid = child.id();
                // A stop that came as it reported ready wins, too.
                if !lifecycle.hand_over_unless_draining() {
                    lifecycle.return_handover(listeners);
                    return format!("upgrade abandoned: {STOPPING}; {}", stop_child(&mut child));
                }
                drop(listeners);
                format!(
                    "upgrade: new process {pid} is ready; process {} stops accepting and drains",
                    std::process::id()
                )
            }
            Err(Failed::Stopping(mut child)) => {
                lifecycle.return_handover(listeners);
                format!("upgrade abandoned: {STOPPING}; {}", stop_child(&mut child))
            }
            Err(Failed::Why(why)) => {
                lifecycle.return_handover(listeners);
                format!("upgrade failed: {why}; still serving")
            }
        }
    }

    fn spawn_and_wait(
        &self,
        listeners: &[Listener],
        lifecycle: &Lifecycle,
    ) -> Result<std::process::Child, Failed> {
        let (mut child, mut ready) = self.spawn(listeners).map_err(Failed::Why)?;
        let pid = child.id();
        let deadline = Instant::now() + READY_TIMEOUT;
        let why = loop {
            if lifecycle.is_draining() {
                return Err(Failed::Stopping(child));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break not_ready_in_time(pid);
            }
            match wait_readable(ready.fd(), left.min(Duration::from_millis(200))) {
                Ok(false) => {}
                Ok(true) => match ready.read() {
                    Ok(Heard::Ready) => return Ok(child),
                    Ok(Heard::Nothing) => {}
                    Ok(Heard::Closed) => {
                        break format!(
                            "new process {pid} closed its ready pipe without reporting ready{}",
                            exit_of(&mut child)
                        );
                    }
                    Err(e) => break format!("reading the ready pipe: {e}"),
                },
                Err(e) => break format!("waiting for the ready pipe: {e}"),
            }
            if let Ok(Some(status)) = child.try_wait() {
                break format!("new process {pid} exited ({status})");
            }
        };
        // Never leave a half-started copy behind.
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
        }
        let _ = child.wait();
        Err(Failed::Why(why))
    }

    /// Starts the new process with `listeners` and the write end of a
    /// ready pipe; the process and the pipe's read end, or why it could
    /// not start. The caller waits for [`Heard::Ready`] (and must not let
    /// the process outlive a failed upgrade).
    pub fn spawn(
        &self,
        listeners: &[Listener],
    ) -> Result<(std::process::Child, ReadyPipe), String> {
        let (ready_rd, ready_wr) = pipe().map_err(|e| format!("no pipe: {e}"))?;
        let groups: Vec<Vec<RawFd>> = listeners
            .iter()
            .map(|l| l.fds().iter().map(AsRawFd::as_raw_fd).collect())
            .collect();
        let spec = groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect::<Vec<_>>()
            .join(",");
        let mut passed: Vec<RawFd> = groups.concat();
        passed.push(ready_wr.as_raw_fd());
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .env(UPGRADE_FDS_VAR, spec)
            .env(READY_FD_VAR, ready_wr.as_raw_fd().to_string())
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_FDNAMES");
        if self.stdin_null {
            cmd.stdin(Stdio::null());
        }
        // SAFETY: the closure runs in the child between fork and exec, and
        // only calls fcntl(2), which is async-signal-safe, on fds that are
        // open in the parent (borrowed for the whole spawn) and so in the
        // child; it allocates nothing (`passed` was built beforehand).
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &passed {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags == -1
                        || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) == -1
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            })
        };
        // std's spawn also empties the new process's signal mask, so a
        // caller that blocks signals for a signalfd (`--runtime fork`'s
        // parent) starts it with none blocked.
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        drop(ready_wr);
        Ok((
            child,
            ReadyPipe {
                file: std::fs::File::from(ready_rd),
                said: Vec::new(),
            },
        ))
    }
}

/// The read end of the pipe a new process reports ready on.
#[derive(Debug)]
pub struct ReadyPipe {
    file: std::fs::File,
    said: Vec<u8>,
}

/// What one read of a [`ReadyPipe`] heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The new process said `READY`.
    Ready,
    /// Not the whole word yet (or a spurious wake-up).
    Nothing,
    /// The pipe closed without it: the new process exited, or will.
    Closed,
}

impl ReadyPipe {
    /// The fd to wait on for readability.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Reads what the pipe holds (once readable: this read may block
    /// otherwise).
    pub fn read(&mut self) -> std::io::Result<Heard> {
        let mut buf = [0u8; 64];
        match self.file.read(&mut buf) {
            Ok(0) => Ok(Heard::Closed),
            Ok(n) => {
                self.said.extend_from_slice(&buf[..n]);
                Ok(if self.said.starts_with(b"READY") {
                    Heard::Ready
                } else {
                    Heard::Nothing
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(Heard::Nothing),
            Err(e) => Err(e),
        }
    }
}

/// Why an upgrade failed when the new process stayed silent.
pub fn not_ready_in_time(pid: u32) -> String {
    format!("new process {pid} did not report ready within {READY_TIMEOUT:?}")
}

/// Why an upgrade did not hand over.
enum Failed {
    /// The new process failed (it was killed if still running).
    Why(String),
    /// This process is stopping: the new one must stop too.
    Stopping(std::process::Child),
}

/// Sends SIGTERM to the new process of an abandoned upgrade and waits
/// for it to exit (SIGKILL after [`CHILD_STOP_WAIT`]); says what happened.
fn stop_child(child: &mut std::process::Child) -> String {
    let pid = child.id();
    if let Ok(Some(status)) = child.try_wait() {
        return format!("new process {pid} had already exited ({status})");
    }
    if let Ok(raw) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) touches no memory; `pid` is our child, not yet
        // waited for, so the number cannot have been reused.
        unsafe { libc::kill(raw, libc::SIGTERM) };
    }
    let end = Instant::now() + CHILD_STOP_WAIT;
    while Instant::now() < end {
        if let Ok(Some(status)) = child.try_wait() {
            return format!("new process {pid} was sent SIGTERM and exited ({status})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    format!("new process {pid} was sent SIGTERM and killed after {CHILD_STOP_WAIT:?}")
}

/// In the new process: tells the old one we are serving (once; a no-op
/// when not started by an upgrade).
pub fn notify_ready(fd: Option<OwnedFd>) {
    if let Some(fd) = fd {
        let mut f = std::fs::File::from(fd);
        let _ = std::io::Write::write_all(&mut f, b"READY\n");
    }
}

/// The ready pipe's fd from the environment (removed from it), taken at
/// start-up.
pub fn take_ready_fd() -> Option<OwnedFd> {
    let v = std::env::var(READY_FD_VAR).ok();
    // SAFETY: called from `main` before any other thread exists.
    unsafe { std::env::remove_var(READY_FD_VAR) };
    let fd: RawFd = v?.parse().ok().filter(|&fd| fd > 2)?;
    // SAFETY: F_GETFD takes no argument and touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return None;
    }
    // SAFETY: the fd is open and was passed to this process alone, by the
    // process that upgraded; it is taken once, before anything else runs.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Not to be passed on to anything we start.
    let _ = dispatch::set_cloexec(fd.as_fd(), true);
    Some(fd)
}

fn exit_of(child: &mut std::process::Child) -> String {
    std::thread::sleep(Duration::from_millis(100));
    match child.try_wait() {
        Ok(Some(status)) => format!(" ({status})"),
        _ => String::new(),
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both fds are new and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn wait_readable(fd: RawFd, within: Duration) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = within.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfd` is one valid pollfd for the duration of the call.
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        -1 => {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => Ok(false),
                _ => Err(e),
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}
