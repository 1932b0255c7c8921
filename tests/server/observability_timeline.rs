//! `--trace-format chrome`: the timeline file that Perfetto opens. Each
//! test parses the file and checks its structure: every `B` has its `E` on
//! the same thread, properly nested (complete `X` slices inside their
//! parent), timestamps in order per thread, flows that connect existing
//! slices, and one request's slices on the worker its handoff names;
//! under `fork`, one file from every process (`fork.rs`).
#![cfg(feature = "trace")]

use std::io::Write as _;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Server, TempDir, get_req, run_binary, wait_until};

mod check;
mod cross_thread;
mod fork;

use check::{
    EPS, Timeline, check, chrome_args, lenient, read_closed, wait_for_file,
    wait_for_park_after_handoff,
};

/// The one request's slice, the handoff that named its worker, and the
/// flow arrow between them, checked on a closed timeline.
pub(crate) fn check_request(t: &Timeline, rt: &str, path: &str) -> usize {
    let (ri, req) = t
        .slices
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == format!("GET {path}"))
        .unwrap_or_else(|| panic!("[{rt}] no request slice for {path}"));
    assert_eq!(req.args["status"], 200, "[{rt}] {req:?}");
    assert_eq!(req.args["method"], "GET", "[{rt}] {req:?}");
    assert_eq!(req.args["path"], path, "[{rt}] {req:?}");
    let fd = req.args["fd"].as_u64().expect("the request's fd");
    // The acceptor's last handoff of this fd before the request.
    let handoff = t
        .slices
        .iter()
        .enumerate()
        .rev()
        .find(|(_, s)| {
            s.name == "handoff"
                && s.ts <= req.ts
                && (s.args["fds"].as_array()).is_some_and(|f| f.iter().any(|x| x == fd))
        })
        .unwrap_or_else(|| panic!("[{rt}] no handoff of fd {fd}"));
    assert_eq!(t.thread(handoff.1.tid), "acceptor", "[{rt}]");
    let worker = handoff.1.args["worker"]
        .as_str()
        .expect("the handoff's worker");
    assert_eq!(
        t.thread(req.tid),
        worker,
        "[{rt}] the request ran on another thread than its handoff named"
    );
    // The handoff's arrow: from the handoff slice, through the worker's
    // handoff loop, to the connection's first poll on that worker.
    let id = (t.flows.iter())
        .find(|(_, evs)| evs.iter().any(|e| e.ph == "s" && e.slice == handoff.0))
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("[{rt}] no flow leaves the handoff"));
    let first = t
        .flow_slice(id, "f")
        .unwrap_or_else(|| panic!("[{rt}] the handoff's flow {id} ends nowhere"));
    assert_eq!(
        first.tid, req.tid,
        "[{rt}] the handoff's flow ends on another thread"
    );
    let expect = if rt == "stackful" {
        "resume co="
    } else {
        "poll task="
    };
    assert!(
        first.name.starts_with(expect),
        "[{rt}] flow ends in {first:?}"
    );
    let step = t.flow_slice(id, "t").expect("a step in the handoff loop");
    assert_eq!(step.tid, req.tid, "[{rt}] {step:?}");
    ri
}

#[test]
fn timeline_follows_one_request_and_is_closed_by_sigterm_and_sigint() {
    for (rt, sig) in [("stackless", libc::SIGTERM), ("stackful", libc::SIGINT)] {
        let dir = TempDir::new("timeline");
        let file = dir.path().join("trace.json");
        let file_s = file.to_str().unwrap();
        let mut server = Server::start(rt, &chrome_args(file_s, "0"));
        let mut c = server.connect();
        // Send only once the connection has parked, so that the request's
        // arrival is a wake (with its arrow to the poll it causes).
        wait_for_park_after_handoff(&file);
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        assert_eq!(c.get("/_httplite/sleep?ms=20").status, 200, "[{rt}]");
        drop(c);
        server.signal(sig);
        let status = server.wait_exit(Duration::from_secs(15));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "[{rt}] {}",
            server.stderr()
        );

        let t = read_closed(&file);
        for name in ["acceptor", "w0", "w1"] {
            assert!(
                t.tid_of(name).is_some(),
                "[{rt}] no {name} track: {:?}",
                t.threads
            );
        }
        let ri = check_request(&t, rt, "/_httplite/plaintext");
        let req = &t.slices[ri];
        // The request is inside the connection's poll (or resume), and
        // that poll was caused by a wake: its arrow starts in the
        // `epoll_wait` slice that saw the request arrive.
        let poll = t
            .slices
            .iter()
            .enumerate()
            .find(|(_, s)| {
                s.tid == req.tid
                    && s.name != req.name
                    && s.ts <= req.ts + EPS
                    && req.end <= s.end + EPS
                    && (s.name.starts_with("poll task=") || s.name.starts_with("resume co="))
            })
            .unwrap_or_else(|| panic!("[{rt}] no poll around {req:?}"));
        let woke = t.flows.values().any(|evs| {
            let s = evs.iter().find(|e| e.ph == "s");
            let f = evs.iter().find(|e| e.ph == "f");
            matches!((s, f), (Some(s), Some(f))
                if f.slice == poll.0 && t.slices[s.slice].name == "epoll_wait" && s.tid == req.tid)
        });
        assert!(
            woke,
            "[{rt}] no wake arrow from epoll_wait into {:?}",
            poll.1
        );
        // The sleep went through the timer heap.
        assert!(
            t.instants.iter().any(|m| m.name == "timer"),
            "[{rt}] no timer instant"
        );
        assert!(
            t.slices
                .iter()
                .any(|s| s.name == "epoll_wait" && s.args["n"].is_u64()),
            "[{rt}] epoll_wait slices carry their events"
        );
        let meta = t.meta.as_ref().unwrap();
        assert_eq!(meta["dropped_events"], 0, "[{rt}] {meta}");
    }
}

