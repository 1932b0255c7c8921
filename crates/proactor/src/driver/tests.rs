//! A full SQ is back-pressure: enters that consume nothing (the kernel's
//! `-EAGAIN`, injected with `stall_enters`) never panic, never lose a CQE
//! already reaped, and every operation completes once the kernel takes
//! SQEs again.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use executor::{Runtime, spawn};

use super::*;
use crate::{TcpStream, op, time};

/// More stalled enters than `push` ever retried before queueing.
const STALLS: u32 = 100;

/// A proactor with a 4-entry SQ: a handful of operations fill it.
fn tiny() -> Proactor {
    Proactor::builder()
        .entries(4)
        .build()
        .unwrap_or_else(|e| panic!("io_uring unavailable: {e} (these tests need it)"))
}

fn socketpair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: fds has room for two ints.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair: {}", io::Error::last_os_error());
    // SAFETY: both fds were just created and are owned here only.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn nop() -> Sqe {
    Sqe {
        opcode: IORING_OP_NOP,
        user_data: IGNORE_UD,
        ..Sqe::default()
    }
}

/// Whether the operation's last CQE arrived (read or not).
fn done(p: &Proactor, key: OpKey) -> bool {
    p.inner.ops.borrow_mut().slot(key).done
}

/// Turns until `done`, at most `turns` times; a turn waits at most 100 ms
/// (a timer), so that a test that goes wrong fails instead of hanging.
fn turn_until(p: &Proactor, turns: usize, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..turns {
        if done() {
            return true;
        }
        let at = Instant::now() + Duration::from_millis(100);
        let timer = p
            .inner
            .timers
            .borrow_mut()
            .insert(at, Waker::noop().clone());
        p.turn(true).unwrap();
        p.inner.timers.borrow_mut().remove(timer);
    }
    done()
}

/// An empty buffer whose capacity is written once (zeroes): memcheck cannot
/// see the kernel's writes through the ring, so bytes a completion fills in
/// must already count as defined for it (see scripts/valgrind.sh).
fn zeroed(capacity: usize) -> Vec<u8> {
    let mut v = vec![0u8; capacity];
    v.clear();
    v
}

#[test]
fn operations_in_flight_complete_through_stalled_enters() {
    let rt = Runtime::with_driver(tiny()).unwrap();
    let p = rt.driver().clone();
    p.stall_enters(STALLS);
    let got = rt.block_on(async {
        let mut tasks = Vec::new();
        let mut keep = Vec::new();
        // One-shot reads answered by sends on socket pairs.
        for i in 0..6u8 {
            let pair = socketpair();
            let (a, b) = (pair.0.as_raw_fd(), pair.1.as_raw_fd());
            keep.push(pair);
            let p2 = Proactor::current();
            tasks.push(spawn(async move {
                // SAFETY: the sockets (in `keep`) are closed at the end of
                // the block, after every operation has finished.
                let (r, buf) = unsafe { op::read(&p2, b, zeroed(16)) }.await;
                assert_eq!(r.unwrap(), 3);
                u32::from(buf[2] - b'0')
            }));
            let p2 = Proactor::current();
            tasks.push(spawn(async move {
                time::sleep(Duration::from_millis(1)).await;
                let msg = vec![b'm', b'=', b'0' + i];
                // SAFETY: as above.
                let (r, _) = unsafe { op::send(&p2, a, msg) }.await;
                assert_eq!(r.unwrap(), 3);
                0
            }));
        }
        // A multishot recv on the provided buffers.
        let (a, b) = socketpair();
        let stream = TcpStream::from_fd(b);
        let p2 = Proactor::current();
        let a_raw = a.as_raw_fd();
        tasks.push(spawn(async move {
            // SAFETY: `a` is closed at the end of the block, after every
            // operation has finished.
            let (r, _) = unsafe { op::send(&p2, a_raw, &b"multishot"[..]) }.await;
            assert_eq!(r.unwrap(), 9);
            0
        }));
        // Ring timeouts and a read cancelled by its timer (a cancel queued
        // while the SQ is full).
        for _ in 0..3 {
            tasks.push(spawn(async {
                Proactor::current()
                    .timeout_op(Duration::from_millis(2))
                    .await;
                0
            }));
        }
        let (quiet, _quiet_peer) = socketpair();
        let quiet_fd = quiet.as_raw_fd();
        tasks.push(spawn(async move {
            let p = Proactor::current();
            let r = time::timeout(
                Duration::from_millis(3),
                // SAFETY: `quiet` is closed at the end of the block, after
                // the cancelled read's last CQE.
                unsafe { op::read(&p, quiet_fd, Vec::with_capacity(8)) },
            )
            .await;
            assert!(r.is_err(), "nothing was sent to this socket");
            0
        }));
        let buf = stream.recv().await.unwrap().expect("bytes");
        assert_eq!(&*buf, b"multishot");
        drop(buf);
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        drop(stream);
        // The stream's cancel and close, the timed-out read's cancel: their
        // CQEs come back on later turns.
        let p = Proactor::current();
        let settled = async {
            while p.stats().in_flight != 0 || p.stats().parked != 0 {
                time::sleep(Duration::from_millis(1)).await;
            }
        };
        time::timeout(Duration::from_secs(5), settled)
            .await
            .unwrap_or_else(|_| panic!("operations never finished: {:?}", p.stats()));
        drop((a, quiet, keep));
        sum
    });
    assert_eq!(got, 1 + 2 + 3 + 4 + 5, "every read saw its send");
    let st = p.stats();
    assert!(st.sq_full > 0, "the SQ never overflowed: {st:?}");
    assert_eq!(p.inner.ring.borrow().stalled_enters(), 0, "{st:?}");
    assert!(p.inner.overflow.borrow().is_empty());
    assert_eq!(p.buffers_available(), 256, "every ring buffer came back");
}

