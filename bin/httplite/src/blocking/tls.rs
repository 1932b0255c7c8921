//! HTTPS for the blocking designs (stackful coroutines and OS threads):
//! [`TlsIo`] is a [`BlockingIo`] over another, with the shared
//! [`tls::Session`](crate::tls::Session) between them, so the connection
//! loop ([`super::conn`]) serves TLS without knowing it.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use super::conn::{self, Ctx};
use super::upstream::Side;
use super::{BlockingIo, BlockingIoWrapper, Deadline, FileChunk};
use crate::tls::session::RawIo;
use crate::tls::{Session, Tls};
use site::exposure::Surface;

/// Plaintext is read at most this much at a time: one TLS record's worth,
/// so the spare room zeroed before each read stays small.
const READ_CHUNK: usize = 16 * 1024;
/// How long a closing connection tries to send its `close_notify`.
const CLOSE_NOTIFY_WAIT: Duration = Duration::from_secs(1);

/// Serves one connection, over TLS if the worker's [`Ctx`] has it for
/// the connection's listener, after
/// its PROXY header if its listener takes one (read off the socket
/// itself, before TLS: the balancer sends it in the clear).
pub fn serve<I: BlockingIo>(ctx: &Ctx, io: I) {
    let on = surface(ctx, &io);
    if ctx.tls.on(on).is_some() {
        return serve_tls(ctx, io, on);
    }
    if let Ok((io, client)) = proxy_header(ctx, io, on) {
        conn::serve(ctx, io, client, on);
    }
}

/// [`serve`] over TLS, out of line: the session (rustls's state, a few
/// KiB) then sits in this frame only, not in a plain connection's. A
/// stackful coroutine's frames below it would otherwise start that much
/// deeper, and every idle plain connection would keep one more stack page
/// touched.
#[inline(never)]
fn serve_tls<I: BlockingIo>(ctx: &Ctx, io: I, on: Surface) {
    match start(ctx, io, on) {
        Ok((Started::Plain(io), client)) => conn::serve(ctx, io, client, on),
        Ok((Started::Tls(io), client)) => conn::serve(ctx, io, client, on),
        Err(_) => {}
    }
}

/// A connection ready for the connection loop.
#[derive(Debug)]
// Briefly on the stack, once per connection: boxing the session would be
// an allocation per connection for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Started<I> {
    /// Plain HTTP.
    Plain(I),
    /// HTTPS: the session is made, its handshake still to come.
    Tls(TlsIo<I>),
}

/// The listener `io` came in on (counted if it is an admin one).
pub fn surface<I: BlockingIo>(ctx: &Ctx, io: &I) -> Surface {
    // SAFETY: `io` owns the socket and keeps it open for this call.
    let on = (ctx.config.admin).surface_of(unsafe { BorrowedFd::borrow_raw(io.fd()) });
    if on == Surface::Admin {
        ctx.stats.admin_connection();
    }
    on
}

/// Whether a connection on `on` opens with a PROXY header: the PROXY
/// protocol is the balancer's, on public listeners only (an operator
/// reaches --admin directly).
pub fn expects_proxy_header<I: BlockingIo>(ctx: &Ctx, io: &I, on: Surface) -> bool {
    on == Surface::Public && ctx.config.proxy.expects_header(io.fd())
}

/// The PROXY header, if `io`'s listener takes one (blocking, within the
/// header timeout): the socket and the client it named; on a refusal
/// (counted), the socket back, to be closed.
fn proxy_header<I: BlockingIo>(
    ctx: &Ctx,
    mut io: I,
    on: Surface,
) -> Result<(I, Option<SocketAddr>), I> {
    if !expects_proxy_header(ctx, &io, on) {
        return Ok((io, None));
    }
    // One deadline for the whole header, however many reads.
    let deadline = Deadline::Since(io.now(), ctx.config.header_timeout);
    match crate::proxy::read_blocking(&ctx.config.proxy, &mut io, deadline) {
        Ok(client) => Ok((io, client)),
        Err(refused) => {
            refused.count(&ctx.stats);
            Err(io)
        }
    }
}

/// What comes before the connection loop: the PROXY header, if its
/// listener takes one (blocking, within the header timeout), and the TLS
/// session, if it has one. The client the header named, if any; on a
/// refusal or a failure (counted), the socket back, to be closed.
pub fn start<I: BlockingIo>(
    ctx: &Ctx,
    io: I,
    on: Surface,
) -> Result<(Started<I>, Option<SocketAddr>), I> {
    let (io, client) = proxy_header(ctx, io, on)?;
    let started = match ctx.tls.on(on) {
        None => Started::Plain(io),
        Some(tls) => match Session::new(tls) {
            Ok(session) => Started::Tls(TlsIo::over(io, session)),
            Err(_) => {
                ctx.stats.error(site::stats::ErrorKind::Io);
                return Err(io);
            }
        },
    };
    Ok((started, client))
}

