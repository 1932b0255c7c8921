//! httplite's whole per-connection state machine (the blocking connection
//! loop that the `threads` and `stackful` runtimes run) over an in-memory
//! transport, with the real routes, limits and statistics.
//!
//! Input: the bytes a client sends, then it closes its side. The split
//! into reads, short writes, whether a static root is served and whether
//! the limits are the defaults or small ones are drawn from a hash of the
//! input.
//!
//! Checks, besides "no panic":
//! - the output is a sequence of well-formed, framed HTTP/1.1 responses;
//! - they answer, in order and exactly once each, the requests that an
//!   independent reading of the whole input finds (the request line,
//!   target forms and `Host` values read afresh from the RFCs in
//!   `fuzz_support::rfc_line`, httparse for the header fields, the RFC's
//!   framing in `fuzz_support::requests_ref`): every complete valid
//!   request is answered and not with a protocol error, an echo returns
//!   the body sent, a malformed request is answered with
//!   400/413/414/431/501/505 (exactly 400 or 505 where the reference
//!   knows which: a malformed line or header field, no limit exceeded)
//!   and `Connection: close`, nothing follows a response that closes, and
//!   a request that has not fully arrived gets no complete answer unless
//!   the server then closes;
//! - `100 Continue` only goes to requests that ask for it;
//! - after a complete answer that closes, the write side is shut (so the
//!   client reads all of it), and nothing is written after that;
//! - the access log (on for half the inputs) has at most one line per
//!   answer, each well-formed, whatever bytes the client sent.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use clap::Parser;
use fuzz_support::Knobs;
use fuzz_support::memio::{MemIo, Wire};
use fuzz_support::requests_ref::{self, RefRequest, Verdict};
use fuzz_support::responses::{self, Response};
use httplite::access_log::{AccessLog, LogSink, WhenFull};
use httplite::blocking::IdleSet;
use httplite::blocking::conn::{self, Ctx};
use httplite::cli::Cli;
use httplite::config::Config;
use httplite::jobs::{Jobs, Retention};
use httplite::routes::App;
use httplite::static_files::StaticRoot;
use httplite::stats::Stats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut knobs = Knobs::new(data);
    let mut config = default_config().clone();
    if knobs.one_in(4) {
        config.limits = http1::Limits {
            max_request_line: 64,
            max_head: 256,
            max_headers: 4,
            max_body: 16,
            ..config.limits
        };
    }
    let app = if knobs.one_in(2) {
        apps().0.clone()
    } else {
        apps().1.clone()
    };
    let log = knobs.one_in(2).then(log_path);
    // The writer thread writes the log; it is finished before the file is
    // read, or a previous input's lines could still be on their way.
    let mut log_writer = None;
    let mut ctx = Ctx {
        app,
        config: Arc::new(config),
        stats: Stats::new(1).worker(0),
        access_log: log.map(|path| {
            std::fs::File::create(path).expect("empty the access log");
            let (sink, writer) = LogSink::open(path, WhenFull::Block).expect("open the access log");
            log_writer = Some(writer);
            AccessLog::new(sink)
        }),
        idle: IdleSet::default(),
        tls: Default::default(),
    };
    let splits = knobs.splits(data.len());
    let mut wire = Wire::default();
    conn::serve(
        &ctx,
        MemIo::new(data, splits, knobs, &mut wire),
        None,
        httplite::exposure::Surface::Public,
    );

    let limits = *http1::Decoder::new(ctx.config.limits).limits();
    let verdicts = requests_ref::parse_stream(data, &limits.into());
    let is_head = |i: usize| {
        verdicts
            .get(i)
            .and_then(request)
            .is_some_and(RefRequest::is_head)
    };
    let answers = match responses::parse(&wire.output, is_head) {
        Ok(answers) => answers,
        Err(e) => panic!(
            "malformed output: {e}\ninput:  {}\noutput: {}",
            data.escape_ascii(),
            wire.output.escape_ascii()
        ),
    };
    if let Err(e) = check(&verdicts, &answers) {
        panic!(
            "{e}\ninput:  {}\noutput: {}\nverdicts: {verdicts:#?}",
            data.escape_ascii(),
            wire.output.escape_ascii()
        );
    }
    if let Some(access_log) = ctx.access_log.take() {
        drop(access_log); // flushes into the writer's queue
        if let Some(writer) = log_writer.take() {
            assert!(
                writer.finish(std::time::Duration::from_secs(10)),
                "the access-log writer did not finish"
            );
        }
        let lines = std::fs::read(log_path()).expect("read the access log");
        if let Err(e) = check_log(&lines, answers.len()) {
            panic!("{e}\nlog: {}", lines.escape_ascii());
        }
    }
    // A server that ends a connection after a complete answer while client
    // bytes that had arrived are still unread half-closes and lingers, so
    // that the close does not reset the connection before the client has
    // read it all. (With nothing unread it may close at once; bytes the
    // client sends later, the next reads here, had not arrived yet.) A
    // client that went away mid-request (answer cut short) needs no care.
    if answers.last().is_some_and(|a| a.close && !a.truncated)
        && wire.unread_at_close
        && !wire.write_shut
    {
        panic!(
            "closed over unread bytes without shutting down the write side\ninput:  {}\noutput: {}",
            data.escape_ascii(),
            wire.output.escape_ascii()
        );
    }
});

