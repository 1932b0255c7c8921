//! Pitfall: edge-triggered epoll and a reader that stops before `EAGAIN`.
//!
//! A client sends one 64 KiB message and waits for the server to say how
//! many bytes it got. The server reads at most 4 KiB per epoll event. Three
//! runs of the same server:
//!
//! 1. edge-triggered, one read per event: the kernel reports the *arrival*
//!    of data once, the reader leaves most of it in the socket, and no event
//!    ever comes again. It hangs; a 500 ms watchdog detects and reports it.
//! 2. level-triggered, one read per event: correct but chatty, since every
//!    `epoll_wait` reports the socket again while bytes remain.
//! 3. edge-triggered, read until `EAGAIN`: correct, one event.
//!
//! Run: `cargo run --release -p reactor --example pitfall_et_no_drain`
//! Explained in `docs/pitfalls/et_no_drain.md`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use reactor::epoll::{Epoll, Events, flags_to_string};
use reactor::sys;

/// The client's one message.
const MESSAGE: usize = 64 * 1024;
/// What the server reads per `read` call.
const CHUNK: usize = 4096;
/// No event for this long while the message is incomplete: a hang.
const WATCHDOG: Duration = Duration::from_millis(500);

#[derive(Clone, Copy)]
enum Variant {
    EdgeOneRead,
    LevelOneRead,
    EdgeDrain,
}

impl Variant {
    fn describe(self) -> &'static str {
        match self {
            Variant::EdgeOneRead => "edge-triggered, one read per event (broken)",
            Variant::LevelOneRead => "level-triggered, one read per event",
            Variant::EdgeDrain => "edge-triggered, read until EAGAIN (fixed)",
        }
    }

    fn epoll_flags(self) -> u32 {
        let lt = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        match self {
            Variant::LevelOneRead => lt,
            _ => lt | libc::EPOLLET as u32,
        }
    }
}

/// What one run saw.
struct Report {
    got: usize,
    waits: u32,
    events: u32,
    reads: u32,
    hung: bool,
    stranded: usize,
    elapsed: Duration,
}

fn main() -> io::Result<()> {
    println!("a client sends {MESSAGE} bytes at once; the server reads {CHUNK} bytes per read\n");
    for variant in [
        Variant::EdgeOneRead,
        Variant::LevelOneRead,
        Variant::EdgeDrain,
    ] {
        println!("== {}", variant.describe());
        run(variant)?;
        println!();
    }
    println!(
        "In edge-triggered mode an event means \"something changed\", not \"something is there\": \
         read until EAGAIN, or remember that the fd is still readable (reactor::Registration does)."
    );
    Ok(())
}

fn run(variant: Variant) -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let client = std::thread::spawn(move || -> io::Result<String> {
        let mut s = TcpStream::connect(addr)?;
        s.write_all(&vec![b'x'; MESSAGE])?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        Ok(answer)
    });
    let (conn, _) = listener.accept()?;
    conn.set_nonblocking(true)?;

    let epoll = Epoll::new()?;
    epoll.add(conn.as_fd(), variant.epoll_flags(), 1)?;
    let mut events = Events::with_capacity(8);
    let mut buf = vec![0u8; CHUNK];
    let mut r = Report {
        got: 0,
        waits: 0,
        events: 0,
        reads: 0,
        hung: false,
        stranded: 0,
        elapsed: Duration::ZERO,
    };
    let start = Instant::now();
    while r.got < MESSAGE {
        r.waits += 1;
        if epoll.wait(&mut events, Some(WATCHDOG))? == 0 {
            r.hung = true;
            r.stranded = bytes_waiting(conn.as_fd())?;
            break;
        }
        for ev in events.iter() {
            r.events += 1;
            if r.events <= 3 {
                println!(
                    "   event {} at {:.3} ms: {}",
                    r.events,
                    start.elapsed().as_secs_f64() * 1e3,
                    flags_to_string(ev.flags)
                );
            }
            loop {
                r.reads += 1;
                match sys::read(conn.as_fd(), &mut buf) {
                    Ok(0) => break,
                    Ok(n) => r.got += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
                if !matches!(variant, Variant::EdgeDrain) {
                    break; // the bug (and level-triggered's habit): one read per event
                }
            }
        }
    }
    r.elapsed = start.elapsed();
    if r.events > 3 {
        println!("   ... {} more events", r.events - 3);
    }
    if r.hung {
        println!(
            "   HUNG: no event for {} ms with {} of {MESSAGE} bytes read and {} bytes \
             still waiting in the socket (FIONREAD)",
            WATCHDOG.as_millis(),
            r.got,
            r.stranded
        );
    } else {
        println!("   done: all {} bytes read", r.got);
    }
    println!(
        "   {} epoll_wait calls, {} events, {} reads, {:.3} ms",
        r.waits,
        r.events,
        r.reads,
        r.elapsed.as_secs_f64() * 1e3
    );
    if r.hung {
        // The bytes were there all along: a read that goes on to EAGAIN finds them.
        let mut late = 0;
        while let Ok(n @ 1..) = sys::read(conn.as_fd(), &mut buf) {
            late += n;
        }
        println!("   after the watchdog, reading on to EAGAIN finds the missing {late} bytes");
    }
    let mut conn = conn;
    let _ = writeln!(conn, "got {} bytes", r.got);
    drop(conn);
    let answer = client.join().expect("client thread")?;
    println!("   client heard: {:?}", answer.trim_end());
    Ok(())
}

/// Bytes queued in the socket's receive buffer.
fn bytes_waiting(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which is valid.
    reactor::syscall!(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) })?;
    Ok(n as usize)
}
