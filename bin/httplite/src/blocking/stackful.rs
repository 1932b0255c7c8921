//! Coroutine per connection: the blocking connection code on stackful
//! coroutines. A "blocking" read that would wait parks the coroutine (its
//! stack and registers saved by a hand-written context switch) and the
//! worker's scheduler runs another; the reactor's waker for the socket puts
//! it back on the run queue. Same reactor, same dispatcher, same HTTP code
//! as the stackless server: only the way of waiting differs.

use std::cell::Cell;
use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use coroutine::net::TcpStream;
use dispatch::{Batch, Closer, WorkerPort};
use reactor::{Interest, Reactor, Tick};

use super::conn::Ctx;
use super::upstream::Side;
use super::{BlockingIo, Deadline, FileChunk};
use crate::date_clock::DateClock;
use crate::lazy_timer::LazyTimer;

/// A reactor-registered socket whose calls park the running coroutine.
struct Stackful {
    stream: TcpStream,
    reactor: Reactor,
    /// One timer per connection, created when a wait first needs one (see
    /// [`LazyTimer`]: waiting between requests, whose idle deadline only
    /// moves later, never touches the heap).
    timer: Option<LazyTimer>,
    /// The timer holds this coroutine's waker (it is stored by a pending
    /// poll and taken only when the timer fires): while the timer is
    /// unfired, a wait need not poll it again.
    timer_has_waker: bool,
    /// Set when a wait for readability ended: the next read goes straight
    /// to the socket instead of asking the registry again.
    woken_readable: bool,
}

fn cancelled() -> io::Error {
    io::Error::other("coroutine cancelled")
}

impl Stackful {
    /// Parks until `op` is ready or `deadline` passes. The deadline is
    /// computed (and the timer armed) only if `op` has to wait: most reads
    /// and writes complete at once.
    fn wait<R>(
        &mut self,
        deadline: Deadline,
        mut op: impl FnMut(&TcpStream, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> io::Result<R> {
        let Stackful {
            stream,
            reactor,
            timer,
            timer_has_waker,
            ..
        } = self;
        // On the reactor's clock: the idle wait of every keep-alive request
        // (`Deadline::After`) then adds and compares words, and an
        // `Instant` is made only if the timer fires.
        let mut due: Option<Tick> = None;
        coroutine::wait(|cx| {
            if let Poll::Ready(r) = op(stream, cx) {
                return Poll::Ready(r);
            }
            let due = *due.get_or_insert_with(|| match deadline {
                Deadline::After(d) => reactor.tick() + d,
                other => tick_of(reactor, other),
            });
            let timer = match timer {
                Some(t) => {
                    t.arm_tick(reactor, due);
                    t
                }
                None => timer.insert(LazyTimer::new(reactor, reactor.instant_at(due))),
            };
            // The waker is this coroutine's for the connection's whole life,
            // so one stored earlier still serves. An unfired timer has not
            // expired either: `due` is at or after the armed deadline.
            if *timer_has_waker && timer.is_unfired(reactor) {
                return Poll::Pending;
            }
            *timer_has_waker = false;
            if timer.poll_expired(reactor, cx, reactor.instant_at(due)) {
                Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
            } else {
                *timer_has_waker = true;
                Poll::Pending
            }
        })
        .map_err(|_| cancelled())?
    }

    /// The rest of a read that could not complete at once, kept out of line
    /// so that the inlined fast path stays small.
    #[inline(never)]
    fn read_waiting(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.wait(deadline, |s, cx| s.poll_read_uninit(cx, buf))
    }

    /// The same for a write.
    #[inline(never)]
    fn write_waiting(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.wait(deadline, |s, cx| s.poll_write(cx, buf))
    }
}

/// A deadline given as an `Instant`, on the reactor's clock. Out of line:
/// inlined, LLVM hoisted its arithmetic (a multiplication, checked adds)
/// out of the wait's loop and ran it on every wait, ~45 instructions per
/// request, for deadlines that are nearly always `Deadline::After`.
#[cold]
#[inline(never)]
fn tick_of(reactor: &Reactor, deadline: Deadline) -> Tick {
    reactor.tick_of(deadline.at(|| reactor.now()))
}

impl Drop for Stackful {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.remove(&self.reactor);
        }
    }
}

