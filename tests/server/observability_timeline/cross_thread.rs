//! What crosses threads on a timeline, and `--runtime uring`: a directory
//! listing and a sha256 job each run on a `poolN` track, joined to the
//! worker by arrows (submit → job, the job's wake → the poll it causes); a
//! close rings a paused acceptor's doorbell; the ring's enters, SQEs and
//! CQEs on a uring worker's track.

use std::time::Duration;

use super::check::{
    EPS, Slice, Timeline, chrome_args, read_closed, wait_for_file, wait_for_park_after_handoff,
};
use super::check_request;
use crate::harness::{Server, Stats, TempDir, get_req, runtimes, wait_until};

/// A task's poll (or a coroutine's resume) on a worker's track.
fn is_poll(t: &Timeline, s: &Slice) -> bool {
    t.thread(s.tid).starts_with('w')
        && (s.name.starts_with("poll task=") || s.name.starts_with("resume co="))
}

/// The flow ids with an event of phase `ph` bound to slice `index`.
fn flows_at(t: &Timeline, index: usize, ph: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = (t.flows.iter())
        .filter(|(_, evs)| evs.iter().any(|e| e.ph == ph && e.slice == index))
        .map(|(id, _)| *id)
        .collect();
    ids.sort_unstable();
    ids
}

/// The slices named `name`, each on a pool thread, and their indices.
fn pool_slices<'a>(t: &'a Timeline, rt: &str, name: &str) -> Vec<(usize, &'a Slice)> {
    let found: Vec<_> = (t.slices.iter().enumerate())
        .filter(|(_, s)| s.name == name)
        .collect();
    assert!(!found.is_empty(), "[{rt}] no {name} slice");
    for (_, s) in &found {
        let thread = t.thread(s.tid);
        let n = thread
            .strip_prefix("pool")
            .and_then(|n| n.parse::<u32>().ok());
        assert!(
            n.is_some(),
            "[{rt}] {name} ran on {thread}, not a pool track"
        );
        assert_eq!(s.args["job"], name, "[{rt}] {s:?}");
    }
    found
}

/// The arrow into pool slice `index` from the poll that submitted it.
fn submitted_by<'a>(t: &'a Timeline, rt: &str, index: usize) -> &'a Slice {
    let ids = flows_at(t, index, "f");
    assert_eq!(ids.len(), 1, "[{rt}] arrows into the pool slice: {ids:?}");
    let from = t.flow_slice(ids[0], "s").expect("the arrow's start");
    assert!(is_poll(t, from), "[{rt}] submitted from {from:?}");
    from
}

/// Listings asked for by the pool test.
const LISTINGS: usize = 5;

