//! The reactor driven by hand: a tiny `block_on` polls a future and turns the
//! reactor whenever it is pending. No executor involved.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use reactor::{Interest, Reactor, sys, time};

struct Flag(AtomicBool, AtomicUsize);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

fn flag() -> (Arc<Flag>, Waker) {
    let f = Arc::new(Flag(AtomicBool::new(false), AtomicUsize::new(0)));
    (f.clone(), Waker::from(f))
}

fn block_on<F: Future>(reactor: &Reactor, fut: F) -> F::Output {
    let _g = reactor.enter();
    let mut fut = pin!(fut);
    let (_f, waker) = flag();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        reactor.turn(None).unwrap();
    }
}

#[test]
fn deregisters_on_drop() {
    let reactor = Reactor::new().unwrap();
    let (r, w) = sys::pipe().unwrap();
    // SAFETY: `r` outlives `reg`, which is dropped below.
    let reg = unsafe { reactor.register(r.as_fd()) }.unwrap();
    assert_eq!(reactor.stats().registered, 1);
    drop(reg);
    assert_eq!(reactor.stats().registered, 0);
    sys::write(w.as_fd(), b"x").unwrap();
    let before = reactor.stats().events;
    reactor.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(
        reactor.stats().events,
        before,
        "epoll no longer reports the fd"
    );
}

#[test]
fn hangup_wakes_reader_and_writer() {
    let reactor = Reactor::new().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    // SAFETY: `server` is declared first, so it is dropped after `reg`.
    let reg = unsafe { reactor.register(server.as_fd()) }.unwrap();
    reactor.turn(Some(Duration::ZERO)).unwrap(); // initial EPOLLOUT edge
    // Fill the send buffer so that the writer has to wait.
    let chunk = [0u8; 65536];
    loop {
        match sys::send(server.as_fd(), &chunk) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                reg.clear_readiness(Interest::Writable);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let (fr, wr) = flag();
    let (fw, ww) = flag();
    assert!(
        reg.poll_ready(&mut Context::from_waker(&wr), Interest::Readable)
            .is_pending()
    );
    assert!(
        reg.poll_ready(&mut Context::from_waker(&ww), Interest::Writable)
            .is_pending()
    );
    // A reset (RST) from the peer: SO_LINGER 0 then close.
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `linger` is a valid struct of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
    assert_eq!(rc, 0);
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(fr.0.load(Ordering::SeqCst) && fw.0.load(Ordering::SeqCst)) {
        assert!(Instant::now() < deadline, "hang-up did not wake both sides");
        reactor.turn(Some(Duration::from_millis(100))).unwrap();
    }
}

#[test]
fn sleep_never_fires_early_and_frees_its_entry() {
    let reactor = Reactor::new().unwrap();
    block_on(&reactor, async {
        for us in [0u64, 300, 1500, 20_000] {
            let start = Instant::now();
            time::sleep(Duration::from_micros(us)).await;
            assert!(start.elapsed() >= Duration::from_micros(us));
        }
    });
    assert_eq!(reactor.stats().timers, 0);
}

#[test]
fn timeout_cancels_and_interval_ticks() {
    let reactor = Reactor::new().unwrap();
    block_on(&reactor, async {
        let never = std::future::pending::<()>();
        let r = time::timeout(Duration::from_millis(5), never).await;
        assert_eq!(r, Err(time::Elapsed));
        let quick = time::timeout(Duration::from_secs(5), async { 7 }).await;
        assert_eq!(quick, Ok(7));
        let mut iv = time::interval(Duration::from_millis(2));
        let t0 = iv.tick().await;
        let t1 = iv.tick().await;
        let t2 = iv.tick().await;
        assert!(t1 - t0 >= Duration::from_millis(2) && t2 - t1 >= Duration::from_millis(2));
    });
    assert_eq!(reactor.stats().timers, 0);
}

#[test]
fn notifier_wakes_a_blocked_turn() {
    let reactor = Reactor::new().unwrap();
    let n = reactor.notifier();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        n.notify();
    });
    // Bounded, so that a lost notify fails here instead of hanging: only
    // the notify can end this turn before its timeout (no fd, no timer).
    let limit = Duration::from_secs(10);
    let start = Instant::now();
    reactor.turn(Some(limit)).unwrap();
    assert!(start.elapsed() < limit, "the notify did not end the turn");
    assert_eq!(reactor.stats().notifies, 1);
    t.join().unwrap();
}

#[test]
fn partial_reader_keeps_readiness_without_new_edge() {
    let reactor = Reactor::new().unwrap();
    let (r, w) = sys::pipe().unwrap();
    // SAFETY: `r` is declared first, so it is dropped after `reg`.
    let reg = unsafe { reactor.register(r.as_fd()) }.unwrap();
    sys::write(w.as_fd(), &[1u8; 100]).unwrap();
    let got = block_on(&reactor, async {
        let mut total = 0;
        // Read 10 bytes at a time; no new data is written after the first edge.
        while total < 100 {
            let n = std::future::poll_fn(|cx| {
                reg.poll_io(cx, Interest::Readable, || {
                    sys::read(r.as_fd(), &mut [0u8; 10])
                })
            })
            .await
            .unwrap();
            total += n;
        }
        total
    });
    assert_eq!(got, 100);
}

#[test]
fn an_accepted_registration_enters_epoll_at_its_first_wait_and_misses_no_byte() {
    let reactor = Reactor::new().unwrap();
    let (r, w) = sys::pipe().unwrap();
    // SAFETY: `r` is declared first, so it is dropped after `reg`.
    let reg = unsafe { reactor.register_accepted(r.as_fd()) };
    let (woke, waker) = flag();
    let mut cx = Context::from_waker(&waker);

    // Not in epoll: bytes raise no event, and the registration knows no
    // readiness; its owner reads without asking.
    sys::write(w.as_fd(), b"first").unwrap();
    reactor.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(reactor.stats().events, 0, "the fd is not in epoll yet");
    assert!(reg.readiness().is_empty());
    let mut buf = [0u8; 64];
    let n = reg.try_io(Interest::Readable, || sys::read(r.as_fd(), &mut buf));
    assert_eq!(n.unwrap(), 5);
    let again = reg.try_io(Interest::Readable, || sys::read(r.as_fd(), &mut buf));
    assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);

    // Bytes that arrive between the EAGAIN and the first wait: the wait
    // adds the fd, epoll reports them, the waiter wakes.
    sys::write(w.as_fd(), b"second").unwrap();
    assert!(reg.poll_ready(&mut cx, Interest::Readable).is_pending());
    reactor.turn(Some(Duration::from_secs(1))).unwrap();
    assert!(
        woke.0.load(Ordering::SeqCst),
        "the late bytes woke the waiter"
    );
    assert!(reg.poll_ready(&mut cx, Interest::Readable).is_ready());
    let n = reg.try_io(Interest::Readable, || sys::read(r.as_fd(), &mut buf));
    assert_eq!(n.unwrap(), 6);

    // From then on it is an ordinary registration: the next edge wakes.
    let again = reg.try_io(Interest::Readable, || sys::read(r.as_fd(), &mut buf));
    assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    woke.0.store(false, Ordering::SeqCst);
    assert!(reg.poll_ready(&mut cx, Interest::Readable).is_pending());
    sys::write(w.as_fd(), b"third").unwrap();
    reactor.turn(Some(Duration::from_secs(1))).unwrap();
    assert!(
        woke.0.load(Ordering::SeqCst),
        "a later edge woke the waiter"
    );
    drop(reg);
    assert_eq!(reactor.stats().registered, 0);
}
