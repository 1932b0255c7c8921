//! Plans driven by hand, as a driver would, with no socket: what each
//! waiting answer asks for, and what it encodes.

use std::path::PathBuf;
use std::time::Duration;

use bytes::BytesMut;
use http1::{Decoder, Limits, Message};

use super::*;
use crate::respond::{Handled, handle};
use crate::static_files::{StaticReply, StaticRoot};

/// A directory of its own under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("site-plan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

use crate::exposure::Surface;
use crate::routes::tests::app;

/// Decodes `head` (and leaves any body in `rbuf`) and routes it: the plan
/// a driver would run, unstarted (without [`handle`]'s shortcut, which
/// answers complete file answers itself: see
/// `handle_answers_complete_file_answers_itself`).
fn start(app: &App, _: &mut BytesMut, rbuf: &mut BytesMut, dec: &mut Decoder) -> Option<Plan> {
    let req = match dec.decode(rbuf) {
        Ok(Some(Message::Head(req))) => req,
        other => panic!("{other:?}"),
    };
    let to = http1::ReplyTo::new(&req);
    let action = app.route(&req, Surface::Public);
    Some(Plan::waiting(req, to, action))
}

/// Decodes `head` and hands it to [`handle`]: the plan if the answer waits.
fn handled(app: &App, wbuf: &mut BytesMut, head: &str) -> Option<Plan> {
    let mut dec = Decoder::new(Limits::default());
    let req = match dec.decode(&mut BytesMut::from(head.as_bytes())) {
        Ok(Some(Message::Head(req))) => req,
        other => panic!("{other:?}"),
    };
    match handle(
        app,
        &app.stats.worker(0),
        wbuf,
        req,
        &Surface::Public,
        false,
        |_, _| {},
    ) {
        Handled::Done(_) => None,
        Handled::Slow(slow) => Some(Plan::new(slow)),
    }
}

#[test]
fn handle_answers_complete_file_answers_itself() {
    let dir = TempDir::new("complete");
    std::fs::write(dir.0.join("f.txt"), "0123456789").unwrap();
    let big = vec![7u8; 2 * INLINE_FILE_MAX as usize];
    std::fs::write(dir.0.join("big.bin"), &big).unwrap();
    let app = app(Some(StaticRoot::new(&dir.0, false).unwrap()));
    let st = app.stats.worker(0);
    // A small file, a 404 and a 304: answered by `handle`, no plan.
    let mut wbuf = BytesMut::new();
    assert!(handled(&app, &mut wbuf, "GET /f.txt HTTP/1.1\r\nHost: a\r\n\r\n").is_none());
    assert!(
        text(&wbuf).ends_with("\r\n\r\n0123456789"),
        "{}",
        text(&wbuf)
    );
    let etag = text(&wbuf)
        .lines()
        .find_map(|l| l.strip_prefix("ETag: ").map(str::to_string))
        .expect("an ETag");
    let mut wbuf = BytesMut::new();
    assert!(handled(&app, &mut wbuf, "GET /no HTTP/1.1\r\nHost: a\r\n\r\n").is_none());
    assert!(text(&wbuf).starts_with("HTTP/1.1 404"), "{}", text(&wbuf));
    let mut wbuf = BytesMut::new();
    let head = format!("GET /f.txt HTTP/1.1\r\nHost: a\r\nIf-None-Match: {etag}\r\n\r\n");
    assert!(handled(&app, &mut wbuf, &head).is_none());
    assert!(text(&wbuf).starts_with("HTTP/1.1 304"), "{}", text(&wbuf));
    // A body for sendfile: the head is encoded, and the plan's first step
    // (already taken) is handed to the driver, then it goes on as usual.
    let mut wbuf = BytesMut::new();
    let mut plan = handled(&app, &mut wbuf, "GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n")
        .expect("a sendfile waits");
    assert!(text(&wbuf).starts_with("HTTP/1.1 200"), "{}", text(&wbuf));
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    assert!(
        matches!(step, Step::SendFile { offset: 0, len, .. } if len == big.len() as u64),
        "{step:?}"
    );
    let step = plan.next(&app, &st, &mut wbuf, Event::Sent);
    assert!(
        matches!(step, Step::Done(o) if o.bytes == big.len() as u64 && o.keep_alive),
        "{step:?}"
    );
}

