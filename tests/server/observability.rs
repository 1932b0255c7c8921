//! What the server shows about itself: per-worker runtime internals in the
//! stats document, and `--trace` (one line per event-loop step).

use std::time::Duration;

use crate::harness::{Client, Server, Stats, runtimes, wait_until};

#[test]
fn stats_report_each_workers_runtime_internals() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = Client::connect(server.addr());
        for _ in 0..5 {
            assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        // A sleep goes through the timer heap on the event-loop designs.
        assert_eq!(c.get("/_httplite/sleep?ms=20").status, 200, "[{rt}]");
        let s = Stats(c.get("/_httplite/stats").text());
        // fork has one "worker": the parent and its children together.
        let workers = if *rt == "fork" { 1 } else { 2 };
        assert_eq!(
            s.0.matches(&format!("\"kind\":\"{rt}\"")).count(),
            workers,
            "[{rt}] one runtime object per worker: {}",
            s.0
        );
        match *rt {
            "threadpool" => {
                // One pool, shown in each worker's entry; this connection
                // holds one of its threads while it asks.
                assert!(s.sum("busy") >= 2, "[{rt}] {}", s.0);
                assert_eq!(s.sum("rejected_503"), 0, "[{rt}] {}", s.0);
            }
            "fork" => {
                // This connection's own child is alive while it asks.
                assert!(s.sum("children_alive") >= 1, "[{rt}] {}", s.0);
                assert!(s.sum("children_high_water") >= 1, "[{rt}] {}", s.0);
                assert_eq!(s.sum("children_crashed"), 0, "[{rt}] {}", s.0);
            }
            "uring" => {
                // Six answers sent before this one, each one SEND SQE and
                // its CQE, plus the recv's CQE that brought each request.
                assert!(s.sum("sqes_submitted") >= 6, "[{rt}] {}", s.0);
                assert!(s.sum("cqes_reaped") >= 12, "[{rt}] {}", s.0);
                assert!(s.sum("io_uring_enters") >= 6, "[{rt}] {}", s.0);
                // The sleep's timer.
                assert!(s.sum("timers_fired") >= 1, "[{rt}] {}", s.0);
                // One connection never drains 1,024 buffers, and nothing
                // was dropped mid-operation.
                assert_eq!(s.sum("buffer_ring_exhaustions"), 0, "[{rt}] {}", s.0);
                assert_eq!(s.sum("cancellations"), 0, "[{rt}] {}", s.0);
                // The recv armed on this connection, at least.
                assert!(s.sum("ops_in_flight") >= 1, "[{rt}] {}", s.0);
            }
            "threads" => {
                // This connection's own thread is alive while it asks.
                assert!(s.sum("threads_alive") >= 1, "[{rt}] {}", s.0);
                assert!(s.sum("threads_high_water") >= 1, "[{rt}] {}", s.0);
            }
            _ => {
                assert!(s.sum("epoll_waits") >= 7, "[{rt}] {}", s.0);
                assert!(s.sum("epoll_events") >= 7, "[{rt}] {}", s.0);
                assert!(s.sum("timers_fired") >= 1, "[{rt}] {}", s.0);
                // The keep-alive connection's idle timer, at least.
                assert!(s.sum("timers_pending") >= 1, "[{rt}] {}", s.0);
                // The connection asking, plus each worker's handoff pipe.
                assert!(s.sum("fds_registered") >= 3, "[{rt}] {}", s.0);
                assert!(s.sum("wakes_local") >= 7, "[{rt}] {}", s.0);
                assert!(s.sum("run_queue_high_water") >= 1, "[{rt}] {}", s.0);
                if *rt == "stackless" {
                    assert!(s.sum("tasks_alive") >= 1, "[{rt}] {}", s.0);
                    assert!(s.sum("polls") >= 7, "[{rt}] {}", s.0);
                } else {
                    // Each worker's accept coroutine plus this connection's.
                    assert!(s.sum("stacks_in_use") >= 3, "[{rt}] {}", s.0);
                    assert!(s.sum("stacks_in_use_high_water") >= 3, "[{rt}] {}", s.0);
                    assert!(s.sum("resumes") >= 7, "[{rt}] {}", s.0);
                }
            }
        }
    }
}

