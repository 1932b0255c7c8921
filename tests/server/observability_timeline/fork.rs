//! `--trace-format chrome` under `--runtime fork`: one file that the
//! parent and every child append to, each process with its own pid (a
//! process per child in Perfetto) and its own events only.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::harness::{Server, TempDir};

use super::check::{check, chrome_args, tail};

#[test]
fn timeline_on_fork_has_each_childs_requests_under_its_own_pid() {
    let dir = TempDir::new("timeline-fork");
    let file = dir.path().join("trace.json");
    let mut server = Server::start("fork", &chrome_args(file.to_str().unwrap(), "0"));
    let parent = u64::from(server.pid());
    // One connection, so one child, per request; each child is forked
    // while the parent's buffer holds the `fork` events of the ones before.
    for _ in 0..3 {
        let mut c = server.connect();
        assert_eq!(c.get("/_httplite/plaintext").status, 200);
    }
    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "{}", server.stderr());

    let text = std::fs::read_to_string(&file).expect("the trace file");
    let events: Vec<Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not valid JSON ({e}): ...{}", tail(&text)));
    let t = check(&events, true);
    let meta = t.meta.as_ref().unwrap();
    assert_eq!(meta["dropped_events"], 0, "{meta}");

    // No event twice: a child that wrote the parent's unwritten events
    // copied into it by the fork would repeat them line for line.
    let mut seen = HashSet::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        assert!(seen.insert(line), "an event written twice: {line}");
    }

    let pid_of = |e: &Value| e["pid"].as_u64().expect("a pid");
    // Every thread belongs to one process; a child's one thread has its
    // pid as tid.
    let mut process_of: HashMap<u64, u64> = HashMap::new();
    for e in &events {
        let tid = e["tid"].as_u64().unwrap();
        if tid == 0 {
            continue; // process-wide metadata
        }
        let pid = *process_of.entry(tid).or_insert(pid_of(e));
        assert_eq!(pid, pid_of(e), "tid {tid} in two processes: {e}");
        if pid != parent {
            assert_eq!(tid, pid, "a child's track is its pid: {e}");
        }
    }
    let names: HashMap<u64, &str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| (pid_of(e), e["args"]["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names.get(&parent),
        Some(&"httplite fork parent"),
        "{names:?}"
    );

    // Each request on its own child, inside that child's connection slice.
    let requests: Vec<_> = (t.slices.iter())
        .filter(|s| s.name == "GET /_httplite/plaintext")
        .collect();
    let children: HashSet<u64> = requests.iter().map(|s| process_of[&s.tid]).collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(children.len(), 3, "three connections, three children");
    assert!(!children.contains(&parent));
    for req in &requests {
        let child = process_of[&req.tid];
        assert_eq!(req.args["status"], 200, "{req:?}");
        assert_eq!(t.thread(req.tid), format!("c{child}"));
        assert_eq!(
            names.get(&child).copied(),
            Some(format!("fork child {child}").as_str())
        );
        let conn = (t.slices.iter())
            .find(|s| s.name == "connection" && s.tid == req.tid)
            .unwrap_or_else(|| panic!("no connection slice in child {child}"));
        assert!(conn.ts <= req.ts && req.end <= conn.end, "{conn:?} {req:?}");
        assert_eq!(conn.args["exit"], 0, "{conn:?}");
    }

    // The parent's own track: a fork and a reap of each child, once.
    let parent_marks: Vec<String> = (t.instants.iter())
        .filter(|m| process_of.get(&m.tid) == Some(&parent))
        .map(|m| format!("{} {}", m.name, m.args["msg"].as_str().unwrap_or("")))
        .collect();
    for child in &children {
        for want in [
            format!("fork pid={child} fd="),
            format!("reap pid={child} status=exit:0"),
        ] {
            let n = parent_marks.iter().filter(|m| m.starts_with(&want)).count();
            assert_eq!(n, 1, "{want}: {parent_marks:?}");
        }
    }
}
