//! `--header-timeout`, `--idle-timeout`, `--write-timeout` (all 1 s here).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::harness::{
    Client, Server, TempDir, get_close, get_req, heavy_lock, is_timeout, runtimes, wait_until,
};

/// Earliest acceptable close for a 1 s timeout (timer rounding slack).
const NOT_BEFORE: Duration = Duration::from_millis(900);
/// Latest acceptable close for a 1 s timeout.
const NOT_AFTER: Duration = Duration::from_secs(3);

#[test]
fn slowloris_is_closed_within_the_header_timeout_while_others_are_served() {
    const SLOW: usize = 10;
    const THREADS: usize = 10;
    const PER_THREAD: usize = 20; // 200 other clients
    let _heavy = heavy_lock();
    for rt in runtimes() {
        let server = Server::start(rt, &["--header-timeout", "1s"]);
        let addr = server.addr();
        let (ready_tx, ready_rx) = mpsc::channel();

        // The slow clients: a request line, then one header byte every
        // 100 ms, never finishing the head. Returns when each was closed
        // (measured from its first byte), or None if it was not in 5 s.
        let slow = std::thread::spawn(move || {
            let mut conns: Vec<(TcpStream, Instant, Option<Duration>)> = (0..SLOW)
                .map(|_| {
                    // Read before connecting: the server's deadline cannot
                    // start earlier, however late this thread runs.
                    let start = Instant::now();
                    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
                    s.set_nodelay(true).unwrap();
                    (&s).write_all(b"GET /_httplite/plaintext HTTP/1.1\r\n")
                        .unwrap();
                    s.set_nonblocking(true).unwrap();
                    (s, start, None)
                })
                .collect();
            ready_tx.send(()).unwrap();
            let trickle = b"X-Slow: abcdefghijklmnopqrstuvwxyz";
            let end = Instant::now() + Duration::from_secs(5);
            let mut i = 0;
            while Instant::now() < end && conns.iter().any(|c| c.2.is_none()) {
                for (s, start, closed) in conns.iter_mut().filter(|c| c.2.is_none()) {
                    let _ = s.write(&trickle[i % trickle.len()..][..1]);
                    let mut buf = [0u8; 1024];
                    // Anything but "would block" means the server gave up
                    // on it (an error response, a FIN or a reset).
                    match s.read(&mut buf) {
                        Err(e) if is_timeout(&e) => {}
                        _ => *closed = Some(start.elapsed()),
                    }
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            conns.into_iter().map(|c| c.2).collect::<Vec<_>>()
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("slow clients did not connect");
        // The server holds them all (plus the connection asking).
        assert!(
            wait_until(Duration::from_secs(5), Duration::from_millis(5), || {
                server.stats().get("connections.open") > SLOW as u64
            }),
            "[{rt}] the server never held the {SLOW} slow clients: {}",
            server.stats().0
        );

        // An ordinary client is served while they are pending: the stats
        // taken after its answer still show no header timeout and all of
        // them open. (An event, not a race of 200 clients against 1 s.)
        let r = server.get("/_httplite/plaintext");
        assert_eq!(r.status, 200, "[{rt}]");
        let stats = server.stats();
        assert_eq!(
            stats.get("timeouts.header"),
            0,
            "[{rt}] a slow client timed out before an ordinary one was served: {}",
            stats.0
        );
        assert!(
            stats.get("connections.open") > SLOW as u64,
            "[{rt}] {}",
            stats.0
        );

        // Then 200 more ordinary clients, all served.
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut ok = 0;
                    for _ in 0..PER_THREAD {
                        let mut c = Client::connect(addr);
                        c.send(&get_close("/_httplite/plaintext"));
                        let r = c.read_response();
                        if r.status == 200 && r.body == b"Hello, World!" {
                            ok += 1;
                        }
                    }
                    ok
                })
            })
            .collect();
        let ok: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let closes = slow.join().unwrap();

        assert_eq!(
            ok,
            THREADS * PER_THREAD,
            "[{rt}] ordinary clients not all served"
        );
        for (i, c) in closes.iter().enumerate() {
            let t = c.unwrap_or_else(|| panic!("[{rt}] slow client {i} still open after 5 s"));
            assert!(
                (NOT_BEFORE..=NOT_AFTER).contains(&t),
                "[{rt}] slow client {i} closed after {t:?}; header timeout is 1 s"
            );
        }
        let stats = server.stats();
        assert!(
            stats.get("timeouts.header") >= SLOW as u64,
            "[{rt}] {}",
            stats.0
        );
    }
}

