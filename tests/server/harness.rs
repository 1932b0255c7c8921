//! The test harness: start and stop the server binary, a raw HTTP/1.1
//! client over `std::net`, a small response parser (status line, headers,
//! `Content-Length` or chunked body), and helpers (stats, temp dirs, curl).
//!
//! Everything is bounded: every socket has read and write timeouts, every
//! wait polls with a deadline, and a [`Server`] that goes out of scope is
//! stopped by its PID (SIGTERM, then SIGKILL as a last resort), so no test
//! leaks a process even when it panics.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::time::{Duration, Instant};

use super::pki::{Pki, TlsStream, shared_client_config, tls_connect, tls_mode, tls_over};

/// Every runtime the behavioural tests run against. Adding a runtime here
/// is the only change the suite needs, apart from the tests that do not
/// apply to it (they say so, and assert what it does instead).
pub const RUNTIMES: &[&str] = &[
    "stackless",
    "stackful",
    "threads",
    "threadpool",
    "fork",
    "uring",
];

/// The runtimes this run covers: [`RUNTIMES`] (every one serves TLS too,
/// for the pass over it, `HTTPLITE_TEST_TLS=1`). `HTTPLITE_TEST_RUNTIMES`
/// (a comma-separated list) narrows it, e.g. to run one design's suite.
pub fn runtimes() -> &'static [&'static str] {
    static CHOSEN: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| {
        let all = RUNTIMES;
        let chosen: Vec<&'static str> = match std::env::var("HTTPLITE_TEST_RUNTIMES") {
            Ok(list) => all
                .iter()
                .copied()
                .filter(|rt| list.split(',').any(|x| x.trim() == *rt))
                .collect(),
            Err(_) => all.to_vec(),
        };
        // A misspelt filter would otherwise turn every test into a pass.
        assert!(
            !chosen.is_empty(),
            "HTTPLITE_TEST_RUNTIMES selects no runtime of {all:?}"
        );
        chosen
    })
}

/// Whether the kernel has `openat2(2)` (Linux 5.6 and later), which the
/// static root resolves paths with; without it, a fallback canonicalises
/// them first (and a symlink is then typed by its target's name).
pub fn kernel_has_openat2() -> bool {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: 0,
    };
    // SAFETY: `how` and the path are valid for the call; a returned fd is
    // closed at once.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c".".as_ptr(),
            &how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: `fd` was just opened and is ours.
        unsafe { libc::close(fd as i32) };
        return true;
    }
    io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS)
}

/// Whether `runtime` is `fork` (a process per connection: no `--workers`,
/// the blocking pool in a jobs process of its own).
pub fn is_fork(runtime: &str) -> bool {
    runtime == "fork"
}

/// Read and write timeout of every test socket.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may take to print its start-up line.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a stopped server may take to exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head the parser accepts.
const MAX_HEAD: usize = 1 << 20;
/// Largest response body the parser accepts.
const MAX_BODY: usize = 256 << 20;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, once per test process
/// (the load tests open thousands of sockets; the server inherits it).
pub fn raise_fd_limit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            // SAFETY: `lim` is a valid rlimit; raising the soft limit up to
            // the hard one is always permitted.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        }
    });
}

/// Sets the soft and hard `RLIMIT_NOFILE` of process `pid`.
pub fn set_fd_limit(pid: u32, limit: u64) {
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: `lim` is a valid rlimit read by the call; a null old-limit
    // pointer is allowed; `pid` is our own child, not yet waited for.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &lim,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit({pid}): {}", io::Error::last_os_error());
}

/// `len` deterministic, non-repeating bytes (xorshift): file contents in
/// which a misplaced or missing chunk cannot go unnoticed, and not sparse.
pub fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The soft `RLIMIT_NOFILE` of this process.
pub fn fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    lim.rlim_cur
}

/// Serialises the heavy tests (thousands of connections or jobs: load,
/// accept storm, jobs, the SIGTERM-under-load and 100-in-flight shutdown
/// tests, the many-slow-clients timeout test), so that on a two-core
/// runner two of them never run at once. It does not shield the other,
/// light tests from them: those must not depend on speed (waits are on
/// events with generous bounds, and speed goals live in the benchmarks).
/// Hold the guard for the whole test.
pub fn heavy_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Polls `cond` every `every` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, every: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(every);
    }
}

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// A running `httplite`, stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    status: Option<ExitStatus>,
    addr: SocketAddr,
    /// The first TCP admin listener's address, if it has one.
    admin: Option<SocketAddr>,
    https: bool,
    runtime: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// One message per pipe-draining thread when it reaches end-of-file.
    drained: mpsc::Receiver<()>,
}

