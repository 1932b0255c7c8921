//! The lame-duck period and the health check (`--drain-delay`,
//! `/_httplite/health`), and SIGHUP reopening the access log.

use std::io::Write as _;
use std::time::{Duration, Instant};

use super::harness::*;

/// On a new keep-alive connection: `Connection: close` in the answer is
/// then the server's decision.
fn health_on_a_new_connection(server: &Server) -> Response {
    server.connect().get("/_httplite/health")
}

#[test]
fn health_fails_during_the_drain_delay_then_the_server_stops() {
    for rt in runtimes() {
        let mut server = Server::start(rt, &["--drain-delay", "1500ms"]);
        let ok = health_on_a_new_connection(&server);
        assert_eq!(ok.status, 200, "[{rt}]");
        assert_eq!(ok.text(), "ok\n");
        assert!(!ok.says_close(), "[{rt}]");
        let mut keepalive = server.connect();
        assert_eq!(keepalive.get("/_httplite/plaintext").status, 200);

        let t = Instant::now();
        server.signal(libc::SIGTERM);
        let draining = wait_until(Duration::from_secs(3), Duration::from_millis(10), || {
            health_on_a_new_connection(&server).status == 503
        });
        assert!(draining, "[{rt}] health still 200 after SIGTERM");
        let r = health_on_a_new_connection(&server);
        assert!(r.says_close(), "[{rt}] 503 without Connection: close");
        assert_eq!(r.text(), "draining\n");
        // Everything else is served as before during the delay.
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let stats = server.get("/_httplite/stats").text();
        assert!(stats.contains("\"state\":\"draining\""), "[{rt}] {stats}");
        // A keep-alive client asking for health is told, and closed.
        let r = keepalive.get("/_httplite/health");
        assert_eq!(r.status, 503, "[{rt}]");
        keepalive.expect_closed(Duration::from_secs(2));

        let status = server
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("[{rt}] did not exit after the drain delay"));
        assert_eq!(status.code(), Some(0), "[{rt}] {}", server.stderr());
        assert!(
            t.elapsed() >= Duration::from_millis(1400),
            "[{rt}] stopped after {:?}, before the drain delay ended",
            t.elapsed()
        );
    }
}

#[test]
fn a_second_signal_ends_the_drain_delay() {
    for rt in runtimes() {
        let mut server = Server::start(rt, &["--drain-delay", "60s"]);
        server.signal(libc::SIGTERM);
        let draining = wait_until(Duration::from_secs(3), Duration::from_millis(10), || {
            health_on_a_new_connection(&server).status == 503
        });
        assert!(draining, "[{rt}]");
        server.signal(libc::SIGINT);
        let status = server
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("[{rt}] a second signal did not end the delay"));
        assert_eq!(status.code(), Some(0), "[{rt}] {}", server.stderr());
    }
}

#[test]
fn the_consoles_quit_begins_the_drain_delay_as_sigterm_does() {
    for rt in runtimes() {
        let mut server = Server::start_with_stdin(rt, &["--console", "--drain-delay", "60s"]);
        let mut stdin = server.take_stdin().unwrap();
        writeln!(stdin, "quit").unwrap();
        let draining = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
            health_on_a_new_connection(&server).status == 503
        });
        assert!(draining, "[{rt}] {}", server.stdout());
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        server.signal(libc::SIGTERM);
        let status = server
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("[{rt}] a signal after quit did not end the delay"));
        assert_eq!(status.code(), Some(0), "[{rt}] {}", server.stderr());
    }
}

/// Waits until `what` is in the log file. A worker hands its buffered
/// lines to the writer when a line comes in a later second (and the
/// stackless one once a second anyway), so a request every 300 ms pushes
/// them out on every runtime.
fn logged(server: &Server, log: &std::path::Path, what: &str) -> bool {
    wait_until(Duration::from_secs(6), Duration::from_millis(300), || {
        let found = std::fs::read_to_string(log).is_ok_and(|t| t.contains(what));
        if !found {
            let _ = server.get("/_httplite/plaintext");
        }
        found
    })
}

#[test]
fn sighup_reopens_the_access_log_after_logrotate_renamed_it() {
    for rt in runtimes() {
        let dir = TempDir::new("reopen");
        let log = dir.path().join("access.log");
        let rotated = dir.path().join("access.log.1");
        let mut server = Server::start(rt, &["--access-log", log.to_str().unwrap()]);
        assert_eq!(server.get("/before").status, 404);
        let written = logged(&server, &log, "/before");
        assert!(written, "[{rt}] the first line never reached the file");
        std::fs::rename(&log, &rotated).unwrap();
        server.signal(libc::SIGHUP);
        let reopened = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            server.stderr().contains("access log: reopened")
        });
        assert!(reopened, "[{rt}] {}", server.stderr());
        assert_eq!(server.get("/after").status, 404);
        let moved_on = logged(&server, &log, "/after");
        assert!(moved_on, "[{rt}] no new file after SIGHUP");
        let old = std::fs::read_to_string(&rotated).unwrap();
        assert!(
            old.contains("/before") && !old.contains("/after"),
            "[{rt}] {old}"
        );
        assert!(server.terminate().success(), "[{rt}]");
    }
}

#[test]
fn console_reopen_and_reload() {
    // The console thread's, and the fork parent's own loop's.
    for rt in ["stackless", "fork"] {
        let dir = TempDir::new("console-reopen");
        let log = dir.path().join("access.log");
        let mut server =
            Server::start_with_stdin(rt, &["--console", "--access-log", log.to_str().unwrap()]);
        let mut stdin = server.take_stdin().unwrap();
        writeln!(stdin, "reopen").unwrap();
        writeln!(stdin, "reload").unwrap();
        let answered = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            let out = server.stdout();
            out.contains("access log: reopened") && out.contains("reload")
        });
        assert!(answered, "[{rt}] {}", server.stdout());
        drop(stdin);
        assert!(server.terminate().success(), "[{rt}]");
    }
}
