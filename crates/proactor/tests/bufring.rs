//! `BufRing::put` is safe, so it checks what the kernel would otherwise
//! trust: the buffer id is in range, and the buffer is not already in the
//! ring (a second entry would let the kernel fill it for one recv while the
//! owner of an earlier one still reads it). Run in release too: these checks
//! must not be debug assertions.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use proactor::BufRing;
use proactor::abi::*;
use proactor::ring::Ring;

fn ring() -> Ring {
    Ring::new(8).unwrap_or_else(|e| panic!("io_uring unavailable: {e} (these tests need it)"))
}

/// Runs `f`, which must panic; returns its message.
fn refused(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("the put was accepted");
    match err.downcast::<String>() {
        Ok(s) => *s,
        Err(e) => e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

#[test]
fn put_out_of_range_is_refused() {
    let ring = ring();
    // SAFETY: unregistered below; no operation ever selects the group.
    let bufs = unsafe { BufRing::new(ring.fd(), 1, 4, 64) }.unwrap();
    for bid in [4, 5, u16::MAX] {
        let msg = refused(|| bufs.put(bid));
        assert!(msg.contains("out of range"), "{bid}: {msg}");
    }
    assert_eq!(bufs.available(), 4, "a refused put changes nothing");
    bufs.unregister(ring.as_fd()).unwrap();
}

#[test]
fn double_put_is_refused() {
    let ring = ring();
    // SAFETY: unregistered below; no operation ever selects the group.
    let bufs = unsafe { BufRing::new(ring.fd(), 1, 4, 64) }.unwrap();
    // `new` gave every buffer to the kernel already.
    for bid in 0..4 {
        let msg = refused(|| bufs.put(bid));
        assert!(msg.contains("already with the kernel"), "{bid}: {msg}");
    }
    assert_eq!(bufs.available(), 4, "a refused put changes nothing");
    bufs.unregister(ring.as_fd()).unwrap();
}

#[test]
fn a_buffer_a_cqe_named_goes_back_once() {
    let mut ring = ring();
    // SAFETY: unregistered below, after the recv's last CQE.
    let bufs = unsafe { BufRing::new(ring.fd(), 1, 2, 16) }.unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    client.write_all(b"hello").unwrap();
    let recv = Sqe {
        opcode: IORING_OP_RECV,
        fd: server.as_raw_fd(),
        flags: IOSQE_BUFFER_SELECT,
        buf_group: bufs.bgid(),
        user_data: 1,
        ..Sqe::default()
    };
    // SAFETY: the recv writes only into `bufs`, which outlives it; `server`
    // is open until the end of the test.
    unsafe { ring.push(&recv) }.expect("SQ has room");
    let mut cqes = Vec::new();
    while cqes.is_empty() {
        ring.enter(1, Some(Duration::from_secs(5))).unwrap();
        ring.reap(&mut cqes);
    }
    let c = cqes[0];
    assert_eq!(c.res, 5);
    assert_ne!(c.flags & IORING_CQE_F_BUFFER, 0);
    let bid = (c.flags >> IORING_CQE_BUFFER_SHIFT) as u16;
    // SAFETY: this CQE named `bid`, and nothing else reports it.
    unsafe { bufs.taken(bid) };
    assert_eq!(bufs.available(), 1);
    // SAFETY: the CQE handed `bid` to us and it has not gone back.
    assert_eq!(unsafe { bufs.bytes(bid, 5) }, b"hello");
    bufs.put(bid);
    assert_eq!(bufs.available(), 2);
    let msg = refused(|| bufs.put(bid));
    assert!(msg.contains("already with the kernel"), "{msg}");
    assert_eq!(bufs.available(), 2);
    bufs.unregister(ring.as_fd()).unwrap();
}