impl Server {
    /// Starts the server on `runtime` with `--bind 127.0.0.1:0 --workers 2`
    /// (no `--workers` for `fork`) plus `args`, with the test endpoints (`/_httplite/panic`) enabled.
    /// A server with a `--root` also gets `--admin 127.0.0.1:0` (unless
    /// `args` name an `--admin`): its stats are read there
    /// ([`Server::stats`], [`Server::connect_admin`]).
    pub fn start(runtime: &str, args: &[&str]) -> Server {
        Server::spawn(runtime, args, true, false)
    }

    /// Like [`Server::start`], with stdin a pipe ([`Server::take_stdin`]).
    pub fn start_with_stdin(runtime: &str, args: &[&str]) -> Server {
        Server::spawn(runtime, args, true, true)
    }

    /// The write end of the server's stdin, if it was started with one.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.as_mut()?.stdin.take()
    }

    /// Like [`Server::start`], without `HTTPLITE_TEST_ENDPOINTS`.
    pub fn start_without_test_endpoints(runtime: &str, args: &[&str]) -> Server {
        Server::spawn(runtime, args, false, false)
    }

    /// Like [`Server::start`], with `setup` given the command before it
    /// runs (stdio is set after it): to pass fds, or to run the binary
    /// through a wrapper ([`rebuild_command`]).
    pub fn start_with(
        runtime: &str,
        args: &[&str],
        setup: impl FnOnce(Command) -> Command,
    ) -> Server {
        Server::spawn_with(runtime, args, true, false, setup)
    }

    fn spawn(runtime: &str, args: &[&str], test_endpoints: bool, stdin: bool) -> Server {
        Server::spawn_with(runtime, args, test_endpoints, stdin, |c| c)
    }

    fn spawn_with(
        runtime: &str,
        args: &[&str],
        test_endpoints: bool,
        stdin: bool,
        setup: impl FnOnce(Command) -> Command,
    ) -> Server {
        raise_fd_limit();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_httplite"));
        cmd.args(["--bind", "127.0.0.1:0", "--runtime", runtime]);
        // `fork` refuses --workers (one thread in the parent, a process
        // per connection): the other designs get two workers.
        if !is_fork(runtime) {
            cmd.args(["--workers", "2"]);
        }
        // In connection mode a pool thread keeps its keep-alive connection
        // while idle, so a test that holds N connections at once needs N
        // threads (the head-of-line effect, docs/threadpool-and-fork.md);
        // such tests hold up to ~100. Event mode, the default, parks idle
        // connections and runs on the default size.
        let connection_mode = args
            .windows(2)
            .any(|w| w == ["--threadpool-mode", "connection"]);
        if runtime == "threadpool" && connection_mode && !args.contains(&"--threadpool-size") {
            cmd.args(["--threadpool-size", "128"]);
        }
        cmd.args(args);
        if args.contains(&"--root") && !args.contains(&"--admin") {
            cmd.args(["--admin", "127.0.0.1:0"]);
        }
        // The suite over TLS: the same tests, every server HTTPS.
        if tls_mode() && !args.contains(&"--tls-cert") {
            let (_, issued) = Pki::shared();
            cmd.arg("--tls-cert").arg(&issued.cert);
            cmd.arg("--tls-key").arg(&issued.key);
        }
        // The default SCHED_IDLE pool runs only on CPU time nothing else
        // wants; beside other busy tests on two cores that can be none for
        // seconds. These tests check what the pool does, not its priority.
        if !args.contains(&"--pool-priority") {
            cmd.args(["--pool-priority", "normal"]);
        }
        cmd.env("RUST_BACKTRACE", "0");
        if test_endpoints {
            cmd.env("HTTPLITE_TEST_ENDPOINTS", "1");
        } else {
            cmd.env_remove("HTTPLITE_TEST_ENDPOINTS");
        }
        let mut cmd = setup(cmd);
        cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_retrying_busy(&mut cmd).expect("cannot start the httplite binary");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));

        // Drain both pipes for the life of the process, so that it never
        // blocks on a full pipe; the first stdout line goes to `first_tx`.
        let (first_tx, first_rx) = mpsc::channel::<String>();
        let (drained_tx, drained) = mpsc::channel::<()>();
        let out = child.stdout.take().expect("stdout is piped");
        let out_buf = stdout.clone();
        let out_drained = drained_tx.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            let mut first = Some(first_tx);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        out_buf.lock().unwrap().extend_from_slice(line.as_bytes());
                        if let Some(tx) = first.take() {
                            let _ = tx.send(line.clone());
                        }
                    }
                }
            }
            let _ = out_drained.send(());
        });
        let err = child.stderr.take().expect("stderr is piped");
        let err_buf = stderr.clone();
        std::thread::spawn(move || {
            let mut err = err;
            let mut chunk = [0u8; 4096];
            loop {
                match err.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => err_buf.lock().unwrap().extend_from_slice(&chunk[..n]),
                }
            }
            let _ = drained_tx.send(());
        });

        let mut server = Server {
            child: Some(child),
            status: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
            https: false,
            runtime: runtime.to_string(),
            stdout,
            stderr,
            drained,
        };
        let line = match first_rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let status = server.wait_exit(Duration::from_millis(500));
                panic!(
                    "httplite --runtime {runtime} {args:?} printed no start-up line \
                     (exit status {status:?}); stderr:\n{}",
                    server.stderr()
                );
            }
        };
        (server.addr, server.https) = parse_listening_line(&line)
            .unwrap_or_else(|| panic!("unexpected start-up line: {line:?}"));
        server.admin = parse_admin(&line);
        server
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its first TCP admin listener (`--admin`), if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// A new plain connection to the admin listener (see [`Server::start`]):
    /// plain HTTP even when the suite runs over TLS (the admin listener
    /// has no certificate unless `--admin-tls-cert` is given).
    pub fn connect_admin(&self) -> Client {
        let addr = self.admin.expect("the server has no TCP --admin listener");
        Client::try_connect_plain(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    /// One `GET` on the admin listener (the public one when there is
    /// none), on a fresh connection that asks to be closed.
    pub fn admin_get(&self, path: &str) -> Response {
        let mut c = match self.admin {
            Some(_) => self.connect_admin(),
            None => self.connect(),
        };
        c.send(&get_close(path));
        c.read_response()
    }

    /// The runtime it was started with.
    pub fn runtime(&self) -> &str {
        &self.runtime
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server was reaped").id()
    }

    /// `http://127.0.0.1:PORT{path}` (`https://` if the server is HTTPS).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Whether the server said it serves HTTPS.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// A new raw connection (TLS, trusting the shared test CA, if the
    /// server is HTTPS).
    pub fn connect(&self) -> Client {
        if self.https {
            return Client::try_connect_tls(self.addr, &shared_client_config())
                .unwrap_or_else(|e| panic!("connect {}: {e}", self.addr));
        }
        Client::connect(self.addr)
    }

    /// One `GET` on a fresh connection that asks to be closed.
    pub fn get(&self, path: &str) -> Response {
        let mut c = self.connect();
        c.send(&get_close(path));
        c.read_response()
    }

    /// The `/_httplite/stats` document (one request on a fresh connection,
    /// to the admin listener when there is one).
    pub fn stats(&self) -> Stats {
        let r = self.admin_get("/_httplite/stats");
        assert_eq!(r.status, 200, "stats: {r:?}");
        Stats(r.text())
    }

    /// Number of open fds of the server process (`/proc/PID/fd`).
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("cannot read /proc/PID/fd")
            .count()
    }

    /// Sends `sig` to the server (by its PID; it is our unreaped child, so
    /// the PID cannot have been reused).
    pub fn signal(&self, sig: libc::c_int) {
        if self.status.is_some() {
            return;
        }
        let pid = self.pid() as libc::pid_t;
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our
        // own child, not yet waited for.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig}): {}", io::Error::last_os_error());
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.status {
            return Some(s);
        }
        let child = self.child.as_mut()?;
        let end = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(s)) => {
                    self.status = Some(s);
                    // The process is gone, but its last output may still be
                    // in the pipes: let both drain before anyone reads them.
                    for _ in 0..2 {
                        let _ = self.drained.recv_timeout(Duration::from_secs(2));
                    }
                    return Some(s);
                }
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
                _ => return None,
            }
        }
    }

    /// The exit status if the process has exited, without waiting for its
    /// output pipes (which a process it started may still hold open).
    pub fn has_exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGTERM, then waits (bounded) for the exit status; panics if the
    /// process does not exit in time.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        match self.wait_exit(STOP_TIMEOUT) {
            Some(s) => s,
            None => panic!("httplite did not exit within {STOP_TIMEOUT:?} of SIGTERM"),
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Everything the server wrote to stdout so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let pid = child.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our
        // own child, not yet waited for.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        if self.wait_exit(Duration::from_secs(5)).is_some() {
            return;
        }
        // Last resort.
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A new command running `program` with `prefix` then `cmd`'s arguments,
/// and `cmd`'s environment changes: a copy of the binary, or the binary
/// through `sh -c SCRIPT` (then `prefix` ends with the binary, `$0`).
pub fn rebuild_command(
    cmd: &Command,
    program: &std::ffi::OsStr,
    prefix: &[&std::ffi::OsStr],
) -> Command {
    let mut new = Command::new(program);
    new.args(prefix);
    new.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => new.env(k, v),
            None => new.env_remove(k),
        };
    }
    new
}