/// What a blocking driver does for `ReadBody`, over the bytes at hand.
fn read_body(dec: &mut Decoder, rbuf: &mut BytesMut, keep: bool) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        match dec.decode(rbuf) {
            Ok(Some(Message::Body(b))) if keep => body.extend_from_slice(&b),
            Ok(Some(Message::Body(_))) => {}
            Ok(Some(Message::End)) => return body,
            other => panic!("{other:?}"),
        }
    }
}

fn text(wbuf: &BytesMut) -> String {
    String::from_utf8_lossy(wbuf).into_owned()
}

#[test]
fn sleep_waits_then_answers_and_closes_if_shutdown_began() {
    let app = app(None);
    let st = app.stats.worker(0);
    for shutting_down in [false, true] {
        let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
        let mut rbuf =
            BytesMut::from(&b"GET /_httplite/sleep?ms=7 HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
        let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).expect("sleep waits");
        let step = plan.next(&app, &st, &mut wbuf, Event::Start);
        assert!(
            matches!(step, Step::Sleep(d) if d == Duration::from_millis(7)),
            "{step:?}"
        );
        assert!(wbuf.is_empty(), "nothing is encoded before the sleep");
        let step = plan.next(&app, &st, &mut wbuf, Event::Slept { shutting_down });
        let Step::Done(out) = step else {
            panic!("{step:?}")
        };
        assert_eq!(out.keep_alive, !shutting_down);
        assert_eq!(out.bytes, 11);
        assert!(text(&wbuf).ends_with("slept 7 ms\n"));
    }
}

#[test]
fn a_body_nobody_wants_is_read_first_unless_the_client_waits_for_100() {
    let dir = TempDir::new("body");
    std::fs::write(dir.0.join("a.txt"), "hello").unwrap();
    let app = app(Some(StaticRoot::new(&dir.0, false).unwrap()));
    let st = app.stats.worker(0);
    // A sleep with a body: drop the body, then sleep.
    let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
    let mut rbuf = BytesMut::from(
        &b"GET /_httplite/sleep?ms=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"[..],
    );
    let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).unwrap();
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    assert!(matches!(step, Step::ReadBody { keep: false }), "{step:?}");
    let body = read_body(&mut dec, &mut rbuf, false);
    let step = plan.next(&app, &st, &mut wbuf, Event::Body(body));
    assert!(matches!(step, Step::Sleep(_)), "{step:?}");

    // The same with `Expect: 100-continue`: answered at once, and closed.
    let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
    let mut rbuf = BytesMut::from(
        &b"GET /a.txt HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"[..],
    );
    let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).unwrap();
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    assert!(
        matches!(step, Step::Done(o) if o.bytes == 5 && !o.keep_alive),
        "{step:?}"
    );
    assert!(text(&wbuf).contains("Connection: close"), "{}", text(&wbuf));
    assert!(text(&wbuf).ends_with("\r\n\r\nhello"), "{}", text(&wbuf));
    assert!(!text(&wbuf).contains("100 Continue"));
}