#[test]
fn finished_connections_leave_no_tasks_or_stacks_behind() {
    for rt in ["stackless", "stackful"] {
        let server = Server::start(rt, &[]);
        for _ in 0..20 {
            let mut c = Client::connect(server.addr());
            assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        // The 20 connections closed; once the server has noticed, only the
        // connection asking is left.
        let (key, expected) = match rt {
            "stackless" => ("tasks_alive", 1),
            _ => ("stacks_in_use", 3), // and each worker's accept coroutine
        };
        let mut last = String::new();
        let settled = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            let mut c = Client::connect(server.addr());
            last = c.get("/_httplite/stats").text();
            Stats(last.clone()).sum(key) == expected
        });
        assert!(
            settled,
            "[{rt}] {key} never came back to {expected}: {last}"
        );
    }
}

#[cfg(not(feature = "trace"))]
#[test]
fn trace_without_the_feature_is_a_one_line_error() {
    let out = crate::harness::run_binary(
        &["--bind", "127.0.0.1:0", "--trace"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features trace"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// The trace lines a `--trace` server printed once `want` shows up.
#[cfg(feature = "trace")]
fn trace_of(server: &Server, want: &str) -> String {
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        last = server.stderr();
        last.contains(want)
    });
    assert!(seen, "no {want:?} in the trace:\n{last}");
    last
}

/// The id in the first `spawn` trace line after a handoff was received
/// (the connection's task or coroutine), once it shows up.
#[cfg(feature = "trace")]
fn spawned_after_handoff(server: &Server, spawn: &str) -> String {
    let mut id = String::new();
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        last = server.stderr();
        let after = last.find("handoff  received").map_or("", |i| &last[i..]);
        id = after
            .split(spawn)
            .nth(1)
            .map(|r| r.chars().take_while(char::is_ascii_digit).collect())
            .unwrap_or_default();
        !id.is_empty()
    });
    assert!(seen, "no {spawn:?} after a handoff in the trace:\n{last}");
    id
}

#[cfg(feature = "trace")]
#[test]
fn trace_follows_one_request_through_every_layer() {
    for rt in ["stackless", "stackful"] {
        let server = Server::start(rt, &["--trace"]);
        let mut c = Client::connect(server.addr());
        // Send only once the connection has parked: then the request's
        // arrival is an edge that wakes it. (A request already there when the
        // connection first runs is read at once, with no edge to show.)
        let spawn = if rt == "stackless" {
            " spawn    task="
        } else {
            " spawn    co="
        };
        let id = spawned_after_handoff(&server, spawn);
        let parked = if rt == "stackless" {
            format!(" poll     task={id} Pending")
        } else {
            format!(" co={id} -> sched parked")
        };
        trace_of(&server, &parked);
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let trace = trace_of(&server, "GET /_httplite/plaintext HTTP/1.1 -> 200");
        // The fd the acceptor handed over is the one epoll reports and the
        // one the request line names.
        let handoff = trace
            .lines()
            .find(|l| l.contains(" acceptor ") && l.contains("handoff"))
            .unwrap_or_else(|| panic!("[{rt}] no handoff line:\n{trace}"));
        let fd: u32 = handoff
            .split("fds=[")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("[{rt}] unreadable handoff line {handoff:?}"));
        let pos = |needle: &str| {
            trace
                .find(needle)
                .unwrap_or_else(|| panic!("[{rt}] no {needle:?} in:\n{trace}"))
        };
        let received = pos(&format!("handoff  received fds=[{fd}]"));
        let readable = pos(&format!("{fd}:IN"));
        let answered = pos(&format!("http     fd={fd} GET /_httplite/plaintext"));
        assert!(
            received < readable && readable < answered,
            "[{rt}]\n{trace}"
        );
        match rt {
            "stackless" => {
                assert!(trace.contains(" spawn    task="), "[{rt}]\n{trace}");
                assert!(trace.contains(" poll     task="), "[{rt}]\n{trace}");
                assert!(trace.contains(" wake     task="), "[{rt}]\n{trace}");
            }
            _ => {
                assert!(trace.contains(" spawn    co="), "[{rt}]\n{trace}");
                assert!(trace.contains(" switch   sched -> co="), "[{rt}]\n{trace}");
                assert!(trace.contains(" -> sched parked"), "[{rt}]\n{trace}");
            }
        }
        // Every line: seconds, thread label, kind.
        for line in trace.lines().filter(|l| !l.starts_with("httplite")) {
            let mut cols = line.split_whitespace();
            let secs = cols.next().and_then(|t| t.parse::<f64>().ok());
            assert!(
                secs.is_some() && cols.count() >= 2,
                "[{rt}] odd line {line:?}"
            );
        }
    }
}