#[test]
fn timeline_is_closed_by_console_quit() {
    let dir = TempDir::new("timeline-quit");
    let file = dir.path().join("trace.json");
    let mut args = chrome_args(file.to_str().unwrap(), "0").to_vec();
    args.push("--console");
    let mut server = Server::start_with_stdin("stackless", &args);
    let mut stdin = server.take_stdin().expect("piped stdin");
    assert_eq!(server.get("/_httplite/plaintext").status, 200);
    stdin.write_all(b"quit\n").unwrap();
    let status = server.wait_exit(Duration::from_secs(15));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{}",
        server.stderr()
    );
    let t = read_closed(&file);
    assert!(
        t.slices
            .iter()
            .any(|s| s.name == "GET /_httplite/plaintext")
    );
}

#[test]
fn timeline_rate_limit_keeps_slices_whole_and_counts_the_drops() {
    let dir = TempDir::new("timeline-rate");
    let file = dir.path().join("trace.json");
    let mut server = Server::start("stackless", &chrome_args(file.to_str().unwrap(), "5"));
    let mut c = server.connect();
    for _ in 0..50 {
        c.send(&get_req("/_httplite/plaintext"));
        assert_eq!(c.read_response().status, 200);
    }
    drop(c);
    server.terminate();
    let t = read_closed(&file);
    let meta = t.meta.as_ref().unwrap();
    // 50 requests make hundreds of events; 5 a second per thread get in.
    let dropped = meta["dropped_events"].as_u64().unwrap();
    assert!(dropped > 100, "{meta}");
    assert_eq!(meta["rate_per_thread"], 5, "{meta}");
    let on_w = t
        .slices
        .iter()
        .filter(|s| t.thread(s.tid).starts_with('w'))
        .count();
    assert!(on_w < 60, "{on_w} worker slices written at 5 a second");
}

#[test]
fn timeline_cut_by_a_crash_reads_with_the_lenient_rule() {
    let dir = TempDir::new("timeline-crash");
    let file = dir.path().join("trace.json");
    let mut server = Server::start("stackless", &chrome_args(file.to_str().unwrap(), "0"));
    for _ in 0..5 {
        assert_eq!(server.get("/_httplite/plaintext").status, 200);
    }
    // The writer collects every thread's events within 100 ms: wait until
    // the file holds all five requests' slices.
    let written = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let events = lenient(&text);
        let t = check(&events, false);
        (t.slices.iter())
            .filter(|s| s.name == "GET /_httplite/plaintext")
            .count()
            == 5
    });
    assert!(written, "the five requests' slices never reached the file");
    server.signal(libc::SIGKILL);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "a killed server's file is not closed"
    );
    let events = lenient(&text);
    let t = check(&events, false);
    assert_eq!(
        t.slices
            .iter()
            .filter(|s| s.name == "GET /_httplite/plaintext")
            .count(),
        5
    );
    // What makes any cut readable is the server's layout: after the
    // opening `[`, one whole event per line, each followed by `,`. So a
    // cut anywhere (even mid-event, a partial write) loses at most the
    // event it cuts, and the lenient rule reads every one before it.
    let mut lines = text.split_inclusive('\n');
    assert_eq!(
        lines.next().map(str::trim_end),
        Some("["),
        "the opening line"
    );
    let mut whole = 0;
    for line in lines {
        let Some(event) = line.strip_suffix(",\n") else {
            // Only the last line may be cut short (the kill).
            assert!(!line.ends_with('\n'), "a line not ending in `,`: {line:?}");
            break;
        };
        serde_json::from_str::<Value>(event)
            .unwrap_or_else(|e| panic!("a line that is not one event ({e}): {event:?}"));
        whole += 1;
    }
    assert_eq!(
        events.len(),
        whole,
        "the lenient rule reads every whole line"
    );
}