/// The request of a verdict whose head was valid.
fn request(v: &Verdict) -> Option<&RefRequest> {
    match v {
        Verdict::Complete(r) | Verdict::BadBody(r) | Verdict::PartialBody(r) => Some(r),
        Verdict::BadHead { .. } | Verdict::PartialHead => None,
    }
}

/// The decoder's error answer: a protocol status, closing, and a body that
/// is the error's reason (the routes' own error pages start with the code).
fn is_protocol_error(a: &Response) -> bool {
    matches!(a.status, 400 | 413 | 414 | 431 | 501 | 505)
        && a.close
        && !a.body.starts_with(a.status.to_string().as_bytes())
}

/// Fails unless `answers` answer `verdicts` as described at the top.
fn check(verdicts: &[Verdict], answers: &[Response]) -> Result<(), String> {
    macro_rules! ensure {
        ($cond:expr, $($msg:tt)+) => {
            if !$cond {
                return Err(format!($($msg)+));
            }
        };
    }
    for (i, a) in answers.iter().enumerate() {
        let last = i + 1 == answers.len();
        let Some(v) = verdicts.get(i) else {
            return Err(format!("answer {i} ({}) to no request", a.status));
        };
        ensure!(!a.close || last, "answer {i} closes, yet more follow");
        for &code in &a.interim {
            ensure!(code == 100, "interim answer {code}");
            ensure!(
                request(v).is_some_and(|r| r.expects_continue),
                "100 Continue to request {i}, which did not ask for it"
            );
        }
        if a.status == 0 {
            // Only a `100 Continue`, then the connection ended.
            ensure!(
                matches!(v, Verdict::PartialBody(_) | Verdict::BadBody(_)),
                "request {i} got only a 100 Continue"
            );
            continue;
        }
        match v {
            Verdict::Complete(r) => {
                ensure!(
                    !a.truncated,
                    "answer {i} to a complete request is cut short"
                );
                // A `HEAD` answer has no body to tell a route's error page
                // from a protocol error; but a protocol error always has a
                // body, which would then have broken the output's framing.
                ensure!(
                    r.is_head() || !is_protocol_error(a),
                    "valid request {i} refused: {a:?}"
                );
                ensure!(r.keep_alive || a.close, "request {i} asked to close");
                if r.is_echo() && a.status == 200 {
                    ensure!(a.body == r.body, "echo {i} returned another body");
                }
            }
            Verdict::BadHead { status, .. } => {
                ensure!(is_protocol_error(a), "bad request {i} answered {a:?}");
                ensure!(
                    status.is_none_or(|code| code == a.status),
                    "bad request {i} answered {}, not {status:?}",
                    a.status
                );
            }
            Verdict::BadBody(_) => ensure!(
                is_protocol_error(a) || a.truncated || a.close,
                "request {i} with a bad body answered {a:?}"
            ),
            Verdict::PartialHead => {
                return Err(format!("answer {i} to a head that never ended: {a:?}"));
            }
            Verdict::PartialBody(_) => ensure!(
                a.truncated || a.close,
                "request {i} without its whole body answered {a:?}"
            ),
        }
    }
    let ended = answers.last().is_some_and(|a| a.close || a.truncated);
    if !ended && let Some(v) = verdicts.get(answers.len()) {
        ensure!(
            !matches!(
                v,
                Verdict::Complete(_) | Verdict::BadHead { certain: true, .. }
            ),
            "request {} was never answered",
            answers.len()
        );
    }
    Ok(())
}