#[test]
fn files_ranges_and_conditionals() {
    let dir = TempDir::new("files");
    std::fs::write(dir.0.join("f.txt"), "0123456789").unwrap();
    std::fs::create_dir(dir.0.join("sub")).unwrap();
    let app = app(Some(StaticRoot::new(&dir.0, true).unwrap()));
    let st = app.stats.worker(0);
    let run = |head: &str| {
        let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
        let mut rbuf = BytesMut::from(head.as_bytes());
        let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).expect("files wait");
        let step = plan.next(&app, &st, &mut wbuf, Event::Start);
        (plan, step, wbuf)
    };

    // A small file: head and body in the write buffer, in one piece.
    let (_, step, wbuf) = run("GET /f.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        matches!(step, Step::Done(o) if o.bytes == 10 && o.keep_alive),
        "{step:?}"
    );
    let head = text(&wbuf);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Length: 10\r\n") && head.ends_with("\r\n\r\n0123456789"));
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("ETag: "))
        .expect("an ETag")
        .to_string();

    // A larger one: the head is encoded, the body is the driver's `sendfile`.
    let big = INLINE_FILE_MAX + 1;
    std::fs::write(dir.0.join("big.bin"), vec![b'x'; big as usize]).unwrap();
    let (mut plan, step, mut wbuf) = run("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n");
    let Step::SendFile { offset, len, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!((offset, len), (0, big));
    assert!(text(&wbuf).ends_with("\r\n\r\n"), "{}", text(&wbuf));
    let step = plan.next(&app, &st, &mut wbuf, Event::Sent);
    assert!(
        matches!(step, Step::Done(o) if o.bytes == big && o.keep_alive),
        "{step:?}"
    );

    // A range.
    let (_, step, wbuf) = run("GET /f.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=2-4\r\n\r\n");
    assert!(matches!(step, Step::Done(o) if o.bytes == 3), "{step:?}");
    assert!(text(&wbuf).starts_with("HTTP/1.1 206 "), "{}", text(&wbuf));
    assert!(text(&wbuf).contains("Content-Range: bytes 2-4/10"));
    assert!(text(&wbuf).ends_with("\r\n\r\n234"));

    // A range past the end.
    let (_, step, wbuf) = run("GET /f.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=20-\r\n\r\n");
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 416),
        "{step:?}"
    );
    assert!(text(&wbuf).contains("Content-Range: bytes */10"));

    // A conditional request that matches: 304, no body.
    let (_, step, wbuf) = run(&format!(
        "GET /f.txt HTTP/1.1\r\nHost: a\r\nIf-None-Match: {etag}\r\n\r\n"
    ));
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 304),
        "{step:?}"
    );
    assert!(text(&wbuf).starts_with("HTTP/1.1 304 "));

    // HEAD: the head only, nothing to send.
    let (_, step, _) = run("HEAD /f.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(matches!(step, Step::Done(o) if o.bytes == 0), "{step:?}");

    // Missing; a directory without its slash; a listing (on the pool).
    let (_, step, _) = run("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 404),
        "{step:?}"
    );
    let (_, step, wbuf) = run("GET /sub HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 301),
        "{step:?}"
    );
    assert!(text(&wbuf).contains("Location: /sub/"));
    let (mut plan, step, mut wbuf) = run("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let Step::Offload(work) = step else {
        panic!("{step:?}")
    };
    let step = plan.next(&app, &st, &mut wbuf, Event::Offloaded(Ok(Ok(work()))));
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 200),
        "{step:?}"
    );
    assert!(text(&wbuf).contains("f.txt"), "{}", text(&wbuf));
    // A full pool is a 503 with Retry-After.
    let (mut plan, _, mut wbuf) = run("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let step = plan.next(&app, &st, &mut wbuf, Event::Offloaded(Err(pool::Full)));
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 503),
        "{step:?}"
    );
    assert!(text(&wbuf).contains("Retry-After: 1"));
}

#[test]
fn a_job_reads_its_input_then_is_submitted() {
    let app = app(None);
    let st = app.stats.worker(0);
    let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
    let mut rbuf = BytesMut::from(
        &b"POST /_httplite/jobs?type=wordcount HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\nExpect: 100-continue\r\n\r\na b c d"[..],
    );
    let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).expect("a job waits");
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    assert!(matches!(step, Step::ReadBody { keep: true }), "{step:?}");
    assert!(text(&wbuf).starts_with("HTTP/1.1 100 Continue\r\n\r\n"));
    let input = read_body(&mut dec, &mut rbuf, true);
    assert_eq!(input, b"a b c d");
    let step = plan.next(&app, &st, &mut wbuf, Event::Body(input));
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 202),
        "{step:?}"
    );
    assert!(
        text(&wbuf).contains("Location: /_httplite/jobs/1"),
        "{}",
        text(&wbuf)
    );
    // Counted once, as a 2xx.
    assert!(
        app.stats_json().contains("\"2xx\":1"),
        "{}",
        app.stats_json()
    );
}

#[test]
fn echo_hands_over_an_encoder_and_finishes_the_body() {
    let app = app(None);
    let st = app.stats.worker(0);
    let (mut wbuf, mut dec) = (BytesMut::new(), Decoder::new(Limits::default()));
    let mut rbuf = BytesMut::from(
        &b"POST /_httplite/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
    );
    let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).expect("echo waits");
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    let Step::Echo {
        mut encoder,
        flush_first: false,
    } = step
    else {
        panic!("{step:?}")
    };
    let body = read_body(&mut dec, &mut rbuf, true);
    encoder.write(&mut wbuf, &body).unwrap();
    let step = plan.next(&app, &st, &mut wbuf, Event::Echoed { encoder, sent: 3 });
    assert!(
        matches!(step, Step::Done(o) if o.bytes == 3 && o.keep_alive),
        "{step:?}"
    );
    let out = text(&wbuf);
    assert!(out.contains("Transfer-Encoding: chunked"), "{out}");
    assert!(out.ends_with("3\r\nabc\r\n0\r\n\r\n"), "{out}");
}

