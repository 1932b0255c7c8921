//! `--runtime threadpool` in event mode (the default): a pool thread serves
//! a request, and the connections waiting for one (new, idle keep-alive,
//! half-sent heads) wait in their worker's front, holding no thread.
//!
//! Each test holds at least `--threadpool-size` connections that do not
//! send a whole request, and checks that others are served meanwhile, or
//! that the front (not a thread) times them out or closes them: in
//! `--threadpool-mode connection` every one of them fails, the idle
//! clients having taken every thread (each wait is bounded, so the
//! failure comes in seconds).

use std::time::{Duration, Instant};

use crate::harness::{Client, Server, get_close, get_req, heavy_lock, wait_until};
use crate::pki::Pki;

/// Event mode, named although it is the default, so that each test says
/// what it is about.
const EVENT: &[&str] = &["--threadpool-mode", "event"];
/// Longest a client waits for an answer here.
const ANSWER_WAIT: Duration = Duration::from_secs(3);

use crate::slow_clients::pool_size;

fn start(extra: &[&str]) -> Server {
    let mut args = EVENT.to_vec();
    args.extend_from_slice(extra);
    Server::start("threadpool", &args)
}

/// A keep-alive connection that has had one answer and now waits, idle.
fn served(server: &Server) -> Client {
    let mut c = server.connect();
    c.send(&get_req("/_httplite/plaintext"));
    let r = c
        .answer_within(ANSWER_WAIT)
        .unwrap_or_else(|e| panic!("a new keep-alive client got no answer: {e}"));
    assert_eq!(r.status, 200);
    c
}

/// `n` idle keep-alive connections.
fn idle_clients(server: &Server, n: usize) -> Vec<Client> {
    (0..n).map(|_| served(server)).collect()
}

/// The connections the server's fronts hold (its stats' `parked`, summed
/// over the workers).
fn parked(server: &Server) -> u64 {
    server.stats().sum("parked")
}

#[test]
fn threadpool_event_two_thousand_keepalive_clients_on_the_default_size() {
    let _heavy = heavy_lock();
    crate::load::two_thousand_keepalive_clients("threadpool", EVENT);
}

#[test]
fn threadpool_event_slowloris_clients_hold_no_thread() {
    let _heavy = heavy_lock();
    let server = start(&[]);
    let slow_count = pool_size().max(8);
    let stats = crate::slow_clients::fresh_clients_beside_slowloris(&server, slow_count);
    assert_eq!(stats.get("timeouts.header"), 0, "{}", stats.0);
    assert!(
        stats.sum("parked") >= slow_count as u64,
        "the slow clients wait in the fronts: {}",
        stats.0
    );
}

#[test]
fn threadpool_event_idle_keepalive_connections_leave_two_threads_free() {
    let server = start(&["--threadpool-size", "2"]);
    let mut idle = idle_clients(&server, 100);
    let t = Instant::now();
    let mut c = server.connect();
    c.send(&get_close("/_httplite/plaintext"));
    let r = c
        .answer_within(ANSWER_WAIT)
        .unwrap_or_else(|e| panic!("a new client waited behind 100 idle ones: {e}"));
    assert_eq!(r.status, 200);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the new client took {took:?}"
    );
    assert!(parked(&server) >= 100);
    // They were kept, not dropped: each is served again.
    for (i, c) in idle.iter_mut().enumerate() {
        c.send(&get_req("/_httplite/json"));
        let r = c
            .answer_within(ANSWER_WAIT)
            .unwrap_or_else(|e| panic!("idle client {i}: {e}"));
        assert_eq!(r.status, 200, "idle client {i}");
    }
}

#[test]
fn threadpool_event_fragmented_head_is_answered() {
    let server = start(&[]);
    // Every thread would be theirs in connection mode.
    let _idle = idle_clients(&server, pool_size());
    crate::slow_clients::heads_in_pieces(&server, 1);
}

