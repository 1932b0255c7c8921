//! Event mode's turns over an in-memory socket: what a pool thread does
//! with a connection the front decoded a head for.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use bytes::BytesMut;
use http1::Message;
use site::exposure::Surface;
use site::stats::TimeoutKind;

use super::{Parked, Turn, resume};
use crate::blocking::conn::Ctx;
use crate::blocking::conn::tests::{GET, Log, Script, ctx};

/// A connection whose client sends `reads` (one per read call) if the
/// loop reads, with `arrived` already read by the front and decoded as far
/// as a whole head.
fn parked(ctx: &Ctx, arrived: &[u8], reads: &[&[u8]]) -> (Parked<Script>, Rc<RefCell<Log>>) {
    let (io, log) = Script::new(reads);
    let mut p = Parked::new(ctx, io, None, Surface::Public);
    p.rbuf.extend_from_slice(arrived);
    match p.decoder.decode(&mut p.rbuf) {
        Ok(Some(Message::Head(req))) => p.pending = Some(req),
        Ok(None) | Err(_) => {}
        Ok(Some(m)) => panic!("a head first, not {m:?}"),
    }
    (p, log)
}

fn output(log: &Rc<RefCell<Log>>) -> String {
    String::from_utf8_lossy(&log.borrow().output).into_owned()
}

#[test]
fn a_turn_answers_every_whole_request_and_parks_with_the_partial_one() {
    let ctx = ctx();
    let partial = &GET[..20];
    let (p, log) = parked(&ctx, &[GET, GET, partial].concat(), &[]);
    let mut wbuf = BytesMut::new();
    let Turn::Park(p) = resume(&ctx, p, false, &mut wbuf) else {
        panic!("closed: {}", output(&log));
    };
    assert_eq!(output(&log).matches("Hello, World!").count(), 2);
    // It never read: the front waits for the rest of the head.
    assert!(log.borrow().written_before_read.is_empty());
    assert_eq!(&p.rbuf[..], partial);
    assert!(!p.is_idle());
    assert_eq!(p.served(), 2);
    assert!(wbuf.is_empty(), "the thread's buffer comes back empty");
}

#[test]
fn an_idle_connection_parks_with_the_idle_timeout_from_the_park() {
    let ctx = ctx();
    let (p, _log) = parked(&ctx, GET, &[]);
    let accepted = p.accepted().expect("new");
    let (due, kind) = p.deadline(&ctx.config);
    assert_eq!(kind, TimeoutKind::Header);
    assert_eq!(due, accepted + ctx.config.header_timeout);
    let before = Instant::now();
    let Turn::Park(p) = resume(&ctx, p, false, &mut BytesMut::new()) else {
        panic!("closed");
    };
    assert!(p.is_idle());
    assert_eq!(p.accepted(), None, "served: no longer new");
    let (due, kind) = p.deadline(&ctx.config);
    assert_eq!(kind, TimeoutKind::Idle);
    assert!(due >= before + ctx.config.idle_timeout);
}

#[test]
fn a_request_that_closes_ends_the_turn_and_the_connection() {
    let ctx = ctx();
    let close = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    let (p, log) = parked(&ctx, close, &[]);
    assert!(matches!(
        resume(&ctx, p, false, &mut BytesMut::new()),
        Turn::Close(_)
    ));
    assert!(output(&log).contains("Hello, World!"));
}

#[test]
fn a_head_the_front_could_not_decode_is_answered_on_the_thread() {
    let ctx = ctx();
    let (p, log) = parked(&ctx, b"GET / HTTP/9.9\r\nHost: a\r\n\r\n", &[]);
    assert!(p.pending.is_none(), "the front found an error, not a head");
    assert!(matches!(
        resume(&ctx, p, false, &mut BytesMut::new()),
        Turn::Close(_)
    ));
    let out = output(&log);
    assert!(out.starts_with("HTTP/1.1 505 "), "{out}");
}

#[test]
fn a_body_is_read_on_the_thread() {
    let ctx = ctx();
    let head = b"POST /_httplite/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nab";
    let (p, log) = parked(&ctx, head, &[b"cd", b"ef"]);
    let Turn::Park(p) = resume(&ctx, p, false, &mut BytesMut::new()) else {
        panic!("closed: {}", output(&log));
    };
    assert!(output(&log).ends_with("\r\n\r\nabcdef"), "{}", output(&log));
    assert_eq!(log.borrow().written_before_read.len(), 2, "two reads");
    assert!(p.is_idle());
}
