//! Pitfall: a read dropped while the kernel still owns its buffer.
//!
//! With readiness, a buffer is lent to `read(2)` for one syscall. With
//! completion, the kernel writes into it *later*, whenever the data comes.
//! A future that times out and hands its buffer back (to the allocator, or
//! here to a buffer pool, which keeps the demonstration memory-safe) leaves
//! the kernel holding a pointer into memory that someone else now uses.
//!
//! 1. broken: the read is submitted into pool buffer A; the caller gives up
//!    and returns A to the pool; the next request takes A and fills it with
//!    its own bytes (a canary, `0x55`); then data arrives for the abandoned
//!    read, and the kernel writes it over the canary.
//! 2. fixed ([`proactor::op::read`]): dropping the future parks the buffer in
//!    the operation's slot and submits `IORING_OP_ASYNC_CANCEL`; the buffer is
//!    released only after the last CQE, so the next request gets another
//!    buffer and its canary survives. (If the data wins the race, it lands in
//!    the parked buffer and is counted as discarded.)
//!
//! Run: `cargo run --release -p proactor --example pitfall_dropped_read`

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use executor::Runtime;
use proactor::abi::*;
use proactor::ring::Ring;
use proactor::{Proactor, op, time};

const LATE: &[u8] = b"LATE DATA FOR A DROPPED READ";

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two ints.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    assert_eq!(r, 0, "pipe2");
    // SAFETY: both fds were just created and are owned only here.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn write(fd: &OwnedFd, bytes: &[u8]) {
    // SAFETY: writes from a live slice.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    assert_eq!(n, bytes.len() as isize);
}

fn overwritten(canary: &[u8]) -> usize {
    canary.iter().filter(|&&b| b != 0x55).count()
}

fn broken() -> std::io::Result<()> {
    let mut ring = Ring::new(8)?;
    let (r, w) = pipe();
    let mut pool: Vec<Vec<u8>> = vec![vec![0; 64], vec![0; 64]];
    let mut a = pool.pop().unwrap();
    let read = Sqe {
        opcode: IORING_OP_READ,
        fd: r.as_raw_fd(),
        addr: a.as_mut_ptr() as u64,
        len: a.len() as u32,
        off: u64::MAX,
        user_data: 1,
        ..Sqe::default()
    };
    // SAFETY: `a`'s heap memory stays allocated (in the pool) until after
    // the CQE below, so the kernel never writes freed memory; the bug shown
    // on purpose is that the memory is *reused* while the kernel owns it.
    unsafe { ring.push(&read) }.expect("SQ has room");
    ring.enter(0, None)?; // the read is in the kernel, waiting on an empty pipe
    pool.push(a); // timed out: "free" the buffer without cancelling
    let mut b = pool.pop().unwrap(); // the next request gets the same memory
    b.fill(0x55);
    write(&w, LATE);
    ring.enter(1, Some(Duration::from_secs(1)))?;
    let mut cqes = Vec::new();
    ring.reap(&mut cqes);
    println!(
        "  read completed after its owner gave up: res={}; the next request's canary has {} of 64 bytes overwritten: {:?}",
        cqes[0].res,
        overwritten(&b),
        String::from_utf8_lossy(&b[..LATE.len()])
    );
    Ok(())
}

fn fixed() -> std::io::Result<()> {
    let rt = Runtime::with_driver(Proactor::new()?)?;
    let p = rt.driver().clone();
    let (r, w) = pipe();
    rt.block_on(async {
        let mut pool: Vec<Vec<u8>> = vec![Vec::with_capacity(64), Vec::with_capacity(64)];
        let a = pool.pop().unwrap();
        // SAFETY: the pipe stays open until this function returns, after
        // the cancelled read's last CQE (the sleeps below).
        let read = unsafe { op::read(&p, r.as_raw_fd(), a) };
        let res = time::timeout(Duration::from_millis(10), read).await;
        assert!(res.is_err(), "timed out: the read future (and its buffer) was dropped");
        println!(
            "  after the timeout: {} operation parked with its buffer, {} cancel submitted",
            p.stats().parked,
            p.stats().cancels
        );
        // The pool did not get `a` back: the next request takes the other buffer.
        let mut b = pool.pop().unwrap();
        b.resize(64, 0x55);
        // One turn first, so the cancel reaches the kernel before the data.
        time::sleep(Duration::from_millis(2)).await;
        write(&w, LATE);
        time::sleep(Duration::from_millis(5)).await;
        println!(
            "  the next request's canary has {} of 64 bytes overwritten; parked now {}; discarded bytes {}",
            overwritten(&b),
            p.stats().parked,
            p.stats().discarded_bytes
        );
    });
    Ok(())
}

fn main() -> std::io::Result<()> {
    println!("1. buffer returned to the pool while the read is in the kernel (broken):");
    broken()?;
    println!("2. buffer parked until the CQE, cancel submitted (fixed):");
    fixed()?;
    Ok(())
}