#[test]
fn silent_connection_is_closed_by_the_header_timeout() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--header-timeout", "1s", "--idle-timeout", "30s"]);
        // Each lower bound is read before the event that starts the server's
        // clock, so a client thread scheduled late cannot make it fail.
        let t = Instant::now();
        let mut c = server.connect();
        c.expect_open(Duration::from_millis(500));
        let extra = c
            .wait_closed(NOT_AFTER)
            .unwrap_or_else(|| panic!("[{rt}] silent connection still open after 3 s"));
        let took = t.elapsed();
        assert!(took >= NOT_BEFORE, "[{rt}] closed after {took:?}");
        // Either nothing or an error response (408) is fine.
        if !extra.is_empty() {
            let text = String::from_utf8_lossy(&extra);
            assert!(text.starts_with("HTTP/1.1 408"), "[{rt}] {text:?}");
        }
        assert!(server.stats().get("timeouts.header") >= 1, "[{rt}]");
    }
}

#[test]
fn partial_head_after_a_request_is_closed_by_the_header_timeout() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--header-timeout", "1s", "--idle-timeout", "30s"]);
        let mut c = server.connect();
        let t = Instant::now();
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        c.send(b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n");
        let extra = c
            .wait_closed(NOT_AFTER)
            .unwrap_or_else(|| panic!("[{rt}] stalled head still open after 3 s"));
        let took = t.elapsed();
        assert!(took >= NOT_BEFORE, "[{rt}] closed after {took:?}");
        if !extra.is_empty() {
            let text = String::from_utf8_lossy(&extra);
            assert!(text.starts_with("HTTP/1.1 408"), "[{rt}] {text:?}");
        }
        assert!(server.stats().get("timeouts.header") >= 1, "[{rt}]");
    }
}

#[test]
fn idle_keep_alive_connection_is_closed_by_the_idle_timeout() {
    // With the idle timeout the longest (the defaults' shape), a connection
    // going idle moves no timer; with a shorter one, it does. Both close.
    let configs: [&[&str]; 2] = [
        &["--idle-timeout", "1s"],
        &[
            "--idle-timeout",
            "1s",
            "--header-timeout",
            "1s",
            "--write-timeout",
            "1s",
        ],
    ];
    for (rt, flags) in runtimes().iter().flat_map(|rt| configs.map(|f| (rt, f))) {
        let server = Server::start(rt, flags);
        let mut c = server.connect();
        // Activity keeps it alive past the timeout.
        for _ in 0..3 {
            assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
            std::thread::sleep(Duration::from_millis(300));
        }
        let t = Instant::now();
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        c.expect_open(Duration::from_millis(500));
        c.expect_closed(NOT_AFTER);
        let took = t.elapsed();
        assert!(took >= NOT_BEFORE, "[{rt}] idle close after {took:?}");
        let stats = server.stats();
        assert_eq!(stats.get("timeouts.idle"), 1, "[{rt}] {}", stats.0);
    }
}

#[test]
fn client_that_stops_reading_is_closed_by_the_write_timeout() {
    for rt in runtimes() {
        let dir = TempDir::new("write-timeout");
        // A sparse 256 MiB file: far more than the socket buffers hold.
        let f = std::fs::File::create(dir.path().join("big.bin")).unwrap();
        f.set_len(256 << 20).unwrap();
        drop(f);
        let root = dir.path().to_str().unwrap();
        let server = Server::start(
            rt,
            &[
                "--root",
                root,
                "--write-timeout",
                "1s",
                "--expose",
                "plaintext",
            ],
        );
        let mut c = server.connect();
        c.send(&get_req("/big.bin"));
        // Never read; the server must give up on its own.
        let gave_up = wait_until(Duration::from_secs(6), Duration::from_millis(100), || {
            server.stats().get("timeouts.write") >= 1
        });
        assert!(
            gave_up,
            "[{rt}] no write timeout counted: {}",
            server.stats().0
        );
        // What arrived is a truncated response, then the close.
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 20];
        let end = Instant::now() + Duration::from_secs(10);
        c.stream()
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut stream = c.stream().try_clone().unwrap();
        loop {
            assert!(
                Instant::now() < end,
                "[{rt}] connection not closed after a write timeout"
            );
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if is_timeout(&e) => {
                    panic!("[{rt}] connection still open after a write timeout ({got} bytes read)")
                }
                Err(_) => break, // reset
            }
        }
        assert!(
            got < (256 << 20),
            "[{rt}] the whole file arrived ({got} bytes)"
        );
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}