#[test]
fn timeline_draws_pool_threads_with_arrows_to_and_from_the_worker() {
    let with_pool = ["stackless", "stackful", "uring"];
    for rt in runtimes().iter().filter(|r| with_pool.contains(r)) {
        let dir = TempDir::new("timeline-pool");
        let root = dir.path().join("www");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        // Enough entries that a listing takes a while: its completion then
        // comes after the connection parked, as a wake (a listing done
        // before the first look at its result wakes nobody).
        for i in 0..500 {
            std::fs::write(root.join(format!("sub/file-{i:03}.txt")), "a").unwrap();
        }
        let file = dir.path().join("trace.json");
        let mut args = chrome_args(file.to_str().unwrap(), "0").to_vec();
        args.extend([
            "--root",
            root.to_str().unwrap(),
            "--list-dirs",
            "--expose",
            "jobs",
        ]);
        let mut server = Server::start(rt, &args);
        let mut c = server.connect();
        for _ in 0..LISTINGS {
            let r = c.get("/sub/");
            assert_eq!(r.status, 200, "[{rt}] {r:?}");
            assert!(r.text().contains("file-499.txt"), "[{rt}] {}", r.text());
        }
        let body = b"abc";
        c.send(
            format!(
                "POST /_httplite/jobs?type=sha256 HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\nabc",
                body.len()
            )
            .as_bytes(),
        );
        assert_eq!(c.read_response().status, 202, "[{rt}]");
        // The job runs detached: wait until its slice is in the file.
        wait_for_file(&file, "\"name\":\"sha256\"");
        drop(c);
        server.terminate();
        let t = read_closed(&file);

        // Each listing was submitted by the connection's poll; and the
        // completion's wake (inside the pool slice, from another thread)
        // leads to the poll on that worker that answers the request.
        let listings = pool_slices(&t, rt, "listing");
        assert_eq!(listings.len(), LISTINGS, "[{rt}]");
        let mut woken = 0;
        for &(li, listing) in &listings {
            let submit = submitted_by(&t, rt, li);
            let woke = flows_at(&t, li, "s");
            assert!(woke.len() <= 1, "[{rt}] arrows out of a listing: {woke:?}");
            let Some(&id) = woke.first() else { continue };
            woken += 1;
            let poll = t.flow_slice(id, "f").expect("the wake's arrow ends");
            assert!(is_poll(&t, poll), "[{rt}] the wake leads to {poll:?}");
            assert_eq!(poll.tid, submit.tid, "[{rt}] woken on another worker");
            assert!(poll.ts + EPS >= listing.ts, "[{rt}] {poll:?} {listing:?}");
            let wake = (t.instants.iter()).find(|m| m.name == "wake" && m.slice == Some(li));
            let wake = wake.unwrap_or_else(|| panic!("[{rt}] no wake in {listing:?}"));
            assert_eq!(wake.args["from"], "remote", "[{rt}] {wake:?}");
            let answered = (t.slices.iter())
                .any(|s| s.name == "GET /sub/" && s.tid == poll.tid && s.end + EPS >= poll.ts);
            assert!(answered, "[{rt}] no request answered after {poll:?}");
        }
        assert!(woken > 0, "[{rt}] no listing's wake arrow in {LISTINGS}");
        let req = (t.slices.iter())
            .find(|s| s.name == "GET /sub/")
            .unwrap_or_else(|| panic!("[{rt}] no request slice"));

        // The job: on a pool track too, with the arrow from the poll that
        // took the POST (nobody waits for it: no arrow back).
        let jobs = pool_slices(&t, rt, "sha256");
        assert_eq!(jobs.len(), 1, "[{rt}] {jobs:?}");
        let submit = submitted_by(&t, rt, jobs[0].0);
        assert_eq!(
            t.thread(submit.tid),
            t.thread(req.tid),
            "[{rt}] one connection"
        );
        let meta = t.meta.as_ref().unwrap();
        assert_eq!(meta["dropped_events"], 0, "[{rt}] {meta}");
    }
}

