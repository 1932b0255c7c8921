//! The answers that wait, in blocking style: the site's [`Plan`] decides
//! what comes next (read a body, sleep, tick an event stream, run a job,
//! send a file, echo), and the connection waits for it right here, on its
//! thread of control.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use http1::{BodyEncoder, Message};
use site::plan::{Event, Plan, Step};
use site::respond::Slow;
use site::stats::{ErrorKind, TimeoutKind};

use super::{ALREADY_THERE, Conn, FLUSH_AT, MIN_READ, Res, Stop, log, timed};
use crate::blocking::{BlockingIo, Deadline, FileChunk};
use crate::driver::{self, Flush};

impl<I: BlockingIo> Conn<'_, I> {
    /// The answers that wait for something: the site's [`Plan`] decides,
    /// this loop waits. (The stackless drivers' `stackless/answer.rs` has
    /// the same loop with `.await` at each wait: one piece of code cannot
    /// both block a thread of control and return `Pending` to an executor.)
    pub(super) fn handle_slow(&mut self, slow: Slow) -> Res<bool> {
        let slow = match slow.into_proxied() {
            Ok(p) => return self.proxy(p.req, &p.route),
            Err(slow) => slow,
        };
        let mut plan = Plan::new(slow);
        let mut event = Event::Start;
        let mut streaming = false;
        loop {
            let Conn { ctx, wbuf, .. } = self;
            event = match plan.next(&ctx.app, &ctx.stats, wbuf, event) {
                Step::ReadBody { keep } => {
                    let mut body = Vec::new();
                    let keep = keep.then_some(&mut body);
                    match self.read_body(keep, plan.head_only()) {
                        Ok(()) => Event::Body(body),
                        Err(Stop::Done) => return Ok(false), // answered with an error
                        Err(stop) => return Err(stop),
                    }
                }
                Step::Sleep(d) => {
                    self.flush()?; // earlier pipelined answers go first
                    {
                        let _asleep = self.ctx.stats.sleeping(); // the `sleeping` gauge
                        self.io.sleep(d);
                    }
                    let shutting_down = self.ctx.idle.is_shutting_down();
                    Event::Slept { shutting_down }
                }
                Step::Tick(d) => {
                    if !std::mem::replace(&mut streaming, true) {
                        driver::cap_event_stream_buffer(self.io.fd());
                    }
                    self.flush()?; // the event, under the write timeout
                    let ended = self.tick(d)?;
                    Event::Ticked { ended }
                }
                Step::Offload(work) => {
                    Event::Offloaded(self.io.offload(self.ctx.app.jobs.pool(), work))
                }
                Step::SendFile { file, offset, len } => {
                    self.write_out(Flush::BodyFollows)?;
                    self.send_file(&file, offset, len)?;
                    Event::Sent
                }
                Step::Echo {
                    mut encoder,
                    flush_first,
                } => {
                    if flush_first {
                        self.flush()?;
                    }
                    let sent = self.echo(&mut encoder)?;
                    Event::Echoed { encoder, sent }
                }
                Step::Done(outcome) => {
                    log(
                        self.ctx,
                        &self.io,
                        self.client,
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

    /// An event stream's wait between two events: `d`, or less if the
    /// client sends anything or closes (it left: true) or shutdown begins
    /// (true). The connection waits in the idle set meanwhile, so that
    /// shutdown ends the wait at once (its read side is shut down), as it
    /// ends a keep-alive wait.
    fn tick(&mut self, d: Duration) -> Res<bool> {
        let until = Deadline::At(self.io.now() + d);
        loop {
            if !self.ctx.idle.enter(&self.idle, self.io.fd()) {
                return Ok(true); // shutting down
            }
            let waited = self.io.wait_readable(until);
            self.ctx.idle.leave(&self.idle);
            match waited {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(false),
                Err(e) => return Err(Stop::Io(e)),
                Ok(()) if self.ctx.idle.is_shutting_down() => return Ok(true),
                Ok(()) => {}
            }
            // Readable: the client closed or spoke, or the readiness was
            // left over from the request (a design that keeps readiness
            // until a read says otherwise): a read tells which.
            if self.rbuf.capacity() - self.rbuf.len() < MIN_READ {
                self.rbuf.reserve(MIN_READ);
            }
            let check = Deadline::After(ALREADY_THERE);
            match self.io.read_uninit(self.rbuf.spare_capacity_mut(), check) {
                Ok(_) => return Ok(true), // end of stream, or bytes: either way it ends
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
    }

    /// Reads the rest of the current request's body into `keep`, or drops
    /// it; a bad body is answered (without a body if `head_only`).
    fn read_body(&mut self, mut keep: Option<&mut Vec<u8>>, head_only: bool) -> Res {
        loop {
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(Message::End)) => return Ok(()),
                Ok(Some(Message::Body(b))) => {
                    if let Some(keep) = keep.as_deref_mut() {
                        keep.extend_from_slice(&b);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    // Answers to earlier pipelined requests go out before
                    // waiting: the rest of this body may be slow, or never
                    // come (found by the `connection` fuzz target).
                    self.flush()?;
                    self.fill()?;
                }
                Err(e) => {
                    driver::reject(&mut self.wbuf, &self.ctx.stats, &e, head_only);
                    return Err(Stop::Done);
                }
            }
        }
    }

    /// Streams the request body back through `enc` as it arrives; the
    /// bytes echoed.
    fn echo(&mut self, enc: &mut BodyEncoder) -> Res<u64> {
        let mut sent = 0u64;
        // A request without a body has none to stream.
        while self.decoder.in_body() {
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(Message::Body(b))) => {
                    sent += b.len() as u64;
                    enc.write(&mut self.wbuf, &b).map_err(|_| Stop::Done)?;
                    if self.wbuf.len() >= FLUSH_AT {
                        self.flush()?;
                    }
                }
                Ok(Some(Message::End)) => break,
                Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                Ok(None) => {
                    self.flush()?; // stream what we have
                    self.fill()?;
                }
                Err(_) => {
                    // The head is already out: all we can do is close.
                    self.ctx.stats.error(ErrorKind::BadRequest);
                    self.flush()?;
                    return Err(Stop::Done);
                }
            }
        }
        Ok(sent)
    }

    /// Sends `len` bytes of `file` from `offset`: with `sendfile(2)` up to
    /// `--sendfile-max`, copied through the thread's buffer beyond it.
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        let copy = len > self.ctx.config.sendfile_max;
        let mut off = offset;
        let end = offset + len;
        self.before_write(Flush::Now);
        while off < end {
            let deadline = Deadline::After(self.ctx.config.write_timeout);
            let chunk = (end - off).min(1 << 20) as usize;
            let chunk = FileChunk {
                file: file.as_fd(),
                offset: &mut off,
                count: chunk,
                copy,
            };
            let n = (self.io.send_file(chunk, deadline)).map_err(timed(TimeoutKind::Write))?;
            if n == 0 {
                return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(())
    }
}
