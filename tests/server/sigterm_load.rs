//! SIGTERM under load: slow responses (sleeps, large downloads read
//! slowly) and keep-alive traffic are in flight when the signal arrives.
//! Every request whose response had begun completes byte for byte, every
//! in-flight sleep is answered, and the server exits 0 within
//! `--shutdown-timeout`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{
    Client, IO_TIMEOUT, Server, TempDir, find, get_req, heavy_lock, pseudo_random, runtimes,
    wait_until,
};

const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Downloads read slowly: begun before the signal, finished after it.
const DOWNLOADS: usize = 4;
/// Far more than the socket buffers on both ends hold (4 MiB + 6 MiB at
/// most), so most of each download is sent after the signal, not left in
/// the kernel by a server that has already exited.
const FILE_SIZE: usize = 24 << 20;
/// Read this much, then pause `READ_PAUSE`: ~6 MB/s, so a download takes
/// ~4 s and is under way, not done, when the signal comes.
const READ_STEP: usize = 64 << 10;
const READ_PAUSE: Duration = Duration::from_millis(10);
/// In-flight sleeps, answered after the signal.
const SLEEPS: usize = 20;
/// Long enough for all of them to be asleep at once on a loaded machine;
/// well under `--shutdown-timeout`.
const SLEEP_MS: u64 = 3000;
/// Keep-alive clients looping on plaintext through the signal.
const KEEPALIVE: usize = 8;

/// What one connection saw.
#[derive(Debug)]
enum Seen {
    /// Every response that began arrived whole and right.
    Complete(usize),
    /// A response began and did not complete, or was wrong.
    Broken(String),
}

