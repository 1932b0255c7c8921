//! Pitfall: a multishot recv that is not re-armed after a CQE without
//! `IORING_CQE_F_MORE`.
//!
//! One SQE, many CQEs: a multishot recv keeps posting a CQE per chunk, each
//! flagged `F_MORE`, until the kernel ends it. Its last CQE has no `F_MORE`,
//! and it is not always an error or EOF: here the provided-buffer ring (two
//! 16-byte buffers) runs dry while 48 bytes wait, so the third CQE is
//! `-ENOBUFS` without `F_MORE`. The server returns its buffers, but a loop
//! that only looks at `res > 0` never notices that nothing is armed any
//! more: the last 16 bytes sit in the socket, nothing is submitted, nothing
//! arrives. The connection goes silent; a 500 ms watchdog reports it.
//!
//! 1. ignore `F_MORE` (broken): 32 of 48 bytes, then silence;
//! 2. re-arm whenever a CQE comes without `F_MORE` (fixed): all 48 bytes.
//!
//! This example drives the raw [`proactor::ring::Ring`]; [`proactor::TcpStream`]
//! re-arms by itself.
//!
//! Run: `cargo run --release -p proactor --example pitfall_no_rearm`

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use proactor::BufRing;
use proactor::abi::*;
use proactor::ring::Ring;

const MESSAGE: usize = 48;
const WATCHDOG: Duration = Duration::from_millis(500);

fn run(rearm: bool) -> std::io::Result<()> {
    let mut ring = Ring::new(8)?;
    // SAFETY: unregistered below, after the last CQE that could use it.
    let bufs = unsafe { BufRing::new(ring.fd(), 1, 2, 16) }?;
    let l = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(l.local_addr()?)?;
    let (server, _) = l.accept()?;
    client.write_all(&[b'z'; MESSAGE])?; // all 48 bytes before the recv is armed
    std::thread::sleep(Duration::from_millis(20));

    let recv = Sqe {
        opcode: IORING_OP_RECV,
        fd: server.as_raw_fd(),
        ioprio: IORING_RECV_MULTISHOT,
        flags: IOSQE_BUFFER_SELECT,
        buf_group: bufs.bgid(),
        user_data: 1,
        ..Sqe::default()
    };
    // SAFETY: the recv writes only into `bufs`, which outlives it; `server`
    // is open until the end of this function.
    unsafe { ring.push(&recv) }.expect("SQ has room");
    let (mut got, mut cqes, mut rearms) = (0, 0, 0);
    let mut last_progress = Instant::now();
    let mut out = Vec::new();
    while got < MESSAGE && last_progress.elapsed() < WATCHDOG {
        ring.enter(1, Some(Duration::from_millis(50)))?;
        out.clear();
        ring.reap(&mut out);
        for c in &out {
            cqes += 1;
            if c.flags & IORING_CQE_F_BUFFER != 0 {
                // SAFETY: this CQE names the buffer; each CQE is read once.
                unsafe { bufs.taken((c.flags >> IORING_CQE_BUFFER_SHIFT) as u16) };
                bufs.put((c.flags >> IORING_CQE_BUFFER_SHIFT) as u16); // consumed at once
            }
            if c.res > 0 {
                got += c.res as usize;
                last_progress = Instant::now();
            }
            let more = c.flags & IORING_CQE_F_MORE != 0;
            println!(
                "    cqe res={:<4} {}",
                c.res,
                if more {
                    "F_MORE"
                } else {
                    "no F_MORE: the multishot has ended"
                }
            );
            if !more && rearm {
                rearms += 1;
                // SAFETY: as for the first submission.
                unsafe { ring.push(&recv) }.expect("SQ has room");
            }
        }
    }
    if got < MESSAGE {
        println!("  SILENT: {got} of {MESSAGE} bytes, then nothing for {WATCHDOG:?} ({cqes} CQEs)");
    } else {
        println!("  all {got} bytes ({cqes} CQEs, {rearms} re-arm)");
    }
    // Cancel whatever is armed and wait for its last CQE before the buffer
    // ring goes (BufRing::new's contract).
    let cancel = Sqe {
        opcode: IORING_OP_ASYNC_CANCEL,
        addr: 1,
        user_data: 2,
        ..Sqe::default()
    };
    // SAFETY: ASYNC_CANCEL points to no memory.
    unsafe { ring.push(&cancel) }.expect("SQ has room");
    ring.enter(1, Some(Duration::from_millis(100)))?;
    ring.enter(0, None)?;
    bufs.unregister(ring.as_fd())?;
    Ok(())
}

fn main() -> std::io::Result<()> {
    println!("48 bytes waiting, a ring of 2 × 16-byte buffers");
    println!("1. only looking at res > 0 (broken):");
    run(false)?;
    println!("2. re-arming after every CQE without F_MORE (fixed):");
    run(true)?;
    Ok(())
}
