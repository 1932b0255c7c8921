//! Access log, buffered per worker: Common Log Format by default, or
//! combined or JSON lines (see `format.rs`).
//!
//! `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a.gif HTTP/1.1" 200 2326`
//!
//! Each worker appends lines to its own buffer and hands a full buffer (or,
//! once a second, whatever it has) to the writer thread as one batch
//! ([`LogSink`]; see `writer.rs`), so the queue is touched per batch, not
//! per request, and no event loop ever writes to the log's destination.
//!
//! A process that may not start the writer thread (a child of `--runtime
//! fork`, copied from a parent that must stay single-threaded) gives its
//! log a [`LineWriter`] instead ([`AccessLog::direct`]): each line, in the
//! same format, goes to it as soon as it is logged, in the logging thread.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

mod format;
mod writer;

pub use format::Format;
pub use writer::{LogCounters, LogSink, LogWriter, WhenFull, stats_members};

/// One worker's buffered log.
#[derive(Debug)]
pub struct AccessLog {
    dest: Dest,
    /// A lock only for the `threads` design, where a worker's connections
    /// run on many threads; elsewhere it is never contended. With the
    /// buffer, the second its first line was written.
    buf: Mutex<(Vec<u8>, u64)>,
    format: Format,
    /// The worker this log belongs to (in the combined and JSON lines).
    worker: usize,
}

/// Flush when a worker's buffer reaches this size.
const FLUSH_AT: usize = 16 * 1024;

/// Where a worker's lines go.
#[derive(Debug)]
enum Dest {
    /// The writer thread's queue, a batch at a time.
    Queue(LogSink),
    /// A destination written in the logging thread, a line at a time.
    Direct(Arc<dyn LineWriter>),
}

/// A destination that takes each line as it is logged, in the logging
/// thread, for a process that may not run the [`LogSink`]'s writer thread.
/// It decides what a destination that falls behind costs (see
/// [`WhenFull`]) and counts what it writes and drops.
pub trait LineWriter: Send + Sync + std::fmt::Debug {
    /// Writes one whole line (its newline included), or counts it as
    /// dropped.
    fn write_line(&self, line: &[u8]);
}

/// What one log line says about a request.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The client.
    pub peer: Option<SocketAddr>,
    /// `GET`.
    pub method: &'a str,
    /// `/a.gif?x=1`.
    pub target: &'a str,
    /// `HTTP/1.1`.
    pub version: &'a str,
    /// Response status.
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// The `Referer` header, if any.
    pub referer: Option<&'a str>,
    /// The `User-Agent` header, if any.
    pub user_agent: Option<&'a str>,
    /// The request time in microseconds, if measured (see `format.rs`).
    pub micros: Option<u64>,
    /// The listener the request came in on (in the combined and JSON
    /// lines; Common Log Format has no field for it).
    pub on: crate::exposure::Surface,
    /// The upstream of a proxied request (in the combined and JSON lines).
    pub upstream: Option<UpstreamLog<'a>>,
}

/// What a proxied request's log line says of its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLog<'a> {
    /// The upstream's address (`127.0.0.1:3000`, `unix:/run/app.sock`).
    pub addr: &'a str,
    /// The status it answered; `None` when it did not (refused, timed out,
    /// malformed: the client got 502 or 504).
    pub status: Option<u16>,
    /// From choosing it to the end of its answer (or the failure), in
    /// microseconds (nginx's `$upstream_response_time`).
    pub micros: u64,
}

impl<'a> Entry<'a> {
    /// The line of `req`, answered with `status` and `bytes` of body, from
    /// `peer` on listener `on`, started at `started` (the request time is
    /// measured now).
    pub fn new(
        peer: Option<SocketAddr>,
        req: &'a http1::Request,
        on: crate::exposure::Surface,
        status: u16,
        bytes: u64,
        started: Option<std::time::Instant>,
    ) -> Entry<'a> {
        let header = |name| req.header(name).and_then(|v| std::str::from_utf8(v).ok());
        Entry {
            peer,
            method: req.method().as_str(),
            target: req.target(),
            version: req.version().as_str(),
            status,
            bytes,
            referer: header("referer"),
            user_agent: header("user-agent"),
            micros: started.map(|t| t.elapsed().as_micros().min(u64::MAX as u128) as u64),
            on,
            upstream: None,
        }
    }
}

impl AccessLog {
    /// A worker's log writing to `sink` in Common Log Format.
    pub fn new(sink: LogSink) -> AccessLog {
        AccessLog::with_format(sink, Format::Common, 0)
    }

    /// Worker `worker`'s log writing to `sink` in `format`.
    pub fn with_format(sink: LogSink, format: Format, worker: usize) -> AccessLog {
        AccessLog {
            dest: Dest::Queue(sink),
            buf: Mutex::new((Vec::with_capacity(FLUSH_AT + 512), 0)),
            format,
            worker,
        }
    }

