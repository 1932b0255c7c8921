//! Start-up: the listening line, and usage errors (bad flags, unusable
//! `--root` or `--bind`) giving one line on stderr and exit code 2.

use std::time::Duration;

use crate::harness::{Client, Server, TempDir, is_fork, run_binary, runtimes, wait_until};

/// Runs the binary; `Err` unless it exits with code 2, prints exactly one
/// non-empty line on stderr mentioning `mention`, and nothing on stdout.
fn usage_error(args: &[&str], mention: &str) -> Result<(), String> {
    let out = run_binary(args, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) {
        return Err(format!(
            "httplite {args:?}: exit status {}, expected 2; stderr: {stderr}",
            out.status
        ));
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != 1 {
        return Err(format!(
            "httplite {args:?}: expected a one-line error on stderr, got {} lines: {stderr:?}",
            lines.len()
        ));
    }
    if !lines[0].contains(mention) {
        return Err(format!(
            "httplite {args:?}: the error does not mention {mention:?}: {stderr:?}"
        ));
    }
    if !out.stdout.is_empty() {
        return Err(format!(
            "httplite {args:?}: stdout: {:?}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(())
}

/// Checks every case, then fails listing all that failed.
fn expect_usage_errors(cases: &[(&[&str], &str)]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(args, mention)| usage_error(args, mention).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} usage errors are wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn prints_the_listening_line() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let out = server.stdout();
        let line = out.lines().next().unwrap();
        assert!(
            line.starts_with(&format!("httplite listening on http://{} (", server.addr())),
            "[{rt}] {line}"
        );
        assert!(line.contains(&format!("runtime: {rt}")), "[{rt}] {line}");
        let workers = match crate::harness::is_fork(rt) {
            true => "processes: one per connection",
            false => "workers: 2",
        };
        assert!(line.contains(workers), "[{rt}] {line}");
        let mut server = server;
        let status = server.terminate();
        assert_eq!(status.code(), Some(0), "[{rt}] {}", server.stderr());
    }
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    expect_usage_errors(&[
        (&["--bogus"], "--bogus"),
        (&["--workers", "0"], "--workers"),
        (&["--workers", "many"], "--workers"),
        (&["--header-timeout", "5x"], "--header-timeout"),
        (&["--max-body", "lots"], "--max-body"),
        (&["--runtime", "quantum"], "--runtime"),
        (&["--bind", "not-an-address"], "--bind"),
    ]);
}

#[test]
fn unusable_root_exits_2_with_one_line() {
    let dir = TempDir::new("bad-root");
    let file = dir.write("file.txt", b"x");
    let missing = dir.path().join("missing");
    expect_usage_errors(&[
        (
            &["--bind", "127.0.0.1:0", "--root", missing.to_str().unwrap()],
            "--root",
        ),
        (
            &["--bind", "127.0.0.1:0", "--root", file.to_str().unwrap()],
            "--root",
        ),
    ]);
}

#[test]
fn unusable_bind_exits_2_with_one_line() {
    // A port already in use, and an address this host does not have.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    expect_usage_errors(&[
        (&["--bind", &addr], "--bind"),
        (&["--bind", "192.0.2.1:80"], "--bind"),
    ]);
}

#[test]
fn quiet_prints_nothing() {
    for rt in runtimes() {
        let (mut child, bind, up) = start_quiet(rt);
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
        // own child, not yet waited for.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        assert!(up, "[{rt}] --quiet server never accepted on {bind}");
        assert_eq!(out.status.code(), Some(0), "[{rt}] {out:?}");
        assert!(
            out.stdout.is_empty(),
            "[{rt}] --quiet printed {:?}",
            out.stdout
        );
    }
}

