//! HTTPS on the proactor: the TLS session fed from completions.
//!
//! The epoll drivers hand rustls a socket to read from; here the kernel has
//! already read, into a ring buffer, when the connection hears of it. So
//! the session is driven the sans-IO way ([`Session::feed`],
//! [`Session::seal`]):
//!
//! ```text
//!   CQE {ciphertext in ring buffer 3} ─feed─▶ rustls ─▶ plaintext appended to rbuf
//!                                                  └─▶ handshake records appended to `out`
//!   http1's answer in wbuf ─seal─▶ rustls ─▶ records appended to `out`
//!   `out` ─▶ IORING_OP_SEND (the buffer moved into the operation, back with the CQE)
//! ```
//!
//! The ring buffer goes back to the ring as soon as it is fed, as on a
//! plain connection. The sessions live beside the connections, in a map
//! of the worker's keyed by fd, so that a plain idle connection is no
//! larger for them. Everything above (`http1`, the site, the connection
//! loop in `conn.rs`) sees only plaintext: the loop already sends what it
//! has before it waits for more, and for TLS that send also carries the
//! records the session queued (the handshake's flights, tickets, alerts).
//! A file body is read with `pread(2)` and sealed (no `sendfile(2)`: the
//! kernel cannot encrypt for rustls, see docs/tls.md).

use std::io;
use std::time::Instant;

use bytes::BytesMut;
use proactor::RecvBuf;

use super::conn::{Conn, Res, Stop};
use super::io as uio;
use crate::tls::session::Fed;
use crate::tls::{Session, Tls};

/// A sealed-records buffer that grew past this (a large file chunk) is
/// freed after its send rather than kept by an idle connection.
const KEEP_OUT: usize = 16 * 1024;

/// One HTTPS connection's TLS state, kept in the worker's
/// [`WorkerCtx::tls_conns`](super::ctx::WorkerCtx::tls_conns) under its fd.
pub(super) struct TlsConn {
    session: Session,
    /// Records sealed and not yet sent.
    out: BytesMut,
    /// The client sent `close_notify`: no more plaintext will come.
    peer_closed: bool,
}

impl TlsConn {
    /// A session with the listener's current certificate.
    pub(super) fn new(tls: &std::sync::Arc<Tls>) -> io::Result<Box<TlsConn>> {
        Ok(Box::new(TlsConn {
            session: Session::new(tls)?,
            out: BytesMut::new(),
            peer_closed: false,
        }))
    }
}

impl Conn {
    /// Runs `f` on this connection's TLS state (`None` on a plain one).
    /// Never across an await: the map is the whole worker's.
    fn with_tls<R>(&self, f: impl FnOnce(&mut TlsConn) -> R) -> Option<R> {
        let fd = self.stream.as_raw_fd();
        self.ctx.tls_conns.borrow_mut().get_mut(&fd).map(|t| f(t))
    }

    /// Whether the client sent `close_notify`.
    pub(super) fn tls_peer_closed(&self) -> bool {
        self.with_tls(|t| t.peer_closed).unwrap_or(false)
    }

    /// Feeds received ciphertext to the session: plaintext into the read
    /// buffer, records to send into `out` (sent by the next flush, which
    /// the loop makes before any wait). An error (bad records, a failed
    /// handshake, plain HTTP on this port) ends the connection once `out`
    /// (the alert, the plain answer) is sent: see [`Conn::failed`].
    pub(super) fn feed_tls(&mut self, buf: &RecvBuf) -> Res {
        let fd = self.stream.as_raw_fd();
        let Conn { active, ctx, .. } = self;
        let rbuf = &mut ctx.pool.ensure(active).rbuf;
        let mut conns = ctx.tls_conns.borrow_mut();
        let Some(tls) = conns.get_mut(&fd) else {
            return Ok(());
        };
        match tls.session.feed(buf, rbuf, &mut tls.out) {
            Ok(Fed::Open) => Ok(()),
            Ok(Fed::Closed) => {
                tls.peer_closed = true;
                Ok(())
            }
            Err(e) => Err(Stop::Io(e)),
        }
    }

    /// [`Conn::write_out`] over TLS: seals the write buffer and sends the
    /// records queued (with the handshake's, if any), under the write
    /// timeout. Between requests the request state goes back to the pool
    /// first, as on a plain connection.
    pub(super) async fn write_out_tls(&mut self, flags: libc::c_int) -> Res {
        let fd = self.stream.as_raw_fd();
        let Conn { active, ctx, .. } = self;
        if let Some(a) = active.as_mut() {
            if !a.wbuf.is_empty() {
                let mut conns = ctx.tls_conns.borrow_mut();
                if let Some(tls) = conns.get_mut(&fd) {
                    tls.session.seal(&a.wbuf, &mut tls.out).map_err(Stop::Io)?;
                }
                a.wbuf.clear();
            }
            if a.is_between_requests()
                && let Some(a) = active.take()
            {
                ctx.pool.put(a);
            }
        }
        self.send_sealed(flags).await
    }

    /// Seals `data` (a chunk of a file body) and sends it.
    pub(super) async fn send_sealed_chunk(&mut self, data: &[u8]) -> Res {
        let sealed = self.with_tls(|t| t.session.seal(data, &mut t.out));
        sealed.transpose().map_err(Stop::Io)?;
        self.send_sealed(0).await
    }

    /// Queues `close_notify` and sends it with whatever is still queued.
    pub(super) async fn close_tls(&mut self) -> Res {
        self.with_tls(|t| t.session.close_into(&mut t.out));
        self.send_sealed(0).await
    }

    /// The connection ends on `stop`, which taking its bytes failed with:
    /// first sends what the session still queued (the alert of a failed
    /// handshake, the answer to plain HTTP on this port), under the write
    /// timeout, and nothing if the client does not take it.
    pub(super) async fn failed(&mut self, stop: Stop) -> Stop {
        let _ = self.send_sealed(0).await;
        stop
    }

    /// Sends the records in `out`; the buffer comes back for the next ones.
    async fn send_sealed(&mut self, flags: libc::c_int) -> Res {
        let out = self.with_tls(|t| std::mem::take(&mut t.out));
        let Some(out) = out.filter(|o| !o.is_empty()) else {
            return Ok(());
        };
        let at = Instant::now() + self.ctx.config.write_timeout;
        let (r, mut back) = uio::send_all(&self.stream, out, at, flags).await;
        if back.capacity() > KEEP_OUT {
            back = BytesMut::new();
        }
        self.with_tls(|t| t.out = back);
        r
    }
}
