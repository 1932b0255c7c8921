//! One connection on the stackless runtime: read, decode, route, encode,
//! write, until the client or a timeout ends it.
//!
//! The loop, for a keep-alive client sending one request at a time:
//!
//! ```text
//!   read(2) → decode → route → encode into wbuf → (more complete requests? loop)
//!   write(2) wbuf once for the whole batch (pipelined responses leave together)
//!   short read (socket drained) → buffers and decoder back to the worker's
//!   pool → wait for readability → take them again → read(2)
//! ```
//!
//! The task's future is written in two halves:
//!
//! - **the fast path** ([`fast`]), a hand-written `poll`, runs that loop
//!   for requests answered without waiting (the constant endpoints, errors,
//!   cached responses) whose answers leave in one write. It is what nearly
//!   every request of a busy server takes, and it costs no `async`
//!   machinery: no nested state machines to resume, no futures to build.
//! - **the general path** ([`general`]), ordinary `async fn`s, handles
//!   everything that waits: a body, a file, a sleep, a partial head under
//!   the header timeout, a write the socket cannot take at once, a close.
//!   The fast path hands it the connection (moved into a boxed future, so
//!   an idle connection never pays for its states) and takes the connection
//!   back once it is idle between requests again.
//!
//! An idle connection holds no buffer and no decoder (nginx's trick for
//! cheap idle keep-alive connections, taken one step further): everything
//! request-sized lives in a pooled [`Active`] state while a request is in
//! hand, so an idle connection costs its task, its socket's registry slot
//! and its timer. Reads after a wake and first writes are optimistic (no
//! readiness check first). Timeouts use one timer per connection that is
//! only re-armed when a deadline moves *earlier*; a later deadline is picked up
//! when the timer fires early, so the hot path never touches the timer heap.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http1::Request;

use super::answer::{FLUSH_AT, Res, Stop};
use super::ctx::{Active, ConnGuard, WorkerCtx};
use super::transport::Transport;
use site::access_log::Entry;
use site::exposure::Surface;
use site::respond::{self, Handled, Outcome, Slow};
use site::stats::TimeoutKind;

use crate::driver;

mod fast;
mod general;
mod timer;

use timer::Timer;

/// Keep at least this much spare room in the read buffer before a read.
const MIN_READ: usize = 1024;
/// How long a closing connection waits for the client's FIN.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// Where the general path picks up from the fast path.
enum Resume {
    /// The top of the loop: answer what is buffered, write, read on (a
    /// partial head, or a write the socket did not take at once).
    Top,
    /// A request whose answer waits (a body, a file, a sleep). Boxed: the
    /// fast path returns a `Resume` on every turn, and most turns are
    /// `Top` (a small enum is returned in registers).
    Slow(Box<Slow>),
    /// The last answer is encoded (`Connection: close`, or a protocol
    /// error): write it and close.
    Close,
}

/// The general path's boxed future. It owns the connection while it runs
/// and gives it back: with `None` when the connection is idle between
/// requests again (the fast path takes over), with the reason otherwise.
type General<S> = Pin<Box<dyn Future<Output = (Conn<S>, Option<Stop>)>>>;

/// The connection's task: the fast path's state inline, the general path's
/// boxed while it runs.
pub struct Connection<S> {
    state: State<S>,
}

enum State<S> {
    Fast(Conn<S>),
    General(General<S>),
    Finished,
}

struct Conn<S> {
    stream: S,
    /// Buffers and decoder, from the worker's pool while a request is in
    /// hand; `None` while waiting between requests (see [`Active`]).
    active: Option<Box<Active>>,
    timer: Timer,
    /// When the first byte of the request being read arrived.
    head_started: Option<Instant>,
    /// When the request in hand began (for the access log's request time).
    request_started: Instant,
    /// Whether a request has been answered on this connection (the first
    /// one is under the header timeout and the first-request grace). A
    /// flag, not a count: it shares a word with the flags below, which
    /// keeps the connection's task in a smaller allocation.
    served_any: bool,
    /// The last read came back short, so the socket was empty then: the
    /// next wait can skip asking whether more arrived (a hint only; the
    /// registry's readiness still decides when the wait ends).
    drained: bool,
    /// The client a PROXY header named (`None`: the socket's peer). Boxed:
    /// one pointer on the connections that have none.
    client: Option<Box<SocketAddr>>,
    /// The listener it came in on. A field of its own (not beside
    /// `client` in a struct): it then shares `drained`'s word.
    on: Surface,
    /// Whether the next write needs `TCP_NODELAY` first (shares the word).
    nagle: driver::Nagle,
    /// The worker's context, through the guard that counts the connection
    /// open (one pointer for both); declared last so that it drops, and
    /// counts the close, after the socket is closed.
    ctx: ConnGuard,
}