/// The notifier's read completes while the SQ is full and enters stall:
/// its re-arm waits in the overflow list, and the CQE after it in the same
/// turn still reaches its operation.
#[test]
fn notifier_rearm_on_a_full_sq_loses_no_completion() {
    let p = tiny();
    let _g = p.enter();
    p.notifier().notify();
    // Submit the eventfd read (data is there: it completes at once) and
    // leave its CQE in the CQ for the turn below.
    p.inner
        .ring
        .borrow_mut()
        .enter(1, Some(Duration::from_secs(1)))
        .unwrap();
    // An operation whose CQE follows the notifier's in the CQ.
    // SAFETY: a NOP points to no memory.
    let key = unsafe { p.start(Kind::Other, nop()) };
    p.inner
        .ring
        .borrow_mut()
        .enter(2, Some(Duration::from_secs(1)))
        .unwrap();
    // Fill the SQ, then stall every enter.
    for _ in 0..4 {
        // SAFETY: a NOP points to no memory.
        unsafe { p.push(&nop()) };
    }
    assert_eq!(p.inner.ring.borrow().pending(), 4);
    p.stall_enters(STALLS);
    assert_eq!(p.turn(false).unwrap(), 2, "both CQEs reaped");
    assert_eq!(p.stats().notifies, 1);
    assert_eq!(p.inner.overflow.borrow().len(), 1, "the re-arm waits");
    assert!(done(&p, key), "the NOP's CQE reached its slot");
    p.release(key, None);
    // Once the kernel takes SQEs again the re-armed read is submitted, and a
    // wake from another thread reaches the ring through it.
    assert!(turn_until(&p, STALLS as usize + 10, || {
        p.inner.ring.borrow().stalled_enters() == 0 && p.inner.overflow.borrow().is_empty()
    }));
    let n = p.notifier();
    std::thread::spawn(move || n.notify()).join().unwrap();
    assert!(
        turn_until(&p, 100, || p.stats().notifies == 2),
        "{:?}",
        p.stats()
    );
}

/// A future dropped while a panic unwinds queues its cancel; with the SQ
/// full and enters stalled that cancel waits for a later turn instead of
/// panicking inside the unwind (which aborts the process).
#[test]
fn release_while_unwinding_on_a_full_sq_does_not_abort() {
    let p = tiny();
    let _g = p.enter();
    let (quiet, _peer) = socketpair();
    // SAFETY: `quiet` is closed when the test ends, after the read's last
    // CQE (`parked` back to 0).
    let mut read = Box::pin(unsafe { op::read(&p, quiet.as_raw_fd(), Vec::with_capacity(8)) });
    let mut cx = Context::from_waker(Waker::noop());
    assert!(read.as_mut().poll(&mut cx).is_pending());
    p.turn(false).unwrap(); // the read is in the kernel now
    assert_eq!(p.stats().in_flight, 1);
    for _ in 0..4 {
        // SAFETY: a NOP points to no memory.
        unsafe { p.push(&nop()) };
    }
    p.stall_enters(STALLS);
    let unwound = catch_unwind(AssertUnwindSafe(move || {
        let _read = read;
        panic!("a task fails with a read in flight");
    }));
    assert!(unwound.is_err());
    assert_eq!(p.stats().parked, 1, "the buffer is parked");
    assert!(!p.inner.overflow.borrow().is_empty(), "the cancel waits");
    assert!(
        turn_until(&p, STALLS as usize + 100, || p.stats().parked == 0),
        "the cancel never reached the read: {:?}",
        p.stats()
    );
    assert_eq!(p.stats().in_flight, 0);
}

