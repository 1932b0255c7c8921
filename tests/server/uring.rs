//! What only `--runtime uring` has: its refusal of an io_uring the kernel
//! will not give us, and its trace lines. Everything else it shares
//! with the other runtimes runs in the rest of the suite (`uring` is in
//! [`crate::harness::RUNTIMES`]).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts the server with a seccomp filter that fails `io_uring_setup`
/// with `errno` (as a container's default profile does with EPERM, or an
/// old kernel with ENOSYS): one line naming the cause and the alternative,
/// exit 2, and no server started on another runtime.
#[cfg(target_arch = "x86_64")]
fn start_without_io_uring(errno: i32) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_httplite"));
    cmd.args(["--runtime", "uring", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only makes two prctl calls
    // on memory of its own (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || {
            let filter = [
                // A = the system call's number (seccomp_data.nr, offset 0).
                libc::BPF_STMT((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0),
                libc::BPF_JUMP(
                    (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    libc::SYS_io_uring_setup as u32,
                    0,
                    1,
                ),
                libc::BPF_STMT(
                    (libc::BPF_RET | libc::BPF_K) as u16,
                    libc::SECCOMP_RET_ERRNO | errno as u32,
                ),
                libc::BPF_STMT(
                    (libc::BPF_RET | libc::BPF_K) as u16,
                    libc::SECCOMP_RET_ALLOW,
                ),
            ];
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &raw const prog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("cannot start the httplite binary");
    // Bounded: a server that started anyway would never exit by itself.
    let pid = child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        // SAFETY: signalling our own child by its pid; if it has exited
        // and been reaped this fails harmlessly (ESRCH).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    });
    let out = child.wait_with_output().expect("wait_with_output");
    drop(killer);
    out
}

#[cfg(target_arch = "x86_64")]
#[test]
fn unavailable_io_uring_is_one_line_and_exit_2_never_a_fallback() {
    for (errno, cause) in [
        (libc::ENOSYS, "ENOSYS"),
        (libc::EPERM, "EPERM"),
        (libc::ENOMEM, "ENOMEM"),
    ] {
        let out = start_without_io_uring(errno);
        let err = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "[{cause}] {out:?}");
        assert!(err.contains(cause), "[{cause}] {err}");
        assert!(
            err.contains("use --runtime stackless instead"),
            "[{cause}] {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "[{cause}] {err}");
        // No other runtime took over.
        assert!(!stdout.contains("listening"), "[{cause}] {stdout}");
    }
}

/// One request's ring traffic: the connection's multishot recv armed once
/// (`sqe op=RECV ... MULTISHOT`), its CQE naming the ring buffer the bytes
/// are in with `MORE` (still armed), then the answer's `SEND` and its CQE.
#[cfg(feature = "trace")]
#[test]
fn uring_trace_shows_sqes_and_cqes_of_one_request() {
    use crate::harness::{Client, Server, wait_until};
    let server = Server::start("uring", &["--trace"]);
    let mut c = Client::connect(server.addr());
    assert_eq!(c.get("/_httplite/plaintext").status, 200);
    let mut trace = String::new();
    let seen = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        trace = server.stderr();
        trace.contains("GET /_httplite/plaintext HTTP/1.1 -> 200")
    });
    assert!(seen, "no http line in the trace:\n{trace}");
    let fd: u32 = trace
        .split("http     fd=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no fd in the http line:\n{trace}"));
    // The answer's SEND follows the `http` line (the line is written when
    // the answer is encoded): wait for each line as it comes.
    let line = |needle: &str| {
        let mut found = None;
        let mut last = String::new();
        wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
            last = server.stderr();
            found = last
                .lines()
                .find(|l| l.contains(needle))
                .map(str::to_string);
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("no {needle:?} in:\n{last}"))
    };
    let recv = line(&format!("op=RECV fd={fd} "));
    assert!(recv.contains("MULTISHOT"), "{recv}");
    let ud = recv
        .split("user_data=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no user_data in {recv:?}"));
    let cqe = line(&format!("user_data={ud} res="));
    assert!(cqe.contains("MORE") && cqe.contains("BUFFER="), "{cqe}");
    let send = line(&format!("op=SEND fd={fd} "));
    let sud = send
        .split("user_data=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no user_data in {send:?}"));
    let sent = line(&format!("user_data={sud} res="));
    assert!(!sent.contains("res=-"), "the send failed: {sent}");
    // Order: recv armed, bytes in, answer out.
    let trace = server.stderr();
    let at = |l: &str| trace.find(l).unwrap();
    assert!(
        at(&recv) < at(&cqe) && at(&cqe) < at(&send) && at(&send) < at(&sent),
        "{trace}"
    );
}

/// The ring's `sqe`/`cqe`/`enter` lines are written like every other
/// layer's: the same columns (seconds, thread, kind, details) and the same
/// per-thread `--trace-rate` budget, the excess reported in a `suppressed`
/// line.
#[cfg(feature = "trace")]
#[test]
fn uring_trace_lines_share_the_reactor_format_and_rate_limit() {
    use crate::harness::{Client, Server, get_req, wait_until};
    let server = Server::start("uring", &["--trace", "--trace-rate", "5"]);
    let mut c = Client::connect(server.addr());
    // Each request is several ring steps (CQEs of the recv and the send,
    // the send's SQE, enters): hundreds of lines unlimited.
    for _ in 0..50 {
        c.send(&get_req("/_httplite/plaintext"));
        assert_eq!(c.read_response().status, 200);
    }
    // The report comes with the first line of a later second: keep the
    // worker busy until it shows up.
    let mut trace = String::new();
    let reported = wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
        assert_eq!(c.get("/_httplite/plaintext").status, 200);
        trace = server.stderr();
        trace.contains(" suppressed ")
    });
    assert!(reported, "no suppressed line:\n{trace}");
    let kind = |l: &str| l.split_whitespace().nth(2).map(str::to_owned);
    let ring: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("op=") || l.contains("user_data=") || l.contains("submitted="))
        .collect();
    assert!(!ring.is_empty(), "no ring line:\n{trace}");
    // 50 requests make hundreds of ring steps; at 5 lines a second per
    // worker, a few seconds' worth print.
    assert!(
        ring.len() < 100,
        "{} ring lines printed:\n{trace}",
        ring.len()
    );
    for line in &ring {
        let mut cols = line.split_whitespace();
        let secs = cols.next().and_then(|t| t.parse::<f64>().ok());
        let label = cols.next().unwrap_or_default();
        assert!(
            secs.is_some() && label.starts_with('w'),
            "not the reactor's columns: {line:?}"
        );
        assert!(
            matches!(kind(line).as_deref(), Some("sqe" | "cqe" | "enter")),
            "{line:?}"
        );
    }
}