/// Reads one response; `Ok(None)` if the connection closed before any
/// byte of it arrived (the request was never begun).
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, slow: bool) -> io::Result<Option<Vec<u8>>> {
    let mut chunk = vec![0u8; READ_STEP];
    let mut need: Option<usize> = None;
    loop {
        if need.is_none()
            && let Some(i) = find(buf, b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let cl = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| io::Error::other(format!("no Content-Length in {head:?}")))?;
            need = Some(i + 4 + cl);
        }
        if let Some(n) = need
            && buf.len() >= n
        {
            let resp = buf[..n].to_vec();
            buf.drain(..n);
            return Ok(Some(resp));
        }
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if buf.is_empty() => return Err(e),
            Err(e) => return Err(io::Error::other(format!("{e} after {} bytes", buf.len()))),
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::other(format!(
                "closed after {} bytes of a response",
                buf.len()
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
        if slow {
            std::thread::sleep(READ_PAUSE);
        }
    }
}

fn body_of(resp: &[u8]) -> &[u8] {
    &resp[find(resp, b"\r\n\r\n").map_or(resp.len(), |i| i + 4)..]
}

fn status_of(resp: &[u8]) -> &[u8] {
    resp.get(9..12).unwrap_or_default()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

#[test]
fn sigterm_under_load_completes_every_begun_response_and_exits_0() {
    let _heavy = heavy_lock();
    let data = pseudo_random(FILE_SIZE);
    let dir = TempDir::new("sigterm-load");
    dir.write("big.bin", &data);
    let root = dir.path().to_str().unwrap().to_string();
    for rt in runtimes() {
        let mut args = vec![
            "--root",
            &root,
            "--expose",
            "plaintext,sleep",
            "--shutdown-timeout",
            "10s",
            "--write-timeout",
            "30s",
        ];
        if *rt == "threadpool" {
            // Each download and each sleep holds its pool thread while it
            // runs (a handler's work, in either mode), and all are to be
            // under way at once, beside the keep-alive clients.
            args.extend(["--threadpool-size", "64"]);
        }
        let mut server = Server::start(rt, &args);
        let addr = server.addr();
        let began = AtomicUsize::new(0); // downloads with their first bytes in
        let keepalive_done = AtomicUsize::new(0);
        let sleeps_sent = AtomicUsize::new(0);
        let signalled = AtomicBool::new(false);

        let (downloads, sleeps, keepalive, exit) = std::thread::scope(|scope| {
            let downloads: Vec<_> = (0..DOWNLOADS)
                .map(|_| {
                    let (data, began) = (&data, &began);
                    scope.spawn(move || {
                        let mut s = connect(addr);
                        s.write_all(&get_req("/big.bin")).unwrap();
                        let mut buf = Vec::new();
                        // Read the first step before saying it began.
                        let mut first = vec![0u8; READ_STEP];
                        let n = s.read(&mut first).unwrap_or(0);
                        buf.extend_from_slice(&first[..n]);
                        began.fetch_add(1, Ordering::SeqCst);
                        match read_response(&mut s, &mut buf, true) {
                            Ok(Some(r)) if status_of(&r) == b"200" && body_of(&r) == &data[..] => {
                                Seen::Complete(1)
                            }
                            Ok(Some(r)) => Seen::Broken(format!(
                                "download: status {:?}, {} body bytes, content differs",
                                String::from_utf8_lossy(status_of(&r)),
                                body_of(&r).len()
                            )),
                            Ok(None) => Seen::Broken("download: closed before the response".into()),
                            Err(e) => Seen::Broken(format!("download cut short: {e}")),
                        }
                    })
                })
                .collect();
            let keepalive: Vec<_> = (0..KEEPALIVE)
                .map(|_| {
                    let (done, signalled) = (&keepalive_done, &signalled);
                    scope.spawn(move || {
                        let mut s = connect(addr);
                        let mut buf = Vec::new();
                        let mut n = 0;
                        // Bounded: stops at the server's close; the cap only
                        // guards against a server that never closes.
                        for _ in 0..10_000_000 {
                            if s.write_all(&get_req("/_httplite/plaintext")).is_err() {
                                // Closed by the server before this request
                                // began: nothing was promised.
                                break;
                            }
                            match read_response(&mut s, &mut buf, false) {
                                Ok(Some(r))
                                    if status_of(&r) == b"200"
                                        && body_of(&r) == b"Hello, World!" =>
                                {
                                    n += 1;
                                    done.fetch_add(1, Ordering::Relaxed);
                                    let head = String::from_utf8_lossy(&r).to_ascii_lowercase();
                                    if head.contains("connection: close") {
                                        break;
                                    }
                                }
                                Ok(Some(r)) => {
                                    return Seen::Broken(format!(
                                        "keep-alive: {:?}",
                                        String::from_utf8_lossy(&r)
                                    ));
                                }
                                // Closed (or reset) before any byte of the
                                // answer: the request was not begun.
                                Ok(None) => break,
                                Err(_) if buf.is_empty() && signalled.load(Ordering::SeqCst) => {
                                    break;
                                }
                                Err(e) => return Seen::Broken(format!("keep-alive: {e}")),
                            }
                        }
                        Seen::Complete(n)
                    })
                })
                .collect();

            // Under way: downloads begun, keep-alive busy.
            let ready = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
                began.load(Ordering::SeqCst) == DOWNLOADS
                    && keepalive_done.load(Ordering::Relaxed) >= 100 * KEEPALIVE
            });
            assert!(ready, "[{rt}] load never got under way");
            // Only then the sleeps, so that none can end before the signal
            // however long the load took to start.
            let sleeps: Vec<_> = (0..SLEEPS)
                .map(|_| {
                    let sent = &sleeps_sent;
                    scope.spawn(move || {
                        let mut s = connect(addr);
                        s.write_all(&get_req(&format!("/_httplite/sleep?ms={SLEEP_MS}")))
                            .unwrap();
                        sent.fetch_add(1, Ordering::SeqCst);
                        let mut buf = Vec::new();
                        match read_response(&mut s, &mut buf, false) {
                            Ok(Some(r))
                                if status_of(&r) == b"200"
                                    && body_of(&r)
                                        == format!("slept {SLEEP_MS} ms\n").as_bytes() =>
                            {
                                Seen::Complete(1)
                            }
                            Ok(Some(r)) => {
                                Seen::Broken(format!("sleep: {:?}", String::from_utf8_lossy(&r)))
                            }
                            Ok(None) => Seen::Broken("sleep: in flight, never answered".into()),
                            Err(e) => Seen::Broken(format!("sleep: {e}")),
                        }
                    })
                })
                .collect();
            let sent = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
                sleeps_sent.load(Ordering::SeqCst) == SLEEPS
            });
            assert!(sent, "[{rt}] sleeps not sent");
            // Every sleep is written; wait until the server is in all of
            // them (its `sleeping` gauge), so that each is in flight at the
            // signal and must be answered.
            let asleep = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
                server.stats().get("sleeping") == SLEEPS as u64
            });
            assert!(
                asleep,
                "[{rt}] the server never held all {SLEEPS} sleeps: {}",
                server.stats().0
            );
            signalled.store(true, Ordering::SeqCst);
            server.signal(libc::SIGTERM);
            let t = Instant::now();
            let exit = server
                .wait_exit(SHUTDOWN_TIMEOUT + Duration::from_secs(5))
                .map(|s| (s, t.elapsed()));
            let join = |hs: Vec<std::thread::ScopedJoinHandle<'_, Seen>>| -> Vec<Seen> {
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            };
            (join(downloads), join(sleeps), join(keepalive), exit)
        });

        let (status, took) = exit.unwrap_or_else(|| {
            panic!(
                "[{rt}] did not exit within {SHUTDOWN_TIMEOUT:?} + 5 s of SIGTERM: {}",
                server.stderr()
            )
        });
        let broken: Vec<&String> = downloads
            .iter()
            .chain(&sleeps)
            .chain(&keepalive)
            .filter_map(|s| match s {
                Seen::Broken(why) => Some(why),
                Seen::Complete(_) => None,
            })
            .collect();
        assert!(
            broken.is_empty(),
            "[{rt}] begun responses broken: {broken:?}"
        );
        assert_eq!(
            status.code(),
            Some(0),
            "[{rt}] exit status {status}: {}",
            server.stderr()
        );
        assert!(
            took <= SHUTDOWN_TIMEOUT + Duration::from_secs(1),
            "[{rt}] exit took {took:?}, more than --shutdown-timeout 10s"
        );
        // After the exit, nothing answers.
        assert!(
            Client::try_connect(addr).is_err(),
            "[{rt}] still accepting after exit"
        );
        let served: usize = keepalive
            .iter()
            .map(|s| match s {
                Seen::Complete(n) => *n,
                Seen::Broken(_) => 0,
            })
            .sum();
        eprintln!(
            "[{rt}] SIGTERM under load: {DOWNLOADS} downloads of {FILE_SIZE} bytes and \
             {SLEEPS} sleeps completed, {served} keep-alive requests, exit 0 after {took:?}"
        );
    }
}