/// A blocking socket with TLS on it.
#[derive(Debug)]
pub struct TlsIo<I> {
    /// Declared first, so dropped before the socket: a session that ends
    /// before its handshake counts that failure as it drops (`incomplete`),
    /// and the count must be in the stats before the client sees the
    /// close.
    session: Session,
    inner: I,
}

impl<I: BlockingIo> TlsIo<I> {
    /// Starts a server-side TLS session over `inner`.
    pub fn new(inner: I, tls: &Arc<Tls>) -> io::Result<TlsIo<I>> {
        Ok(TlsIo::over(inner, Session::new(tls)?))
    }

    /// `session` over `inner`.
    pub fn over(inner: I, session: Session) -> TlsIo<I> {
        TlsIo { inner, session }
    }

    /// The loop of both waits ([`BlockingIo::wait_readable`],
    /// [`BlockingIo::wait_either`]): while the session needs input, `wait`
    /// on the socket (ended early if it reports the upstream's side), then
    /// one step of the session; the client's side once the session holds
    /// plaintext, is over, or failed (the read that follows reports it).
    #[inline]
    fn step_until_readable(
        &mut self,
        deadline: Deadline,
        mut wait: impl FnMut(&mut I, Deadline) -> io::Result<Side>,
    ) -> io::Result<Side> {
        let deadline = Deadline::At(deadline.at(|| self.inner.now()));
        while self.session.needs_input() {
            if wait(&mut self.inner, deadline)? == Side::Upstream {
                return Ok(Side::Upstream);
            }
            let (session, mut raw) = self.parts(deadline);
            match session.step(&mut raw) {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(e),
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        Ok(Side::Client)
    }

    /// The socket and the deadline of the call under way, as the session's
    /// [`RawIo`].
    fn parts(&mut self, deadline: Deadline) -> (&mut Session, Raw<'_, I>) {
        (
            &mut self.session,
            Raw {
                io: &mut self.inner,
                deadline,
            },
        )
    }
}

/// The inner socket under one deadline: every receive and send blocks
/// until done or until the deadline.
struct Raw<'a, I> {
    io: &'a mut I,
    deadline: Deadline,
}

impl<I: BlockingIo> RawIo for Raw<'_, I> {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the
        // elements are initialised and stay so: `read_uninit` only stores
        // received bytes (its `BlockingIo` contract), never uninitialised
        // ones.
        let buf = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [MaybeUninit<u8>]) };
        self.io.read_uninit(buf, self.deadline)
    }

    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io.write(buf, self.deadline)
    }
}

/// The socket for one receive at most (made only if it is known to be
/// readable), then `WouldBlock`.
struct OneRecv<'a, I> {
    raw: Raw<'a, I>,
    left: bool,
}

impl<I: BlockingIo> RawIo for OneRecv<'_, I> {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !std::mem::take(&mut self.left) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.raw.recv(buf)
    }

    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.raw.send(buf)
    }
}

// SAFETY: `read_uninit` returns a count from `Session::read` into the
// first `len` elements, all initialised just before (zeroed), and that
// count is at most `len` (it reads into a slice of that length).
unsafe impl<I: BlockingIo> BlockingIoWrapper for TlsIo<I> {
    type Inner = I;
    const ENCRYPTED: bool = true;

    #[inline]
    fn inner(&self) -> &I {
        &self.inner
    }

