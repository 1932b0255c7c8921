//! Many connections: 2,000 concurrent × 10 requests, and no fd leak after
//! 10,000 connections come and go.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{
    Client, Server, fd_limit, get_close, get_req, heavy_lock, runtimes, wait_until,
};

#[test]
fn two_thousand_concurrent_connections_ten_requests_each() {
    let _heavy = heavy_lock();
    for rt in runtimes() {
        // Default settings on every design, threadpool's event mode
        // included: its idle keep-alive connections wait in the front,
        // not on a thread.
        two_thousand_keepalive_clients(rt, &[]);
    }
}

/// 2,000 keep-alive connections, all open at once, each sending 10
/// requests in rounds (every connection waits for the others'); every
/// answer must be a 200. Hold [`heavy_lock`] around it.
pub fn two_thousand_keepalive_clients(rt: &str, args: &[&str]) {
    const THREADS: usize = 50;
    const PER_THREAD: usize = 40; // 2,000 connections
    const ROUNDS: usize = 10;
    let server = Server::start(rt, args);
    assert!(
        fd_limit() >= 2 * (THREADS * PER_THREAD) as u64 + 200,
        "RLIMIT_NOFILE {} is too low for 2,000 connections (client + server)",
        fd_limit()
    );
    let addr = server.addr();
    let opened = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let opened = opened.clone();
            let failed = failed.clone();
            let go = go.clone();
            std::thread::spawn(move || -> usize {
                let run = || {
                    let mut conns: Vec<Client> =
                        (0..PER_THREAD).map(|_| Client::connect(addr)).collect();
                    // Everyone holds all their connections open before
                    // the first request: 2,000 at once (bounded wait
                    // for the main thread to check that and say go).
                    opened.fetch_add(1, Ordering::SeqCst);
                    wait_until(Duration::from_secs(30), Duration::from_millis(5), || {
                        go.load(Ordering::SeqCst) || failed.load(Ordering::SeqCst)
                    });
                    let mut ok = 0;
                    for round in 0..ROUNDS {
                        for (i, c) in conns.iter_mut().enumerate() {
                            let path = if (t + i + round) % 2 == 0 {
                                "/_httplite/plaintext"
                            } else {
                                "/_httplite/json"
                            };
                            c.send(&get_req(path));
                        }
                        for (i, c) in conns.iter_mut().enumerate() {
                            let r = c.read_response();
                            let want: &[u8] = if (t + i + round) % 2 == 0 {
                                b"Hello, World!"
                            } else {
                                br#"{"message":"Hello, World!"}"#
                            };
                            assert_eq!(r.status, 200, "thread {t} conn {i} round {round}");
                            assert_eq!(r.body, want, "thread {t} conn {i} round {round}");
                            ok += 1;
                        }
                    }
                    ok
                };
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
                    Ok(ok) => ok,
                    Err(e) => {
                        failed.store(true, Ordering::SeqCst);
                        std::panic::resume_unwind(e)
                    }
                }
            })
        })
        .collect();
    // All connected: the server sees them all open at once.
    let all_connected = wait_until(Duration::from_secs(30), Duration::from_millis(5), || {
        opened.load(Ordering::SeqCst) == THREADS || failed.load(Ordering::SeqCst)
    });
    let mut open_seen = 0;
    if all_connected && !failed.load(Ordering::SeqCst) {
        wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
            open_seen = server.stats().get("connections.open");
            open_seen > (THREADS * PER_THREAD) as u64
        });
    }
    go.store(true, Ordering::SeqCst);
    let mut ok = 0;
    let mut errors = Vec::new();
    for th in threads {
        match th.join() {
            Ok(n) => ok += n,
            Err(e) => errors.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
        }
    }
    assert!(
        errors.is_empty(),
        "[{rt}] client threads failed: {errors:?}"
    );
    assert_eq!(ok, THREADS * PER_THREAD * ROUNDS, "[{rt}]");
    assert!(
        open_seen > (THREADS * PER_THREAD) as u64,
        "[{rt}] the server never had all {} connections open at once (saw {open_seen})",
        THREADS * PER_THREAD
    );
    let stats = server.stats();
    assert!(
        stats.get("connections.total") > (THREADS * PER_THREAD) as u64,
        "[{rt}] {}",
        stats.0
    );
    assert!(
        stats.get("requests") > (THREADS * PER_THREAD * ROUNDS) as u64,
        "[{rt}] {}",
        stats.0
    );
}

#[test]
fn no_fd_leak_after_ten_thousand_connections() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 1250; // 10,000 connections
    let _heavy = heavy_lock();
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        // Warm up (lazily created fds, buffers), then wait for a stable count.
        for _ in 0..20 {
            assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        let mut baseline = server.fd_count();
        wait_until(Duration::from_secs(2), Duration::from_millis(50), || {
            let now = server.fd_count();
            let stable = now == baseline;
            baseline = now;
            stable
        });

        let addr = server.addr();
        let started = Instant::now();
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let mut c = Client::connect(addr);
                        // Vary how connections end: the server closes
                        // (Connection: close), the client closes after the
                        // answer, the client resets, the client vanishes
                        // mid-request, the client half-closes.
                        match (t * PER_THREAD + i) % 5 {
                            0 => {
                                c.send(&get_close("/_httplite/plaintext"));
                                assert_eq!(c.read_response().status, 200);
                                c.expect_closed(Duration::from_secs(5));
                            }
                            1 => {
                                c.send(&get_req("/_httplite/json"));
                                assert_eq!(c.read_response().status, 200);
                            }
                            2 => {
                                c.send(&get_req("/_httplite/plaintext"));
                                assert_eq!(c.read_response().status, 200);
                                c.close_with_reset();
                            }
                            3 => {
                                c.send(b"GET /_httplite/plaintext HTTP/1.1\r\nHost:");
                            }
                            _ => {
                                c.send(&get_req("/_httplite/plaintext"));
                                c.shutdown_write();
                                assert_eq!(c.read_response().status, 200);
                                c.expect_closed(Duration::from_secs(5));
                            }
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().expect("client thread failed");
        }
        let took = started.elapsed();

        let mut last = 0;
        let back = wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            last = server.fd_count();
            last <= baseline
        });
        assert!(
            back,
            "[{rt}] fd leak: {last} fds open 5 s after 10,000 connections \
             (baseline {baseline}; clients took {took:?})"
        );
        // Only the stats request's own connection is open. A connection's
        // close is counted just after its socket closes, so poll briefly.
        let mut stats = server.stats();
        let settled = wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            stats = server.stats();
            stats.get("connections.open") == 1
        });
        assert!(
            stats.get("connections.total") >= (THREADS * PER_THREAD) as u64,
            "[{rt}] {}",
            stats.0
        );
        assert!(
            settled,
            "[{rt}] connections still counted open: {}",
            stats.0
        );
    }
}