// SAFETY: `read_uninit` returns what the stream's `try_read_uninit` or
// `poll_read_uninit` returned, which is what `read(2)` returned: at most
// `buf.len()`, all written by the kernel.
unsafe impl BlockingIo for Stackful {
    type Waits = super::upstream::CoroutineWaits;
    fn will_close(&mut self) {
        self.stream.will_close();
    }

    fn set_nodelay(&mut self) {
        let _ = self.stream.set_nodelay(true);
    }

    // The two calls of every request are inlined into the connection loop:
    // their fast paths are a few instructions around the syscall.
    #[inline(always)]
    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        if std::mem::take(&mut self.woken_readable) {
            match self.stream.try_read_uninit(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {} // stale edge
                res => return res,
            }
        }
        self.read_waiting(buf, deadline)
    }

    #[inline(always)]
    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        // Optimistic: a send buffer nearly always has room, so skip the
        // readiness check; `WouldBlock` clears readiness and we wait.
        match self.stream.try_write(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            res => return res,
        }
        self.write_waiting(buf, deadline)
    }

    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        match self.stream.try_write_more(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            res => return res,
        }
        // The send buffer is full, so the head cannot leave alone anyway.
        self.write_waiting(buf, deadline)
    }

    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize> {
        let FileChunk {
            file,
            offset,
            count,
            copy,
        } = chunk;
        self.wait(deadline, |s, cx| match copy {
            false => s.poll_sendfile(cx, file, offset, count),
            // The buffer is the worker's: read and send happen in one poll,
            // with no switch between them.
            true => crate::driver::with_copy_buffer(|buf| {
                s.poll_send_file_copied(cx, file, offset, count, buf)
            }),
        })
    }

    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        let mut woken = false;
        self.wait(deadline, |s, cx| {
            // After a wake, reading the readiness bits is enough (and
            // cheaper than a poll): a waker is stored only if we wait again.
            if std::mem::replace(&mut woken, true) && s.is_read_ready() {
                return Poll::Ready(Ok(()));
            }
            s.poll_readable(cx).map(Ok)
        })?;
        self.woken_readable = true;
        Ok(())
    }

    /// Parks until either registration has an edge, each checked with a
    /// one-byte peek: readiness is edge-triggered and stays set after a
    /// read that emptied the socket exactly, and a read of a stale side
    /// would park this coroutine on that side alone.
    fn wait_either(
        &mut self,
        up: &super::upstream::Upstream<super::upstream::CoroutineWaits>,
        deadline: Deadline,
    ) -> io::Result<Side> {
        let up_reg = up.waits();
        let side = self.wait(deadline, |s, cx| {
            loop {
                let mut stale = false;
                if s.poll_readable(cx).is_ready() {
                    if readable_now(s.registration()) {
                        return Poll::Ready(Ok(Side::Client));
                    }
                    stale = true;
                }
                if up_reg.poll_ready(cx, Interest::Readable).is_ready() {
                    if readable_now(up_reg) {
                        return Poll::Ready(Ok(Side::Upstream));
                    }
                    stale = true;
                }
                // A stale side's readiness is cleared now: polling again
                // stores the waker for its next edge.
                if !stale {
                    return Poll::Pending;
                }
            }
        })?;
        self.woken_readable = side == Side::Client;
        Ok(side)
    }

    fn sleep(&mut self, d: Duration) {
        coroutine::sleep(d);
    }

    fn now(&self) -> Instant {
        self.reactor.now()
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        self.stream.shutdown(how)
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }

    fn offload<T: Send + 'static>(
        &mut self,
        pool: &pool::Pool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, pool::JoinError>, pool::Full> {
        // Coroutines share the worker thread: park this one, not the thread
        // (`coroutine::spawn_blocking_in`, with the work named).
        let handle = pool.spawn_blocking_as(site::plan::POOL_WORK, f)?;
        Ok(coroutine::await_future(handle).unwrap_or(Err(pool::JoinError::Cancelled)))
    }
}