/// Access-log lines: at most one per answer, each one line in Common Log
/// Format with the request's quotes intact, whatever bytes the client sent.
fn check_log(log: &[u8], answers: usize) -> Result<(), String> {
    let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
    if lines.len() > answers {
        return Err(format!("{} log lines for {answers} answers", lines.len()));
    }
    for line in lines {
        let Some(text) = line.strip_suffix(b"\n") else {
            return Err("an unterminated log line".into());
        };
        if text.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return Err("a control character in a log line".into());
        }
        if !text.starts_with(b"127.0.0.1 - - [") || text.iter().filter(|&&b| b == b'"').count() != 2
        {
            return Err("a malformed log line".into());
        }
    }
    Ok(())
}

/// This process's access-log file, emptied for each input.
fn log_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("httplite-fuzz-access-{}.log", std::process::id()))
    })
}

/// The server's configuration with no flags given.
fn default_config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::from_cli(default_cli()))
}

/// The command line with no flags given.
fn default_cli() -> &'static Cli {
    static CLI: OnceLock<Cli> = OnceLock::new();
    CLI.get_or_init(|| Cli::parse_from(["httplite"]))
}

/// The two apps: built-in routes only, and a static root with a few files.
fn apps() -> &'static (Arc<App>, Arc<App>) {
    static APPS: OnceLock<(Arc<App>, Arc<App>)> = OnceLock::new();
    APPS.get_or_init(|| {
        // Background jobs as the server sets them up, on one pool thread.
        let cli = default_cli();
        let pool = pool::Pool::builder()
            .name("fuzz-pool")
            .max_threads(1)
            .queue_bound(cli.pool_queue)
            .idle_timeout(cli.pool_idle_timeout)
            .build();
        let retention = Retention {
            max_count: cli.jobs_retain,
            max_age: cli.jobs_ttl,
        };
        let jobs = Jobs::new(pool, retention, false);
        // Without a root every endpoint answers; with one, none does on
        // the public listener (a hidden endpoint is routed as a file).
        let app = |root: Option<StaticRoot>| {
            Arc::new(App {
                exposure: match root {
                    None => httplite::exposure::Exposure::DEMO,
                    Some(_) => httplite::exposure::Exposure::site(&[]),
                },
                root,
                stats: Arc::new(Stats::new(1)),
                worker_extra: Box::new(|_, _| {}),
                test_endpoints: false,
                jobs: jobs.clone(),
                events: Default::default(),
                health_path: Some("/healthz".to_string()),
                max_sleeping: 1024,
                proxy: Default::default(),
            })
        };
        let dir = static_dir();
        let root = StaticRoot::new(&dir, true).expect("static root");
        (app(None), app(Some(root)))
    })
}

/// A small site in the temp dir: a file, an index, a directory to list.
fn static_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("httplite-fuzz-root");
    let files: [(&str, &[u8]); 4] = [
        ("hello.txt", b"Hello, World!\n"),
        ("sub/index.html", b"<p>sub</p>\n"),
        ("list/a.bin", &[7u8; 3000]),
        ("list/empty", b""),
    ];
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).expect("static dir");
        std::fs::write(&path, content).expect("static file");
    }
    dir
}