/// Starts `httplite --quiet` on a port just found free, and waits (bounded)
/// until it accepts there. With no start-up line to learn the port from, the
/// port is picked before the server binds it, so another test's connection
/// may take it in between: the server then exits with code 2, and we try
/// another port (bounded). Returns the child, its address, and whether it
/// came up.
fn start_quiet(rt: &str) -> (std::process::Child, String, bool) {
    for _ in 0..5 {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let bind = format!("127.0.0.1:{port}");
        let workers: &[&str] = if crate::harness::is_fork(rt) {
            &[] // refused: one thread, a process per connection
        } else {
            &["--workers", "1"]
        };
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_httplite"))
            .args(["--bind", &bind, "--runtime", rt, "--quiet"])
            .args(workers)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut exited = None;
        let settled =
            crate::harness::wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
                exited = child.try_wait().unwrap();
                exited.is_some() || std::net::TcpStream::connect(&bind).is_ok()
            });
        match exited {
            Some(status) if status.code() == Some(2) => continue,
            Some(_) => return (child, bind, false),
            None => return (child, bind, settled),
        }
    }
    panic!("[{rt}] five free ports were all taken before the server bound them");
}

/// A worker whose set-up fails (its ring or epoll cannot be created) stops
/// the start: the server exits with the reason instead of announcing itself
/// with a worker that never serves (whose reuseport listener would still
/// take its share of the connections).
#[test]
fn a_worker_that_fails_its_set_up_stops_the_start() {
    for &rt in runtimes().iter().filter(|rt| !is_fork(rt)) {
        for dispatch in ["acceptor", "reuseport"] {
            use std::process::{Command, Stdio};
            let mut child = Command::new(env!("CARGO_BIN_EXE_httplite"))
                .args(["--bind", "127.0.0.1:0", "--workers", "2"])
                .args(["--runtime", rt, "--dispatch", dispatch])
                .env("HTTPLITE_TEST_ENDPOINTS", "1")
                .env("HTTPLITE_TEST_FAIL_WORKER", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("cannot start the httplite binary");
            // A server that starts anyway never exits by itself: bounded.
            let exited = wait_until(Duration::from_secs(15), Duration::from_millis(10), || {
                child.try_wait().expect("try_wait").is_some()
            });
            if !exited {
                let _ = child.kill();
            }
            let out = child.wait_with_output().expect("wait_with_output");
            assert!(
                exited,
                "[{rt} {dispatch}] still running with a failed worker"
            );
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(2), "[{rt} {dispatch}] {stderr}");
            assert!(
                stderr.contains("worker 1 ended before it was ready"),
                "[{rt} {dispatch}] {stderr}"
            );
            assert!(!stdout.contains("listening"), "[{rt} {dispatch}] {stdout}");
        }
    }
}

/// A lone worker accepts from the listener itself unless told otherwise:
/// no acceptor thread (nor its hop for every new connection), and the
/// listening line says so. `--dispatch acceptor` still gets one.
#[test]
fn a_lone_worker_accepts_itself_unless_told_otherwise() {
    use std::io::BufRead;
    // Fork's parent accepts: it has no dispatch.
    for rt in runtimes().iter().filter(|rt| !is_fork(rt)) {
        let cases: [(&[&str], &str, bool); 2] = [
            (&[], "reuseport", false),
            (&["--dispatch", "acceptor"], "acceptor", true),
        ];
        for (extra, mode, has_acceptor) in cases {
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_httplite"))
                .args(["--bind", "127.0.0.1:0", "--runtime", rt, "--workers", "1"])
                .args(extra)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // Kept open until the exit: the server prints as it stops.
            let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            assert!(
                line.contains(&format!("dispatch: {mode}")),
                "[{rt} {extra:?}] {line}"
            );
            let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
                .unwrap()
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .collect();
            // Thread names are cut to 15 bytes: "dispatch-accept".
            let acceptor = threads.iter().any(|t| t.starts_with("dispatch-accept"));
            assert_eq!(acceptor, has_acceptor, "[{rt} {extra:?}] {threads:?}");
            let addr = line
                .split("http://")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("[{rt}] no address in {line}"));
            assert_eq!(Client::connect(addr).get("/nope").status, 404, "[{rt}]");
            // SAFETY: kill(2) on our own child's PID, which it still has
            // (it has not been waited for).
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            assert!(child.wait().unwrap().success(), "[{rt} {extra:?}]");
        }
    }
}
