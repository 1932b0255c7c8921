//! Access log in Common Log Format, buffered per worker.
//!
//! `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a.gif HTTP/1.1" 200 2326`
//!
//! Each worker appends lines to its own buffer and hands a full buffer (or,
//! once a second, whatever it has) to the shared writer in one `write`, so the
//! lock is taken per batch, not per request.

#[cfg(test)]
use std::fs::File;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where the log goes; shared by all workers.
#[derive(Clone)]
pub struct LogSink {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogSink")
    }
}

impl LogSink {
    /// Opens `path` for appending, or stdout for `-`.
    pub fn open(path: &Path) -> io::Result<LogSink> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(io::stdout())
        } else {
            Box::new(OpenOptions::new().create(true).append(true).open(path)?)
        };
        Ok(LogSink {
            out: Arc::new(Mutex::new(out)),
        })
    }

    /// A sink writing to an already open file (tests).
    #[cfg(test)]
    pub fn from_file(f: File) -> LogSink {
        LogSink {
            out: Arc::new(Mutex::new(Box::new(f))),
        }
    }

    fn write_batch(&self, buf: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A log that cannot be written must not take the server down.
        let _ = out.write_all(buf);
        let _ = out.flush();
    }
}

/// One worker's buffered log.
#[derive(Debug)]
pub struct AccessLog {
    sink: LogSink,
    /// A lock only for the `threads` design, where a worker's connections
    /// run on many threads; elsewhere it is never contended.
    buf: Mutex<Vec<u8>>,
}

/// Flush when a worker's buffer reaches this size.
const FLUSH_AT: usize = 16 * 1024;

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
}

impl AccessLog {
    /// A worker's log writing to `sink`.
    pub fn new(sink: LogSink) -> AccessLog {
        AccessLog {
            sink,
            buf: Mutex::new(Vec::with_capacity(FLUSH_AT + 512)),
        }
    }

    /// Appends one line.
    pub fn log(&self, e: &Entry<'_>) {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let host = e.peer.map(|p| p.ip().to_string());
        let bytes = if e.bytes == 0 {
            "-".to_string()
        } else {
            e.bytes.to_string()
        };
        let _ = writeln!(
            buf,
            "{} - - [{}] \"{} {} {}\" {} {}",
            host.as_deref().unwrap_or("-"),
            clf_time(unix_now()),
            sanitize(e.method),
            sanitize(e.target),
            e.version,
            e.status,
            bytes
        );
        if buf.len() >= FLUSH_AT {
            self.sink.write_batch(&buf);
            buf.clear();
        }
    }

    /// Writes out what is buffered (called once a second and at shutdown).
    pub fn flush(&self) {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        if !buf.is_empty() {
            self.sink.write_batch(&buf);
            buf.clear();
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Quotes and control bytes would let a client forge log lines.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c == '"' || c.is_control() { '?' } else { c })
        .collect()
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
        let sink = LogSink::from_file(File::create(&path).unwrap());
        let log = AccessLog::new(sink);
        log.log(&Entry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            method: "GET",
            target: "/a\"b\nc",
            version: "HTTP/1.1",
            status: 200,
            bytes: 13,
        });
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text.starts_with("127.0.0.1 - - ["), "{text}");
        assert!(text.ends_with("\"GET /a?b?c HTTP/1.1\" 200 13\n"), "{text}");
    }
}
