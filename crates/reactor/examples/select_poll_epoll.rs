//! select, poll, epoll: what one readiness wait costs with N idle connections.
//!
//! A server holds N idle TCP connections and one active one (a byte sits
//! unread in it, so it is always readable), and asks the kernel "which of
//! them can I read?" with each of the three interfaces:
//!
//! - `select`: a bitmap of fd numbers, rebuilt before every call (the kernel
//!   overwrites it with the answer); the kernel walks every bit up to the
//!   highest fd. Fds must be below `FD_SETSIZE` (1,024): beyond that the call
//!   cannot even be made, and the example prints that error instead;
//! - `poll`: an array of `pollfd`, copied into the kernel and walked whole on
//!   every call: the kernel asks each of the N + 1 sockets whether it is
//!   ready;
//! - `epoll_wait`: the interest list lives in the kernel (registered once
//!   with `epoll_ctl`); sockets put themselves on a ready list when data
//!   arrives, and the wait only copies out that list: one entry here.
//!
//! Each figure is the median, over batches of waits, of the mean time of one
//! wait in its batch (a batch keeps the clock's own cost out of the figure).
//! Every wait must report exactly the active connection, or the run fails.
//!
//! **Why TCP over 127.0.0.1, not socketpairs:** the question is what a
//! server pays, and a server's fds are TCP sockets (their readiness check
//! is TCP's, not a Unix socket's). And the process limit on open files here
//! is 20,000: a socketpair puts both ends in the process, so 10,001 of them
//! would need 20,002 fds. The client ends live in a forked child instead,
//! which holds the other 10,001; the parent raises its soft `RLIMIT_NOFILE`
//! to the hard limit.
//!
//! Run: `cargo run --release -p reactor --example select_poll_epoll`
//! (`-- --sizes 10,100,1000,10000 --waits 2000` are the defaults).
//! Read in `docs/select-poll-epoll.md`; `scripts/lib/select_poll_epoll_chart.py`
//! draws the chart there from this table.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// Waits per batch: enough that two clock reads are noise next to them.
const BATCH: usize = 10;

/// One row of the table: the idle count and each interface's median wait
/// in nanoseconds, or why it could not run.
#[derive(Debug)]
pub struct Row {
    /// Idle connections watched (the active one comes on top).
    pub idle: usize,
    /// `select`, or the error that stops it (an fd at or past `FD_SETSIZE`).
    pub select: Result<f64, String>,
    /// `poll`.
    pub poll: f64,
    /// `epoll_wait`.
    pub epoll: f64,
}

/// Connections, server side: `active` has a byte waiting; `idle` never will.
struct Conns {
    active: RawFd,
    idle: Vec<RawFd>,
    /// Write end of a pipe the child blocks on; closing it ends the child.
    child_pipe: RawFd,
    child: libc::pid_t,
}

impl Drop for Conns {
    fn drop(&mut self) {
        for &fd in self.idle.iter().chain([&self.active, &self.child_pipe]) {
            // SAFETY: fds we opened and own; nothing uses them after this.
            unsafe { libc::close(fd) };
        }
        let mut status = 0;
        // SAFETY: our child; reaping it once.
        unsafe { libc::waitpid(self.child, &mut status, 0) };
    }
}

fn check(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(ret)
}

/// Raises the soft limit on open files to the hard one (20,000 on the
/// project's machines): 10,000 connections need more than the usual 1,024.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut lim = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: getrlimit writes a whole rlimit into valid memory.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) };
    check(r, "getrlimit")?;
    // SAFETY: initialised by the successful call above.
    let mut lim = unsafe { lim.assume_init() };
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: a valid rlimit, soft = hard, which an unprivileged process may set.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    check(r, "setrlimit")?;
    Ok(lim.rlim_cur)
}

