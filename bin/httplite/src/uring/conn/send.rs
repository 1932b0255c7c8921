//! How a connection's answers leave: sends of the write buffer under the
//! write timeout (between requests detached, so that the connection goes
//! idle at once and holds no buffers while the kernel sends), and the
//! close that sends the last answer with the FIN and lingers only if the
//! client may still be sending.

use std::io;
use std::os::fd::AsFd;
use std::task::Poll;
use std::time::{Duration, Instant};

use site::stats::TimeoutKind;

use super::{Conn, Res, Stop, Waiting};
use crate::driver::Flush;
use crate::uring::io as uio;

/// How long a closing connection waits for the client's FIN.
const LINGER: Duration = Duration::from_secs(1);
/// How much a closing connection reads and discards at most.
const LINGER_BYTES: usize = 64 * 1024;

impl Conn {
    /// Sends what the write buffer holds, under the write timeout.
    ///
    /// Between requests the request state goes back to the pool as the send
    /// is submitted, not when its CQE comes: the answer is split off the
    /// write buffer (the same allocation, shared), so the next connection
    /// to answer in this turn encodes into the rest of it. Otherwise every
    /// connection waiting for its send's CQE held a state of its own (two
    /// 4 KiB buffers): opening 10,000 connections (scripts/idle-memory.sh)
    /// peaked at 2.4 MB of them, heap that stayed resident after. That send
    /// is detached ([`proactor::TcpStream::send_detached`]): the connection
    /// goes idle without waiting for its CQE.
    pub(in crate::uring) async fn flush(&mut self) -> Res {
        self.write_out(Flush::Now).await
    }

    /// [`Conn::flush`], sent as `how` says.
    pub(in crate::uring) async fn write_out(&mut self, how: Flush) -> Res {
        let flags = how.send_flags();
        if self.tls {
            return Box::pin(self.write_out_tls(flags)).await;
        }
        self.sent().await?;
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        if active.wbuf.is_empty() {
            return Ok(());
        }
        if self.nagle.before_write(how) {
            let _ = reactor::sys::set_nodelay(self.stream.as_fd(), true);
        }
        if active.is_between_requests() {
            // Not waited for: the connection goes idle at once, and the
            // idle wait watches the send (its write timeout, its failure).
            let answer = active.wbuf.split();
            self.release_active();
            let answer = uio::SendBuf {
                buf: answer,
                start: 0,
            };
            self.stream.send_detached(answer, flags);
            return Ok(());
        }
        let at = Instant::now() + self.ctx.config.write_timeout;
        let wbuf = std::mem::take(&mut active.wbuf);
        let (r, wbuf) = uio::send_all(&self.stream, wbuf, at, flags).await;
        self.io().wbuf = wbuf;
        r
    }

    /// Waits, under the write timeout, until the detached send in flight
    /// (if any) has sent everything.
    pub(in crate::uring) async fn sent(&mut self) -> Res {
        if !self.stream.has_detached() {
            return Ok(());
        }
        // Nearly always over already (its CQE came in an earlier turn): no
        // clock read, no timer then.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(r) = self.poll_sent(&mut cx, false) {
            return r;
        }
        let at = Instant::now() + self.ctx.config.write_timeout;
        uio::until(
            at,
            TimeoutKind::Write,
            std::future::poll_fn(|cx| self.poll_sent(cx, true)),
        )
        .await?
    }

    /// Whether the detached send has sent everything (`Ready(Ok)`) or
    /// failed; a short send's rest is sent on, detached again. `awaits`:
    /// `cx` is woken when everything is sent too, not only on a failure.
    pub(super) fn poll_sent(&self, cx: &mut std::task::Context<'_>, awaits: bool) -> Poll<Res> {
        loop {
            let (r, mut rest) = match self.stream.poll_detached::<uio::SendBuf>(cx, awaits) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Ready(Some(ended)) => ended,
            };
            match r {
                Ok(0) => return Poll::Ready(Err(Stop::Io(io::ErrorKind::WriteZero.into()))),
                Ok(n) => rest.start += n,
                // The ring retries a full socket itself; should it answer
                // EAGAIN all the same, the same send goes again.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Poll::Ready(Err(Stop::Io(e))),
            }
            self.stream.send_detached(rest, 0);
        }
    }

    /// Writes what is buffered, then half-closes and drains what the client
    /// still sends (bounded), so that closing with unread input does not
    /// turn into a reset that could destroy the answer before it is read.
    ///
    /// The half-close and the drain are skipped when nothing more can come
    /// (the stackless driver's rule): everything received was a whole
    /// request now answered, and the server is not shutting down. (The
    /// multishot recv has already taken whatever arrived off the socket,
    /// so the close never finds unread bytes there to turn into a reset.)
    ///
    /// The last answer leaves with the FIN ([`Flush::Last`]).
    pub(in crate::uring) async fn close(&mut self) -> Stop {
        if let Err(stop) = self.write_out(Flush::Last).await {
            return stop;
        }
        if let Err(stop) = self.sent().await {
            return stop;
        }
        if self.tls
            && let Err(stop) = Box::pin(self.close_tls()).await
        {
            return stop;
        }
        if !self.tls && self.between_requests() && !self.ctx.shutdown.get() {
            return Stop::Done;
        }
        if self
            .stream
            .shutdown(std::net::Shutdown::Write)
            .await
            .is_err()
        {
            return Stop::Done;
        }
        let deadline = Instant::now() + LINGER;
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match self
                .recv(deadline, TimeoutKind::Write, Waiting::InRequest)
                .await
            {
                Ok(Some(buf)) => drained += buf.len(),
                _ => break,
            }
        }
        Stop::Done
    }
}
