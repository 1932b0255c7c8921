//! Step 6: a reactor that maps fds to wakers; async accept, read, write.
//!
//! Steps 3 and 5 meet here. Each socket is registered once with the
//! thread's epoll, edge-triggered, for reading and writing. An operation
//! tries the syscall first; only if it says `WouldBlock` does it leave the
//! task's waker in the fd's slot and return `Pending`. When the executor
//! has nothing to run, it waits in `epoll_wait` ([`Reactor::wait`]), and
//! every reported fd wakes the waker in its slot: the task is queued and
//! polled again, and tries the syscall again.
//!
//! No edge is lost: a task stores its waker only right after `WouldBlock`
//! (the drain of step 3), and the next `epoll_wait` runs only after the
//! task returned `Pending`, so any later arrival finds the waker there.
//!
//! Exercises (solutions in [`crate::solutions::step06`]):
//!
//! 1. `read_exact(stream, buf)`: an async `read_exact` on top of
//!    [`TcpStream::read`].
//! 2. `connect(addr)`: an async connect. Start a non-blocking `connect`
//!    (`EINPROGRESS`), wait for writability, then read `SO_ERROR`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::io::{self, ErrorKind, Read, Write};
use std::net;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::step02_level_epoll::{Epoll, event_array};
use crate::step03_edge_epoll::EDGE_ALL;
use crate::step05_executor::Executor;

/// Which way a task waits on an fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Readable (or a connection to accept, or the peer closed).
    Read,
    /// Writable (or a connect finished).
    Write,
}

// ANCHOR: reactor
/// The thread's epoll and, per registered fd, the wakers waiting on it.
#[derive(Debug)]
pub struct Reactor {
    epoll: Epoll,
    slots: RefCell<HashMap<RawFd, [Option<Waker>; 2]>>,
}

thread_local! {
    static REACTOR: Reactor = Reactor {
        epoll: Epoll::new().expect("epoll_create1"),
        slots: RefCell::new(HashMap::new()),
    };
}

/// Calls `f` with this thread's reactor.
pub fn with_reactor<R>(f: impl FnOnce(&Reactor) -> R) -> R {
    REACTOR.with(f)
}

impl Reactor {
    /// Watches `fd` (non-blocking) for every event, edge-triggered.
    pub fn register(&self, fd: RawFd) -> io::Result<()> {
        self.epoll.add(fd, EDGE_ALL, fd as u64)?;
        self.slots.borrow_mut().insert(fd, [None, None]);
        Ok(())
    }

    /// Stops watching `fd`; call it before closing the fd.
    pub fn deregister(&self, fd: RawFd) {
        self.slots.borrow_mut().remove(&fd);
        let _ = self.epoll.delete(fd);
    }

    /// Leaves `waker` in `fd`'s slot for `dir`, for the next event.
    pub fn set_waker(&self, fd: RawFd, dir: Direction, waker: &Waker) {
        if let Some(slot) = self.slots.borrow_mut().get_mut(&fd) {
            slot[dir as usize] = Some(waker.clone());
        }
    }

    /// Waits for events (at most `timeout`; `None`: no limit) and wakes
    /// the tasks waiting on the ready fds.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<()> {
        // Rounded up: a timeout rounded down to 0 ms would return at once
        // and spin until the deadline.
        let ms = timeout.map_or(-1, |t| {
            t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        });
        let mut events = event_array(64);
        let n = self.epoll.wait(&mut events, ms)?;
        let mut wake = Vec::new();
        {
            let mut slots = self.slots.borrow_mut();
            for event in &events[..n] {
                let (fd, bits) = (event.u64 as RawFd, event.events as i32);
                let Some(slot) = slots.get_mut(&fd) else {
                    continue;
                };
                // Errors and hang-ups wake both: the retried syscall reports them.
                let gone = bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
                if gone || bits & (libc::EPOLLIN | libc::EPOLLRDHUP) != 0 {
                    wake.extend(slot[Direction::Read as usize].take());
                }
                if gone || bits & libc::EPOLLOUT != 0 {
                    wake.extend(slot[Direction::Write as usize].take());
                }
            }
        }
        // Outside the borrow: waking may (in other executors) poll at once.
        wake.into_iter().for_each(Waker::wake);
        Ok(())
    }
}

/// Tries `op`; on `WouldBlock`, parks the task on `fd` for `dir`.
pub fn poll_io<T>(
    fd: RawFd,
    dir: Direction,
    cx: &mut Context<'_>,
    mut op: impl FnMut() -> io::Result<T>,
) -> Poll<io::Result<T>> {
    match op() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {
            with_reactor(|r| r.set_waker(fd, dir, cx.waker()));
            Poll::Pending
        }
        result => Poll::Ready(result),
    }
}
// ANCHOR_END: reactor

