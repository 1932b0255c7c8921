//! The proactor over real loopback sockets and pipes: multishot accept and
//! recv, sends, the cancellation and buffer-ownership rules, ENOBUFS
//! back-pressure, timers and cross-thread wakes. io_uring must work here;
//! if the ring cannot be set up these tests fail with the kernel's reason.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream as StdStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use executor::{Runtime, spawn};
use proactor::{Proactor, TcpListener, op, time};

/// The shared executor on a default proactor.
fn runtime() -> Runtime<Proactor> {
    Proactor::new()
        .and_then(Runtime::with_driver)
        .unwrap_or_else(|e| panic!("io_uring unavailable: {e} (these tests need it)"))
}

fn small_runtime(buffers: u16, size: u32) -> Runtime<Proactor> {
    Runtime::with_driver(
        Proactor::builder()
            .buffers(buffers, size)
            .build()
            .expect("io_uring"),
    )
    .unwrap()
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two ints.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    assert_eq!(r, 0);
    // SAFETY: both fds were just created and are owned here only.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

#[test]
fn echo_over_multishot_accept_and_recv() {
    let rt = runtime();
    rt.block_on(async {
        let l = TcpListener::bind(localhost()).unwrap();
        let addr = l.local_addr().unwrap();
        let client = thread::spawn(move || {
            let mut got = Vec::new();
            for i in 0..3 {
                let mut s = StdStream::connect(addr).unwrap();
                let msg = format!("hello {i}");
                s.write_all(msg.as_bytes()).unwrap();
                s.shutdown(Shutdown::Write).unwrap();
                let mut back = String::new();
                s.read_to_string(&mut back).unwrap();
                got.push(back);
            }
            got
        });
        for _ in 0..3 {
            let s = l.accept().await.unwrap();
            let mut all = Vec::new();
            while let Some(buf) = s.recv().await.unwrap() {
                all.extend_from_slice(&buf);
            }
            let (r, _) = s.send_all(all).await;
            r.unwrap();
            s.close().await.unwrap();
        }
        assert_eq!(client.join().unwrap(), ["hello 0", "hello 1", "hello 2"]);
    });
    let st = rt.driver().stats();
    assert!(st.cqes > 0 && st.sqes > 0);
    assert_eq!(
        rt.driver().buffers_available(),
        256,
        "every buffer id returned"
    );
}

#[test]
fn dropped_recv_future_loses_nothing() {
    // The documented rule: dropping a `recv()` future leaves the multishot
    // armed; bytes that arrive meanwhile go to the next `recv()`.
    let rt = runtime();
    rt.block_on(async {
        let l = TcpListener::bind(localhost()).unwrap();
        let mut c = StdStream::connect(l.local_addr().unwrap()).unwrap();
        let s = l.accept().await.unwrap();
        let r = time::timeout(Duration::from_millis(20), s.recv()).await;
        assert!(r.is_err(), "nothing was sent yet");
        c.write_all(b"late bytes").unwrap();
        let buf = s.recv().await.unwrap().expect("data");
        assert_eq!(&*buf, b"late bytes");
        let st = Proactor::current().stats();
        assert_eq!(st.discarded_bytes, 0);
        assert_eq!(st.cancels, 0, "a dropped recv() future cancels nothing");
    });
}

#[test]
fn dropped_stream_discards_and_counts_and_returns_buffers() {
    let rt = runtime();
    rt.block_on(async {
        let l = TcpListener::bind(localhost()).unwrap();
        let mut c = StdStream::connect(l.local_addr().unwrap()).unwrap();
        let s = l.accept().await.unwrap();
        // Arm the multishot (the recv() future is dropped by the timeout).
        assert!(
            time::timeout(Duration::from_millis(5), s.recv())
                .await
                .is_err()
        );
        c.write_all(&[7u8; 1000]).unwrap();
        // The armed multishot has received (a buffer is taken); drop the
        // stream unread.
        let p = Proactor::current();
        assert!(
            until(|| p.buffers_available() < 256).await,
            "nothing received"
        );
        drop(s);
        // The cancel and close go out on the next turn; the buffer comes back.
        let done = || {
            let st = p.stats();
            st.cancels == 1 && st.parked == 0 && st.discarded_bytes == 1000
        };
        assert!(until(done).await, "{:?}", p.stats());
        let st = p.stats();
        assert_eq!(st.discarded_bytes, 1000, "{st:?}");
        assert_eq!(st.cancels, 1);
        assert_eq!(st.parked, 0);
        assert_eq!(Proactor::current().buffers_available(), 256);
        // The peer sees the close.
        let mut rest = Vec::new();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = c.read_to_end(&mut rest);
    });
}

#[test]
fn cancelled_read_parks_its_buffer_until_the_cqe() {
    let rt = runtime();
    let p = rt.driver().clone();
    let (r, _w) = pipe();
    rt.block_on(async {
        // SAFETY: `r` stays open until the test ends, after the block
        // waited for the second read's last CQE (`parked` back to 0).
        let fut = unsafe { op::read(&p, r.as_raw_fd(), Vec::with_capacity(16)) };
        drop(fut); // never polled: nothing submitted, nothing parked
        let canary = Vec::with_capacity(4096);
        let res = time::timeout(
            Duration::from_millis(10),
            // SAFETY: as above.
            unsafe { op::read(&p, r.as_raw_fd(), canary) },
        )
        .await;
        assert!(res.is_err(), "an empty pipe times out");
        // The read was in the kernel: its buffer is parked, a cancel queued.
        assert_eq!(p.stats().parked, 1);
        assert_eq!(p.stats().cancels, 1);
        assert!(
            until(|| p.stats().parked == 0).await,
            "freed once -ECANCELED arrived"
        );
    });
    assert_eq!(p.stats().discarded_bytes, 0);
}

#[test]
fn data_for_a_cancelled_read_is_counted_as_discarded() {
    // Deterministic race: the read and its cancel are queued in the same
    // submission, and data is already in the pipe, so the read completes
    // inline with the bytes before the cancel runs (which then finds
    // nothing). The bytes are in a parked buffer nobody will read: counted.
    let rt = runtime();
    let p = rt.driver().clone();
    let (r, w) = pipe();
    rt.block_on(async {
        // SAFETY: `r` stays open until the test ends, after the block gave
        // the read and its cancel turns to complete (`parked` checked 0).
        let mut fut = Box::pin(unsafe { op::read(&p, r.as_raw_fd(), Vec::with_capacity(64)) });
        // One poll queues the SQE without submitting it.
        let waker = std::task::Waker::noop();
        assert!(
            fut.as_mut()
                .poll(&mut std::task::Context::from_waker(waker))
                .is_pending()
        );
        drop(fut);
        assert_eq!(p.stats().parked, 1);
        // SAFETY: writes 5 bytes from a live buffer.
        let n = unsafe { libc::write(w.as_raw_fd(), b"hello".as_ptr().cast(), 5) };
        assert_eq!(n, 5);
        assert!(until(|| p.stats().parked == 0).await, "{:?}", p.stats());
    });
    let st = p.stats();
    assert_eq!(st.discarded_bytes, 5, "{st:?}");
    assert_eq!(st.parked, 0);
}

use std::future::Future;

/// Waits on the runtime's timer, a millisecond at a time, until `cond`
/// holds (true) or 5 s pass (false): for counters the next turns update.
async fn until(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while !cond() {
        if Instant::now() >= end {
            return false;
        }
        time::sleep(Duration::from_millis(1)).await;
    }
    true
}

#[test]
fn enobufs_back_pressure_then_resume() {
    // 4 buffers of 64 bytes; the client sends 4 KiB while the server holds
    // every buffer it gets. The multishot ends with -ENOBUFS; once buffers
    // come back the stream re-arms and every byte arrives in order.
    let rt = small_runtime(4, 64);
    let p = rt.driver().clone();
    rt.block_on(async {
        let l = TcpListener::bind(localhost()).unwrap();
        let addr = l.local_addr().unwrap();
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        let expect = data.clone();
        let client = thread::spawn(move || {
            let mut c = StdStream::connect(addr).unwrap();
            c.write_all(&data).unwrap();
        });
        let s = l.accept().await.unwrap();
        let accepted = p.stats().cqes;
        let mut held = Vec::new();
        let mut got = Vec::new();
        while held.len() < 4 {
            let b = s.recv().await.unwrap().unwrap();
            got.extend_from_slice(&b);
            held.push(b);
        }
        assert_eq!(p.buffers_available(), 0);
        // The ring is dry: the multishot's four buffers and then its last
        // CQE, -ENOBUFS, are reaped before any buffer comes back (the
        // stream sees that one on its next recv).
        let dry = || p.stats().cqes >= accepted + 5;
        assert!(until(dry).await, "{:?}", p.stats());
        drop(held);
        while let Some(b) = s.recv().await.unwrap() {
            got.extend_from_slice(&b);
        }
        client.join().unwrap();
        assert_eq!(got, expect);
    });
    let st = p.stats();
    assert!(st.enobufs >= 1, "{st:?}");
    assert!(st.rearms >= 1, "{st:?}");
    assert_eq!(p.buffers_available(), 4);
}

#[test]
fn sleeping_is_one_enter_not_a_busy_peek() {
    // Uncapped even under valgrind (PROACTOR_MAX_WAIT_MS): the cap exists
    // for tests whose wake comes from another thread, and this one has none.
    let rt = Proactor::builder()
        .max_wait(None)
        .build()
        .and_then(Runtime::with_driver)
        .unwrap_or_else(|e| panic!("io_uring unavailable: {e} (these tests need it)"));
    let before = rt.driver().stats().enters;
    let t = Instant::now();
    rt.block_on(time::sleep(Duration::from_millis(50)));
    assert!(t.elapsed() >= Duration::from_millis(50));
    let enters = rt.driver().stats().enters - before;
    assert!(
        enters <= 3,
        "{enters} io_uring_enter calls for one 50 ms sleep"
    );
}

#[test]
fn wake_from_another_thread() {
    let rt = runtime();
    let (tx, rx) = std::sync::mpsc::channel::<std::task::Waker>();
    let t = thread::spawn(move || {
        let w = rx.recv().unwrap();
        thread::sleep(Duration::from_millis(20));
        w.wake();
    });
    let mut sent = false;
    rt.block_on(std::future::poll_fn(|cx| {
        if sent {
            return std::task::Poll::Ready(());
        }
        sent = true;
        tx.send(cx.waker().clone()).unwrap();
        std::task::Poll::Pending
    }));
    t.join().unwrap();
    // The doorbell's CQE ended the wait natively; under valgrind's capped
    // waits (PROACTOR_MAX_WAIT_MS) the cap may end it first, the executor
    // then finds the woken task on its own, and the CQE is read next turn.
    rt.driver().turn(false).unwrap();
    // Read from another thread, as a stats page on another worker would.
    let handle = rt.driver().stats_handle();
    let seen = thread::spawn(move || handle.get()).join().unwrap();
    assert!(seen.notifies >= 1, "{seen:?}");
    assert!(seen.enters >= 1 && seen.cqes >= 1);
}

#[test]
fn spawned_tasks_and_ring_timeout_and_shutdown() {
    let rt = runtime();
    rt.block_on(async {
        let l = TcpListener::bind(localhost()).unwrap();
        let addr = l.local_addr().unwrap();
        let server = spawn(async move {
            let s = l.accept().await.unwrap();
            s.shutdown(Shutdown::Write).await.unwrap();
            s.recv().await.unwrap().map(|b| b.to_vec())
        });
        let mut c = StdStream::connect(addr).unwrap();
        c.write_all(b"x").unwrap();
        let t = Instant::now();
        Proactor::current()
            .timeout_op(Duration::from_millis(10))
            .await;
        assert!(t.elapsed() >= Duration::from_millis(10));
        assert_eq!(server.await.unwrap().as_deref(), Some(&b"x"[..]));
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap(); // EOF thanks to the shutdown
        assert!(rest.is_empty());
    });
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

/// Dropping the runtime with a read still in the kernel: the task's drop
/// parks the buffer and cancels the read, and the proactor's teardown
/// waits for the read's last CQE, frees the buffer (once) and brings the
/// gauges back to zero.
#[test]
fn runtime_drop_drains_in_flight_operations() {
    let (r, _w) = pipe();
    let raw = r.as_raw_fd();
    let freed = Arc::new(AtomicUsize::new(0));
    let stats;
    {
        let rt = runtime();
        stats = rt.driver().stats_handle();
        let buf = Tracked {
            bytes: Vec::with_capacity(128),
            freed: freed.clone(),
        };
        rt.block_on(async move {
            spawn(async move {
                let p = Proactor::current();
                // SAFETY: the pipe `raw` names is opened before the
                // runtime and closed after it, whose teardown waits for
                // this read's last CQE.
                let _ = unsafe { op::read(&p, raw, buf) }.await;
            });
            // Until the read is in the kernel: the notifier's read and
            // this one consumed.
            while Proactor::current().stats().sqes < 2 {
                executor::yield_now().await;
            }
        });
        assert_eq!(stats.get().in_flight, 1);
        assert_eq!(freed.load(Ordering::SeqCst), 0, "the kernel holds it");
        // rt dropped here with the read still in the kernel.
    }
    assert_eq!(freed.load(Ordering::SeqCst), 1, "freed once, at teardown");
    let st = stats.get();
    assert_eq!((st.parked, st.in_flight), (0, 0), "{st:?}");
}

#[test]
fn one_multishot_accept_sqe_serves_many_connections() {
    let rt = runtime();
    rt.block_on(async {
        let p = Proactor::current();
        let l = TcpListener::bind(localhost()).unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<StdStream> = (0..5).map(|_| StdStream::connect(addr).unwrap()).collect();
        let before = p.stats().sqes;
        let mut conns = Vec::new();
        for _ in 0..5 {
            conns.push(l.accept().await.unwrap());
        }
        // The accept SQE, plus the notifier's eventfd read (queued when the
        // proactor was built, submitted with the first turn): five
        // connections, no SQE of their own.
        assert_eq!(p.stats().sqes - before, 2, "{:?}", p.stats());
        drop(clients);
    });
}

#[test]
fn adopts_a_handed_off_fd() {
    // Acceptor mode: another thread accepts, hands the fd over, and the
    // proactor's thread adopts it (as the dispatch crate's workers do).
    let std_listener = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
    let acceptor = thread::spawn(move || {
        let (s, _) = std_listener.accept().unwrap();
        tx.send(OwnedFd::from(s)).unwrap();
    });
    let mut client = StdStream::connect(addr).unwrap();
    client.write_all(b"handed off").unwrap();
    let fd = rx.recv().unwrap();
    acceptor.join().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let s = proactor::TcpStream::from_fd(fd);
        let buf = s.recv().await.unwrap().unwrap();
        assert_eq!(&*buf, b"handed off");
        drop(buf);
        let (r, _) = s.send(&b"ok"[..]).await;
        assert_eq!(r.unwrap(), 2);
        s.close().await.unwrap();
    });
    let mut back = Vec::new();
    client.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"ok");
}

