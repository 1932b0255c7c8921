//! The measured alternatives of `proactor::transfer` over real loopback
//! sockets: SEND_ZC's two completions and its buffer held until the second,
//! SPLICE through a pipe, registered (fixed) files. io_uring must work
//! here; if the ring cannot be set up these tests fail with the reason.

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{TcpListener as StdListener, TcpStream as StdStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::thread;
use std::time::Duration;

use executor::Runtime;
use proactor::op::IoBuf;
use proactor::{Proactor, op, time, transfer};

fn runtime() -> Runtime<Proactor> {
    Proactor::new()
        .and_then(Runtime::with_driver)
        .unwrap_or_else(|e| panic!("io_uring unavailable: {e} (these tests need it)"))
}

/// Our non-blocking end, and a thread that reads the other end to EOF.
fn pair() -> (StdStream, thread::JoinHandle<Vec<u8>>) {
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all
    });
    let s = StdStream::connect(addr).unwrap();
    s.set_nonblocking(true).unwrap();
    (s, reader)
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

/// A buffer that records when it is freed.
struct Marked {
    bytes: Vec<u8>,
    freed: Rc<Cell<bool>>,
}

impl Drop for Marked {
    fn drop(&mut self) {
        self.freed.set(true);
    }
}

// SAFETY: the Vec's heap bytes do not move with the value.
unsafe impl IoBuf for Marked {
    fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
    fn len(&self) -> usize {
        self.bytes.len()
    }
}

#[test]
fn send_zc_returns_the_buffer_only_after_its_notification() {
    let rt = runtime();
    let p = rt.driver().clone();
    let (s, reader) = pair();
    let data = pattern(256 * 1024);
    rt.block_on(async {
        // SAFETY: `s` is closed after the block, when the send is over.
        let (r, buf) = unsafe { transfer::send_zc(&p, s.as_raw_fd(), data.clone()) }.await;
        let sent = r.unwrap();
        assert!(sent.bytes > 0);
        assert_eq!(buf, data, "the buffer comes back whole");
        // Both CQEs were read by the future: the slot is free, nothing was
        // orphaned or cancelled.
        let st = p.stats();
        assert_eq!((st.in_flight, st.parked, st.cancels), (0, 0, 0));
        let mut rest = data[sent.bytes..].to_vec();
        while !rest.is_empty() {
            // SAFETY: as above.
            let (r, b) = unsafe { op::send(&p, s.as_raw_fd(), rest) }.await;
            rest = b[r.unwrap()..].to_vec();
        }
    });
    drop(s);
    assert_eq!(reader.join().unwrap(), data);
}

#[test]
fn dropped_send_zc_parks_its_buffer_until_the_last_cqe() {
    let rt = runtime();
    let p = rt.driver().clone();
    let (s, reader) = pair();
    let freed = Rc::new(Cell::new(false));
    rt.block_on(async {
        let buf = Marked {
            bytes: pattern(64 * 1024),
            freed: freed.clone(),
        };
        // SAFETY: `s` is closed after the block, which waits for the send's
        // last CQE.
        let fut = unsafe { transfer::send_zc(&p, s.as_raw_fd(), buf) };
        drop(fut); // submitted, not completed: the kernel may read the pages
        assert!(!freed.get(), "freed while the kernel may still read it");
        assert_eq!(p.stats().parked, 1);
        for _ in 0..100 {
            if p.stats().parked == 0 {
                break;
            }
            time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(p.stats().parked, 0, "the notification never came");
        assert!(freed.get(), "freed at the last CQE");
    });
    drop(s);
    reader.join().unwrap();
}

#[test]
fn splice_sends_a_file_through_a_pipe() {
    let rt = runtime();
    let p = rt.driver().clone();
    let data = pattern(300_000);
    let path = std::env::temp_dir().join(format!("proactor-splice.{}", std::process::id()));
    std::fs::write(&path, &data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut fds = [0; 2];
    // SAFETY: fds has room for two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds were just created and are owned here only.
    let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (s, reader) = pair();
    rt.block_on(async {
        // From offset 1,000 on, in chunks smaller than the pipe (64 KiB).
        // SAFETY: the file, the pipe and the socket are closed after the
        // block, when every splice is over.
        let n = unsafe {
            transfer::splice_file(
                &p,
                file.as_raw_fd(),
                1_000,
                (data.len() - 1_000) as u64,
                [pr.as_raw_fd(), pw.as_raw_fd()],
                s.as_raw_fd(),
                32 * 1024,
            )
        }
        .await
        .unwrap();
        assert_eq!(n, (data.len() - 1_000) as u64);
    });
    drop(s);
    assert_eq!(reader.join().unwrap(), &data[1_000..]);
}

#[test]
fn fixed_files_send_and_recv_by_index() {
    let rt = runtime();
    let p = rt.driver().clone();
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let peer = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        s.write_all(b"pong").unwrap();
        got
    });
    let s = StdStream::connect(addr).unwrap();
    s.set_nonblocking(true).unwrap();
    rt.block_on(async {
        // Index 1 names our socket; index 0 another fd, so that a wrong
        // index (or the fd number used as one) would not reach the peer.
        let other = std::fs::File::open("/dev/null").unwrap();
        transfer::register_files(&p, &[other.as_fd(), s.as_fd()]).unwrap();
        let (r, _) = transfer::send_fixed(&p, 1, b"ping".to_vec()).await;
        assert_eq!(r.unwrap(), 4);
        // Zeroed first: memcheck cannot see the kernel's writes through the
        // ring, and would call the received bytes uninitialised.
        let mut room = vec![0u8; 16];
        room.clear();
        let (r, buf) = transfer::recv_fixed(&p, 1, room).await;
        assert_eq!(r.unwrap(), 4);
        assert_eq!(buf, b"pong");
        transfer::unregister_files(&p).unwrap();
        let (r, _) = transfer::send_fixed(&p, 1, b"late".to_vec()).await;
        assert!(r.is_err(), "the table is gone after unregistering");
    });
    assert_eq!(&peer.join().unwrap(), b"ping");
}
