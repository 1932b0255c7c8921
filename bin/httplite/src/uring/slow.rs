//! The answers that wait (a body, a sleep, a job, a file, an echo): the
//! site's [`Plan`] decides what to send, these loops only wait for it.
//! They are the stackless driver's general path with completions instead
//! of readiness (that file says why a driver cannot share these loops with
//! another that waits differently).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use http1::{BodyEncoder, Message};
use site::plan::{Event, Plan, Step};
use site::respond::Slow;
use site::stats::ErrorKind;

use super::conn::{Conn, FLUSH_AT, Res, Stop, log};
use super::io as uio;
use crate::driver;

/// Bytes copied per `pread` + send when a file is larger than
/// `--sendfile-max`.
const COPY_CHUNK: usize = 256 * 1024;

impl Conn {
    /// Runs one waiting answer to its end: `Ok(keep)`, or why the
    /// connection ends.
    pub(super) async fn handle_slow(&mut self, slow: Slow) -> Res<bool> {
        let mut plan = Plan::new(slow);
        let mut event = Event::Start;
        let mut streaming = false;
        loop {
            let Conn { active, ctx, .. } = self;
            let wbuf = &mut ctx.pool.ensure(active).wbuf;
            event = match plan.next(&ctx.app, &ctx.stats, wbuf, event) {
                Step::ReadBody { keep } => {
                    let mut body = Vec::new();
                    let keep = keep.then_some(&mut body);
                    match self.read_body(keep, plan.head_only()).await {
                        Ok(()) => Event::Body(body),
                        Err(Stop::Done) => return Ok(false), // answered with an error
                        Err(stop) => return Err(stop),
                    }
                }
                Step::Sleep(d) => {
                    // Earlier pipelined answers should not wait for this one.
                    self.flush().await?;
                    {
                        let _asleep = self.ctx.stats.sleeping();
                        proactor::time::sleep(d).await;
                    }
                    Event::Slept {
                        shutting_down: self.ctx.shutdown.get(),
                    }
                }
                Step::Tick(d) => {
                    if !std::mem::replace(&mut streaming, true) {
                        driver::cap_event_stream_buffer(self.stream.as_raw_fd());
                    }
                    self.flush().await?; // the event, under the write timeout
                    let ended = self.tick(d).await?;
                    Event::Ticked { ended }
                }
                Step::Offload(work) => match (self.ctx.app.jobs.pool())
                    .spawn_blocking_as(site::plan::POOL_WORK, work)
                {
                    Ok(listing) => Event::Offloaded(Ok(listing.await)),
                    Err(full) => Event::Offloaded(Err(full)),
                },
                Step::SendFile { file, offset, len } => {
                    // The head shares the body's first segment.
                    self.write_out(libc::MSG_MORE).await?;
                    self.send_file(&file, offset, len).await?;
                    Event::Sent
                }
                Step::Echo {
                    mut encoder,
                    flush_first,
                } => {
                    if flush_first {
                        self.flush().await?;
                    }
                    let sent = self.echo(&mut encoder).await?;
                    Event::Echoed { encoder, sent }
                }
                Step::Done(outcome) => {
                    let fd = self.stream.as_raw_fd();
                    log(
                        &self.ctx,
                        fd,
                        self.on,
                        plan.request(),
                        outcome,
                        self.request_started,
                    );
                    return Ok(outcome.keep_alive);
                }
                Step::Close => return Ok(false),
            };
        }
    }

