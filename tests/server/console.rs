//! The operator console: `--console` reads commands from a piped stdin.

use std::io::Write as _;
use std::time::Duration;

use crate::harness::{Server, is_fork, runtimes, wait_until};

/// Waits (bounded) until the server's stdout contains `needle`.
fn wait_for_output(server: &Server, needle: &str) -> String {
    let found = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
        server.stdout().contains(needle)
    });
    let out = server.stdout();
    assert!(
        found,
        "no {needle:?} on stdout:\n{out}\nstderr:\n{}",
        server.stderr()
    );
    out
}

/// `workers` on a design with workers (under fork, one line says why
/// there are none, and `upgrade` one why it is not done).
fn console_workers(server: &Server, stdin: &mut impl std::io::Write, rt: &str) {
    if is_fork(rt) {
        stdin.write_all(b"workers\n").unwrap();
        wait_for_output(server, "workers: none under --runtime fork");
        return;
    }
    stdin.write_all(b"workers\n").unwrap();
    wait_for_output(
        server,
        "worker       open  connections     requests    queue",
    );
}

/// `jobs`, once a wordcount job was submitted (under fork, the parent
/// asks the jobs process).
fn console_jobs(server: &Server, stdin: &mut impl std::io::Write, rt: &str) {
    stdin.write_all(b"jobs\n").unwrap();
    wait_for_output(server, "most recent");
    // The table's row for the job submitted above, once it has run: each
    // `jobs` prints a snapshot, so ask again until one shows it done
    // (on a loaded machine the first may still say queued).
    let done = wait_until(Duration::from_secs(10), Duration::from_millis(200), || {
        if server.stdout().contains("wordcount    done") {
            return true;
        }
        stdin.write_all(b"jobs\n").unwrap();
        false
    });
    assert!(
        done,
        "{rt}: the job never showed done:\n{}",
        server.stdout()
    );
}

#[test]
fn commands_answer_and_quit_shuts_down_gracefully() {
    for rt in runtimes() {
        let mut server = Server::start_with_stdin(rt, &["--console"]);
        let mut stdin = server.take_stdin().expect("piped stdin");
        wait_for_output(&server, "console: reading commands");
        // Some traffic, so that the tables have numbers in them.
        let mut client = server.connect();
        assert_eq!(client.get("/_httplite/plaintext").status, 200);
        client.send(b"POST /_httplite/jobs?type=wordcount HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\na b");
        assert_eq!(client.read_response().status, 202, "{rt}");

        stdin.write_all(b"help\n").unwrap();
        wait_for_output(&server, "quit     graceful shutdown");
        stdin.write_all(b"stats\n").unwrap();
        let out = wait_for_output(&server, "blocking pool");
        let requests = out
            .lines()
            .find(|l| l.trim_start().starts_with("requests"))
            .expect("a requests row");
        // The row's last column is the count: exactly 2 (not 12 or 102).
        assert_eq!(
            requests.split_whitespace().last(),
            Some("2"),
            "{rt}: {requests:?}"
        );
        console_workers(&server, &mut stdin, rt);
        console_jobs(&server, &mut stdin, rt);
        stdin.write_all(b"frobnicate\n").unwrap();
        wait_for_output(
            &server,
            "unknown command \"frobnicate\": try stats, workers, jobs, reload, reopen, upgrade, quit or help",
        );
        // `reload` is for the TLS certificate (tests/server/tls.rs).
        stdin.write_all(b"reload\n").unwrap();
        if server.is_https() {
            wait_for_output(&server, "TLS certificate reloaded");
        } else {
            wait_for_output(&server, "reload: nothing to reload (no --tls-cert)");
        }

        stdin.write_all(b"quit\n").unwrap();
        wait_for_output(&server, "shutting down");
        let status = server.wait_exit(Duration::from_secs(15));
        assert_eq!(
            status.map(|s| s.code()),
            Some(Some(0)),
            "{rt}: {}",
            server.stderr()
        );
        assert!(server.stdout().contains("shut down cleanly"), "{rt}");
    }
}

#[test]
fn closed_stdin_does_not_stop_the_server() {
    for rt in runtimes() {
        let mut server = Server::start_with_stdin(rt, &["--console"]);
        let stdin = server.take_stdin().expect("piped stdin");
        wait_for_output(&server, "console: reading commands");
        drop(stdin);
        wait_for_output(&server, "console: end of input; the server carries on");
        assert_eq!(
            server.get("/_httplite/plaintext").text(),
            "Hello, World!",
            "{rt}"
        );
        assert!(
            server.wait_exit(Duration::from_millis(200)).is_none(),
            "{rt}: still running"
        );
        let status = server.terminate();
        assert_eq!(status.code(), Some(0), "{rt}");
    }
}

#[test]
fn a_console_on_dev_null_reads_end_of_input_and_serves_on() {
    // stdin is /dev/null here, which epoll cannot watch: the console reads it
    // the blocking way (it never waits) and gets end of input at once. The
    // fork parent's `poll` sees it readable, and reads the end at once.
    for rt in ["stackless", "fork"] {
        let mut server = Server::start(rt, &["--console"]);
        wait_for_output(&server, "console: end of input");
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "{rt}");
        assert_eq!(server.terminate().code(), Some(0), "{rt}");
    }
}

#[test]
fn stdin_is_back_in_blocking_mode_after_quit() {
    use std::os::fd::AsRawFd;
    use std::process::{Command, Stdio};
    let nonblocking = |fd: i32| {
        // SAFETY: F_GETFL on a descriptor we own; no memory is passed.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert!(flags >= 0, "fcntl: {}", std::io::Error::last_os_error());
        flags & libc::O_NONBLOCK != 0
    };
    // The console thread's stdin, and the fork parent's.
    for design in [["--workers", "1"], ["--runtime", "fork"]] {
        let (reader, mut writer) = std::io::pipe().unwrap();
        // A duplicate shares the open file description, flags included: what
        // the server sets on its stdin, we see here (as a shell would).
        let ours = reader.try_clone().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_httplite"))
            .args(["--bind", "127.0.0.1:0", "--console", "--quiet"])
            .args(design)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let set = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
            nonblocking(ours.as_raw_fd())
        });
        assert!(set, "{design:?}: the console reads stdin non-blocking");
        writer.write_all(b"quit\n").unwrap();
        let exited = wait_until(Duration::from_secs(15), Duration::from_millis(10), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !exited {
            let _ = child.kill();
            panic!("{design:?}: no exit after quit");
        }
        assert!(child.wait().unwrap().success(), "{design:?}");
        assert!(
            !nonblocking(ours.as_raw_fd()),
            "{design:?}: stdin left non-blocking"
        );
    }
}
