//! Measures the ways to move bytes out on this machine, over loopback, to
//! decide which the server uses (`docs/io-uring.md` has the figures):
//!
//! 1. `IORING_OP_SEND` vs `IORING_OP_SEND_ZC` for 4 KiB .. 1 MiB sends;
//! 2. a file to a socket: `sendfile(2)` with a ring poll when the socket is
//!    full (the server today) vs `IORING_OP_SPLICE` through a pipe, for
//!    64 KiB, 1 MiB, 4 MiB and 16 MiB files;
//! 3. plain fds vs registered (fixed) files for 4 KiB sends and recvs.
//!
//! The sender runs on CPU 0, a plain blocking reader on CPU 1 (pinned when
//! the machine has two). Each case runs ROUNDS times (default 3); the
//! figures are the median and the (min–max) of the sender's CPU time, user
//! and system (the process's minus the reader thread's, so the kernel's
//! io-wq workers count; with `DEFER_TASKRUN` the send work itself runs in
//! the sender's thread), per operation or per GiB, and the wall
//! throughput. Ends within a minute.
//!
//! ```text
//! cargo run --release -p proactor --example send_paths [-- ROUNDS [sends|files|fixed]]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use executor::Runtime;
use proactor::transfer::{self, ZcSent};
use proactor::{Proactor, op};

const MIB: u64 = 1 << 20;

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

fn cpu(who: i32) -> Duration {
    // SAFETY: a zeroed rusage is valid for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    unsafe { libc::getrusage(who, &mut ru) };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// This thread's CPU time (user + system).
fn thread_cpu() -> Duration {
    cpu(libc::RUSAGE_THREAD)
}

/// A connected pair: our end (non-blocking, for the ring) and a reader
/// thread on the other end that discards everything until EOF and returns
/// its own CPU time.
fn pair(reader_cpu: usize) -> (TcpStream, std::thread::JoinHandle<Duration>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        pin(reader_cpu);
        let c0 = thread_cpu();
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        thread_cpu() - c0
    });
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    (s, reader)
}