// ANCHOR: net
/// A listening socket whose `accept` waits as a future.
#[derive(Debug)]
pub struct TcpListener(net::TcpListener);

/// A connected socket whose reads and writes wait as futures.
#[derive(Debug)]
pub struct TcpStream(net::TcpStream);

impl TcpListener {
    /// Makes `listener` non-blocking and registers it with the reactor.
    pub fn new(listener: net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        with_reactor(|r| r.register(listener.as_raw_fd()))?;
        Ok(TcpListener(listener))
    }

    /// Waits for the next client.
    pub async fn accept(&self) -> io::Result<TcpStream> {
        let fd = self.0.as_raw_fd();
        let (stream, _) =
            poll_fn(|cx| poll_io(fd, Direction::Read, cx, || self.0.accept())).await?;
        TcpStream::new(stream)
    }
}

impl TcpStream {
    /// Makes `stream` non-blocking and registers it with the reactor.
    pub fn new(stream: net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        with_reactor(|r| r.register(stream.as_raw_fd()))?;
        Ok(TcpStream(stream))
    }

    /// The std socket underneath (non-blocking).
    pub fn std(&self) -> &net::TcpStream {
        &self.0
    }

    /// Reads some bytes; 0 means the peer closed its side.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.0.as_raw_fd();
        poll_fn(|cx| poll_io(fd, Direction::Read, cx, || (&self.0).read(buf))).await
    }

    /// Writes some bytes.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.0.as_raw_fd();
        poll_fn(|cx| poll_io(fd, Direction::Write, cx, || (&self.0).write(buf))).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf).await? {
                0 => return Err(ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        with_reactor(|r| r.deregister(self.0.as_raw_fd()));
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        with_reactor(|r| r.deregister(self.0.as_raw_fd()));
    }
}
// ANCHOR_END: net

// ANCHOR: serve
/// Runs `future` on `executor`, waiting in this thread's reactor when no
/// task is ready.
pub fn block_on<F>(executor: &Executor, future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let idle = || with_reactor(|r| r.wait(None)).expect("epoll_wait");
    executor.block_on_with_idle(future, idle)
}

/// Echoes everything a client sends until it closes; returns the count.
pub async fn echo(stream: TcpStream) -> io::Result<usize> {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        match stream.read(&mut buf).await? {
            0 => return Ok(total),
            n => {
                stream.write_all(&buf[..n]).await?;
                total += n;
            }
        }
    }
}

/// Accepts `conns` clients, one task each, and waits for all of them;
/// returns the bytes echoed.
pub async fn serve(executor: Executor, listener: TcpListener, conns: usize) -> io::Result<usize> {
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let stream = listener.accept().await?;
        tasks.push(executor.spawn(echo(stream)));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap_or(0); // a reset client echoed nothing more
    }
    Ok(total)
}
// ANCHOR_END: serve

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{client, roundtrip, start};

    fn start_echo(
        conns: usize,
    ) -> (
        std::net::SocketAddr,
        crate::testutil::Done<io::Result<usize>>,
    ) {
        start(move |l| {
            let ex = Executor::new();
            let listener = TcpListener::new(l)?;
            block_on(&ex, serve(ex.clone(), listener, conns))
        })
    }

    #[test]
    fn one_thread_many_tasks() {
        let (addr, done) = start_echo(4);
        let mut cs: Vec<_> = (0..4).map(|_| client(addr)).collect();
        for (i, c) in cs.iter_mut().enumerate().rev() {
            assert_eq!(
                roundtrip(c, format!("task {i}").as_bytes()),
                format!("task {i}").as_bytes()
            );
        }
        drop(cs);
        assert_eq!(done.wait().unwrap(), 4 * 6);
    }

    #[test]
    fn writes_wait_for_room_in_the_send_buffer() {
        let (addr, done) = start_echo(1);
        let mut c = client(addr);
        let msg: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut reader = c.try_clone().unwrap();
        let back = std::thread::spawn(move || {
            let mut back = vec![0u8; 4_000_000];
            reader.read_exact(&mut back).unwrap();
            back
        });
        c.write_all(&msg).unwrap();
        assert!(back.join().unwrap() == msg);
        drop(c);
        assert_eq!(done.wait().unwrap(), msg.len());
    }

    #[test]
    fn a_closed_fd_leaves_no_slot_behind() {
        let (addr, done) = start(|l| {
            let ex = Executor::new();
            let listener = TcpListener::new(l)?;
            let served = block_on(&ex, serve(ex.clone(), listener, 2))?;
            // Only the dropped listener's and streams' slots existed.
            Ok::<_, io::Error>((served, with_reactor(|r| r.slots.borrow().len())))
        });
        for _ in 0..2 {
            let mut c = client(addr);
            assert_eq!(roundtrip(&mut c, b"x"), b"x");
        }
        assert_eq!(done.wait().unwrap(), (2, 0));
    }
}