/// Serves one connection to the end. Never panics on bad input: protocol
/// errors are answered and the connection closed.
/// `on` is the listener it came in on.
pub fn serve<S: Transport>(ctx: Rc<WorkerCtx>, stream: S, on: Surface) -> Connection<S> {
    serve_with(stream, ctx.open_connection(), None, on)
}

/// [`serve`] for a connection already counted open (`ctx`, the guard that
/// leads to the worker's context) whose PROXY header named `client` (see
/// `super::proxied`).
pub fn serve_with<S: Transport>(
    stream: S,
    ctx: ConnGuard,
    client: Option<SocketAddr>,
    on: Surface,
) -> Connection<S> {
    let now = ctx.reactor.now();
    let timer = Timer::new(
        &ctx.reactor,
        now + ctx.config.header_timeout,
        TimeoutKind::Header,
    );
    Connection {
        state: State::Fast(Conn {
            // Nothing until the first bytes arrive: a batch of new
            // connections must not each take buffers at once, and a client
            // that connects and sends nothing holds none.
            active: None,
            timer,
            head_started: Some(now),
            request_started: now,
            served_any: false,
            drained: false,
            client: client.map(Box::new),
            on,
            nagle: match S::WRITES_ITSELF {
                true => {
                    stream.set_nodelay();
                    driver::Nagle::Off
                }
                false => driver::Nagle::Unwritten,
            },
            stream,
            ctx,
        }),
    }
}

impl<S: Transport> Future for Connection<S> {
    type Output = ();

    /// The hot path only: a connection in the fast path, polled after a
    /// wake, that answers and waits again (or ends). Everything else (the
    /// move to the general path, polling it, the way back, finishing) is in
    /// [`Connection::drive`], out of line. Kept free of loops on purpose:
    /// with the state machine's loop in here, LLVM hoisted a dozen field
    /// and thread-local addresses out of it and spilled them to the stack
    /// on every poll, ~20 instructions per request for a loop that nearly
    /// always runs once.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // `Connection` is `Unpin`: the connection moves between the states.
        let this = self.get_mut();
        if let State::Fast(conn) = &mut this.state {
            if reactor::trace::chrome::on() {
                driver::trace_arrival(std::os::fd::AsRawFd::as_raw_fd(&conn.stream));
            }
            return match conn.poll_fast(cx, true) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(exit) => this.drive(cx, Some(exit)),
            };
        }
        this.drive(cx, None)
    }
}

impl<S: Transport> Connection<S> {
    /// The state machine around the fast path: `exit` is what the fast path
    /// just returned (`None`: the general path is running and was woken).
    #[inline(never)]
    fn drive(&mut self, cx: &mut Context<'_>, mut exit: Option<fast::Exit>) -> Poll<()> {
        loop {
            let stop = match exit.take() {
                Some(fast::Exit::Stop(stop)) => stop,
                Some(fast::Exit::Resume(resume)) => {
                    if matches!(resume, Resume::Close)
                        && let State::Fast(conn) = &mut self.state
                        && let Some(stop) = conn.close_now()
                    {
                        stop
                    } else {
                        let State::Fast(mut conn) =
                            std::mem::replace(&mut self.state, State::Finished)
                        else {
                            unreachable!("the fast path returned it")
                        };
                        self.state = State::General(Box::pin(async move {
                            let stop = conn.run(resume).await;
                            (conn, stop)
                        }));
                        continue;
                    }
                }
                None => match &mut self.state {
                    State::General(general) => match general.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready((conn, None)) => {
                            // Idle between requests again: the fast path
                            // takes over (below), without a wake this time.
                            self.state = State::Fast(conn);
                            continue;
                        }
                        Poll::Ready((conn, Some(stop))) => {
                            self.state = State::Fast(conn);
                            stop
                        }
                    },
                    State::Fast(conn) => match conn.poll_fast_outlined(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(e) => {
                            exit = Some(e);
                            continue;
                        }
                    },
                    State::Finished => return Poll::Ready(()),
                },
            };
            if let State::Fast(conn) = std::mem::replace(&mut self.state, State::Finished) {
                conn.finish(stop);
            }
            return Poll::Ready(());
        }
    }
}

impl<S> Drop for Conn<S> {
    fn drop(&mut self) {
        self.timer.lazy.remove(&self.ctx.reactor);
        // As `release_active` (which needs the `Transport` bound a `Drop`
        // impl cannot add).
        if let Some(active) = self.active.take() {
            self.ctx.pool.put(active);
        }
    }
}

impl<S: Transport> Conn<S> {
    /// Counts why the connection stopped; dropping it closes the socket
    /// (and that close takes it out of epoll).
    fn finish(self, stop: Stop) {
        self.stream.will_close();
        stop.count(&self.ctx.stats);
    }