    /// Worker `worker`'s log handing each line, in `format`, to `writer`
    /// as it is logged: nothing is buffered, so nothing waits for a flush.
    pub fn direct(writer: Arc<dyn LineWriter>, format: Format, worker: usize) -> AccessLog {
        AccessLog {
            dest: Dest::Direct(writer),
            buf: Mutex::new((Vec::with_capacity(512), 0)),
            format,
            worker,
        }
    }

    /// Appends one line.
    pub fn log(&self, e: &Entry<'_>) {
        let mut guard = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let (buf, since) = &mut *guard;
        let now = unix_now();
        if buf.is_empty() {
            *since = now;
        }
        format::write_line(buf, self.format, e, now, self.worker);
        match &self.dest {
            Dest::Direct(writer) => {
                writer.write_line(buf);
                buf.clear();
            }
            // Full, or holding lines from an earlier second: hand it over
            // (a driver without a timer still gets its lines out while it
            // serves).
            Dest::Queue(sink) => {
                if buf.len() >= FLUSH_AT || *since != now {
                    sink.write_batch(buf);
                    buf.clear();
                }
            }
        }
    }

    /// Writes out what is buffered (called once a second and at shutdown).
    pub fn flush(&self) {
        let mut guard = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let (buf, _) = &mut *guard;
        if let (Dest::Queue(sink), false) = (&self.dest, buf.is_empty()) {
            sink.write_batch(buf);
            buf.clear();
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `10/Oct/2000:13:55:36 +0000`.
fn clf_time(secs: u64) -> String {
    // Reuse http1's calendar: "Tue, 10 Oct 2000 13:55:36 GMT".
    let d = http1::format_http_date(secs);
    let d = std::str::from_utf8(&d).unwrap_or("Thu, 01 Jan 1970 00:00:00 GMT");
    format!(
        "{}/{}/{}:{} +0000",
        &d[5..7],
        &d[8..11],
        &d[12..16],
        &d[17..25]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clf_format() {
        assert_eq!(clf_time(971_186_136), "10/Oct/2000:13:55:36 +0000");
    }

    #[test]
    fn lines_are_sanitized_and_batched() {
        let path = std::env::temp_dir().join(format!("httplite-log-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let (sink, writer) = LogSink::start(file, WhenFull::Drop).unwrap();
        let log = AccessLog::new(sink);
        log.log(&Entry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            method: "GET",
            target: "/a\"b\nc",
            version: "HTTP/1.1",
            status: 200,
            bytes: 13,
            referer: None,
            user_agent: None,
            micros: None,
            on: crate::exposure::Surface::Public,
            upstream: None,
        });
        drop(log);
        assert!(
            writer.finish(std::time::Duration::from_secs(5)),
            "the writer stops"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text.starts_with("127.0.0.1 - - ["), "{text}");
        assert!(text.ends_with("\"GET /a?b?c HTTP/1.1\" 200 13\n"), "{text}");
    }

    /// Collects what it is handed, one element per call.
    #[derive(Debug, Default)]
    struct Lines(Mutex<Vec<Vec<u8>>>);

    impl LineWriter for Lines {
        fn write_line(&self, line: &[u8]) {
            self.0.lock().unwrap().push(line.to_vec());
        }
    }

    #[test]
    fn a_direct_log_hands_over_each_line_whole_as_it_is_logged() {
        let lines = Arc::new(Lines::default());
        let log = AccessLog::direct(lines.clone(), Format::Json, 0);
        let entry = |target| Entry {
            peer: Some("192.0.2.1:5000".parse().unwrap()),
            method: "GET",
            target,
            version: "HTTP/1.1",
            status: 200,
            bytes: 13,
            referer: None,
            user_agent: None,
            micros: Some(7),
            on: crate::exposure::Surface::Public,
            upstream: None,
        };
        log.log(&entry("/one"));
        assert_eq!(lines.0.lock().unwrap().len(), 1, "written before a flush");
        log.log(&entry("/two"));
        log.flush();
        drop(log);
        let got = lines.0.lock().unwrap();
        assert_eq!(got.len(), 2);
        for (line, target) in got.iter().zip(["/one", "/two"]) {
            let text = std::str::from_utf8(line).unwrap();
            assert!(text.starts_with("{\"time\":"), "{text}");
            assert!(text.contains(&format!("\"target\":\"{target}\"")), "{text}");
            assert!(text.contains("\"remote\":\"192.0.2.1\""), "{text}");
            assert_eq!(text.matches('\n').count(), 1, "{text}");
            assert!(text.ends_with("\"listener\":\"public\"}\n"), "{text}");
        }
    }
}