/// `httplite listening on http://127.0.0.1:PORT (...)` → the address, and
/// whether the scheme is `https`.
fn parse_listening_line(line: &str) -> Option<(SocketAddr, bool)> {
    let rest = line.strip_prefix("httplite listening on ")?;
    let (https, rest) = match rest.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, rest.strip_prefix("http://")?),
    };
    let addr = rest.split([' ', ',', ';', '\n']).next()?;
    Some((addr.parse().ok()?, https))
}

/// `...; admin on http://127.0.0.1:PORT, unix:/path (...)` → the first
/// TCP admin address.
fn parse_admin(line: &str) -> Option<SocketAddr> {
    let rest = line.split_once("; admin on ")?.1;
    let rest = rest.split(" (").next()?;
    rest.split(", ")
        .find_map(|u| {
            u.strip_prefix("http://")
                .or_else(|| u.strip_prefix("https://"))
        })
        .and_then(|a| a.parse().ok())
}

/// For a test that cannot apply to `fork` because it needs `flag` (a
/// thread in the parent, or the blocking pool): asserts what `fork` does
/// instead, which is to refuse `args` at start-up with one line naming
/// `flag` and exit status 2 (docs/threadpool-and-fork.md).
pub fn assert_fork_refuses(args: &[&str], flag: &str) {
    let mut all = vec!["--runtime", "fork", "--bind", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let out = run_binary(&all, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "fork {args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "fork {args:?}: {stderr}");
    assert!(
        stderr.contains(&format!("--runtime fork does not take {flag}")),
        "fork {args:?}: {stderr}"
    );
}

/// Runs the binary with `args` to completion (bounded: killed after
/// `timeout`), for the start-up error tests.
pub fn run_binary(args: &[&str], timeout: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_httplite"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the httplite binary");
    let end = Instant::now() + timeout;
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => return child.wait_with_output().expect("wait_with_output"),
            None if Instant::now() >= end => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("wait_with_output");
                panic!(
                    "httplite {args:?} still running after {timeout:?}; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

// ---------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------

/// The `/_httplite/stats` JSON document.
#[derive(Debug, Clone)]
pub struct Stats(pub String);

impl Stats {
    /// The number at a dotted path such as `"timeouts.header"`: each
    /// segment is looked up after the previous one, which is enough for this
    /// flat, fixed-order document (and never reaches into `workers`).
    pub fn get(&self, path: &str) -> u64 {
        self.try_get(path)
            .unwrap_or_else(|| panic!("stats has no number at {path}: {}", self.0))
    }

    /// Like [`Stats::get`], `None` if absent.
    pub fn try_get(&self, path: &str) -> Option<u64> {
        let s = &self.0;
        let mut pos = 0;
        for seg in path.split('.') {
            let key = format!("\"{seg}\":");
            pos += s[pos..].find(&key)? + key.len();
        }
        leading_number(&s[pos..])
    }

    /// The sum of every number keyed `key` anywhere in the document (for
    /// per-worker counters such as `"epoll_waits"`).
    pub fn sum(&self, key: &str) -> u64 {
        let pat = format!("\"{key}\":");
        self.0
            .match_indices(&pat)
            .map(|(i, _)| {
                leading_number(&self.0[i + pat.len()..])
                    .unwrap_or_else(|| panic!("\"{key}\" is not a number in {}", self.0))
            })
            .sum()
    }

    /// Whether the document has `"key":` somewhere.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains(&format!("\"{key}\":"))
    }
}

/// The unsigned number at the start of `s` (after any spaces), as a JSON
/// value in the stats document.
fn leading_number(s: &str) -> Option<u64> {
    let digits: String = s
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/// `GET path HTTP/1.1` (keep-alive).
pub fn get_req(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}

/// `GET path HTTP/1.1` with `Connection: close`.
pub fn get_close(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").into_bytes()
}

/// `POST /_httplite/echo` with a `Content-Length` body.
pub fn echo_req(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /_httplite/echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

// ---------------------------------------------------------------------------
// Raw client and response parser
// ---------------------------------------------------------------------------

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
    /// Whether the body was chunked on the wire.
    pub chunked: bool,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many headers are named `name`.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// Whether `Connection` lists `close`.
    pub fn says_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }

    /// The body as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw HTTP/1.1 client connection with its own read buffer, so that
/// pipelined responses parse one after the other.
#[derive(Debug)]
pub struct Client {
    stream: Stream,
    buf: Vec<u8>,
}

/// The client's connection: plain TCP, or TLS over it (see `pki`).
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

impl Client {
    /// Connects (bounded) and sets read and write timeouts; over TLS when
    /// the suite runs in TLS mode (`HTTPLITE_TEST_TLS=1`).
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    /// Like [`Client::connect`], returning the error.
    pub fn try_connect(addr: SocketAddr) -> io::Result<Client> {
        if tls_mode() {
            return Client::try_connect_tls(addr, &shared_client_config());
        }
        Client::try_connect_plain(addr)
    }

    /// A cleartext connection whatever the mode (raw bytes to a TLS port).
    pub fn try_connect_plain(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Client {
            stream: Stream::Plain(stream),
            buf: Vec::new(),
        })
    }

    /// A connection on `sock`, already connected (raw bytes such as a
    /// PROXY header may have been sent on it), over TLS when the suite
    /// runs in TLS mode.
    pub fn from_tcp(sock: TcpStream) -> Client {
        let stream = match tls_mode() {
            true => Stream::Tls(Box::new(
                tls_over(sock, &shared_client_config()).expect("start TLS"),
            )),
            false => {
                sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                sock.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                Stream::Plain(sock)
            }
        };
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A TLS connection with `config`, whatever the mode.
    pub fn try_connect_tls(
        addr: SocketAddr,
        config: &Arc<rustls::ClientConfig>,
    ) -> io::Result<Client> {
        Ok(Client {
            stream: Stream::Tls(Box::new(tls_connect(addr, config)?)),
            buf: Vec::new(),
        })
    }

    /// Completes the TLS handshake now (a rustls stream otherwise does it
    /// with the first read or write); nothing for a plain connection.
    pub fn complete_handshake(&mut self) -> io::Result<()> {
        if let Stream::Tls(s) = &mut self.stream {
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock)?;
            }
        }
        Ok(())
    }

    /// The TLS session, if the connection has one.
    pub fn tls(&self) -> Option<&rustls::ClientConnection> {
        match &self.stream {
            Stream::Plain(_) => None,
            Stream::Tls(s) => Some(&s.conn),
        }
    }

    /// The socket (under TLS, the TCP socket the records travel on).
    pub fn stream(&self) -> &TcpStream {
        self.stream.tcp()
    }

    /// Writes all of `bytes` (panics on error).
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("write to {:?}: {e}", self.stream.tcp().peer_addr()));
    }

    /// Writes all of `bytes`.
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a keep-alive `GET` and reads its response.
    pub fn get(&mut self, path: &str) -> Response {
        self.send(&get_req(path));
        self.read_response()
    }

    /// Half-closes the client's sending side.
    pub fn shutdown_write(&mut self) {
        if let Stream::Tls(s) = &mut self.stream {
            // TLS's end of stream first, then TCP's.
            s.conn.send_close_notify();
            let _ = s.flush();
        }
        self.stream
            .tcp()
            .shutdown(Shutdown::Write)
            .expect("shutdown(Write)");
    }

    /// Reads the next response to a request that may have a body (panics on
    /// error). Interim (1xx) responses are returned like any other.
    pub fn read_response(&mut self) -> Response {
        self.try_read_response(false)
            .unwrap_or_else(|e| panic!("reading a response: {e}; buffered: {:?}", self.buffered()))
    }

    /// Reads the next response to a `HEAD` (no body whatever the headers say).
    pub fn read_head_response(&mut self) -> Response {
        self.try_read_response(true)
            .unwrap_or_else(|e| panic!("reading a HEAD response: {e}"))
    }

    /// The next response, if it comes within `d` (instead of the usual
    /// [`IO_TIMEOUT`]).
    pub fn answer_within(&mut self, d: Duration) -> io::Result<Response> {
        self.stream().set_read_timeout(Some(d))?;
        let r = self.try_read_response(false);
        self.stream().set_read_timeout(Some(IO_TIMEOUT))?;
        r
    }

    /// Reads the next response; `head_only` for the answer to a `HEAD`.
    pub fn try_read_response(&mut self, head_only: bool) -> io::Result<Response> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("response head too large"));
            }
            self.fill()?;
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec())
            .map_err(|_| invalid("response head is not UTF-8"))?;
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        if !version.starts_with("HTTP/1.") {
            return Err(invalid(&format!("bad status line {status_line:?}")));
        }
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(&format!("bad status line {status_line:?}")))?;
        let reason = parts.next().unwrap_or_default().to_string();
        let mut headers = Vec::new();
        for line in lines {
            let (n, v) = line
                .split_once(':')
                .ok_or_else(|| invalid(&format!("bad header line {line:?}")))?;
            headers.push((n.to_string(), v.trim().to_string()));
        }
        let mut resp = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            chunked: false,
        };
        if head_only || status < 200 || status == 204 || status == 304 {
            return Ok(resp);
        }
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if chunked {
            resp.chunked = true;
            resp.body = self.read_chunked()?;
        } else if let Some(cl) = resp.header("content-length") {
            let n: usize = cl
                .parse()
                .map_err(|_| invalid(&format!("bad Content-Length {cl:?}")))?;
            if n > MAX_BODY {
                return Err(invalid("body too large for the test parser"));
            }
            resp.body = self.read_exact_buf(n)?;
        } else {
            // Delimited by end of stream.
            loop {
                match self.fill() {
                    Ok(()) if self.buf.len() <= MAX_BODY => {}
                    Ok(()) => return Err(invalid("body too large for the test parser")),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            }
            resp.body = std::mem::take(&mut self.buf);
        }
        Ok(resp)
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size_str = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_str, 16)
                .map_err(|_| invalid(&format!("bad chunk size line {line:?}")))?;
            if size == 0 {
                // Trailers, up to the empty line.
                for _ in 0..1000 {
                    if self.read_line()?.is_empty() {
                        return Ok(body);
                    }
                }
                return Err(invalid("too many trailer lines"));
            }
            if body.len() + size > MAX_BODY {
                return Err(invalid("body too large for the test parser"));
            }
            body.extend_from_slice(&self.read_exact_buf(size)?);
            if self.read_exact_buf(2)? != b"\r\n" {
                return Err(invalid("chunk not followed by CRLF"));
            }
        }
    }

    fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("line too long"));
            }
            self.fill()?;
        }
    }

    fn read_exact_buf(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            self.fill()?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// One `read` into the buffer; end of stream is `UnexpectedEof`.
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// The next `n` bytes the server sends, raw (what follows a `101`).
    pub fn read_bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill()
                .unwrap_or_else(|e| panic!("reading {n} bytes: {e}; got {}", self.buf.len()));
        }
        self.buf.drain(..n).collect()
    }

    /// Bytes received but not parsed yet.
    pub fn buffered(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }

    /// Reads until the server closes (EOF or reset) or `within` passes;
    /// returns what arrived, or `None` if the connection is still open.
    pub fn wait_closed(&mut self, within: Duration) -> Option<Vec<u8>> {
        let end = Instant::now() + within;
        let mut extra = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.buf = extra;
                return None;
            }
            self.stream
                .tcp()
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("set_read_timeout");
            let r = self.stream.read(&mut chunk);
            match r {
                Ok(0) => break,
                Ok(n) => {
                    extra.extend_from_slice(&chunk[..n]);
                    if extra.len() > MAX_BODY {
                        panic!("server keeps sending; expected it to close");
                    }
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Reset or any other error: the connection is gone.
                Err(_) => break,
            }
        }
        self.stream
            .tcp()
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        Some(extra)
    }

    /// Asserts that the server closes the connection within `within`
    /// without sending anything more.
    pub fn expect_closed(&mut self, within: Duration) {
        match self.wait_closed(within) {
            Some(extra) => assert!(
                extra.is_empty(),
                "expected the connection closed with nothing more, got {:?}",
                String::from_utf8_lossy(&extra)
            ),
            None => {
                panic!("connection still open after {within:?}; expected the server to close it")
            }
        }
    }

    /// Asserts that nothing arrives and the connection stays open for `d`.
    pub fn expect_open(&mut self, d: Duration) {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes: {:?}",
            self.buffered()
        );
        self.stream
            .tcp()
            .set_read_timeout(Some(d))
            .expect("set_read_timeout");
        let mut b = [0u8; 1024];
        let r = self.stream.read(&mut b);
        self.stream
            .tcp()
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        match r {
            Err(e) if is_timeout(&e) => {}
            Ok(0) => panic!("connection closed; expected it to stay open for {d:?}"),
            Ok(n) => panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&b[..n])),
            Err(e) => panic!("connection failed ({e}); expected it to stay open for {d:?}"),
        }
    }

    /// `/_httplite/stats` asked on this connection. The same document as
    /// [`Server::stats`] on every design but `fork`, where the file
    /// cache's counters are those of the child answering (the cache lives
    /// in each child), so a test that reads them asks its own connection.
    pub fn stats(&mut self) -> Stats {
        Stats(self.get("/_httplite/stats").text())
    }

    /// Closes with a reset (SO_LINGER 0) instead of a FIN.
    pub fn close_with_reset(self) {
        set_linger_zero(self.stream.tcp());
        drop(self);
    }
}

