//! One TLS connection as a pump between a socket and plaintext, shared by
//! every driver.
//!
//! A driver hands its socket in as a [`RawIo`] at each call: a blocking
//! one (the call waits, under the driver's deadline) or a non-blocking one
//! (the call answers `WouldBlock`, and the driver waits for readiness
//! its own way and calls again). The session keeps no socket, so the same
//! code serves both, and a `WouldBlock` anywhere leaves it in a state the
//! next call continues from.
//!
//! ```text
//!   read:  socket ─recv→ rustls (decrypt, handshake) ─→ plaintext for http1
//!          (handshake messages rustls wants to send go out on the way)
//!   write: http1's bytes ─→ rustls (encrypt, one pass) ─send→ socket
//!   file:  pread(2) a chunk ─→ rustls ─send→ socket (no sendfile(2):
//!          the kernel cannot encrypt here, see docs/tls.md)
//! ```
//!
//! A driver that is *handed* the socket's bytes instead of reading them
//! (io_uring's completions, in ring buffers) uses the same session through
//! [`Session::feed`] and [`Session::seal`]: bytes in from a buffer,
//! plaintext and records out into buffers it owns and sends itself.

use std::io::{self, Read, Write};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use bytes::BytesMut;
use rustls::{HandshakeKind, ServerConnection};

use super::Tls;
use super::plain::{self, Verdict};
use super::stats::Failure;

/// A file is read and encrypted this much at a time (rustls buffers at
/// most 64 KiB of records before the socket takes them).
const FILE_CHUNK: usize = 64 * 1024;

/// The socket, as a session sees it during one call.
pub trait RawIo {
    /// Receives bytes (`0`: end of stream); `WouldBlock` if none are there
    /// and the socket is non-blocking.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Sends some of `buf`; `WouldBlock` if the socket takes none now.
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
}

/// A [`RawIo`] over memory: receives from the bytes a completion delivered
/// (`WouldBlock` once they are used up), sends by appending to a buffer
/// the driver sends later (it never refuses: the driver bounds what it
/// seals between two sends).
struct MemIo<'a> {
    input: &'a [u8],
    out: &'a mut BytesMut,
}

impl RawIo for MemIo<'_> {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.input.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }

    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
}

/// What [`Session::feed`] found the connection to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// Still open: wait for more bytes (after sending what was queued).
    Open,
    /// The client sent `close_notify` (or closed before a byte): the
    /// plaintext appended is the last.
    Closed,
}

/// [`RawIo`] as the `io::Read` and `io::Write` rustls moves records with.
struct Sock<'a, S: RawIo + ?Sized>(&'a mut S);

impl<S: RawIo + ?Sized> Read for Sock<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv(buf)
    }
}

impl<S: RawIo + ?Sized> Write for Sock<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the connection is.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Nothing received yet: the first byte tells TLS from plain HTTP.
    Sniff,
    /// TLS: everything goes through rustls.
    Tls,
    /// Plain HTTP on the TLS port: reading its head to answer it.
    Plain,
    /// The client closed before sending a byte: every read is the end.
    Closed,
    /// Answered or failed: every further read fails.
    Failed,
}

/// One connection's TLS state.
pub struct Session {
    conn: ServerConnection,
    tls: Arc<Tls>,
    phase: Phase,
    /// Decrypted bytes rustls holds that the driver has not read yet.
    buffered: usize,
    /// The client sent `close_notify`: reads now return end of stream.
    peer_closed: bool,
    /// The handshake finished and was counted.
    counted: bool,
    /// A cleartext head being read, or a file chunk being encrypted.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("phase", &self.phase)
            .field("buffered", &self.buffered)
            .field("handshaking", &self.conn.is_handshaking())
            .finish_non_exhaustive()
    }
}

