//! A log never stops the server: with the access log's destination stalled
//! (a FIFO whose reader never reads) or failing (`/dev/full`), requests go
//! on being answered, the lost lines are counted in the stats and reported
//! on stderr; with `--access-log-full block` the lines wait instead. Lines
//! logged by many connections at once (under `fork`, many processes) are
//! never cut into one another, to a file or to a pipe; under `fork` a line
//! too long for one write to a pipe is dropped whole and counted.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::harness::{Client, Server, Stats, TempDir, get_req, is_fork, runtimes, wait_until};

/// Requests sent: their log lines (~80 bytes each) are far more than a
/// pipe (64 KiB) and the writer's queue (64 batches of 16 KiB) hold.
const REQUESTS: usize = 20_000;

/// Sends `REQUESTS` pipelined plaintext requests, 100 per write, and reads
/// every answer.
fn flood(server: &Server) {
    flood_on(server.connect(), server.runtime(), &AtomicUsize::new(0));
}

/// [`flood`] on the connection `c` (to a server on runtime `rt`),
/// counting the answers in `answered`.
fn flood_on(mut c: Client, rt: &str, answered: &AtomicUsize) {
    let batch: Vec<u8> = (0..100)
        .flat_map(|_| get_req("/_httplite/plaintext"))
        .collect();
    for _ in 0..REQUESTS / 100 {
        c.send(&batch);
        for _ in 0..100 {
            assert_eq!(c.read_response().status, 200, "[{rt}]");
            answered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A FIFO at `path` with a reader that never reads (kept open by the
/// returned file, so the server's writes fill it and then stall).
fn stalled_fifo(dir: &TempDir) -> (String, File) {
    let path = dir.path().join("log.fifo");
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path alive for the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap();
    (path.to_str().unwrap().to_string(), reader)
}

/// Reads `reader` (non-blocking) on a thread until every writer has closed
/// it, for at most `within`; `None` if it did not end in time or failed.
fn read_until_closed(
    mut reader: File,
    within: Duration,
) -> std::thread::JoinHandle<Option<Vec<u8>>> {
    use std::io::Read as _;
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            match reader.read(&mut buf) {
                Ok(0) => return Some(text),
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => return None,
            }
        }
        None
    })
}

#[test]
fn a_stalled_log_loses_lines_but_never_stops_the_server() {
    for rt in runtimes() {
        let dir = TempDir::new("log-fifo");
        let (fifo, _reader) = stalled_fifo(&dir);
        let server = Server::start(rt, &["--access-log", &fifo]);
        flood(&server);
        // A new connection is still answered at once.
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let dropped = wait_until(Duration::from_secs(5), Duration::from_millis(100), || {
            server.stats().get("access_log.dropped") > 0
        });
        assert!(
            dropped,
            "[{rt}] nothing counted as dropped: {}",
            server.stats().0
        );
        let reported = wait_until(Duration::from_secs(8), Duration::from_millis(100), || {
            server.stderr().contains("access log:")
        });
        assert!(reported, "[{rt}] no report on stderr: {}", server.stderr());
        assert!(
            server.stderr().contains("not keeping up"),
            "[{rt}] {}",
            server.stderr()
        );
    }
}

#[test]
fn a_failing_log_is_counted_and_reported() {
    for rt in runtimes() {
        let mut server = Server::start(rt, &["--access-log", "/dev/full"]);
        let mut c = server.connect();
        for _ in 0..50 {
            assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        // A worker hands its lines over when a line of a later second comes
        // (every runtime) or on its one-second timer (stackless).
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let counted = wait_until(Duration::from_secs(5), Duration::from_millis(100), || {
            server.stats().get("access_log.dropped") >= 50
        });
        assert!(counted, "[{rt}] {}", server.stats().0);
        assert_eq!(server.stats().get("access_log.written"), 0, "[{rt}]");
        assert_eq!(server.terminate().code(), Some(0), "[{rt}]");
        assert!(
            server.stderr().contains("No space left on device"),
            "[{rt}] {}",
            server.stderr()
        );
    }
}

#[test]
fn with_block_every_line_is_written_once_the_reader_reads() {
    for rt in runtimes() {
        let dir = TempDir::new("log-block");
        let (fifo, reader) = stalled_fifo(&dir);
        let args = ["--access-log", fifo.as_str(), "--access-log-full", "block"];
        let mut server = Server::start(rt, &args);
        let c = server.connect();
        let answered = Arc::new(AtomicUsize::new(0));
        let count = answered.clone();
        let load = std::thread::spawn(move || flood_on(c, rt, &count));
        // The reader starts late: once the lines outgrow the pipe and the
        // writer's queue, the load stops (every worker waits for room), or
        // it ends if lines were dropped instead. Checked as a count that
        // no longer moves over two looks 300 ms apart.
        let mut last = usize::MAX;
        let settled = wait_until(Duration::from_secs(30), Duration::from_millis(300), || {
            let now = answered.load(Ordering::Relaxed);
            std::mem::replace(&mut last, now) == now
        });
        assert!(settled, "[{rt}] the load neither stopped nor ended");
        assert!(
            last < REQUESTS,
            "[{rt}] all {REQUESTS} answered while nobody read the log"
        );
        // Now read everything, to the end of the stream (the server's exit:
        // a blocking worker hands its last lines over when it stops).
        let reading = read_until_closed(reader, Duration::from_secs(90));
        load.join()
            .expect("every request answered while the log blocked");
        let stats = server.stats();
        assert_eq!(stats.get("access_log.dropped"), 0, "[{rt}] {}", stats.0);
        assert_eq!(server.terminate().code(), Some(0), "[{rt}]");
        let lines = reading.join().unwrap().expect("the log read to its end");
        let text = String::from_utf8_lossy(&lines);
        let plain = text.lines().filter(|l| l.contains("/_httplite/plaintext"));
        assert_eq!(plain.count(), REQUESTS, "[{rt}] lines in the log");
    }
}

/// Where a test's log goes: a file, or a FIFO read on a thread from the
/// server's start to its exit.
enum Dest {
    File,
    Fifo,
}

/// What [`log_of`] found: the log's text, the stats read just before the
/// server's exit, and its stderr.
struct Logged {
    text: String,
    stats: Stats,
    stderr: String,
}

/// Starts a server on `rt` logging to `dest` in `dir` with `args`, has
/// `run` send its requests, stops the server (exit status 0) and reads the
/// log.
fn log_of(
    rt: &str,
    dest: &Dest,
    dir: &TempDir,
    args: &[&str],
    run: impl FnOnce(&Server),
) -> Logged {
    let (path, reader) = match dest {
        Dest::File => (dir.path().join("access.log").display().to_string(), None),
        Dest::Fifo => {
            let (path, reader) = stalled_fifo(dir);
            (path, Some(reader))
        }
    };
    let mut all = vec!["--access-log", path.as_str()];
    all.extend_from_slice(args);
    let mut server = Server::start(rt, &all);
    // Started once the server holds the FIFO open (before that, a read
    // would find no writer: the end of the stream).
    let reading = reader.map(|r| read_until_closed(r, Duration::from_secs(60)));
    run(&server);
    let stats = server.stats();
    assert_eq!(server.terminate().code(), Some(0), "[{rt}]");
    let bytes = match reading {
        Some(r) => r.join().unwrap().expect("the FIFO read to its end"),
        None => std::fs::read(&path).unwrap(),
    };
    Logged {
        text: String::from_utf8(bytes).unwrap(),
        stats,
        stderr: server.stderr(),
    }
}

#[test]
fn lines_logged_at_once_by_many_connections_are_never_cut() {
    const CONNECTIONS: usize = 20;
    const EACH: usize = 10;
    // Lines of about 2.3 KB: big writes, still within one pipe write.
    let agent = "a".repeat(2000);
    for rt in runtimes() {
        for dest in [Dest::File, Dest::Fifo] {
            let dir = TempDir::new("log-many");
            // `block`: a FIFO reader that falls behind loses no line.
            let args = ["--access-log-format", "json", "--access-log-full", "block"];
            let Logged { text, stats, .. } = log_of(rt, &dest, &dir, &args, |server| {
                std::thread::scope(|s| {
                    for conn in 0..CONNECTIONS {
                        let mut c = server.connect();
                        let agent = &agent;
                        s.spawn(move || {
                            let batch: Vec<u8> = (0..EACH)
                                .flat_map(|i| {
                                    format!(
                                        "GET /_httplite/plaintext?c{conn}r{i} HTTP/1.1\r\n\
                                         Host: x\r\nUser-Agent: {agent}\r\n\r\n"
                                    )
                                    .into_bytes()
                                })
                                .collect();
                            c.send(&batch);
                            for _ in 0..EACH {
                                assert_eq!(c.read_response().status, 200, "[{rt}]");
                            }
                        });
                    }
                });
            });
            let kind = match dest {
                Dest::File => "file",
                Dest::Fifo => "fifo",
            };
            let mut targets = std::collections::HashSet::new();
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("[{rt} {kind}] {e}: a cut line: {line:.200}"));
                let target = v["target"].as_str().unwrap().to_string();
                if target == "/_httplite/stats" {
                    continue; // the harness's, before the exit
                }
                assert_eq!(v["user_agent"], agent.as_str(), "[{rt} {kind}]");
                assert!(targets.insert(target), "[{rt} {kind}] twice: {line:.200}");
            }
            assert_eq!(targets.len(), CONNECTIONS * EACH, "[{rt} {kind}] lines");
            assert_eq!(stats.get("access_log.dropped"), 0, "[{rt} {kind}]");
        }
    }
}

