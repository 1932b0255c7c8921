//! Pitfall: a lost wakeup from clearing readiness too early.
//!
//! The reactor remembers each fd's readiness (an edge sets it) and a socket
//! wrapper must clear it only when an operation returned `EAGAIN`: that is
//! the one proof that the kernel will send another edge. Here are two
//! wrappers over the real `reactor::Registration` API, differing only in
//! *when* they clear:
//!
//! - `EagerSocket` clears as soon as it is told "ready", before reading
//!   ("this wakeup is handled now") — a habit from level-triggered APIs;
//! - `CorrectSocket` uses `Registration::poll_io`, which clears on `EAGAIN`.
//!
//! The protocol reads a 4-byte length, then the body: the first read stops
//! long before the socket is empty. The client sends one frame and waits for
//! the echo. With the eager wrapper the body sits in the socket while the
//! task waits for an edge that will never come; a 1 s timeout reports it.
//!
//! Run: `cargo run --release -p executor --example pitfall_lost_wakeup`
//! Explained in `docs/pitfalls/lost_wakeup.md`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use executor::net::TcpListener;
use reactor::{Interest, Reactor, Registration, sys};

/// How long the server waits for a frame before calling it a hang.
const PATIENCE: Duration = Duration::from_secs(1);
const BODY: &[u8] = b"a frame body of sixty bytes, sent right behind its length...";

/// A socket registered with the thread's reactor; the registration is
/// declared first so that it leaves epoll before the fd closes.
struct Socket {
    reg: Registration,
    fd: OwnedFd,
    reads: u32,
}

impl Socket {
    fn new(fd: OwnedFd) -> io::Result<Socket> {
        // SAFETY: the socket owns `fd` and keeps it in the field after
        // `reg`, so the registration is dropped first.
        let reg = unsafe { Reactor::current().register(fd.as_fd()) }?;
        Ok(Socket { reg, fd, reads: 0 })
    }
}

/// One way of turning `EAGAIN` into waiting.
trait ReadPolicy {
    const NAME: &'static str;
    fn poll_read(s: &mut Socket, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
}

// ANCHOR: broken
/// Broken: forgets readiness before the read has shown the socket empty.
struct EagerSocket;

impl ReadPolicy for EagerSocket {
    const NAME: &'static str = "clear readiness when woken, then read (broken)";
    fn poll_read(s: &mut Socket, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(s.reg.poll_ready(cx, Interest::Readable));
            // BUG: "this wakeup is handled now". But a read that does not
            // reach EAGAIN leaves bytes behind, and no edge will announce
            // them again: the next poll_ready parks the task for good.
            s.reg.clear_readiness(Interest::Readable);
            s.reads += 1;
            match sys::read(s.fd.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                res => return Poll::Ready(res),
            }
        }
    }
}

// ANCHOR_END: broken

// ANCHOR: fixed
/// Fixed: readiness is cleared by the `EAGAIN` itself (`poll_io`).
struct CorrectSocket;

impl ReadPolicy for CorrectSocket {
    const NAME: &'static str = "read, clear readiness only on EAGAIN (fixed)";
    fn poll_read(s: &mut Socket, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let Socket { reg, fd, reads } = s;
        reg.poll_io(cx, Interest::Readable, || {
            *reads += 1;
            sys::read(fd.as_fd(), buf)
        })
    }
}
// ANCHOR_END: fixed

async fn read_exact<P: ReadPolicy>(s: &mut Socket, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::future::poll_fn(|cx| P::poll_read(s, cx, buf)).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
    }
    Ok(())
}

/// Reads one length-prefixed frame.
async fn read_frame<P: ReadPolicy>(s: &mut Socket) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    read_exact::<P>(s, &mut len).await?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    read_exact::<P>(s, &mut body).await?;
    Ok(body)
}

fn client(addr: SocketAddr) -> io::Result<String> {
    let mut s = StdStream::connect(addr)?;
    let mut frame = (BODY.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(BODY);
    s.write_all(&frame)?; // one write: length and body arrive together
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut echo = Vec::new();
    Ok(match s.read_to_end(&mut echo) {
        Ok(0) => "no echo, connection closed".to_string(),
        Ok(n) => format!("echo of {n} bytes"),
        // Closing a socket with unread input sends a reset.
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
            "no echo, connection reset (the server closed with our body unread)".to_string()
        }
        Err(e) => return Err(e),
    })
}

fn run<P: ReadPolicy>() -> io::Result<()> {
    println!("== {}", P::NAME);
    executor::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
        let addr = listener.local_addr()?;
        let client = std::thread::spawn(move || client(addr));
        let (stream, _) = listener.accept().await?;
        let mut sock = Socket::new(stream.into_fd())?;

        let start = Instant::now();
        let frame = executor::timeout(PATIENCE, read_frame::<P>(&mut sock)).await;
        let elapsed = start.elapsed();
        match frame {
            Ok(Ok(body)) => {
                println!(
                    "   frame of {} bytes in {:.3} ms, {} reads",
                    body.len(),
                    elapsed.as_secs_f64() * 1e3,
                    sock.reads
                );
                sys::write(sock.fd.as_fd(), &body)?;
            }
            Ok(Err(e)) => println!("   error: {e}"),
            Err(_) => println!(
                "   HUNG for {:.0} ms after {} reads: readiness says {:?}, yet {} bytes wait \
                 in the socket (FIONREAD). The edge that announced them was consumed and \
                 thrown away.",
                elapsed.as_secs_f64() * 1e3,
                sock.reads,
                sock.reg.readiness(),
                bytes_waiting(sock.fd.as_raw_fd())?
            ),
        }
        drop(sock);
        let heard = client.join().expect("client thread")?;
        println!("   client: {heard}\n");
        Ok(())
    })
}

/// Bytes queued in a socket's receive buffer.
fn bytes_waiting(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which is valid.
    reactor::syscall!(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) })?;
    Ok(n as usize)
}

fn main() -> io::Result<()> {
    println!(
        "a client sends a 4-byte length and a {}-byte body in one write, then waits for the echo\n",
        BODY.len()
    );
    run::<EagerSocket>()?;
    run::<CorrectSocket>()?;
    println!(
        "Clear readiness only when an operation returned EAGAIN (Registration::poll_io / try_io): \
         it is the only proof that the kernel will report the fd again."
    );
    Ok(())
}