#[cfg(feature = "trace")]
#[test]
fn trace_shows_timers_firing() {
    let server = Server::start("stackless", &["--trace"]);
    let mut c = Client::connect(server.addr());
    assert_eq!(c.get("/_httplite/sleep?ms=30").status, 200);
    let trace = trace_of(&server, "GET /_httplite/sleep?ms=30 HTTP/1.1 -> 200");
    assert!(trace.contains(" timer    fired=1"), "{trace}");
}

#[cfg(feature = "trace")]
#[test]
fn trace_rate_limit_drops_and_reports_the_excess() {
    let server = Server::start("stackless", &["--trace", "--trace-rate", "5"]);
    let mut c = Client::connect(server.addr());
    for _ in 0..50 {
        c.send(&crate::harness::get_req("/_httplite/plaintext"));
        assert_eq!(c.read_response().status, 200);
    }
    // The report comes with the first line of a later second.
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(c.get("/_httplite/plaintext").status, 200);
    let trace = trace_of(&server, "suppressed");
    let worker_lines = trace
        .lines()
        .filter(|l| l.contains(" w0 ") || l.contains(" w1 "))
        .count();
    // 50 requests make hundreds of steps; at 5 a second per worker, a few
    // seconds' worth print.
    assert!(worker_lines < 100, "{worker_lines} lines printed:\n{trace}");
}

#[cfg(feature = "trace")]
#[test]
fn trace_ties_a_proxy_headers_client_to_its_fd() {
    use std::io::Write;
    for rt in runtimes() {
        let args = [
            "--trace",
            "--proxy-protocol",
            "--trusted-proxy",
            "127.0.0.1",
        ];
        let server = Server::start(rt, &args);
        let mut sock = std::net::TcpStream::connect(server.addr()).unwrap();
        sock.write_all(b"PROXY TCP4 192.0.2.1 203.0.113.9 5000 443\r\n")
            .unwrap();
        let mut c = Client::from_tcp(sock);
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let trace = trace_of(&server, "GET /_httplite/plaintext HTTP/1.1 -> 200");
        let fd_of = |needle: &str| {
            let line = trace
                .lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("[{rt}] no {needle:?} in:\n{trace}"));
            let fd = line.split("fd=").nth(1).and_then(|r| r.split(' ').next());
            fd.unwrap_or_else(|| panic!("[{rt}] no fd in {line}"))
                .to_string()
        };
        assert_eq!(
            fd_of("PROXY client=192.0.2.1:5000"),
            fd_of("GET /_httplite/plaintext HTTP/1.1 -> 200"),
            "[{rt}] the client's line and the request's name the same fd"
        );
    }
}

/// `--runtime fork`: the parent opens the trace file before any fork and
/// every child appends its own lines to it, labelled with its pid.
#[cfg(feature = "trace")]
#[test]
fn text_trace_on_fork_has_each_childs_lines_under_its_label() {
    let dir = crate::harness::TempDir::new("trace-fork");
    let file = dir.path().join("trace.txt");
    let args = ["--trace-file", file.to_str().unwrap(), "--trace-rate", "0"];
    let mut server = Server::start("fork", &args);
    for _ in 0..3 {
        let mut c = server.connect();
        assert_eq!(c.get("/_httplite/plaintext").status, 200);
    }
    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    let text = std::fs::read_to_string(&file).expect("the trace file");
    // Whole lines only, from every process: seconds, label, kind.
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for cols in &lines {
        assert!(
            cols.len() >= 3 && cols[0].parse::<f64>().is_ok(),
            "odd line {cols:?} in:\n{text}"
        );
    }
    let labelled = |label: &str, what: &str| -> Vec<String> {
        (lines.iter())
            .filter(|c| c[1] == label && c[2] == what)
            .map(|c| c[3..].join(" "))
            .collect()
    };
    let forks = labelled("parent", "fork");
    assert_eq!(forks.len(), 3, "{forks:?}\n{text}");
    for fork in &forks {
        let pid = (fork.strip_prefix("pid="))
            .and_then(|r| r.split(' ').next())
            .unwrap_or_else(|| panic!("odd fork line {fork:?}"));
        let label = format!("c{pid}");
        let http = labelled(&label, "http");
        assert_eq!(http.len(), 1, "{label}: {http:?}\n{text}");
        assert!(
            http[0].contains("GET /_httplite/plaintext HTTP/1.1 -> 200"),
            "{http:?}"
        );
        let child = labelled(&label, "child");
        assert!(child.len() == 2 && child[1] == "exit=0", "{child:?}");
        let reap = format!("pid={pid} status=exit:0");
        assert!(
            labelled("parent", "reap").contains(&reap),
            "no {reap:?} in:\n{text}"
        );
    }
}
