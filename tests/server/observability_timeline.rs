//! `--trace-format chrome`: the timeline file that Perfetto opens. Each
//! test parses the file and checks its structure: every `B` has its `E` on
//! the same thread, properly nested (complete `X` slices inside their
//! parent), timestamps in order per thread, flows that connect existing
//! slices, and one request's slices on the worker its handoff names.
#![cfg(feature = "trace")]

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Server, TempDir, assert_fork_refuses, get_req, run_binary, wait_until};

/// One slice: a `B`..`E` pair or an `X`.
#[derive(Debug, Clone)]
struct Slice {
    tid: u64,
    name: String,
    ts: f64,
    end: f64,
    args: Value,
}

/// One flow event and the slice it is bound to.
#[derive(Debug, Clone)]
struct FlowEvent {
    ph: String,
    tid: u64,
    ts: f64,
    /// The enclosing slice (`s`, `t`, `f` with `bp:"e"`) or, for an `f`
    /// without it, the next slice to begin on that thread.
    slice: usize,
}

/// A parsed, checked timeline.
#[derive(Debug)]
struct Timeline {
    slices: Vec<Slice>,
    instants: Vec<(u64, String, Value)>,
    flows: HashMap<u64, Vec<FlowEvent>>,
    threads: HashMap<u64, String>,
    meta: Option<Value>,
}

impl Timeline {
    fn thread(&self, tid: u64) -> &str {
        self.threads.get(&tid).map_or("?", String::as_str)
    }

    fn tid_of(&self, name: &str) -> Option<u64> {
        self.threads
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }

    /// The slice whose flow of `id` has an event of phase `ph`.
    fn flow_slice(&self, id: u64, ph: &str) -> Option<&Slice> {
        let ev = self.flows.get(&id)?.iter().find(|e| e.ph == ph)?;
        Some(&self.slices[ev.slice])
    }
}

/// Timestamps are microseconds with three decimals: compare to the ns.
const EPS: f64 = 0.0015;

/// Parses and checks the events; `complete`: the file was closed, so every
/// slice must have ended. Panics with what is wrong.
fn check(events: &[Value], complete: bool) -> Timeline {
    let mut t = Timeline {
        slices: Vec::new(),
        instants: Vec::new(),
        flows: HashMap::new(),
        threads: HashMap::new(),
        meta: None,
    };
    // Per thread: the last timestamp, the open slices (index into
    // `t.slices`), flow ends waiting for the next slice.
    let mut last: HashMap<u64, f64> = HashMap::new();
    let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut waiting: HashMap<u64, Vec<(u64, f64)>> = HashMap::new();
    for (i, ev) in events.iter().enumerate() {
        let ph = ev["ph"]
            .as_str()
            .unwrap_or_else(|| panic!("event {i} has no ph: {ev}"));
        let tid = ev["tid"]
            .as_u64()
            .unwrap_or_else(|| panic!("event {i} has no tid: {ev}"));
        assert!(ev["pid"].is_u64(), "event {i} has no pid: {ev}");
        if ph == "M" {
            match ev["name"].as_str() {
                Some("thread_name") => {
                    let name = ev["args"]["name"].as_str().expect("a thread name");
                    t.threads.insert(tid, name.to_string());
                }
                Some("httplite_trace") => t.meta = Some(ev["args"].clone()),
                _ => {}
            }
            continue;
        }
        let ts = ev["ts"]
            .as_f64()
            .unwrap_or_else(|| panic!("event {i} has no ts: {ev}"));
        let prev = last.insert(tid, ts).unwrap_or(0.0);
        assert!(
            ts + EPS >= prev,
            "event {i} on tid {tid} goes back in time ({prev} -> {ts}): {ev}"
        );
        let stack = open.entry(tid).or_default();
        let name = ev["name"].as_str().unwrap_or("").to_string();
        let mut new_slice = |t: &mut Timeline, end: f64| {
            t.slices.push(Slice {
                tid,
                name: name.clone(),
                ts,
                end,
                args: ev["args"].clone(),
            });
            let index = t.slices.len() - 1;
            // Flow ends without `bp` bind to the next slice that begins.
            for (id, f_ts) in waiting.remove(&tid).unwrap_or_default() {
                t.flows.entry(id).or_default().push(FlowEvent {
                    ph: "f".into(),
                    tid,
                    ts: f_ts,
                    slice: index,
                });
            }
            index
        };
        match ph {
            "B" => {
                let index = new_slice(&mut t, f64::NAN);
                stack.push(index);
            }
            "E" => {
                let index = stack
                    .pop()
                    .unwrap_or_else(|| panic!("event {i}: an E with no open B on tid {tid}"));
                t.slices[index].end = ts;
                if let Some(args) = ev["args"].as_object() {
                    for (k, v) in args {
                        t.slices[index].args[k] = v.clone();
                    }
                }
            }
            "X" => {
                let dur = ev["dur"].as_f64().expect("an X has a dur");
                assert!(dur >= 0.0, "event {i}: negative dur");
                if let Some(&parent) = stack.last() {
                    assert!(
                        ts + EPS >= t.slices[parent].ts,
                        "event {i}: X starts before its parent {:?}",
                        t.slices[parent]
                    );
                }
                // Its parent's E comes later: checked there via `last`,
                // since the X's end becomes this thread's last time.
                let index = new_slice(&mut t, ts + dur);
                last.insert(tid, ts + dur);
                let _ = index;
            }
            "i" => t.instants.push((tid, name, ev["args"].clone())),
            "s" | "t" | "f" => {
                let id = ev["id"].as_u64().expect("a flow id");
                let bound_to_enclosing = ph != "f" || ev["bp"].as_str() == Some("e");
                if bound_to_enclosing {
                    let &slice = stack.last().unwrap_or_else(|| {
                        panic!("event {i}: flow {id} {ph} outside any slice on tid {tid}")
                    });
                    t.flows.entry(id).or_default().push(FlowEvent {
                        ph: ph.to_string(),
                        tid,
                        ts,
                        slice,
                    });
                } else {
                    waiting.entry(tid).or_default().push((id, ts));
                }
            }
            other => panic!("event {i}: unexpected phase {other:?}"),
        }
    }
    if complete {
        for (tid, stack) in &open {
            assert!(
                stack.is_empty(),
                "tid {tid} ({}) has unended slices: {:?}",
                t.thread(*tid),
                stack.iter().map(|&s| &t.slices[s]).collect::<Vec<_>>()
            );
        }
        assert!(t.meta.is_some(), "no closing httplite_trace metadata event");
    }
    for (tid, ids) in &waiting {
        // A flow end on a thread whose next slice never came: only a
        // cut file may have one.
        assert!(
            !complete || ids.is_empty(),
            "tid {tid}: flow ends bound to no slice: {ids:?}"
        );
    }
    // Every flow starts once, in a slice, before its steps and its end
    // (the threads' chunks interleave in the file: compare times, not
    // places). A start with no end is allowed (a task woken, then dropped).
    for (id, evs) in &t.flows {
        let starts: Vec<_> = evs.iter().filter(|e| e.ph == "s").collect();
        if complete || !starts.is_empty() {
            assert_eq!(starts.len(), 1, "flow {id}: {evs:?}");
        }
        if let Some(s) = starts.first() {
            for e in evs.iter().filter(|e| e.ph != "s") {
                assert!(e.ts + EPS >= s.ts, "flow {id} goes back in time: {evs:?}");
            }
        }
    }
    // Every slice that ended lies within its thread's time and has a
    // thread name.
    for s in &t.slices {
        assert!(
            t.threads.contains_key(&s.tid),
            "no thread_name for tid {}",
            s.tid
        );
        assert!(
            s.end.is_nan() || s.end + EPS >= s.ts,
            "slice ends before it begins: {s:?}"
        );
    }
    t
}

