//! What real clients do that a benchmark's do not, on every design with its
//! default settings: heads that trickle in a byte at a time beside fresh
//! clients (slowloris), heads sent in pieces with silences between them,
//! and ApacheBench's keep-alive run (`ab -k`, 100 at once).
//!
//! A design that gives each connection a thread for its whole life fails
//! all three (`--runtime threadpool --threadpool-mode connection`: the slow
//! and silent clients take every thread); each wait here is bounded, so
//! such a failure comes in seconds.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{Client, Server, Stats, get_close, get_req, heavy_lock, runtimes};

/// Longest a client waits for an answer here.
const ANSWER_WAIT: Duration = Duration::from_secs(3);
/// A fresh client beside the slow ones must be answered within this.
const FRESH_WITHIN: Duration = Duration::from_secs(2);

/// The server's default `--threadpool-size` on this machine (4 per CPU): as
/// many slow clients as that at least, so that each would hold a thread.
pub fn pool_size() -> usize {
    4 * std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// `slow_count` clients send half a head and then one header byte per
/// 100 ms, never finishing it; meanwhile 20 fresh clients, one at a time,
/// must each be answered within [`FRESH_WITHIN`]. Returns the server's
/// stats, taken while the slow clients are still trickling.
pub fn fresh_clients_beside_slowloris(server: &Server, slow_count: usize) -> Stats {
    let addr = server.addr();
    let mut slow: Vec<Client> = (0..slow_count)
        .map(|_| {
            let mut c = Client::connect(addr);
            c.send(b"GET /_httplite/plaintext HTTP/1.1\r\n");
            c
        })
        .collect();
    let trickle = b"X-Slow: abcdefghijklmnopqrstuvwxyz";
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (slow, stop) = (&mut slow, &stop);
        // Bounded: at most 30 s.
        scope.spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                for c in slow.iter_mut() {
                    let _ = c.try_send(&trickle[i % trickle.len()..][..1]);
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for i in 0..20 {
                let t = Instant::now();
                let mut c = Client::connect(addr);
                c.send(&get_close("/_httplite/plaintext"));
                let r = c.answer_within(ANSWER_WAIT).unwrap_or_else(|e| {
                    panic!("fresh client {i}: no answer within {ANSWER_WAIT:?} beside {slow_count} slow ones ({e})")
                });
                let took = t.elapsed();
                assert_eq!(r.status, 200, "fresh client {i}");
                assert!(took < FRESH_WITHIN, "fresh client {i} took {took:?}");
            }
            server.stats()
        }));
        stop.store(true, Ordering::SeqCst);
        result.unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

#[test]
fn fresh_clients_are_answered_at_once_beside_slowloris_clients() {
    let _heavy = heavy_lock();
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let stats = fresh_clients_beside_slowloris(&server, pool_size().max(8));
        // The slow ones are still within their header timeout (10 s).
        assert_eq!(stats.get("timeouts.header"), 0, "[{rt}] {}", stats.0);
    }
}

/// `count` connections each send a `POST /_httplite/echo` whose head comes
/// in three pieces 500 ms apart (silent between them), all at once; each
/// must get its body back, and its connection go on.
pub fn heads_in_pieces(server: &Server, count: usize) {
    let body = b"the body of a request whose head came in three pieces";
    let head = format!(
        "POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nX-Pieces: three, 500 ms apart\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let (a, b) = (head.len() / 3, 2 * head.len() / 3);
    let mut conns: Vec<Client> = (0..count).map(|_| server.connect()).collect();
    for c in &mut conns {
        c.send(&head.as_bytes()[..a]);
    }
    std::thread::sleep(Duration::from_millis(500));
    for c in &mut conns {
        c.send(&head.as_bytes()[a..b]);
    }
    std::thread::sleep(Duration::from_millis(500));
    for c in &mut conns {
        c.send(&[&head.as_bytes()[b..], &body[..]].concat());
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let r = c
            .answer_within(ANSWER_WAIT)
            .unwrap_or_else(|e| panic!("request {i} in pieces: no answer ({e})"));
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.body, body, "request {i}");
    }
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&get_req("/_httplite/plaintext"));
        let r = c.answer_within(ANSWER_WAIT).unwrap();
        assert_eq!(r.status, 200, "request {i}'s connection, next request");
    }
}

#[test]
fn fifteen_heads_sent_in_pieces_500_ms_apart_are_all_answered() {
    let _heavy = heavy_lock();
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        // More than the thread pool's default size on this machine.
        heads_in_pieces(&server, 15.max(pool_size() + 1));
    }
}

/// `ab -k -c 100 -n N` (ApacheBench, keep-alive, 100 connections at once):
/// its report's lines.
fn ab_keep_alive(server: &Server, n: usize) -> String {
    let url = server.url("/_httplite/plaintext");
    let out = Command::new("timeout")
        .args([
            "60",
            "ab",
            "-k",
            "-q",
            "-c",
            "100",
            "-n",
            &n.to_string(),
            "-s",
            "10",
        ])
        .arg(&url)
        .output()
        .expect("run ab (apache2-utils; scripts/test.sh installs it)");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ab failed ({:?}): {report}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// The number after `label` in ab's report.
fn ab_figure(report: &str, label: &str) -> Option<u64> {
    let line = report.lines().find(|l| l.starts_with(label))?;
    line[label.len()..].split_whitespace().next()?.parse().ok()
}

#[test]
fn ab_keep_alive_with_100_connections_completes() {
    let _heavy = heavy_lock();
    const N: u64 = 20_000;
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let report = ab_keep_alive(&server, N as usize);
        assert_eq!(
            ab_figure(&report, "Complete requests:"),
            Some(N),
            "[{rt}] {report}"
        );
        assert_eq!(
            ab_figure(&report, "Failed requests:"),
            Some(0),
            "[{rt}] {report}"
        );
        assert!(!report.contains("Non-2xx responses"), "[{rt}] {report}");
        // Every request on a kept-alive connection (ab opens 100).
        assert_eq!(
            ab_figure(&report, "Keep-Alive requests:"),
            Some(N),
            "[{rt}] {report}"
        );
    }
}