#[test]
fn a_line_too_long_for_one_pipe_write() {
    // A request line of about 5 KB: its log line is longer than PIPE_BUF.
    let long = format!("/_httplite/plaintext?{}", "q".repeat(5000));
    for rt in runtimes() {
        for dest in [Dest::File, Dest::Fifo] {
            let dir = TempDir::new("log-long");
            let logged = log_of(rt, &dest, &dir, &[], |server| {
                let mut c = server.connect();
                assert_eq!(c.get(&long).status, 200, "[{rt}]");
                // (A fork child has written or dropped the long line before
                // it reads the next request: the stats count it by now.)
                assert_eq!(c.get("/_httplite/plaintext?short").status, 200, "[{rt}]");
            });
            let (text, stats) = (&logged.text, &logged.stats);
            // (Less the harness's reads of the stats.)
            let lines: Vec<&str> = (text.lines())
                .filter(|l| !l.contains("/_httplite/stats"))
                .collect();
            let short = |l: &&str| l.contains("\"GET /_httplite/plaintext?short HTTP/1.1\" 200 13");
            let whole = |l: &&str| l.contains(&format!("\"GET {long} HTTP/1.1\" 200 13"));
            match (is_fork(rt), &dest) {
                // A fork child writes each line in one write(2), which a
                // pipe takes in one piece only up to PIPE_BUF: the line is
                // dropped whole, counted and reported, never cut.
                (true, Dest::Fifo) => {
                    assert!(lines.len() == 1 && short(&lines[0]), "[{rt}] {text:.300}");
                    assert_eq!(stats.get("access_log.dropped"), 1, "[{rt}] {}", stats.0);
                    let why = "a line longer than 4096 bytes cannot go to a pipe in one write";
                    assert!(logged.stderr.contains(why), "[{rt}] {}", logged.stderr);
                }
                // A file takes it whole, and so does a pipe from the one
                // writer thread of the other designs.
                _ => {
                    assert_eq!(lines.len(), 2, "[{rt}] {text:.300}");
                    assert!(whole(&lines[0]) && short(&lines[1]), "[{rt}] {text:.300}");
                }
            }
        }
    }
}