/// Median and (min, max).
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn fmt(v: Vec<f64>, digits: usize) -> String {
    let (m, lo, hi) = stats(v);
    format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

/// One run of `body` against a fresh connection: (sender CPU, wall). The
/// sender's CPU is the process's minus the reader's, so that work the
/// kernel hands to its io-wq threads (SPLICE always goes there) counts.
/// The socket whose fd `body` gets stays open until the future it returns
/// has completed (`block_on` drives it to the end).
fn run<F, Fut>(p: &Proactor, rt: &Runtime<Proactor>, body: F) -> (Duration, Duration)
where
    F: FnOnce(Proactor, RawFd) -> Fut,
    Fut: Future<Output = ()>,
{
    let (s, reader) = pair(1);
    s.set_nonblocking(true).unwrap();
    let fd = s.as_raw_fd();
    let (c0, t0) = (cpu(libc::RUSAGE_SELF), Instant::now());
    rt.block_on(body(p.clone(), fd));
    let t1 = Instant::now();
    drop(s);
    let reader_cpu = reader.join().unwrap();
    (
        (cpu(libc::RUSAGE_SELF) - c0).saturating_sub(reader_cpu),
        t1 - t0,
    )
}

/// The unsent part of a buffer, `buf[start..]`, owned by a send.
struct Tail {
    buf: Vec<u8>,
    start: usize,
}

// SAFETY: the Vec's heap bytes do not move with the value; `start ≤ len`.
unsafe impl op::IoBuf for Tail {
    fn as_ptr(&self) -> *const u8 {
        self.buf[self.start..].as_ptr()
    }
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// # Safety
/// `fd` stays open until the future completes (as `op::send` asks).
async unsafe fn send_all_plain(p: &Proactor, fd: RawFd, buf: Vec<u8>) -> Vec<u8> {
    let mut tail = Tail { buf, start: 0 };
    while tail.start < tail.buf.len() {
        // SAFETY: our caller's contract.
        let (r, t) = unsafe { op::send(p, fd, tail) }.await;
        tail = t;
        tail.start += r.expect("send");
    }
    tail.buf
}

/// # Safety
/// As [`send_all_plain`].
async unsafe fn send_all_zc(p: &Proactor, fd: RawFd, buf: Vec<u8>, copied: &mut u64) -> Vec<u8> {
    // SAFETY: our caller's contract.
    let (r, buf) = unsafe { transfer::send_zc(p, fd, buf) }.await;
    let ZcSent { bytes, copied: c } = r.expect("send_zc");
    *copied += u64::from(c);
    if bytes < buf.len() {
        // A partial send (the socket was full): finish plainly.
        // SAFETY: our caller's contract.
        let tail = unsafe { send_all_plain(p, fd, buf[bytes..].to_vec()) }.await;
        drop(tail);
    }
    buf
}

fn sends(p: &Proactor, rt: &Runtime<Proactor>, rounds: usize) {
    println!("## send vs SEND_ZC (sender CPU µs per send and per MiB; wall MiB/s)\n");
    println!(
        "| size | sends | SEND µs/send | SEND_ZC µs/send | SEND CPU ms/GiB | SEND_ZC CPU ms/GiB | SEND MiB/s | SEND_ZC MiB/s | ZC copied |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for size in [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20] {
        let total = 128 * MIB;
        let n = (total / size as u64) as usize;
        let (mut cp, mut cz, mut wp, mut wz) = (vec![], vec![], vec![], vec![]);
        let mut copied = 0;
        for _ in 0..rounds {
            let (c, w) = run(p, rt, |p, fd| async move {
                let mut buf = vec![7u8; size];
                for _ in 0..n {
                    // SAFETY: `run` keeps the socket open until this
                    // future has completed.
                    buf = unsafe { send_all_plain(&p, fd, buf) }.await;
                }
            });
            cp.push(c.as_secs_f64());
            wp.push(w.as_secs_f64());
            let cop = &mut copied;
            let (c, w) = run(p, rt, |p, fd| async move {
                let mut buf = vec![7u8; size];
                for _ in 0..n {
                    // SAFETY: as above.
                    buf = unsafe { send_all_zc(&p, fd, buf, cop) }.await;
                }
            });
            cz.push(c.as_secs_f64());
            wz.push(w.as_secs_f64());
        }
        let per = |v: &[f64], k: f64| v.iter().map(|x| x * k).collect::<Vec<_>>();
        let gib = 1024.0 / (total / MIB) as f64;
        println!(
            "| {} KiB | {n} | {} | {} | {} | {} | {} | {} | {}/{} |",
            size >> 10,
            fmt(per(&cp[..], 1e6 / n as f64), 2),
            fmt(per(&cz[..], 1e6 / n as f64), 2),
            fmt(per(&cp[..], 1e3 * gib), 0),
            fmt(per(&cz[..], 1e3 * gib), 0),
            fmt(wp.iter().map(|w| (total / MIB) as f64 / w).collect(), 0),
            fmt(wz.iter().map(|w| (total / MIB) as f64 / w).collect(), 0),
            copied,
            n * rounds,
        );
    }
    println!();
}

fn temp_file(len: u64) -> OwnedFd {
    let path = std::env::temp_dir().join(format!("send_paths.{}.{len}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..k]).unwrap();
        left -= k as u64;
    }
    let f = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    f.into()
}

/// # Safety
/// `sock` stays open until the future completes (as `op::poll` asks).
async unsafe fn sendfile_ring_poll(p: &Proactor, sock: RawFd, file: RawFd, len: u64) {
    let mut off: libc::off_t = 0;
    while (off as u64) < len {
        // At most 1 MiB per call, as the server does.
        let chunk = (len - off as u64).min(MIB) as usize;
        // SAFETY: both fds are open; `off` is a valid offset the kernel advances.
        let n = unsafe { libc::sendfile(sock, file, &mut off, chunk) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "sendfile: {e}");
            // SAFETY: our caller's contract.
            unsafe { op::poll(p, sock, libc::POLLOUT) }
                .await
                .expect("poll");
        }
    }
}

fn pipe(size: i32) -> [OwnedFd; 2] {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fcntl on the pipe we just made; failure leaves the default size.
    unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, size) };
    // SAFETY: both fds are new and ours.
    unsafe { [OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])] }
}

fn files(p: &Proactor, rt: &Runtime<Proactor>, rounds: usize) {
    println!("## a file to a socket: sendfile + ring poll vs SPLICE through a pipe\n");
    println!(
        "| file | repeats | sendfile CPU µs/file | SPLICE CPU µs/file | sendfile MiB/s | SPLICE MiB/s |"
    );
    println!("|---|---|---|---|---|---|");
    for (len, reps) in [
        (64 << 10, 2000usize),
        (MIB, 128),
        (4 * MIB, 32),
        (16 * MIB, 16),
    ] {
        let file = temp_file(len);
        let ffd = file.as_raw_fd();
        let (mut cs, mut cz, mut ws, mut wz) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let (c, w) = run(p, rt, |p, fd| async move {
                for _ in 0..reps {
                    // SAFETY: `run` keeps the socket open until this future
                    // has completed.
                    unsafe { sendfile_ring_poll(&p, fd, ffd, len) }.await;
                }
            });
            cs.push(c.as_secs_f64());
            ws.push(w.as_secs_f64());
            let pp = pipe(1 << 20);
            let pfd = [pp[0].as_raw_fd(), pp[1].as_raw_fd()];
            let (c, w) = run(p, rt, |p, fd| async move {
                for _ in 0..reps {
                    // SAFETY: `run` keeps the socket open until this future
                    // has completed, and the file and the pipe outlive it.
                    let n = unsafe { transfer::splice_file(&p, ffd, 0, len, pfd, fd, 1 << 20) }
                        .await
                        .expect("splice");
                    assert_eq!(n, len);
                }
            });
            cz.push(c.as_secs_f64());
            wz.push(w.as_secs_f64());
        }
        let mib = (len * reps as u64) as f64 / MIB as f64;
        let per = |v: &[f64]| v.iter().map(|x| x * 1e6 / reps as f64).collect::<Vec<_>>();
        println!(
            "| {} | {reps} | {} | {} | {} | {} |",
            if len >= MIB {
                format!("{} MiB", len / MIB)
            } else {
                format!("{} KiB", len >> 10)
            },
            fmt(per(&cs[..]), 1),
            fmt(per(&cz[..]), 1),
            fmt(ws.iter().map(|w| mib / w).collect(), 0),
            fmt(wz.iter().map(|w| mib / w).collect(), 0),
        );
    }
    println!();
}

