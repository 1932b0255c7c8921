//! The blocking connection loop over an in-memory socket: regression tests
//! for what the `connection` fuzz target (fuzz/) found.

use std::cell::RefCell;
use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Ctx, serve};
use crate::blocking::{BlockingIo, Deadline, FileChunk, IdleSet};
use crate::config::Config;
use site::jobs::{Jobs, Retention};
use site::routes::App;
use site::stats::Stats;

/// What the server wrote, and how much of it before each read.
#[derive(Default)]
pub(super) struct Log {
    pub(super) output: Vec<u8>,
    pub(super) written_before_read: Vec<usize>,
}

/// A socket whose client sends `reads`, one per read call, then closes.
pub(super) struct Script {
    pub(super) reads: std::vec::IntoIter<Vec<u8>>,
    pub(super) log: Rc<RefCell<Log>>,
}

impl Script {
    /// A socket whose client sends `reads`, and the log it writes.
    pub(super) fn new(reads: &[&[u8]]) -> (Self, Rc<RefCell<Log>>) {
        let log = Rc::new(RefCell::new(Log::default()));
        let reads = reads.iter().map(|r| r.to_vec()).collect::<Vec<_>>();
        let io = Script {
            reads: reads.into_iter(),
            log: log.clone(),
        };
        (io, log)
    }
}

// SAFETY: `read_uninit` writes every byte it counts, and asserts the chunk
// fits `buf`.
unsafe impl BlockingIo for Script {
    type Waits = crate::blocking::upstream::PollWaits;
    fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>], _: Deadline) -> io::Result<usize> {
        let mut log = self.log.borrow_mut();
        let written = log.output.len();
        log.written_before_read.push(written);
        let Some(chunk) = self.reads.next() else {
            return Ok(0);
        };
        assert!(chunk.len() <= buf.len(), "test chunks fit one read");
        for (dst, &b) in buf.iter_mut().zip(&chunk) {
            dst.write(b);
        }
        Ok(chunk.len())
    }

    fn write(&mut self, buf: &[u8], _: Deadline) -> io::Result<usize> {
        self.log.borrow_mut().output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn send_file(&mut self, _: FileChunk<'_>, _: Deadline) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn wait_readable(&mut self, _: Deadline) -> io::Result<()> {
        Ok(())
    }

    fn wait_either(
        &mut self,
        _: &crate::blocking::upstream::Upstream<Self::Waits>,
        _: Deadline,
    ) -> io::Result<crate::blocking::upstream::Side> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn sleep(&mut self, _: Duration) {}

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn shutdown(&mut self, _: Shutdown) -> io::Result<()> {
        Ok(())
    }

    fn fd(&self) -> RawFd {
        -1
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        None
    }
}

pub(super) fn ctx() -> Ctx {
    let pool = pool::Pool::builder().max_threads(1).build();
    let retention = Retention {
        max_count: 16,
        max_age: Duration::from_secs(60),
    };
    let cli = <crate::cli::Cli as clap::Parser>::parse_from(["httplite"]);
    Ctx {
        app: Arc::new(App {
            root: None,
            stats: Arc::new(Stats::new(1)),
            worker_extra: Box::new(|_, _| {}),
            test_endpoints: false,
            jobs: Jobs::new(pool, retention, false),
            events: Default::default(),
            exposure: site::exposure::Exposure::DEMO,
            health_path: None,
            max_sleeping: 1024,
            proxy: Default::default(),
        }),
        config: Arc::new(Config::from_cli(&cli)),
        stats: Stats::new(1).worker(0),
        access_log: None,
        idle: IdleSet::default(),
        tls: Default::default(),
    }
}

/// Serves one connection whose client sends `reads`; returns the log.
fn run(reads: &[&[u8]]) -> Log {
    let (io, log) = Script::new(reads);
    serve(&ctx(), io, None, site::exposure::Surface::Public);
    Rc::try_unwrap(log)
        .ok()
        .expect("the connection is done")
        .into_inner()
}

pub(super) const GET: &[u8] = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\n\r\n";
/// Answered 405 once its body has been read and dropped.
const POST_HEAD: &[u8] =
    b"POST /_httplite/plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\n";

#[test]
fn pipelined_answers_are_not_lost_when_a_body_never_ends() {
    // The client pipelines a GET and a POST, sends half of the POST's body
    // and closes. The GET was answered into the write buffer, then the
    // server waited for the body without writing it out, met the end of
    // the stream, and dropped the GET's answer with the connection.
    let input = [GET, POST_HEAD, b"abc"].concat();
    let log = run(&[&input]);
    let out = String::from_utf8_lossy(&log.output);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\nHello, World!"), "{out}");
}

#[test]
fn earlier_answers_go_out_before_a_body_is_awaited() {
    let input = [GET, POST_HEAD, b"abc"].concat();
    let log = run(&[&input, b"def"]);
    let out = String::from_utf8_lossy(&log.output);
    // The second read (for the rest of the body) came after the GET's
    // answer was written, not after the POST's.
    let get_answer = out.find("Hello, World!").expect("GET answered") + "Hello, World!".len();
    assert_eq!(log.written_before_read.get(1), Some(&get_answer), "{out}");
    assert!(out[get_answer..].starts_with("HTTP/1.1 405 "), "{out}");
}

#[test]
fn a_bad_body_of_a_head_request_is_answered_without_a_body() {
    // The 400 for a HEAD request's broken chunked body carried the error's
    // reason as a body, which a client reads as the next response.
    let input = b"HEAD / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    let log = run(&[input]);
    let out = String::from_utf8_lossy(&log.output);
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(out.contains("\r\nConnection: close\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\n"), "a body follows the head: {out}");

    // The same error for a GET keeps its reason as the body.
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    let out = String::from_utf8_lossy(&run(&[input]).output).into_owned();
    assert!(out.ends_with("\r\n\r\ninvalid chunk size"), "{out}");
}