/// A small file that shrinks between its lookup and the copy: the head
/// that promised its old length is taken back and the connection closes,
/// rather than send a body shorter than its Content-Length.
#[test]
fn a_small_file_that_shrinks_is_not_sent_short() {
    let dir = TempDir::new("shrink");
    std::fs::write(dir.0.join("f.txt"), "0123456789").unwrap();
    let app = app(Some(StaticRoot::new(&dir.0, false).unwrap()));
    let st = app.stats.worker(0);
    let (mut wbuf, mut dec) = (
        BytesMut::from(&b"earlier answer"[..]),
        Decoder::new(Limits::default()),
    );
    let mut rbuf = BytesMut::from(&b"GET /f.txt HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    let mut plan = start(&app, &mut wbuf, &mut rbuf, &mut dec).expect("files wait");
    // Opened and measured at 10 bytes; now it has 3.
    std::fs::write(dir.0.join("f.txt"), "012").unwrap();
    let step = plan.next(&app, &st, &mut wbuf, Event::Start);
    assert!(matches!(step, Step::Close), "{step:?}");
    assert_eq!(&wbuf[..], b"earlier answer", "the head is taken back");
}

#[test]
fn multiple_ranges_are_parts_each_copied_or_sent() {
    let dir = TempDir::new("parts");
    let big = 3 * INLINE_FILE_MAX;
    let data: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.0.join("big.bin"), &data).unwrap();
    std::fs::write(dir.0.join("f.txt"), "0123456789abcdefghij").unwrap();
    // No open-file cache: the small parts are read, not copied from it.
    let app = app(Some(StaticRoot::new(&dir.0, false).unwrap()));
    let st = app.stats.worker(0);
    let start_plan = |head: &str, wbuf: &mut BytesMut| {
        let mut dec = Decoder::new(Limits::default());
        let mut rbuf = BytesMut::from(head.as_bytes());
        let mut plan = start(&app, wbuf, &mut rbuf, &mut dec).expect("files wait");
        let step = plan.next(&app, &st, wbuf, Event::Start);
        (plan, step)
    };
    let boundary = |wbuf: &BytesMut| {
        let t = text(wbuf);
        let b = t.split("boundary=").nth(1).expect("a boundary").to_string();
        b.split("\r\n").next().unwrap().to_string()
    };

    // A small file: everything in the write buffer at once.
    let mut wbuf = BytesMut::new();
    let (_, step) = start_plan(
        "GET /f.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1,5-6\r\n\r\n",
        &mut wbuf,
    );
    let b = boundary(&wbuf);
    let body = format!(
        "--{b}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 0-1/20\r\n\r\n01\
         \r\n--{b}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 5-6/20\r\n\r\n56\
         \r\n--{b}--\r\n"
    );
    let Step::Done(o) = step else {
        panic!("{step:?}")
    };
    assert_eq!((o.status.code(), o.bytes), (206, body.len() as u64));
    let t = text(&wbuf);
    assert!(t.starts_with("HTTP/1.1 206 "), "{t}");
    assert!(
        t.contains(&format!("Content-Length: {}\r\n", body.len())),
        "{t}"
    );
    assert!(t.ends_with(&format!("\r\n\r\n{body}")), "{t}");

    // A big file: a small part is copied, a big one sent.
    let mut wbuf = BytesMut::new();
    let last = big - 1;
    let (mut plan, step) = start_plan(
        &format!("GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9,100-{last}\r\n\r\n"),
        &mut wbuf,
    );
    let b = boundary(&wbuf);
    let Step::SendFile { offset, len, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!((offset, len), (100, big - 100));
    let ct = "Content-Type: application/octet-stream";
    let mut expect =
        format!("--{b}\r\n{ct}\r\nContent-Range: bytes 0-9/{big}\r\n\r\n").into_bytes();
    expect.extend_from_slice(&data[..10]);
    expect.extend_from_slice(
        format!("\r\n--{b}\r\n{ct}\r\nContent-Range: bytes 100-{last}/{big}\r\n\r\n").as_bytes(),
    );
    assert!(wbuf.ends_with(&expect), "{}", text(&wbuf));
    wbuf.clear(); // the driver flushed it, then sent the part
    let step = plan.next(&app, &st, &mut wbuf, Event::Sent);
    assert!(
        matches!(step, Step::Done(o) if o.status.code() == 206),
        "{step:?}"
    );
    assert_eq!(text(&wbuf), format!("\r\n--{b}--\r\n"));

    // Two big parts: two sends, the second's header between them.
    let mut wbuf = BytesMut::new();
    let h = INLINE_FILE_MAX + 1;
    let (mut plan, step) = start_plan(
        &format!(
            "GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=0-{},-{h}\r\n\r\n",
            h - 1
        ),
        &mut wbuf,
    );
    assert!(
        matches!(step, Step::SendFile { offset: 0, len, .. } if len == h),
        "{step:?}"
    );
    wbuf.clear();
    let step = plan.next(&app, &st, &mut wbuf, Event::Sent);
    assert!(
        matches!(step, Step::SendFile { offset, len, .. } if offset == big - h && len == h),
        "{step:?}"
    );
    assert!(text(&wbuf).starts_with("\r\n--") && text(&wbuf).ends_with("\r\n\r\n"));
    wbuf.clear();
    let step = plan.next(&app, &st, &mut wbuf, Event::Sent);
    assert!(matches!(step, Step::Done(_)), "{step:?}");
    assert!(text(&wbuf).ends_with("--\r\n"));

    // HEAD: the head with the whole length, nothing sent.
    let mut wbuf = BytesMut::new();
    let (_, step) = start_plan(
        "HEAD /f.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1,5-6\r\n\r\n",
        &mut wbuf,
    );
    assert!(matches!(step, Step::Done(o) if o.bytes == 0), "{step:?}");
    assert!(text(&wbuf).contains("multipart/byteranges"));
}

#[test]
fn a_cache_hit_encodes_the_same_answers_from_its_encoded_heads() {
    let dir = TempDir::new("heads");
    std::fs::write(dir.0.join("a.css"), "body { color: red }\n").unwrap();
    std::fs::write(
        dir.0.join("big.bin"),
        vec![1u8; 3 * INLINE_FILE_MAX as usize],
    )
    .unwrap();
    let cached = app(Some(
        StaticRoot::new(&dir.0, false)
            .unwrap()
            .with_file_cache(100, Duration::from_secs(60)),
    ));
    let uncached = app(Some(StaticRoot::new(&dir.0, false).unwrap()));
    // The answer without its Date line (the clock may tick in between).
    let answer = |app: &App, head: &str| {
        let mut wbuf = BytesMut::new();
        let plan = handled(app, &mut wbuf, head);
        let text = text(&wbuf);
        let lines: Vec<&str> = text
            .split("\r\n")
            .filter(|l| !l.starts_with("Date: "))
            .collect();
        (lines.join("\r\n"), plan.is_some())
    };
    let etag = {
        let (t, _) = answer(&uncached, "GET /a.css HTTP/1.1\r\nHost: a\r\n\r\n");
        t.lines()
            .find_map(|l| l.strip_prefix("ETag: ").map(str::to_string))
            .expect("an ETag")
    };
    let heads = [
        "GET /a.css HTTP/1.1\r\nHost: a\r\n\r\n".to_string(),
        "HEAD /a.css HTTP/1.1\r\nHost: a\r\n\r\n".to_string(),
        "GET /a.css HTTP/1.0\r\n\r\n".to_string(),
        format!("GET /a.css HTTP/1.1\r\nHost: a\r\nIf-None-Match: {etag}\r\n\r\n"),
        "GET /big.bin HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_string(),
        "GET /a.css HTTP/1.1\r\nHost: a\r\nRange: bytes=0-3\r\n\r\n".to_string(),
    ];
    for head in &heads {
        answer(&cached, head); // the miss that fills the cache
        let hit = answer(&cached, head);
        assert_eq!(hit, answer(&uncached, head), "{head}");
    }
    let cache = cached
        .root
        .as_ref()
        .and_then(StaticRoot::file_cache)
        .unwrap();
    let hits = cache.stats.hits.load(std::sync::atomic::Ordering::Relaxed);
    // Two files, each a miss once.
    assert_eq!(hits, 2 * heads.len() as u64 - 2);
    // And the hits took the encoded heads.
    let req = |head: &str| match Decoder::new(Limits::default()).decode(&mut BytesMut::from(head)) {
        Ok(Some(Message::Head(req))) => req,
        other => panic!("{other:?}"),
    };
    let root = cached.root.as_ref().unwrap();
    let reply = root.serve(&req(&heads[0]));
    assert!(matches!(reply, StaticReply::Whole { .. }), "{reply:?}");
    let reply = root.serve(&req(&heads[3]));
    assert!(matches!(reply, StaticReply::Unchanged(_)), "{reply:?}");
}