fn fixed(p: &Proactor, rt: &Runtime<Proactor>, rounds: usize) {
    println!("## plain fd vs registered (fixed) file: 4 KiB sent, and recvs of ≤ 4 KiB\n");
    println!("| operation | count | plain CPU ns/op | fixed CPU ns/op |");
    println!("|---|---|---|---|");
    let n = 100_000;
    let (mut sp, mut sf) = (vec![], vec![]);
    for _ in 0..rounds {
        for fixed in [false, true] {
            let (c, _) = run(p, rt, |p, fd| async move {
                if fixed {
                    // SAFETY: `run` keeps the socket open for the call.
                    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
                    transfer::register_files(&p, &[sock]).unwrap();
                }
                let mut tail = Tail {
                    buf: vec![1u8; 4096],
                    start: 0,
                };
                for _ in 0..n {
                    // All 4 KiB, however many sends that takes (a full
                    // socket takes part of one, or answers EAGAIN).
                    tail.start = 0;
                    while tail.start < tail.buf.len() {
                        let (r, t) = if fixed {
                            transfer::send_fixed(&p, 0, tail).await
                        } else {
                            // SAFETY: `run` keeps the socket open until this
                            // future has completed.
                            unsafe { op::send(&p, fd, tail) }.await
                        };
                        tail = t;
                        match r {
                            Ok(k) => tail.start += k,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                // SAFETY: as above.
                                unsafe { op::poll(&p, fd, libc::POLLOUT) }
                                    .await
                                    .expect("poll");
                            }
                            Err(e) => panic!("send: {e}"),
                        }
                    }
                }
                if fixed {
                    transfer::unregister_files(&p).unwrap();
                }
            });
            if fixed { &mut sf } else { &mut sp }.push(c.as_secs_f64());
        }
    }
    let per = |v: &[f64]| v.iter().map(|x| x * 1e9 / n as f64).collect::<Vec<_>>();
    println!(
        "| send | {n} | {} | {} |",
        fmt(per(&sp), 0),
        fmt(per(&sf), 0)
    );

    // Recvs: a writer thread on CPU 1 sends 4 KiB messages as fast as the
    // socket takes them; we recv them (each recv takes what is there).
    let (mut rp, mut rf) = (vec![], vec![]);
    let total = 256 * MIB;
    for _ in 0..rounds {
        for fixed in [false, true] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let writer = std::thread::spawn(move || {
                pin(1);
                let mut s = TcpStream::connect(addr).unwrap();
                let buf = vec![2u8; 4096];
                let mut sent = 0;
                while sent < total {
                    s.write_all(&buf).unwrap();
                    sent += 4096;
                }
            });
            let (s, _) = l.accept().unwrap();
            s.set_nonblocking(true).unwrap();
            let fd = s.as_raw_fd();
            let c0 = thread_cpu();
            let ops = rt.block_on(async {
                let p = p.clone();
                if fixed {
                    transfer::register_files(&p, &[s.as_fd()]).unwrap();
                }
                let mut buf = Vec::with_capacity(4096);
                let (mut got, mut ops) = (0, 0u64);
                while got < total {
                    let (r, b) = if fixed {
                        transfer::recv_fixed(&p, 0, buf).await
                    } else {
                        // SAFETY: `s` stays open until after this block.
                        unsafe { transfer::recv(&p, fd, buf) }.await
                    };
                    got += r.unwrap() as u64;
                    ops += 1;
                    buf = b;
                }
                if fixed {
                    transfer::unregister_files(&p).unwrap();
                }
                ops
            });
            let c = (thread_cpu() - c0).as_secs_f64() * 1e9 / ops as f64;
            writer.join().unwrap();
            if fixed { rf.push(c) } else { rp.push(c) }
        }
    }
    println!(
        "| recv (≤ 4 KiB each) | {} MiB | {} | {} |",
        total / MIB,
        fmt(rp, 0),
        fmt(rf, 0)
    );
    println!();
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    // An optional second argument runs one section: sends, files or fixed.
    let only = std::env::args().nth(2);
    let want = |s: &str| only.as_deref().is_none_or(|o| o == s);
    pin(0);
    let rt = Proactor::new()
        .and_then(Runtime::with_driver)
        .expect("io_uring");
    let p = rt.driver().clone();
    println!("# send paths, {rounds} rounds: median (min–max)\n");
    println!("ring: {}\n", p.describe());
    if want("sends") {
        sends(&p, &rt, rounds);
    }
    if want("files") {
        files(&p, &rt, rounds);
    }
    if want("fixed") {
        fixed(&p, &rt, rounds);
    }
}