#[test]
fn timeline_on_uring_shows_the_ring_and_one_request() {
    for &rt in runtimes().iter().filter(|r| **r == "uring") {
        let dir = TempDir::new("timeline-uring");
        let file = dir.path().join("trace.json");
        let mut server = Server::start(rt, &chrome_args(file.to_str().unwrap(), "0"));
        let mut c = server.connect();
        // As on stackless: the request's arrival is a wake of a parked task.
        wait_for_park_after_handoff(&file);
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        drop(c);
        server.signal(libc::SIGTERM);
        let status = server.wait_exit(Duration::from_secs(15));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{}",
            server.stderr()
        );

        let t = read_closed(&file);
        for name in ["acceptor", "w0", "w1"] {
            assert!(t.tid_of(name).is_some(), "no {name} track: {:?}", t.threads);
        }
        // The handoff's arrow ends in the connection's first poll on the
        // worker the handoff named (checked by `check_request`).
        let ri = check_request(&t, rt, "/_httplite/plaintext");
        let req = &t.slices[ri];
        let fd = req.args["fd"].as_u64().unwrap();
        let (pi, poll) = (t.slices.iter().enumerate())
            .find(|(_, s)| {
                is_poll(&t, s) && s.tid == req.tid && s.ts <= req.ts + EPS && req.end <= s.end + EPS
            })
            .unwrap_or_else(|| panic!("no poll around {req:?}"));
        // That poll was caused by a wake inside the io_uring_enter that
        // reaped the request's CQE: an arrow from the enter into the poll.
        let into_poll = flows_at(&t, pi, "f");
        let from_enter = into_poll.iter().find_map(|&id| {
            let s = t.flow_slice(id, "s")?;
            (s.name == "io_uring_enter" && s.tid == req.tid).then_some(s)
        });
        let enter =
            from_enter.unwrap_or_else(|| panic!("no wake arrow from an enter into {poll:?}"));
        assert!(enter.args["wait"].is_boolean(), "{enter:?}");
        assert!(enter.args["cqes"].as_u64() >= Some(1), "{enter:?}");
        // The connection's multishot recv: its SQE (op, fd) in a poll, its
        // CQEs (the same user_data, a result, flags) in an enter.
        let recv = (t.instants.iter())
            .find(|m| m.name == "sqe" && m.args["op"] == "RECV" && m.args["fd"] == fd)
            .unwrap_or_else(|| panic!("no RECV sqe for fd {fd}"));
        assert_eq!(recv.args["multishot"], true, "{recv:?}");
        assert_eq!(recv.tid, req.tid, "{recv:?}");
        assert!(
            recv.slice.is_some_and(|s| is_poll(&t, &t.slices[s])),
            "{recv:?}"
        );
        let ud = &recv.args["user_data"];
        assert!(ud.is_string(), "{recv:?}");
        let cqe = (t.instants.iter())
            .find(|m| m.name == "cqe" && m.args["user_data"] == *ud && m.ts + EPS >= recv.ts)
            .unwrap_or_else(|| panic!("no cqe for {recv:?}"));
        assert!(cqe.args["res"].as_i64() > Some(0), "{cqe:?}");
        assert_eq!(cqe.args["more"], true, "{cqe:?}");
        assert!(
            cqe.args["flags"].is_u64() && cqe.args["buffer"].is_u64(),
            "{cqe:?}"
        );
        let in_enter = cqe.slice.map(|s| t.slices[s].name.as_str());
        assert_eq!(in_enter, Some("io_uring_enter"), "{cqe:?}");
        // The answer left through a SEND of that fd.
        assert!(
            (t.instants.iter())
                .any(|m| m.name == "sqe" && m.args["op"] == "SEND" && m.args["fd"] == fd),
            "no SEND sqe for fd {fd}"
        );
        let meta = t.meta.as_ref().unwrap();
        assert_eq!(meta["dropped_events"], 0, "{meta}");
    }
}

#[test]
fn timeline_draws_the_doorbell_a_close_rings_for_the_paused_acceptor() {
    let dir = TempDir::new("timeline-doorbell");
    let file = dir.path().join("trace.json");
    let mut args = chrome_args(file.to_str().unwrap(), "0").to_vec();
    args.extend(["--max-connections", "1"]);
    let mut server = Server::start("stackless", &args);
    let mut a = server.connect();
    assert_eq!(a.get("/_httplite/plaintext").status, 200);
    // At the limit: the acceptor pauses, b waits in the listen queue
    // until a's close rings the doorbell from a worker.
    let mut b = server.connect();
    b.send(&get_req("/_httplite/plaintext"));
    // b's arrival has woken the acceptor, which found no room and armed
    // the doorbell (a's connection can still ask).
    let paused = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        let r = a.get("/_httplite/stats");
        Stats(r.text()).get("accept.paused_at_max") >= 1
    });
    assert!(paused, "the acceptor never paused at --max-connections 1");
    drop(a);
    assert_eq!(b.read_response().status, 200);
    drop(b);
    server.terminate();
    let t = read_closed(&file);
    let bells: Vec<usize> = (t.slices.iter().enumerate())
        .filter(|(_, s)| s.name == "doorbell" && t.thread(s.tid) == "acceptor")
        .map(|(i, _)| i)
        .collect();
    assert!(!bells.is_empty(), "no doorbell slice on the acceptor");
    let rung_from_a_poll = bells.iter().any(|&i| {
        flows_at(&t, i, "f")
            .iter()
            .filter_map(|&id| t.flow_slice(id, "s"))
            .any(|s| is_poll(&t, s))
    });
    assert!(
        rung_from_a_poll,
        "no arrow from a worker's poll into a doorbell"
    );
}