#[test]
fn timeline_on_threads_and_threadpool_has_request_slices() {
    for rt in ["threads", "threadpool"] {
        let dir = TempDir::new("timeline-threads");
        let file = dir.path().join("trace.json");
        let mut server = Server::start(rt, &chrome_args(file.to_str().unwrap(), "0"));
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        server.terminate();
        let t = read_closed(&file);
        let req = t
            .slices
            .iter()
            .find(|s| s.name == "GET /_httplite/plaintext")
            .unwrap_or_else(|| panic!("[{rt}] no request slice"));
        let thread = t.thread(req.tid);
        assert!(thread != "acceptor", "[{rt}] {thread}");
        // The handoff's arrow ends at the request, on the thread that
        // served it (no slice is open there: it binds to the next one).
        let ends_here = t.flows.values().any(|evs| {
            evs.iter()
                .any(|e| e.ph == "f" && std::ptr::eq(&t.slices[e.slice], req))
        });
        assert!(
            ends_here,
            "[{rt}] no handoff arrow into the request on {thread}"
        );
    }
}

#[test]
fn timeline_shows_the_upstream_sockets_wakes_beside_the_clients() {
    for rt in ["stackless", "stackful"] {
        let up = crate::reverse_proxy::upstream::TestUpstream::start(None);
        let dir = TempDir::new("timeline-proxy");
        let file = dir.path().join("trace.json");
        let route = format!("/app/={}", up.url());
        let mut args = chrome_args(file.to_str().unwrap(), "0").to_vec();
        args.extend(["--proxy", &route]);
        let mut server = Server::start(rt, &args);
        let r = server.get("/app/slow?ms=30");
        assert_eq!((r.status, r.text().as_str()), (200, "slow"), "[{rt}]");
        server.terminate();
        let t = read_closed(&file);
        // The exchange's first line names both sockets.
        let (tid, ts, client, upstream) = t
            .instants
            .iter()
            .filter(|m| m.name == "upstream")
            .find_map(|m| {
                let msg = m.args["msg"].as_str()?;
                let field = |key: &str| -> Option<String> {
                    let v = msg.split(' ').find_map(|w| w.strip_prefix(key))?;
                    Some(v.to_string())
                };
                Some((m.tid, m.ts, field("fd=")?, field("upstream_fd=")?))
            })
            .unwrap_or_else(|| panic!("[{rt}] no upstream line: {:?}", t.instants));
        // Each socket's readiness wakes the worker's epoll_wait, on the
        // same track: the client's (its request), then the upstream's (its
        // answer, after the request went up).
        let woke = |fd: &str, since: f64| {
            t.slices.iter().any(|s| {
                s.tid == tid
                    && s.name == "epoll_wait"
                    && s.ts >= since
                    && s.args["fds"]
                        .as_str()
                        .is_some_and(|fds| fds.split(' ').any(|e| e.starts_with(&format!("{fd}:"))))
            })
        };
        assert!(
            woke(&client, 0.0),
            "[{rt}] fd {client} never woke the worker"
        );
        assert!(
            woke(&upstream, ts),
            "[{rt}] fd {upstream} never woke the worker after {ts}"
        );
        assert!(
            t.instants.iter().any(|m| m.name == "upstream"
                && m.args["msg"]
                    .as_str()
                    .is_some_and(|s| s.contains("answer status=200"))),
            "[{rt}] no answer line"
        );
    }
}

#[test]
fn chrome_trace_needs_a_file() {
    let out = run_binary(
        &["--bind", "127.0.0.1:0", "--trace-format", "chrome"],
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("needs --trace-file"), "{err}");
}

#[test]
fn text_trace_goes_to_the_trace_file() {
    let dir = TempDir::new("trace-text");
    let file = dir.path().join("trace.txt");
    let mut server = Server::start("stackless", &["--trace-file", file.to_str().unwrap()]);
    assert_eq!(server.get("/_httplite/plaintext").status, 200);
    wait_for_file(&file, "GET /_httplite/plaintext HTTP/1.1 -> 200");
    server.terminate();
    assert!(!server.stderr().contains(" poll "), "{}", server.stderr());
}
