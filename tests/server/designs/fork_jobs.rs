//! The jobs process of `--runtime fork` (the rest of the jobs' behaviour
//! runs on fork like on every design, in jobs.rs): it outlives a child
//! killed in the middle of its requests, is started again if it dies, and
//! ends with the server.

use std::time::Duration;

use super::{all_children, children, is_jobs_process};
use crate::harness::{Client, Server, wait_until};

/// The server's jobs process (there is exactly one: the parent waits
/// until it has named itself before it says it listens, or that it
/// started another).
fn jobs_process(server: &Server) -> u32 {
    let found: Vec<u32> = (all_children(server.pid()).into_iter())
        .filter(|&p| is_jobs_process(p))
        .collect();
    assert_eq!(found.len(), 1, "one jobs process: {found:?}");
    found[0]
}

fn submit_req(kind: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /_httplite/jobs?type={kind} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// Submits a wordcount of `text` and waits (bounded) for its result.
fn word_count(client: &mut Client, text: &str) -> String {
    client.send(&submit_req("wordcount", text.as_bytes()));
    let r = client.read_response();
    assert_eq!(r.status, 202, "{}", r.text());
    let location = r.header("location").expect("Location").to_string();
    let mut body = String::new();
    let done = wait_until(Duration::from_secs(10), Duration::from_millis(5), || {
        body = client.get(&location).text();
        body.contains("\"state\":\"done\"")
    });
    assert!(done, "{body}");
    body
}

/// Whether process `pid` has ended and been reaped (or is a zombie).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
    }
}

#[test]
fn fork_jobs_process_survives_a_child_killed_mid_request() {
    let server = Server::start("fork", &[]);
    let jobs = jobs_process(&server);
    let mut other = server.connect();
    assert!(word_count(&mut other, "a b").ends_with("\"result\":2}"));
    for round in 0..5u64 {
        // A child with a burst of pipelined submissions and reads: each is
        // a round trip to the jobs process, so a kill right after they
        // were sent lands in the middle of one (or between two).
        let before = children(server.pid());
        let mut victim = server.connect();
        let mut wire = Vec::new();
        for i in 0..200 {
            wire.extend(submit_req("sha256", format!("input {i}").as_bytes()));
            wire.extend(b"GET /_httplite/stats HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        victim.send(&wire);
        let mut child = None;
        wait_until(Duration::from_secs(5), Duration::from_millis(1), || {
            child = (children(server.pid()).into_iter()).find(|kid| !before.contains(kid));
            child.is_some()
        });
        let child = child.expect("the victim's child");
        // Each round a little later into the burst.
        std::thread::sleep(Duration::from_millis(round * 3));
        // SAFETY: `child` is the server's child, alive (its connection is open).
        unsafe { libc::kill(child as libc::pid_t, libc::SIGKILL) };
        let ended = wait_until(Duration::from_secs(5), Duration::from_millis(5), || {
            gone(child)
        });
        assert!(ended, "child {child} outlived SIGKILL");
        drop(victim);
    }
    // The same jobs process, never restarted, serves the connection it
    // served before and new ones.
    assert_eq!(jobs_process(&server), jobs);
    assert!(word_count(&mut other, "a b c").ends_with("\"result\":3}"));
    assert!(word_count(&mut server.connect(), "a").ends_with("\"result\":1}"));
    let stats = server.stats();
    assert_eq!(stats.sum("jobs_restarts"), 0, "{}", stats.0);
    assert!(stats.get("pool.threads_started") >= 1, "{}", stats.0);
}

#[test]
fn fork_jobs_process_is_started_again_when_it_dies_and_ids_go_on() {
    let server = Server::start("fork", &[]);
    let first = jobs_process(&server);
    let mut client = server.connect();
    let body = word_count(&mut client, "one two");
    assert!(body.starts_with("{\"id\":1,"), "{body}");
    // Older than a second: one that dies younger is not started again.
    std::thread::sleep(Duration::from_millis(1100));
    // SAFETY: `first` is the server's child, alive.
    unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
    let restarted = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        server
            .stderr()
            .contains("the jobs process ended (signal:9); started another")
    });
    assert!(restarted, "{}", server.stderr());
    let second = jobs_process(&server);
    assert_ne!(first, second);
    // A child forked after the restart reaches the new one; the first
    // job died with the old one, and ids go on after it.
    let mut fresh = server.connect();
    let r = fresh.get("/_httplite/jobs/1");
    assert_eq!(r.status, 404, "{}", r.text());
    let body = word_count(&mut fresh, "three");
    assert!(body.starts_with("{\"id\":2,"), "{body}");
    assert_eq!(server.stats().sum("jobs_restarts"), 1);
}

#[test]
fn fork_jobs_process_ends_with_the_server() {
    // Stopped by the parent (SIGTERM, reaped) on a graceful stop...
    let mut server = Server::start("fork", &[]);
    let jobs = jobs_process(&server);
    assert!(word_count(&mut server.connect(), "x").ends_with("\"result\":1}"));
    assert!(server.terminate().success(), "{}", server.stderr());
    assert!(gone(jobs), "the jobs process outlived its server");
    // ...and by the kernel (PR_SET_PDEATHSIG) if the parent is killed.
    let mut server = Server::start("fork", &[]);
    let jobs = jobs_process(&server);
    server.signal(libc::SIGKILL);
    server.wait_exit(Duration::from_secs(5));
    let ended = wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        gone(jobs)
    });
    assert!(ended, "the jobs process outlived its killed parent");
}