/// The error a connection ends with when its input is not acceptable TLS.
fn invalid(msg: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Session {
    /// A new server-side session with the current certificate.
    pub fn new(tls: &Arc<Tls>) -> io::Result<Session> {
        let conn = ServerConnection::new(tls.config.clone()).map_err(io::Error::other)?;
        Ok(Session {
            conn,
            tls: tls.clone(),
            phase: Phase::Sniff,
            buffered: 0,
            peer_closed: false,
            counted: false,
            scratch: Vec::new(),
        })
    }

    /// Whether a read would return at once without the socket: decrypted
    /// bytes are waiting, or the client's `close_notify` has arrived.
    #[inline]
    pub fn has_plaintext(&self) -> bool {
        self.buffered > 0 || self.peer_closed
    }

    /// Whether records are waiting for the socket to take them.
    #[inline]
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Whether the handshake is still under way.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Reads plaintext into `out`, receiving and decrypting records (and
    /// doing the handshake) as needed. `Ok(0)`: the client closed.
    /// Non-blocking sockets give `WouldBlock` when they have nothing.
    pub fn read(&mut self, sock: &mut impl RawIo, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.phase {
                Phase::Tls => {}
                Phase::Sniff => {
                    self.sniff(sock)?;
                    continue;
                }
                Phase::Plain => return self.plain(sock),
                Phase::Closed => return Ok(0),
                Phase::Failed => return Err(invalid("TLS connection failed")),
            }
            if self.has_plaintext() {
                let n = match self.conn.reader().read(out) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => return Err(e),
                };
                self.buffered -= n.min(self.buffered);
                if n > 0 || self.peer_closed {
                    return Ok(n);
                }
            }
            // Handshake messages first: the client may be waiting for them.
            self.send_some(sock)?;
            let n = self.conn.read_tls(&mut Sock(sock))?;
            if n == 0 {
                return Ok(0);
            }
            self.process(sock)?;
        }
    }

    /// Whether a read would need the socket: the session is sniffing or
    /// speaking TLS and holds no decrypted bytes.
    pub fn needs_input(&self) -> bool {
        matches!(self.phase, Phase::Sniff | Phase::Tls) && !self.has_plaintext()
    }

    /// One step with what the socket has, for a driver that must wait in a
    /// way it can interrupt (a blocking driver's idle wait, which shutdown
    /// ends) rather than inside [`Session::read`]: sends what rustls wants
    /// to send, receives once, and processes it (the handshake advances,
    /// records are decrypted). Returns the bytes received; `0` is the end
    /// of the stream. Call it only when a receive would not block.
    pub fn step(&mut self, sock: &mut impl RawIo) -> io::Result<usize> {
        match self.phase {
            Phase::Sniff => {
                self.sniff(sock)?;
                // The server's first flight, if the ClientHello was whole.
                self.send_some(sock)?;
                Ok(usize::from(self.phase != Phase::Closed))
            }
            Phase::Tls => {
                self.send_some(sock)?;
                let n = self.conn.read_tls(&mut Sock(sock))?;
                if n > 0 {
                    self.process(sock)?;
                    self.send_some(sock)?;
                }
                Ok(n)
            }
            Phase::Plain | Phase::Closed | Phase::Failed => Ok(0),
        }
    }

    /// Encrypts some of `data` and sends what the socket takes; the count
    /// of plaintext bytes taken. Records left over go out with the next
    /// call or [`Session::flush`]; while any are left, a non-blocking
    /// socket's `WouldBlock` is passed on and nothing new is taken.
    pub fn write(&mut self, sock: &mut impl RawIo, data: &[u8]) -> io::Result<usize> {
        self.flush(sock)?;
        if data.is_empty() {
            return Ok(0);
        }
        let n = self.conn.writer().write(data)?;
        self.send_some(sock)?;
        Ok(n)
    }

    /// Sends every record waiting (`WouldBlock` if a non-blocking socket
    /// takes no more now).
    pub fn flush(&mut self, sock: &mut impl RawIo) -> io::Result<()> {
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut Sock(sock))? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Reads up to `count` bytes of file `fd` at `*offset`, encrypts them
    /// and sends what the socket takes; advances `*offset` by the bytes
    /// taken (`0`: the file ended early).
    pub fn send_file(
        &mut self,
        sock: &mut impl RawIo,
        fd: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        self.flush(sock)?;
        let want = count.min(FILE_CHUNK);
        if self.scratch.len() < want {
            self.scratch.resize(want, 0);
        }
        let n = reactor::sys::pread(fd, &mut self.scratch[..want], *offset)?;
        if n == 0 {
            return Ok(0);
        }
        let taken = self.conn.writer().write(&self.scratch[..n])?;
        *offset += taken as u64;
        self.send_some(sock)?;
        Ok(taken)
    }

    /// Takes `input` (bytes the driver received for this connection):
    /// tells TLS from plain HTTP on the first bytes, advances the handshake,
    /// decrypts records, appending their plaintext to `plain`; what the
    /// session must send (handshake flights, tickets, alerts, or the
    /// answer to plain HTTP on this port) is appended to `out`, which the
    /// driver sends before it waits again. An error ends the connection
    /// (after `out` is sent: it may hold the alert).
    pub fn feed(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> io::Result<Fed> {
        let mut io = MemIo { input, out };
        let result = self.feed_io(&mut io, plain);
        // Whatever rustls queued on the way: the handshake's next flight,
        // the alert of a failure.
        self.flush(&mut io)?;
        result
    }

    fn feed_io(&mut self, io: &mut MemIo<'_>, plain: &mut BytesMut) -> io::Result<Fed> {
        loop {
            match self.phase {
                Phase::Tls => {}
                Phase::Sniff => {
                    self.sniff(io)?;
                    self.take_plaintext(plain)?;
                    continue;
                }
                Phase::Plain => {
                    return match self.plain(io) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Fed::Open),
                        Err(e) => Err(e),
                        Ok(_) => Err(invalid("plain HTTP request on a TLS port")),
                    };
                }
                Phase::Closed => return Ok(Fed::Closed),
                Phase::Failed => return Err(invalid("TLS connection failed")),
            }
            if self.peer_closed {
                return Ok(Fed::Closed);
            }
            if io.input.is_empty() {
                return Ok(Fed::Open);
            }
            // Record by record, taking the plaintext out between them:
            // rustls refuses more input while its plaintext buffer is full.
            self.conn.read_tls(&mut io.input)?;
            self.process(io)?;
            self.take_plaintext(plain)?;
        }
    }

    /// Moves the plaintext rustls holds to the end of `plain`.
    fn take_plaintext(&mut self, plain: &mut BytesMut) -> io::Result<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        let at = plain.len();
        plain.resize(at + self.buffered, 0);
        self.conn.reader().read_exact(&mut plain[at..])?;
        self.buffered = 0;
        Ok(())
    }

    /// Encrypts all of `data` into records appended to `out` (with any
    /// records already queued before them), for the driver to send.
    pub fn seal(&mut self, data: &[u8], out: &mut BytesMut) -> io::Result<()> {
        let mut io = MemIo { input: &[], out };
        self.flush(&mut io)?;
        let mut rest = data;
        while !rest.is_empty() {
            // rustls takes up to its buffer limit at a time; the records
            // go to `out` at once, so the next call takes more.
            let n = self.conn.writer().write(rest)?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            rest = &rest[n..];
            self.flush(&mut io)?;
        }
        Ok(())
    }

    /// Appends `close_notify` to `out`, if the connection speaks TLS.
    pub fn close_into(&mut self, out: &mut BytesMut) {
        self.close(&mut MemIo { input: &[], out });
    }

    /// Queues `close_notify` and sends what the socket takes at once (the
    /// connection is closing: nothing waits for the rest).
    pub fn close(&mut self, sock: &mut impl RawIo) {
        if self.phase == Phase::Tls {
            self.conn.send_close_notify();
            let _ = self.send_some(sock);
        }
    }

    /// Sends waiting records until the socket would block.
    fn send_some(&mut self, sock: &mut impl RawIo) -> io::Result<()> {
        match self.flush(sock) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    /// Lets rustls process what it received; counts the handshake when it
    /// completes, and the failure when it fails (after sending the alert
    /// rustls queued, if the socket takes it).
    fn process(&mut self, sock: &mut impl RawIo) -> io::Result<()> {
        match self.conn.process_new_packets() {
            Ok(state) => {
                self.buffered = state.plaintext_bytes_to_read();
                self.peer_closed = state.peer_has_closed();
                if !self.counted && !self.conn.is_handshaking() {
                    self.counted = true;
                    let resumed = self.conn.handshake_kind() == Some(HandshakeKind::Resumed);
                    self.tls.stats.handshake(
                        self.conn.protocol_version(),
                        self.conn.negotiated_cipher_suite(),
                        resumed,
                    );
                }
                Ok(())
            }
            Err(e) => {
                if !self.counted {
                    self.counted = true;
                    self.tls.stats.failure(Failure::of(&e));
                }
                self.phase = Phase::Failed;
                let _ = self.send_some(sock);
                Err(invalid(e))
            }
        }
    }

    /// Reads the first bytes and decides: TLS (a handshake record) or
    /// plain HTTP.
    fn sniff(&mut self, sock: &mut impl RawIo) -> io::Result<()> {
        let mut first = [0u8; 512];
        let n = sock.recv(&mut first)?;
        if n == 0 {
            // Closed before a byte: nothing to answer (counted at drop).
            self.phase = Phase::Closed;
            return Ok(());
        }
        if first[0] == plain::HANDSHAKE_RECORD {
            self.phase = Phase::Tls;
            let mut rest = &first[..n];
            while !rest.is_empty() {
                self.conn.read_tls(&mut rest)?;
                self.process(sock)?;
            }
        } else {
            self.phase = Phase::Plain;
            self.scratch.extend_from_slice(&first[..n]);
        }
        Ok(())
    }

    /// Reads a plain HTTP head on the TLS port and answers it (400, or
    /// 308 with `--redirect-http`); the connection then fails.
    fn plain(&mut self, sock: &mut impl RawIo) -> io::Result<usize> {
        loop {
            match plain::answer(&self.scratch, self.tls.redirect_http) {
                Verdict::More => {
                    let mut more = [0u8; 1024];
                    let n = sock.recv(&mut more)?;
                    if n == 0 {
                        self.phase = Phase::Failed;
                        self.counted = true;
                        self.tls.stats.failure(Failure::PlainHttp);
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    self.scratch.extend_from_slice(&more[..n]);
                }
                Verdict::Reply(reply) => {
                    self.phase = Phase::Failed;
                    self.counted = true;
                    self.tls.stats.failure(Failure::PlainHttp);
                    self.scratch = Vec::new();
                    // Small, on a fresh socket: it goes at once or not at
                    // all (a client that does not read gets nothing).
                    let mut off = 0;
                    while off < reply.len() {
                        match sock.send(&reply[off..]) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => off += n,
                        }
                    }
                    return Err(invalid("plain HTTP request on a TLS port"));
                }
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Ended before the handshake finished, and not for a reason
        // already counted: the client went away or was timed out.
        if !self.counted {
            self.tls.stats.failure(Failure::Incomplete);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