/// Opens `idle + 1` connections to a listener on 127.0.0.1 from a forked
/// child, accepts them here, and has the child write one byte on the first
/// (the active one, accepted first so that its fd number is low enough for
/// `select` at every size it can run).
fn connect(idle: usize) -> io::Result<Conns> {
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    // SAFETY: sockaddr_in is plain data; all-zero is a valid start.
    let mut addr: libc::sockaddr_in = unsafe { mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
    let mut pipe = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    let r = unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) };
    check(r, "pipe2")?;
    let total = idle + 1;
    // SAFETY: the child runs only async-signal-safe calls (socket, connect,
    // write, read, _exit) on memory prepared before the fork: safe even if
    // the parent has other threads (the test harness does).
    let child = check(unsafe { libc::fork() }, "fork")?;
    if child == 0 {
        // SAFETY: see above. The child's sockets are never closed: they go
        // when it exits, after the parent closes the pipe.
        unsafe {
            libc::close(pipe[1]);
            for i in 0..total {
                let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                let sa = (&raw const addr).cast::<libc::sockaddr>();
                let len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                if s < 0 || libc::connect(s, sa, len) < 0 {
                    libc::_exit(1);
                }
                if i == 0 && libc::write(s, b"x".as_ptr().cast(), 1) != 1 {
                    libc::_exit(1);
                }
            }
            let mut b = 0u8;
            libc::read(pipe[0], (&raw mut b).cast(), 1); // until the parent closes it
            libc::_exit(0);
        }
    }
    // SAFETY: the read end is the child's; ours is pipe[1].
    unsafe { libc::close(pipe[0]) };
    let mut conns = Conns {
        active: -1,
        idle: Vec::with_capacity(idle),
        child_pipe: pipe[1],
        child,
    };
    for i in 0..total {
        // SAFETY: accept4 on our listener; no address wanted.
        let fd = unsafe {
            libc::accept4(
                listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        let fd = check(fd, "accept4 (is the fd limit high enough?)")?;
        if i == 0 {
            conns.active = fd;
        } else {
            conns.idle.push(fd);
        }
    }
    // Wait until the active connection's byte has arrived, so that every
    // measured wait finds it.
    let mut p = libc::pollfd {
        fd: conns.active,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    if check(unsafe { libc::poll(&mut p, 1, 5000) }, "poll")? != 1 {
        return Err(io::Error::other("the active connection's byte never came"));
    }
    Ok(conns)
}

/// Times `waits` calls of `wait` in batches; the median over batches of the
/// mean time per call, in nanoseconds.
fn median_ns(waits: usize, mut wait: impl FnMut() -> io::Result<()>) -> io::Result<f64> {
    for _ in 0..BATCH {
        wait()?; // warm caches and the kernel's paths
    }
    let mut per_wait = Vec::with_capacity(waits / BATCH + 1);
    for _ in 0..waits.div_ceil(BATCH) {
        let start = Instant::now();
        for _ in 0..BATCH {
            wait()?;
        }
        per_wait.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    per_wait.sort_by(f64::total_cmp);
    Ok(per_wait[per_wait.len() / 2])
}

fn wrong(what: &str, n: libc::c_int) -> io::Error {
    io::Error::other(format!(
        "{what} reported {n} ready fds, not just the active one"
    ))
}

fn time_select(active: RawFd, idle: &[RawFd], waits: usize) -> io::Result<Result<f64, String>> {
    let max = idle.iter().copied().chain([active]).max().unwrap_or(active);
    if max as usize >= libc::FD_SETSIZE {
        // What glibc's fortified FD_SET aborts on; libc's would index out of
        // its 1,024-bit array. The call cannot be made at all.
        return Ok(Err(format!(
            "fd {max} >= FD_SETSIZE ({})",
            libc::FD_SETSIZE
        )));
    }
    // SAFETY: fd_set is plain data; FD_ZERO initialises it.
    let mut watched: libc::fd_set = unsafe { mem::zeroed() };
    // SAFETY: every fd is below FD_SETSIZE (checked above).
    unsafe {
        libc::FD_ZERO(&mut watched);
        for &fd in idle.iter().chain([&active]) {
            libc::FD_SET(fd, &mut watched);
        }
    }
    let t = median_ns(waits, || {
        // select overwrites its sets with the answer: a fresh copy each call
        // is part of what using it costs.
        let mut set = watched;
        let mut timeout = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        let null = std::ptr::null_mut();
        // SAFETY: a valid fd_set and timeval; nfds covers every fd in it.
        let n = unsafe { libc::select(max + 1, &mut set, null, null, &mut timeout) };
        let n = check(n, "select")?;
        // SAFETY: `active` is below FD_SETSIZE.
        if n != 1 || !unsafe { libc::FD_ISSET(active, &set) } {
            return Err(wrong("select", n));
        }
        Ok(())
    })?;
    Ok(Ok(t))
}

fn time_poll(active: RawFd, idle: &[RawFd], waits: usize) -> io::Result<f64> {
    // The active fd first, where select (which scans in fd order) meets it
    // too: once the kernel has found one ready fd, it stops hooking the
    // rest onto their sockets' wait queues (it will not sleep), and with the
    // active fd last poll paid for N hooks and unhooks per call as well.
    let mut fds: Vec<libc::pollfd> = [&active]
        .into_iter()
        .chain(idle)
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    median_ns(waits, || {
        // SAFETY: `fds` is a valid array of fds.len() pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 5000) };
        let n = check(n, "poll")?;
        if n != 1 || fds[0].revents & libc::POLLIN == 0 {
            return Err(wrong("poll", n));
        }
        Ok(())
    })
}

fn time_epoll(active: RawFd, idle: &[RawFd], waits: usize) -> io::Result<f64> {
    // SAFETY: plain syscall; the fd is closed below.
    let ep = check(
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
        "epoll_create1",
    )?;
    let result = (|| {
        for &fd in idle.iter().chain([&active]) {
            // Level-triggered, like select and poll: the active socket is
            // reported on every wait while its byte stays unread.
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: valid epoll fd, open socket, valid event.
            let r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
            check(r, "epoll_ctl")?;
        }
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        median_ns(waits, || {
            // SAFETY: `events` holds 64 entries.
            let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 64, 5000) };
            let n = check(n, "epoll_wait")?;
            if n != 1 || events[0].u64 != active as u64 {
                return Err(wrong("epoll_wait", n));
            }
            Ok(())
        })
    })();
    // SAFETY: our epoll fd, closed once.
    unsafe { libc::close(ep) };
    result
}

/// Measures every size in `sizes` (idle connections) with `waits` waits per
/// interface, on one set of `max(sizes) + 1` connections.
pub fn measure(sizes: &[usize], waits: usize) -> io::Result<Vec<Row>> {
    let most = sizes.iter().copied().max().unwrap_or(0);
    let conns = connect(most)?;
    let mut rows = Vec::new();
    for &idle in sizes {
        let watched = &conns.idle[..idle];
        rows.push(Row {
            idle,
            select: time_select(conns.active, watched, waits)?,
            poll: time_poll(conns.active, watched, waits)?,
            epoll: time_epoll(conns.active, watched, waits)?,
        });
    }
    Ok(rows)
}

/// The table as the example prints it (Markdown).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| idle connections | select | poll | epoll_wait |\n| ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let select = match &r.select {
            Ok(ns) => format!("{ns:.0} ns"),
            Err(e) => format!("error: {e}"),
        };
        out += &format!(
            "| {} | {select} | {:.0} ns | {:.0} ns |\n",
            r.idle, r.poll, r.epoll
        );
    }
    out
}

#[allow(dead_code)] // unused when the integration test includes this file
fn main() -> io::Result<()> {
    let mut sizes = vec![10, 100, 1000, 10_000];
    let mut waits = 2000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--sizes" => {
                sizes = v
                    .split(',')
                    .map(|s| s.trim().parse().expect("--sizes: comma-separated numbers"))
                    .collect()
            }
            "--waits" => waits = v.parse().expect("--waits: a number"),
            _ => panic!("usage: select_poll_epoll [--sizes 10,100,1000,10000] [--waits 2000]"),
        }
    }
    let limit = raise_fd_limit()?;
    println!(
        "One readiness wait with N idle TCP connections (127.0.0.1) and 1 active one: \
         median over batches of {BATCH} waits, {waits} waits per cell; fd limit {limit}.\n"
    );
    print!("{}", table(&measure(&sizes, waits)?));
    Ok(())
}