    #[inline]
    fn inner_mut(&mut self) -> &mut I {
        &mut self.inner
    }

    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        let len = buf.len().min(READ_CHUNK);
        let buf = &mut buf[..len];
        buf.fill(MaybeUninit::new(0));
        // SAFETY: every element was initialised just above.
        let out = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [u8]) };
        let (session, mut raw) = self.parts(deadline);
        session.read(&mut raw, out)
    }

    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        let (session, mut raw) = self.parts(deadline);
        let n = session.write(&mut raw, buf)?;
        // Blocking sends leave nothing behind, but say so.
        session.flush(&mut raw)?;
        Ok(n)
    }

    /// Its own `write`: the record is a copy anyway, so there is nothing
    /// for `MSG_MORE` to save.
    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        BlockingIoWrapper::write(self, buf, deadline)
    }

    /// Copies every file, to encrypt it.
    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize> {
        let (session, mut raw) = self.parts(deadline);
        let n = session.send_file(&mut raw, chunk.file, chunk.offset, chunk.count)?;
        session.flush(&mut raw)?;
        Ok(n)
    }

    /// Waits until a read returns at once: decrypted bytes, the end of the
    /// stream, or an error to report. The handshake (and any record that
    /// holds no request bytes) is done here, one receive per readiness, so
    /// that it runs inside the driver's idle wait, which shutdown can end,
    /// rather than inside a read, which it cannot. One deadline for the
    /// whole wait: a client trickling a handshake gains no time per byte.
    ///
    /// The deadline can pass between the wait and the receive (a socket
    /// read refuses to start after it): that is this wait's timeout, not
    /// an error for the read that follows, which would wait under the
    /// caller's next deadline (the header timeout, which shutdown does not
    /// end) for a handshake the caller meant to give up on.
    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        self.step_until_readable(deadline, |inner, d| {
            inner.wait_readable(d).map(|()| Side::Client)
        })
        .map(drop)
    }

    /// A tunnel's wait: as [`TlsIo::wait_readable`] (the client's side is
    /// ready once the session holds plaintext or is over), ended early by
    /// the upstream's side.
    fn wait_either(
        &mut self,
        up: &super::upstream::Upstream<I::Waits>,
        deadline: Deadline,
    ) -> io::Result<Side> {
        self.step_until_readable(deadline, |inner, d| inner.wait_either(up, d))
    }

    /// What the socket holds, taken without waiting for the client (a
    /// readable socket's receive returns at once, and only one receive is
    /// made): a step of the session, so that the handshake advances a
    /// flight at a time and a record arrives in as many pieces as it likes
    /// (rustls keeps the partial one); or, for plain HTTP sent to the TLS
    /// port, a piece of its head, answered once whole. The front watches
    /// the socket between steps, so no part of it holds a pool thread.
    fn settle(&mut self, readable: bool, deadline: Deadline) -> io::Result<bool> {
        let mut readable = readable;
        if self.session.needs_input() {
            if !readable {
                return Ok(false);
            }
            readable = false;
            let (session, mut raw) = self.parts(deadline);
            match session.step(&mut raw) {
                Ok(0) | Err(_) => return Ok(true), // the read that follows reports it
                Ok(_) => {}
            }
            if self.session.needs_input() {
                return Ok(false);
            }
        }
        if self.session.has_plaintext() {
            return Ok(true);
        }
        // Plain HTTP on the TLS port (or a session that is over, which the
        // read answers without the socket): at most one receive, then
        // `WouldBlock`, which the session resumes from.
        let (session, raw) = self.parts(deadline);
        let mut once = OneRecv {
            raw,
            left: readable,
        };
        match session.read(&mut once, &mut []) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
            Ok(_) => Ok(true),
        }
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read {
            let (session, mut raw) = self.parts(Deadline::After(CLOSE_NOTIFY_WAIT));
            session.close(&mut raw);
        }
        self.inner.shutdown(how)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A socket whose wait reports bytes that its read then refuses to
    /// take: the deadline passed in between.
    struct LateRead;

    // SAFETY: `read_uninit` never returns `Ok`.
    unsafe impl BlockingIo for LateRead {
        type Waits = super::super::upstream::PollWaits;
        fn read_uninit(&mut self, _: &mut [MaybeUninit<u8>], _: Deadline) -> io::Result<usize> {
            Err(io::ErrorKind::TimedOut.into())
        }
        fn write(&mut self, buf: &[u8], _: Deadline) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn send_file(&mut self, _: FileChunk<'_>, _: Deadline) -> io::Result<usize> {
            Err(io::ErrorKind::Unsupported.into())
        }
        fn wait_readable(&mut self, _: Deadline) -> io::Result<()> {
            Ok(())
        }
        fn wait_either(
            &mut self,
            _: &super::super::upstream::Upstream<Self::Waits>,
            _: Deadline,
        ) -> io::Result<Side> {
            Err(io::ErrorKind::Unsupported.into())
        }
        fn sleep(&mut self, _: Duration) {}
        fn now(&self) -> Instant {
            Instant::now()
        }
        fn shutdown(&mut self, _: Shutdown) -> io::Result<()> {
            Ok(())
        }
        fn fd(&self) -> std::os::fd::RawFd {
            -1
        }
        fn peer_addr(&self) -> Option<SocketAddr> {
            None
        }
    }

    #[test]
    fn a_deadline_that_passes_before_the_receive_is_the_waits_timeout() {
        let (tls, _) = crate::tls::session::tests::server(false);
        let mut io = TlsIo::new(LateRead, &tls).unwrap();
        let e = BlockingIo::wait_readable(&mut io, Deadline::After(Duration::from_millis(1)))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