/// The file as written by a server that exited normally: strict JSON.
fn read_closed(path: &Path) -> Timeline {
    let text = std::fs::read_to_string(path).expect("the trace file");
    let events: Vec<Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not valid JSON ({e}): ...{}", tail(&text)));
    check(&events, true)
}

fn tail(text: &str) -> &str {
    &text[text.len().saturating_sub(400)..]
}

/// The lenient rule for a file cut short (a crash, a full disk): it is the
/// JSON Array Format with one event per line, each ending in `,`; keep the
/// whole lines up to the last `},`, and close the array. The same rule as
/// `scripts/timeline-svg.py`'s loader.
fn lenient(text: &str) -> Vec<Value> {
    if text.trim_end().ends_with(']') {
        return serde_json::from_str(text).expect("a closed file is valid JSON");
    }
    let kept = match text.rfind("},\n") {
        Some(end) => format!("{}]", &text[..=end]),
        None => "[]".to_string(),
    };
    serde_json::from_str(&kept).unwrap_or_else(|e| panic!("lenient parse failed ({e})"))
}

/// Waits until the writer has put `want` in the file (it writes every
/// 100 ms).
fn wait_for_file(path: &Path, want: &str) {
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        last = std::fs::read_to_string(path).unwrap_or_default();
        last.contains(want)
    });
    assert!(seen, "no {want:?} in the trace file: ...{}", tail(&last));
}

fn chrome_args<'a>(file: &'a str, rate: &'a str) -> [&'a str; 6] {
    [
        "--trace-format",
        "chrome",
        "--trace-file",
        file,
        "--trace-rate",
        rate,
    ]
}

/// The one request's slice, the handoff that named its worker, and the
/// flow arrow between them, checked on a closed timeline.
fn check_request(t: &Timeline, rt: &str, path: &str) -> usize {
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
    let expect = if rt == "stackless" {
        "poll task="
    } else {
        "resume co="
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
        wait_for_file(&file, "\"handoff received\"");
        std::thread::sleep(Duration::from_millis(100));
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
            t.instants.iter().any(|(_, n, _)| n == "timer"),
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
    // The writer collects every thread's events within 100 ms.
    wait_for_file(&file, "GET /_httplite/plaintext");
    std::thread::sleep(Duration::from_millis(300));
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
    // Cut anywhere, even mid-event (a partial write): the rule still reads
    // every whole event before the cut, and they still check out.
    let whole_lines = |cut: &str| cut.matches("},\n").count();
    for frac in [0.31, 0.5, 0.77, 0.93] {
        let mut at = (text.len() as f64 * frac) as usize;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let cut = &text[..at];
        let events = lenient(cut);
        assert_eq!(events.len(), whole_lines(cut), "cut at {at}");
        check(&events, false);
    }
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
fn chrome_trace_needs_a_file_and_fork_refuses_it() {
    let out = run_binary(
        &["--bind", "127.0.0.1:0", "--trace-format", "chrome"],
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("needs --trace-file"), "{err}");
    assert_fork_refuses(
        &["--trace-format", "chrome", "--trace-file", "/dev/null"],
        "--trace-format chrome",
    );
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
