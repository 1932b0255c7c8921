//! Pitfall: the `EMFILE` accept spin, and the reserved-fd fix.
//!
//! When a process has used up its `RLIMIT_NOFILE`, `accept4` fails with
//! `EMFILE` and the connection stays in the kernel's queue: the listener is
//! still readable. A loop that treats the error as transient and retries
//! burns a core without accepting anything, and the client hears nothing.
//!
//! Both runs below put 20 clients in the accept queue of a process whose fd
//! table is full (soft limit lowered to exactly the fds it holds), then watch
//! for one second with `getrusage`:
//!
//! 1. a naive edge-triggered accept loop that retries on any error;
//! 2. `dispatch::Server`, which keeps one fd in reserve (`/dev/null`): on
//!    `EMFILE` it closes the reserve, accepts into the freed slot, closes
//!    that connection at once (the client gets a clean close) and reopens
//!    the reserve; then epoll sleeps until the next client.
//!
//! Run: `cargo run --release -p dispatch --example pitfall_emfile_spin`
//! Explained in `docs/pitfalls/emfile_spin.md`.

mod common;

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use dispatch::{Config, Server};
use reactor::epoll::{Epoll, Events};
use reactor::sys;

/// Clients queued while the fd table is full.
const CLIENTS: usize = 20;
/// How long each run watches.
const WINDOW: Duration = Duration::from_secs(1);

fn main() -> io::Result<()> {
    println!(
        "{CLIENTS} clients connect to a process that has no fd left; watching for {} ms\n",
        WINDOW.as_millis()
    );
    naive()?;
    reserved_fd()?;
    println!(
        "Out of fds, the listener stays readable: never retry accept blindly. Shed with a \
         reserved fd (dispatch's accept.rs), back off, and keep max_connections below the limit."
    );
    Ok(())
}

fn naive() -> io::Result<()> {
    println!("== naive accept loop: retry on any error (broken)");
    let listener = sys::tcp_listener("127.0.0.1:0".parse().unwrap(), Default::default())?;
    let addr = sys::local_addr(listener.as_fd())?;
    let ep = Epoll::new()?;
    ep.add(listener.as_fd(), (libc::EPOLLIN | libc::EPOLLET) as u32, 0)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (accepted, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let lfd = listener.try_clone()?; // the same socket, owned by the thread
    let server = std::thread::spawn({
        let (stop, accepted, failed) = (stop.clone(), accepted.clone(), failed.clone());
        move || {
            let mut events = Events::with_capacity(8);
            while !stop.load(Relaxed) {
                let _ = ep.wait(&mut events, Some(Duration::from_millis(50)));
                // Edge-triggered, so accept until EAGAIN...
                while !stop.load(Relaxed) {
                    match sys::accept_fd(lfd.as_fd()) {
                        Ok(conn) => {
                            accepted.fetch_add(1, Relaxed);
                            drop(conn);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        // ...and treat errors as transient: EMFILE is not.
                        Err(_) => {
                            failed.fetch_add(1, Relaxed);
                        }
                    }
                }
            }
        }
    });
    let watch = watch_full(addr, || {
        stop.store(true, Relaxed);
        server.join().expect("naive server thread");
    })?;
    println!(
        "   CPU {:.0} ms in {} ms ({:.0}% of a core); accept: {} failed, {} accepted",
        watch.cpu.as_secs_f64() * 1e3,
        WINDOW.as_millis(),
        100.0 * watch.cpu.as_secs_f64() / WINDOW.as_secs_f64(),
        failed.load(Relaxed),
        accepted.load(Relaxed)
    );
    println!("   clients: {}\n", watch.clients);
    Ok(())
}

fn reserved_fd() -> io::Result<()> {
    println!("== dispatch::Server: reserved fd, shed, sleep (fixed)");
    let config = Config {
        workers: 1,
        ..Config::new("127.0.0.1:0".parse().unwrap())
    };
    let server = Server::start(config, common::echo_worker)?;
    let addr = server.local_addr();
    // One echo first: the worker's event loop (and its fds) is up. Then
    // wait for the worker to close that connection, so that no slot frees
    // up once the table is full.
    echo(addr)?;
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.stats().total().closed < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let watch = watch_full(addr, || {})?;
    let s = server.stats().acceptor().snapshot();
    println!(
        "   CPU {:.1} ms in {} ms ({:.1}% of a core); accept: {} EMFILE, {} shed, {} accepted",
        watch.cpu.as_secs_f64() * 1e3,
        WINDOW.as_millis(),
        100.0 * watch.cpu.as_secs_f64() / WINDOW.as_secs_f64(),
        s.emfile_events,
        s.rejected,
        s.accepted
    );
    println!("   clients: {}", watch.clients);
    // With fds free again, serving resumes.
    let start = Instant::now();
    let answer = echo(addr)?;
    println!(
        "   fds freed: a new client is served again, {answer:?} in {:.3} ms\n",
        start.elapsed().as_secs_f64() * 1e3
    );
    server.shutdown(Duration::from_secs(1));
    server.join()
}

/// One line to the echo worker and its answer.
fn echo(addr: SocketAddr) -> io::Result<String> {
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.write_all(b"hello\n")?;
    let mut answer = [0u8; 16];
    let n = c.read(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer[..n]).into_owned())
}

/// What one window at the fd limit looked like.
struct Watch {
    cpu: Duration,
    clients: String,
}

/// Fills the fd table, queues the clients, watches for [`WINDOW`], calls
/// `stop` and looks at the clients, then frees the table again.
fn watch_full(addr: SocketAddr, stop: impl FnOnce()) -> io::Result<Watch> {
    // Client sockets first: connecting later needs no new fd.
    let clients: Vec<OwnedFd> = (0..CLIENTS)
        .map(|_| sys::tcp_socket(addr))
        .collect::<io::Result<_>>()?;
    let (soft, _) = dispatch::sys::nofile_limit()?;
    let plugs = fill_fd_table()?;
    for c in &clients {
        sys::connect(c.as_fd(), addr)?;
    }
    let before = dispatch::sys::process_cpu_time()?;
    std::thread::sleep(WINDOW);
    let cpu = dispatch::sys::process_cpu_time()? - before;
    stop();

    let (mut closed, mut reset, mut waiting, mut other) = (0, 0, 0, 0);
    for c in &clients {
        match sys::read(c.as_fd(), &mut [0u8; 16]) {
            Ok(0) => closed += 1,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => reset += 1,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => waiting += 1,
            _ => other += 1,
        }
    }
    dispatch::sys::set_nofile_limit(soft)?;
    drop(plugs);
    let mut clients = format!("{closed} got a clean close, {waiting} still waiting with no answer");
    if reset > 0 {
        clients += &format!(", {reset} reset");
    }
    if other > 0 {
        clients += &format!(", {other} other");
    }
    Ok(Watch { cpu, clients })
}

/// Opens `/dev/null` into every free slot up to the highest fd in use, then
/// lowers the soft limit so that no slot is left: the next new fd is EMFILE.
/// Dropping the returned files (after restoring the limit) undoes it.
fn fill_fd_table() -> io::Result<Vec<File>> {
    let top = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(2);
    let mut plugs = Vec::new();
    loop {
        let plug = File::open("/dev/null")?;
        if plug.as_raw_fd() as u64 > top {
            break; // dropped: the first free slot is now top + 1
        }
        plugs.push(plug);
    }
    dispatch::sys::set_nofile_limit(top + 1)?;
    Ok(plugs)
}