#[test]
fn threadpool_event_shutdown_closes_idle_connections_and_finishes_the_others() {
    let mut server = start(&["--shutdown-timeout", "10s", "--idle-timeout", "60s"]);
    let mut idle = idle_clients(&server, pool_size());
    // One being answered when the signal comes (on a thread), one with
    // half a head (in the front).
    let mut busy = server.connect();
    busy.send(&get_req("/_httplite/sleep?ms=1500"));
    let mut partial = server.connect();
    partial.send(b"GET /_httplite/plaintext HTTP/1.1\r\n");
    let asleep = wait_until(ANSWER_WAIT, Duration::from_millis(10), || {
        server.stats().get("sleeping") == 1
    });
    assert!(asleep, "the sleep never began: {}", server.stats().0);
    server.signal(libc::SIGTERM);
    // The idle ones close at once.
    for c in &mut idle {
        c.expect_closed(Duration::from_secs(2));
    }
    // The half-sent head is still awaited, and answered with a close.
    partial.send(b"Host: t\r\n\r\n");
    let r = partial
        .answer_within(ANSWER_WAIT)
        .expect("the completed head's answer");
    assert_eq!(r.status, 200);
    assert!(r.says_close(), "{r:?}");
    // The request in flight completes, with a close.
    let r = busy.answer_within(ANSWER_WAIT).expect("the sleep's answer");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"slept 1500 ms\n");
    assert!(r.says_close(), "{r:?}");
    busy.expect_closed(Duration::from_secs(3));
    let status = server.wait_exit(Duration::from_secs(5));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn threadpool_event_header_and_idle_timeouts_fire_in_the_front() {
    let server = start(&["--header-timeout", "2s", "--idle-timeout", "2s"]);
    let n = pool_size();
    let mut idle = idle_clients(&server, n);
    let mut silent: Vec<Client> = (0..n).map(|_| server.connect()).collect();
    let mut partial: Vec<Client> = (0..n)
        .map(|_| {
            let mut c = server.connect();
            c.send(b"GET /_httplite/plaintext HTTP/1.1\r\nHost");
            c
        })
        .collect();
    // All of them wait in the fronts, none on a thread.
    let want = 3 * n as u64;
    let mut seen = 0;
    let all_parked = wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
        seen = parked(&server);
        seen == want
    });
    assert!(all_parked, "{seen} parked, not {want}");
    for c in idle.iter_mut().chain(&mut silent).chain(&mut partial) {
        assert!(
            c.wait_closed(Duration::from_secs(5)).is_some(),
            "still open 5 s after a 2 s timeout"
        );
    }
    let stats = server.stats();
    assert_eq!(stats.get("timeouts.idle"), n as u64, "{}", stats.0);
    assert_eq!(stats.get("timeouts.header"), 2 * n as u64, "{}", stats.0);
    assert_eq!(stats.sum("parked"), 0, "{}", stats.0);
    // The one asking is the only one left.
    assert_eq!(stats.get("connections.open"), 1, "{}", stats.0);
}

#[test]
fn threadpool_event_full_queue_refuses_new_connections_only() {
    let server = start(&["--threadpool-size", "1", "--threadpool-queue", "1"]);
    let mut keep = served(&server);
    // The one thread sleeps; a request waits in the queue, which is full.
    let mut sleeper = server.connect();
    sleeper.send(&get_req("/_httplite/sleep?ms=1500"));
    std::thread::sleep(Duration::from_millis(300));
    // On a thread of its own: over TLS its handshake waits in the queue too.
    let addr = server.addr();
    let queued = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        c.send(&get_req("/_httplite/plaintext"));
        c.answer_within(Duration::from_secs(5)).map(|r| r.status)
    });
    std::thread::sleep(Duration::from_millis(300));
    // A new connection is refused at once (in the clear, even on an HTTPS
    // listener: the 503 is written before any of the connection is read).
    let mut refused = Client::try_connect_plain(addr).expect("connect");
    let r = refused.answer_within(ANSWER_WAIT).expect("the 503");
    assert_eq!(r.status, 503);
    assert!(r.says_close());
    refused.expect_closed(Duration::from_secs(5));
    // A keep-alive connection let in before is not: its request waits its
    // turn, beyond the bound.
    keep.send(&get_req("/_httplite/json"));
    for (what, c) in [("sleeper", &mut sleeper), ("keep-alive", &mut keep)] {
        let r = c
            .answer_within(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(r.status, 200, "{what}");
    }
    let status = queued.join().expect("the queued client");
    assert_eq!(status.expect("the queued client's answer"), 200);
    let stats = server.stats();
    assert_eq!(stats.get("errors.overloaded"), 1, "{}", stats.0);
    assert_eq!(
        stats.sum("rejected_503"),
        2,
        "one pool, listed per worker: {}",
        stats.0
    );
}

#[test]
fn threadpool_event_tls_connections_park_between_requests_and_mid_head() {
    let (_, issued) = Pki::shared();
    let tls = crate::tls::tls_args(issued);
    let mut args: Vec<&str> = tls.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--threadpool-size", "2"]);
    let server = start(&args);
    assert!(server.is_https());
    // More idle TLS clients than threads, and one sending its head a byte
    // per TLS record.
    let mut idle = idle_clients(&server, 8);
    let mut slow = server.connect();
    let head = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n\r\n";
    for b in &head[..head.len() - 1] {
        slow.send(std::slice::from_ref(b));
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut fresh = server.connect();
    fresh.send(&get_close("/_httplite/plaintext"));
    let r = fresh
        .answer_within(ANSWER_WAIT)
        .expect("a fresh TLS client's answer");
    assert_eq!(r.status, 200);
    assert!(parked(&server) >= 9);
    slow.send(&head[head.len() - 1..]);
    let r = slow
        .answer_within(ANSWER_WAIT)
        .expect("the slow head's answer");
    assert_eq!(r.status, 200);
    for (i, c) in idle.iter_mut().enumerate() {
        c.send(&get_req("/_httplite/json"));
        let r = c
            .answer_within(ANSWER_WAIT)
            .unwrap_or_else(|e| panic!("idle client {i}: {e}"));
        assert_eq!(r.status, 200, "idle client {i}");
    }
}