/// A one-shot poll completes only once the fd is ready, with the ready
/// events as its result (the server waits on its dispatch port this way).
#[test]
fn poll_waits_for_readiness_then_reports_it() {
    let rt = runtime();
    let (r, w) = pipe();
    let w = std::fs::File::from(w);
    rt.block_on(async {
        let p = Proactor::current();
        let fd = r.as_raw_fd();
        // SAFETY: `r` stays open until the test ends, after the poll
        // completed.
        let mut polled = std::pin::pin!(unsafe { op::poll(&p, fd, libc::POLLIN) });
        // Nothing written yet: still pending after the ring had a turn.
        let early = time::timeout(Duration::from_millis(50), polled.as_mut()).await;
        assert!(
            early.is_err(),
            "a poll on an empty pipe completed: {early:?}"
        );
        (&w).write_all(b"x").unwrap();
        let revents = polled.await.expect("poll");
        assert!(revents & libc::POLLIN as u32 != 0, "revents {revents:#x}");
    });
}

/// `wake_all` polls every task once: a task parked on a flag nobody
/// registered for sees it set.
#[test]
fn wake_all_polls_every_task_once() {
    use std::cell::Cell;
    use std::rc::Rc;
    let rt = runtime();
    let seen = rt.block_on(async {
        let flag = Rc::new(Cell::new(false));
        let polls = Rc::new(Cell::new(0u32));
        let mut handles = Vec::new();
        for _ in 0..3 {
            let (flag, polls) = (flag.clone(), polls.clone());
            handles.push(spawn(std::future::poll_fn(move |_| {
                polls.set(polls.get() + 1);
                if flag.get() {
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            })));
        }
        executor::yield_now().await; // each task polled once, then parked
        assert_eq!(polls.get(), 3);
        flag.set(true);
        executor::wake_all();
        for h in handles {
            h.await.unwrap();
        }
        polls.get()
    });
    assert_eq!(seen, 6, "each task polled once more, no more");
}

/// A detached send larger than the socket buffer still goes out whole
/// (`MSG_WAITALL`: the kernel sends the rest itself), and an owner that
/// waits for its end is woken when it has sent everything.
#[test]
fn a_detached_send_goes_out_whole() {
    const LEN: usize = 8 << 20;
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = thread::spawn(move || {
        let mut client = StdStream::connect(addr).unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        got
    });
    let (server, _) = listener.accept().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let s = proactor::TcpStream::from_std(server).unwrap();
        let bytes: Vec<u8> = (0..LEN).map(|i| i as u8).collect();
        s.send_detached(bytes, 0);
        assert!(s.has_detached());
        let end = std::future::poll_fn(|cx| s.poll_detached::<Vec<u8>>(cx, true)).await;
        assert!(end.is_none(), "a short or failed send");
        assert!(!s.has_detached());
        s.close().await.unwrap();
    });
    let got = reader.join().unwrap();
    assert_eq!(got.len(), LEN);
    assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));
}

/// A detached send to a peer that has gone reports its failure, with the
/// buffer back.
#[test]
fn a_failed_detached_send_reports_its_error() {
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let client = StdStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    // Gone: the first send draws a reset, and a later one fails.
    drop(client);
    let rt = runtime();
    rt.block_on(async {
        let s = proactor::TcpStream::from_std(server).unwrap();
        let mut failed = None;
        for _ in 0..3 {
            s.send_detached(vec![7u8; 1024], 0);
            match std::future::poll_fn(|cx| s.poll_detached::<Vec<u8>>(cx, true)).await {
                None => time::sleep(Duration::from_millis(20)).await,
                Some((r, buf)) => {
                    assert_eq!(buf.len(), 1024);
                    failed = Some(r);
                    break;
                }
            }
        }
        let err = failed.expect("no send failed").expect_err("a failed send");
        assert!(
            matches!(err.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
            "{err}"
        );
    });
}
