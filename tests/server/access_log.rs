//! A log never stops the server: with the access log's destination stalled
//! (a FIFO whose reader never reads) or failing (`/dev/full`), requests go
//! on being answered, the lost lines are counted in the stats and reported
//! on stderr; with `--access-log-full block` the lines wait instead.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::harness::{Client, Server, TempDir, get_req, runtimes, wait_until};

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