/// A stream dropped right after a dropped `shutdown`, which the kernel runs
/// in one of its worker threads and looks the fd up there: the stream's
/// close waits for the shutdown's last CQE, so the number cannot be reused
/// under it.
#[test]
fn a_dropped_shutdown_holds_the_streams_close_until_its_cqe() {
    let p = tiny();
    let _g = p.enter();
    let (peer, ours) = socketpair();
    let stream = TcpStream::from_fd(ours);
    let mut shutdown = Box::pin(stream.shutdown(std::net::Shutdown::Read));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(shutdown.as_mut().poll(&mut cx).is_pending());
    drop(shutdown); // its cancel is queued behind it
    drop(stream);
    assert_eq!(
        p.inner.ops.borrow().held_closes(),
        1,
        "the close did not wait for the shutdown"
    );
    assert!(
        turn_until(&p, 100, || p.stats().in_flight == 0),
        "{:?}",
        p.stats()
    );
    assert_eq!(p.inner.ops.borrow().held_closes(), 0);
    let mut byte = [0u8; 1];
    // SAFETY: reads at most one byte into a live buffer.
    let n = unsafe { libc::read(peer.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    assert_eq!(
        n,
        0,
        "the peer sees the close: {}",
        io::Error::last_os_error()
    );
}

/// `push` never fails, whatever the kernel does: every operation started
/// beyond a full SQ completes once enters work again.
#[test]
fn operations_started_beyond_a_full_sq_all_complete() {
    let p = tiny();
    p.turn(false).unwrap();
    p.stall_enters(STALLS);
    let keys: Vec<OpKey> = (0..10)
        // SAFETY: a NOP points to no memory.
        .map(|_| unsafe { p.start(Kind::Other, nop()) })
        .collect();
    assert_eq!(p.stats().sq_full, 6, "{:?}", p.stats());
    assert!(
        turn_until(&p, STALLS as usize + 20, || keys
            .iter()
            .all(|k| done(&p, *k))),
        "{:?}",
        p.stats()
    );
    for k in keys {
        p.release(k, None);
    }
    assert_eq!(p.stats().in_flight, 0);
}

/// A read buffer that counts how often it was freed.
struct Tracked {
    bytes: Vec<u8>,
    freed: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.freed.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the Vec's heap bytes do not move with the value.
unsafe impl op::IoBuf for Tracked {
    fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
    fn len(&self) -> usize {
        self.bytes.len()
    }
}

// SAFETY: as above; `capacity` bytes are allocated.
unsafe impl op::IoBufMut for Tracked {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }
    fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
    unsafe fn set_len(&mut self, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.bytes.set_len(n) }
    }
}

/// Dropping the proactor while SQEs wait in the overflow list (a read and
/// its cancel, behind a full SQ, enters stalled): teardown submits them,
/// the read is cancelled, and its parked buffer is freed, once.
#[test]
fn teardown_submits_the_overflow_list_and_frees_parked_buffers() {
    let freed = Arc::new(AtomicUsize::new(0));
    let (quiet, _peer) = socketpair();
    let p = tiny();
    {
        let _g = p.enter();
        // The notifier's read and three NOPs fill the SQ.
        for _ in 0..3 {
            // SAFETY: a NOP points to no memory.
            unsafe { p.push(&nop()) };
        }
        p.stall_enters(STALLS);
        let buf = Tracked {
            bytes: Vec::with_capacity(16),
            freed: freed.clone(),
        };
        // SAFETY: `quiet` is declared before `p`, so it is closed after
        // the proactor's teardown, which waits for the read's last CQE.
        let mut read = Box::pin(unsafe { op::read(&p, quiet.as_raw_fd(), buf) });
        let mut cx = Context::from_waker(Waker::noop());
        assert!(read.as_mut().poll(&mut cx).is_pending());
        drop(read);
        assert_eq!(
            p.inner.overflow.borrow().len(),
            2,
            "the read and its cancel"
        );
        assert_eq!(p.stats().parked, 1);
    }
    drop(p);
    assert_eq!(
        freed.load(Ordering::SeqCst),
        1,
        "the parked buffer was freed once"
    );
}