    /// One read attempt, without waiting or consulting readiness first:
    /// `None` if it would block.
    #[inline(always)]
    fn read_now(&mut self) -> Option<io::Result<usize>> {
        let Conn {
            active,
            ctx,
            stream,
            ..
        } = self;
        let rbuf = &mut ctx.pool.ensure(active).rbuf;
        if rbuf.capacity() - rbuf.len() < MIN_READ {
            // Doubling for a head that keeps growing; MIN_READ otherwise.
            rbuf.reserve(MIN_READ.max(rbuf.len()));
        }
        let spare = rbuf.spare_capacity_mut();
        let room = spare.len();
        match stream.try_read_uninit(spare) {
            Ok(n) => {
                // SAFETY: the kernel initialised the first `n` spare bytes.
                unsafe { rbuf.set_len(rbuf.len() + n) };
                self.drained = n < room;
                Some(Ok(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// The request-time state, taken from the pool if the connection has
    /// none (it has one from the first bytes of a request until it goes
    /// idle again).
    #[inline]
    fn io(&mut self) -> &mut Active {
        self.ctx.pool.ensure(&mut self.active)
    }

    /// Before any write sent as `how`: a write after the first turns Nagle
    /// off (see [`driver::Nagle`]).
    #[inline(always)]
    fn before_write(&mut self, how: driver::Flush) {
        if self.nagle.before_write(how) {
            self.stream.set_nodelay();
        }
    }

    /// Gives the request-time state back to the pool (going idle, or done).
    #[inline]
    fn release_active(&mut self) {
        if let Some(active) = self.active.take() {
            self.ctx.pool.put(active);
        }
    }

    /// Whether nothing of a next request has arrived (see
    /// [`Active::is_between_requests`]; without the state, nothing has).
    fn between_requests(&self) -> bool {
        self.active.as_ref().is_none_or(|a| a.is_between_requests())
    }

    /// Handles one request without waiting, if it can (see
    /// [`respond::handle`]). What must wait comes back as `Slow`, for the
    /// general path.
    #[inline]
    fn handle(&mut self, req: Request) -> Handled<Slow> {
        self.served_any = true;
        let Conn {
            ctx,
            active,
            stream,
            request_started,
            client,
            on,
            ..
        } = self;
        let wbuf = &mut ctx.pool.ensure(active).wbuf;
        let shutting_down = ctx.shutdown.is_set();
        let started = *request_started;
        respond::handle(
            &ctx.app,
            &ctx.stats,
            wbuf,
            req,
            on,
            shutting_down,
            |req, out| log(ctx, stream, client, on, req, out, Some(started)),
        )
    }
}

/// Writes the access-log line, if logging is on. `client` is borrowed,
/// not copied: a copy of the address per request cost the plaintext path
/// instructions even with no log. `started` `None`: the reactor's time
/// now (a head that came whole in this poll), read only if used.
#[inline]
fn log<S: Transport>(
    ctx: &WorkerCtx,
    stream: &S,
    client: &Option<Box<SocketAddr>>,
    on: &Surface,
    req: &Request,
    out: Outcome,
    started: Option<Instant>,
) {
    // Converted only where used: `Reactor::now` is arithmetic with an
    // overflow check, which the compiler cannot drop as dead code.
    let started = || started.unwrap_or_else(|| ctx.reactor.now());
    if reactor::trace::active() {
        let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
        driver::trace_outcome(fd, req, out, started());
    }
    if ctx.access_log.is_some() {
        access_log(ctx, stream, client, on, req, out, started(), None);
    }
}

/// [`log`] for a proxied request, whose line names its upstream.
#[allow(clippy::too_many_arguments)]
fn log_proxied<S: Transport>(
    ctx: &WorkerCtx,
    stream: &S,
    client: &Option<Box<SocketAddr>>,
    on: &Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: site::access_log::UpstreamLog<'_>,
) {
    if reactor::trace::active() {
        let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
        driver::trace_outcome(fd, req, out, started);
    }
    if ctx.access_log.is_some() {
        access_log(ctx, stream, client, on, req, out, started, Some(upstream));
    }
}

/// [`log`]'s line, out of line and cold so that the request loops it is
/// inlined into carry only the `is_some` test when logging is off.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn access_log<S: Transport>(
    ctx: &WorkerCtx,
    stream: &S,
    client: &Option<Box<SocketAddr>>,
    on: &Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: Option<site::access_log::UpstreamLog<'_>>,
) {
    let Some(log) = &ctx.access_log else { return };
    let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
    let client = client.as_deref().copied();
    let peer = (ctx.config.proxy).client_of(client, fd, req, || stream.peer_addr().ok());
    log.log(&Entry {
        upstream,
        ..Entry::new(peer, req, *on, out.status.code(), out.bytes, Some(started))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every idle connection's task holds a `Connection` beside the
    /// executor's 56-byte header, in one allocation: 160 bytes here make it
    /// a 224-byte malloc chunk, 168 or more a 240-byte one.
    #[test]
    fn an_idle_connection_stays_small() {
        let size = size_of::<Connection<executor::net::TcpStream>>();

        assert!(
            size <= 160,
            "the connection's task state grew to {size} bytes"
        );
    }
}