/// Whether a read of `reg`'s socket would return now (bytes, the end of
/// the stream, an error), by a one-byte `MSG_PEEK`; if not, its read
/// readiness is cleared (the `EAGAIN` of the edge-triggered contract).
fn readable_now(reg: &reactor::Registration) -> bool {
    let peeked = reg.try_io(Interest::Readable, || {
        let mut byte = 0u8;
        // SAFETY: one writable byte for the call; the fd is the
        // registration's, open while it is.
        reactor::syscall!(unsafe {
            libc::recv(
                reg.fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        })
    });
    !matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Counts a connection open until dropped, also when its coroutine is
/// cancelled (unwound) at the shutdown deadline.
struct Open {
    ctx: Rc<Ctx>,
    live: Rc<Cell<usize>>,
    closer: Closer,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
        self.closer.connection_closed();
        self.live.set(self.live.get() - 1);
    }
}

/// Runs one worker: a coroutine per handed-off connection.
pub fn run(mut port: WorkerPort, ctx: Ctx, stack_size: usize) -> io::Result<()> {
    let rt = coroutine::Runtime::builder()
        .stack_size(stack_size)
        .on_turn({
            let date = DateClock::default();
            move |r: &Reactor| date.tick(r.tick())
        })
        .build()?;
    ctx.stats.set_runtime(Box::new(crate::probes::Stackful {
        reactor: rt.reactor().stats_handle(),
        coroutines: rt.stats_handle(),
    }));
    let ctx = Rc::new(ctx);
    let live = Rc::new(Cell::new(0usize));
    let result = rt.block_on(|| accept_loop(&mut port, &ctx, &live));
    // Whatever is still open at the deadline is cancelled here: dropping the
    // runtime unwinds every coroutine, closing its socket.
    drop(rt);
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
    result
}

fn accept_loop(port: &mut WorkerPort, ctx: &Rc<Ctx>, live: &Rc<Cell<usize>>) -> io::Result<()> {
    let reactor = Reactor::current();
    // SAFETY: the port owns its fd and is borrowed for this whole
    // function; `handoff` is dropped before it returns, and nothing the
    // port does meanwhile (`poll_batch`, closes) closes that fd.
    let handoff = unsafe { reactor.register(port.as_fd()) }?;
    port.ready();
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let deadline = loop {
        let batch = coroutine::wait(|cx| {
            handoff.poll_io(cx, Interest::Readable, || match port.poll_batch(&mut fds) {
                Ok(Batch::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
                other => other,
            })
        })
        .map_err(|_| cancelled())??;
        for fd in fds.drain(..) {
            // Accepted with SOCK_NONBLOCK by the dispatcher: no fcntl; into
            // epoll only if it has to wait.
            let stream = TcpStream::from_accepted_fd(fd);
            spawn_connection(stream, ctx, live, port.closer(), &reactor);
        }
        if let Batch::Shutdown { deadline } = batch {
            break deadline;
        }
    };
    drop(handoff);
    // Idle connections get end-of-file now; busy ones finish their request
    // (answered with `Connection: close`) until the deadline.
    ctx.idle.begin_shutdown();
    while live.get() > 0 && Instant::now() < deadline {
        coroutine::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn spawn_connection(
    stream: TcpStream,
    ctx: &Rc<Ctx>,
    live: &Rc<Cell<usize>>,
    closer: Closer,
    reactor: &Reactor,
) {
    // No TCP_NODELAY yet: the connection sets it before its second write
    // (see `driver::Nagle`).
    ctx.stats.connections.fetch_add(1, Ordering::Relaxed);
    live.set(live.get() + 1);
    let open = Open {
        ctx: ctx.clone(),
        live: live.clone(),
        closer,
    };
    let reactor = reactor.clone();
    // No stack to be had (address space, fd limit on mmap): the closure is
    // dropped, closing the socket, and `open` counts the connection closed.
    let _ = coroutine::try_spawn_detached(move || {
        let open = open;
        let io = Stackful {
            stream,
            reactor,
            timer: None,
            timer_has_waker: false,
            woken_readable: false,
        };
        super::tls::serve(&open.ctx, io);
    });
}
