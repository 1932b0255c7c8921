//! The timeline's parser and its structural checks, shared by the
//! timeline tests: every `B` has its `E` on the same thread, properly
//! nested, timestamps in order per thread, flows bound to slices that
//! exist, each started once and never going back in time.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::harness::wait_until;

/// One slice: a `B`..`E` pair or an `X`.
#[derive(Debug, Clone)]
pub struct Slice {
    pub tid: u64,
    pub name: String,
    pub ts: f64,
    pub end: f64,
    pub args: Value,
}

/// One instant event, and the slice it lies in (if any).
#[derive(Debug, Clone)]
pub struct Mark {
    pub tid: u64,
    pub name: String,
    pub ts: f64,
    pub args: Value,
    pub slice: Option<usize>,
}

/// One flow event and the slice it is bound to.
#[derive(Debug, Clone)]
pub struct FlowEvent {
    pub ph: String,
    pub tid: u64,
    pub ts: f64,
    /// The enclosing slice (`s`, `t`, `f` with `bp:"e"`) or, for an `f`
    /// without it, the next slice to begin on that thread.
    pub slice: usize,
}

/// A parsed, checked timeline.
#[derive(Debug)]
pub struct Timeline {
    pub slices: Vec<Slice>,
    pub instants: Vec<Mark>,
    pub flows: HashMap<u64, Vec<FlowEvent>>,
    pub threads: HashMap<u64, String>,
    pub meta: Option<Value>,
}

impl Timeline {
    pub fn thread(&self, tid: u64) -> &str {
        self.threads.get(&tid).map_or("?", String::as_str)
    }

    pub fn tid_of(&self, name: &str) -> Option<u64> {
        self.threads
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }

    /// The slice whose flow of `id` has an event of phase `ph`.
    pub fn flow_slice(&self, id: u64, ph: &str) -> Option<&Slice> {
        let ev = self.flows.get(&id)?.iter().find(|e| e.ph == ph)?;
        Some(&self.slices[ev.slice])
    }
}

/// Timestamps are microseconds with three decimals: compare to the ns.
pub const EPS: f64 = 0.0015;

/// Parses and checks the events; `complete`: the file was closed, so every
/// slice must have ended. Panics with what is wrong.
pub fn check(events: &[Value], complete: bool) -> Timeline {
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
            "i" => t.instants.push(Mark {
                tid,
                name,
                ts,
                args: ev["args"].clone(),
                slice: stack.last().copied(),
            }),
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
pub fn read_closed(path: &Path) -> Timeline {
    let text = std::fs::read_to_string(path).expect("the trace file");
    let events: Vec<Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not valid JSON ({e}): ...{}", tail(&text)));
    check(&events, true)
}

pub fn tail(text: &str) -> &str {
    &text[text.len().saturating_sub(400)..]
}

/// The lenient rule for a file cut short (a crash, a full disk): it is the
/// JSON Array Format with one event per line, each ending in `,`; keep the
/// whole lines up to the last `},`, and close the array. The same rule as
/// `scripts/timeline-svg.py`'s loader.
pub fn lenient(text: &str) -> Vec<Value> {
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
pub fn wait_for_file(path: &Path, want: &str) {
    let mut last = String::new();
    let seen = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        last = std::fs::read_to_string(path).unwrap_or_default();
        last.contains(want)
    });
    assert!(seen, "no {want:?} in the trace file: ...{}", tail(&last));
}

/// Waits until the worker that received the first handoff has gone back
/// to sleep after it (a `B` of `epoll_wait`, or of an `io_uring_enter`
/// that waits, on its track): the new connection's task has then read
/// nothing and parked, so a request sent now arrives as a wake.
pub fn wait_for_park_after_handoff(path: &Path) {
    let mut last = String::new();
    let parked =
        wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            last = std::fs::read_to_string(path).unwrap_or_default();
            let events = lenient(&last);
            let Some((at, tid)) = events.iter().enumerate().find_map(|(i, e)| {
                (e["name"] == "handoff received").then(|| (i, e["tid"].as_u64()))
            }) else {
                return false;
            };
            events[at + 1..].iter().any(|e| {
                e["ph"] == "B"
                    && e["tid"].as_u64() == tid
                    && (e["name"] == "epoll_wait"
                        || (e["name"] == "io_uring_enter" && e["args"]["wait"] == true))
            })
        });
    assert!(
        parked,
        "no sleep after the first handoff in the trace file: ...{}",
        tail(&last)
    );
}

pub fn chrome_args<'a>(file: &'a str, rate: &'a str) -> [&'a str; 6] {
    [
        "--trace-format",
        "chrome",
        "--trace-file",
        file,
        "--trace-rate",
        rate,
    ]
}