    /// Waits out one interval of an event stream: `Ok(true)` if the stream
    /// is to end now (the client sent something or closed, or the server
    /// is draining), `Ok(false)` when the interval has passed. The armed
    /// multishot recv is what tells that the client spoke; whatever it
    /// sent is dropped with the stream (an event stream reads nothing).
    async fn tick(&mut self, d: Duration) -> Res<bool> {
        let Conn { stream, ctx, .. } = self;
        let mut sleep = pin!(proactor::time::sleep(d));
        // `None`: draining (the worker wakes every task when it starts).
        let woke = std::future::poll_fn(|cx| {
            if ctx.shutdown.get() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(r) = stream.poll_recv(cx) {
                return Poll::Ready(Some(Some(r)));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(None));
            }
            Poll::Pending
        })
        .await;
        match woke {
            None => Ok(true),
            Some(None) => Ok(false),
            Some(Some(Ok(_))) => Ok(true),
            Some(Some(Err(e))) => Err(Stop::Io(e)),
        }
    }

    /// Reads the rest of the current request's body into `keep`, or drops
    /// it; a bad body is answered (without a body if `head_only`).
    async fn read_body(&mut self, mut keep: Option<&mut Vec<u8>>, head_only: bool) -> Res {
        loop {
            let io = self.io();
            match io.decoder.decode(&mut io.rbuf) {
                Ok(Some(Message::End)) => return Ok(()),
                Ok(Some(Message::Body(b))) => {
                    if let Some(keep) = keep.as_deref_mut() {
                        keep.extend_from_slice(&b);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    // Earlier pipelined answers go out before waiting.
                    self.flush().await?;
                    self.fill().await?;
                }
                Err(e) => {
                    let Conn { active, ctx, .. } = self;
                    let wbuf = &mut ctx.pool.ensure(active).wbuf;
                    driver::reject(wbuf, &ctx.stats, &e, head_only);
                    return Err(Stop::Done);
                }
            }
        }
    }

    /// Streams the request body back through `enc` as it arrives; the
    /// bytes echoed.
    async fn echo(&mut self, enc: &mut BodyEncoder) -> Res<u64> {
        let mut sent = 0u64;
        while self.io().decoder.in_body() {
            let io = self.io();
            match io.decoder.decode(&mut io.rbuf) {
                Ok(Some(Message::Body(b))) => {
                    sent += b.len() as u64;
                    enc.write(&mut io.wbuf, &b).map_err(|_| Stop::Done)?;
                    if io.wbuf.len() >= FLUSH_AT {
                        self.flush().await?;
                    }
                }
                Ok(Some(Message::End)) => break,
                Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                Ok(None) => {
                    self.flush().await?;
                    self.fill().await?;
                }
                Err(_) => {
                    // The head is already out: all we can do is close.
                    self.ctx.stats.error(ErrorKind::BadRequest);
                    self.flush().await?;
                    return Err(Stop::Done);
                }
            }
        }
        Ok(sent)
    }

    /// Sends `len` bytes of `file` from `offset`: `sendfile(2)` on the
    /// socket up to `--sendfile-max` (a full socket is waited for with a
    /// ring poll), and beyond it, or over TLS, `pread` into an owned buffer
    /// sent with `IORING_OP_SEND` (sealed first over TLS).
    async fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        let end = offset + len;
        let mut off = offset;
        let fd = file.as_fd();
        let write_timeout = self.ctx.config.write_timeout;
        if len > self.ctx.config.sendfile_max || self.tls {
            let mut buf = bytes::BytesMut::new();
            while off < end {
                let chunk = (end - off).min(COPY_CHUNK as u64) as usize;
                buf.clear();
                buf.resize(chunk, 0);
                let n = uio::pread(fd, &mut buf, off).map_err(Stop::Io)?;
                if n == 0 {
                    // The file shrank under us: the length is a lie now.
                    return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                buf.truncate(n);
                off += n as u64;
                if self.tls {
                    Box::pin(self.send_sealed_chunk(&buf)).await?;
                    continue;
                }
                let at = Instant::now() + write_timeout;
                let (r, back) = uio::send_all(&self.stream, buf, at, 0).await;
                r?;
                buf = back;
            }
            return Ok(());
        }
        let mut at = None;
        while off < end {
            let chunk = (end - off).min(1 << 20) as usize;
            match uio::sendfile_once(self.stream.as_fd(), fd, &mut off, chunk) {
                Ok(0) => return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into())),
                Ok(_) => at = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The write timeout counts from the first wait with no
                    // progress since.
                    let deadline = *at.get_or_insert_with(|| Instant::now() + write_timeout);
                    uio::wait_writable(&self.ctx.proactor, &self.stream, deadline).await?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
        Ok(())
    }
}