/// Sets SO_LINGER {on, 0}: closing the socket then sends a reset.
pub fn set_linger_zero(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let lg = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the fd is a valid open socket owned by `stream`; `lg` is a
    // properly initialised linger struct whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lg as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", io::Error::last_os_error());
}

/// Whether `e` is a read/write timeout.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// First index of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// Temporary directories
// ---------------------------------------------------------------------------

/// A directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty, uniquely named directory.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("httplite-test-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes a file (creating parent directories) and returns its path.
    pub fn write(&self, rel: &str, contents: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create dirs");
        }
        std::fs::write(&p, contents).expect("write file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------
// curl
// ---------------------------------------------------------------------------

/// The `curl` binary on PATH. Panics (fails the test) if there is none:
/// the curl tests must never be skipped silently.
pub fn curl_path() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join("curl");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "`curl` is not on PATH: the curl integration tests need the real curl binary \
         (scripts/test.sh installs it; on Debian/Ubuntu: apt-get install curl)"
    );
}

/// `curl`, trusting the shared test CA when the suite runs over TLS.
pub fn curl_command() -> Command {
    let mut cmd = Command::new(curl_path());
    if tls_mode() {
        cmd.arg("--cacert").arg(Pki::shared().0.ca());
    }
    cmd
}

/// Runs `curl -sS --max-time 10 ARGS` (bounded by curl's own timeout).
pub fn curl(args: &[&str]) -> Output {
    let out = curl_command()
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run curl");
    assert!(
        out.status.success(),
        "curl {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Spawns `cmd`, retrying while exec says `ETXTBSY`. Tests that copy the
/// binary (the upgrade tests) write an executable, and a `fork` by another
/// test thread in that instant inherits the write fd until its own exec:
/// the file is "busy" for that moment (the same race cargo retries).
fn spawn_retrying_busy(cmd: &mut Command) -> io::Result<Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}
