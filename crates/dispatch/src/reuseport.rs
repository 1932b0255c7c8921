//! `SO_REUSEPORT` mode: every worker accepts from its own listener.
//!
//! The port a worker registers is a small epoll instance of its own, holding
//! three fds (edge-triggered): the listener, the worker's doorbell (shutdown,
//! or room freed below its connection share) and a timerfd (back-off after
//! `EMFILE` with no reserve left). An epoll fd is itself pollable, readable
//! while any fd inside is ready, so the runtime still registers one fd, and
//! the port can close its listener on shutdown without the runtime ever
//! having seen it (the runtime's rule "deregister before close" holds
//! trivially). Nothing on the accept path reads the inner epoll: `accept4`
//! runs directly, so nesting costs no syscall.
//!
//! The inner epoll is readable while a listener has connections queued,
//! and a runtime may wait on the port level-triggered (io_uring's poll
//! completes at once on a ready fd). So while the port will not accept
//! (backing off after `EMFILE`, or paused at its connection share) its
//! listeners are silenced in the inner epoll (no events), and made to
//! report again when it resumes: otherwise such a runtime would spin on a
//! port that is always ready and never accepts.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use reactor::epoll::Epoll;

use crate::accept::{self, Backoff, Step};
use crate::handoff::BATCH;
use crate::shared::Shared;
use crate::stats::WorkerStats;
use crate::sys;
use crate::wake::Wake;
use crate::worker::Batch;

const IN_EDGE: u32 = (libc::EPOLLIN | libc::EPOLLET) as u32;

/// Batches accepted at shutdown from what is already queued, before the
/// listeners close.
const FINAL_ROUNDS: usize = 8;

/// The worker side of reuseport mode (inside a [`WorkerPort`](crate::WorkerPort)).
#[derive(Debug)]
pub(crate) struct ListenerSource {
    ep: Epoll,
    /// Every socket this worker accepts from (its own reuseport socket of
    /// each address, and any socket it shares with the other workers);
    /// empty once closed at shutdown.
    listeners: Vec<Arc<OwnedFd>>,
    /// Accept rounds taken since shutdown began (see `poll`).
    final_rounds: usize,
    room: Arc<Wake>,
    timer: OwnedFd,
    reserve: Option<OwnedFd>,
    backoff: Backoff,
    backing_off: bool,
    limit: Option<u64>,
    paused: bool,
    /// Whether the listeners report in the inner epoll (see the module
    /// doc): off while backing off or paused.
    listening: bool,
    /// The doorbell may hold an unread ring (we armed it at some point).
    ring_pending: bool,
    /// The last attempt saw `EAGAIN`: the next call may skip straight to
    /// `WouldBlock`, because any new connection will raise a new edge.
    drained: bool,
}

impl ListenerSource {
    pub(crate) fn new(
        listeners: Vec<Arc<OwnedFd>>,
        room: Arc<Wake>,
        limit: Option<u64>,
    ) -> io::Result<ListenerSource> {
        let ep = Epoll::new()?;
        let timer = sys::timerfd()?;
        for l in &listeners {
            ep.add(l.as_fd(), IN_EDGE, 0)?;
        }
        ep.add(room.fd(), IN_EDGE, 1)?;
        ep.add(timer.as_fd(), IN_EDGE, 2)?;
        Ok(ListenerSource {
            ep,
            listeners,
            final_rounds: 0,
            room,
            timer,
            reserve: sys::open_reserve().ok(),
            backoff: Backoff::default(),
            backing_off: false,
            limit,
            paused: false,
            listening: true,
            ring_pending: false,
            drained: false,
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.ep.as_fd()
    }

    pub(crate) fn poll(
        &mut self,
        out: &mut Vec<OwnedFd>,
        shared: &Shared,
        id: usize,
    ) -> io::Result<Batch> {
        if shared.shutdown.is_requested() {
            // What is already in the accept queue has finished its
            // handshake and may have sent a request: take it (a few
            // batches at most) before closing, as the acceptor does.
            // (Not when handing over: the successor accepts it.)
            if !self.listeners.is_empty()
                && self.final_rounds < FINAL_ROUNDS
                && !shared.shutdown.is_handover()
            {
                self.final_rounds += 1;
                self.drained = false;
                self.backing_off = false;
                let n = self.accept_batch(out, shared, id)?;
                if n > 0 {
                    return Ok(Batch::Fds(n));
                }
            }
            self.close_listener();
            return Ok(Batch::Shutdown {
                deadline: shared.shutdown.deadline(),
            });
        }
        if self.listeners.is_empty() {
            return Ok(Batch::Shutdown {
                deadline: shared.shutdown.deadline(),
            });
        }
        if self.drained {
            self.drained = false;
            return Ok(Batch::WouldBlock);
        }
        if self.ring_pending {
            self.ring_pending = false;
            self.room.drain();
        }
        if self.backing_off {
            if self.backoff.remaining().is_some() {
                return Ok(Batch::WouldBlock);
            }
            self.backing_off = false;
            let _ = sys::eventfd_drain(self.timer.as_raw_fd());
        }
        let n = self.accept_batch(out, shared, id)?;
        self.listen(!self.backing_off && !self.paused)?;
        if n == 0 {
            return Ok(Batch::WouldBlock);
        }
        Ok(Batch::Fds(n))
    }

    /// Accepts up to one batch from the listeners in turn; sets `drained`
    /// when every one said `EAGAIN`.
    fn accept_batch(
        &mut self,
        out: &mut Vec<OwnedFd>,
        shared: &Shared,
        id: usize,
    ) -> io::Result<usize> {
        let stats = &shared.stats.workers()[id];
        let start = out.len();
        let mut budget = self.room_left(stats);
        let mut empty = 0;
        let mut next = 0;
        while out.len() - start < BATCH && empty < self.listeners.len() {
            if budget == 0 {
                budget = self.pause(stats);
                if budget == 0 {
                    break;
                }
            }
            let listener = self.listeners[next % self.listeners.len()].as_fd();
            match accept::step(listener, &mut self.reserve) {
                Step::Conn(fd) => {
                    self.backoff.reset();
                    stats.handed_off.fetch_add(1, Relaxed);
                    out.push(fd);
                    budget -= 1;
                }
                Step::Empty => {
                    // This one is empty: the next listener's turn.
                    empty += 1;
                    next += 1;
                    continue;
                }
                Step::Retry => {
                    stats.accept_errors.fetch_add(1, Relaxed);
                }
                Step::Shed => {
                    stats.emfile_events.fetch_add(1, Relaxed);
                    stats.shed.fetch_add(1, Relaxed);
                }
                Step::Exhausted(e) => {
                    stats.emfile_events.fetch_add(1, Relaxed);
                    shared.stats.set_last_accept_error(&e);
                    self.start_backoff()?;
                    break;
                }
                Step::Failed(e) => {
                    stats.accept_errors.fetch_add(1, Relaxed);
                    shared.stats.set_last_accept_error(&e);
                    self.start_backoff()?;
                    break;
                }
            }
        }
        let n = out.len() - start;
        if n > 0 {
            stats.batches.fetch_add(1, Relaxed);
        }
        // Only a batch that is returned may carry "drained" to the next
        // call; an empty one already answers WouldBlock.
        self.drained = n > 0 && empty >= self.listeners.len();
        Ok(n)
    }

    /// Connections this worker may still take before its share is used up.
    fn room_left(&mut self, stats: &WorkerStats) -> u64 {
        let Some(limit) = self.limit else {
            return u64::MAX;
        };
        // SeqCst: the closer's side of the doorbell handshake (wake.rs).
        let closed = stats.closed.load(SeqCst);
        let open = stats.handed_off.load(Relaxed).saturating_sub(closed);
        let left = limit.saturating_sub(open);
        if left > 0 && self.paused {
            self.paused = false;
        }
        left
    }

    /// At the share: arm the doorbell, re-check, and either carry on or
    /// report no room (the doorbell will ring the port when a close frees
    /// some).
    fn pause(&mut self, stats: &WorkerStats) -> u64 {
        self.room.arm();
        self.ring_pending = true;
        let left = self.room_left(stats);
        if left > 0 {
            self.room.disarm();
            return left;
        }
        if !self.paused {
            self.paused = true;
            stats.paused_at_max.fetch_add(1, Relaxed);
        }
        // A failure leaves the listeners reporting: a level-triggered
        // waiter then polls in vain until a close makes room, never worse.
        let _ = self.listen(false);
        0
    }

    /// Lets the listeners report in the inner epoll, or silences them
    /// (see the module doc). Turning them back on re-checks readiness, so
    /// connections queued meanwhile wake the port.
    fn listen(&mut self, on: bool) -> io::Result<()> {
        if on == self.listening {
            return Ok(());
        }
        let flags = if on { IN_EDGE } else { 0 };
        for l in &self.listeners {
            self.ep.modify(l.as_fd(), flags, 0)?;
        }
        self.listening = on;
        Ok(())
    }

    fn start_backoff(&mut self) -> io::Result<()> {
        let wait = self.backoff.start();
        self.backing_off = true;
        sys::timerfd_arm(self.timer.as_raw_fd(), wait)?;
        self.listen(false)
    }

    /// Closes the listener (once): the kernel drops it from the reuseport
    /// group, so new connections go to the workers still listening.
    fn close_listener(&mut self) {
        for l in self.listeners.drain(..) {
            let _ = self.ep.delete(l.as_fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::time::{Duration, Instant};

    /// Level readiness of `fd` now, as io_uring's poll sees it.
    fn readable(fd: BorrowedFd<'_>) -> bool {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n == 1 && pfd.revents & libc::POLLIN != 0
    }

    #[test]
    fn a_port_backing_off_is_not_readable_with_connections_queued() {
        let l = reactor::sys::tcp_listener(
            "127.0.0.1:0".parse().unwrap(),
            reactor::sys::ListenOptions::default(),
        )
        .unwrap();
        let addr = reactor::sys::local_addr(l.as_fd()).unwrap();
        let shared = Shared::new(Mode::ReusePort, 1).unwrap();
        let room = Arc::new(Wake::new().unwrap());
        let mut port = ListenerSource::new(vec![Arc::new(l)], room, None).unwrap();
        let _queued = std::net::TcpStream::connect(addr).unwrap();
        assert!(
            readable(port.fd()),
            "a queued connection makes the port ready"
        );

        // Out of fds with nothing to shed with: the port backs off, and
        // must not stay ready meanwhile (a level-triggered waiter would spin).
        port.start_backoff().unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            port.poll(&mut out, &shared, 0),
            Ok(Batch::WouldBlock)
        ));
        assert!(!readable(port.fd()), "ready while backing off: a spin");

        // The back-off's timer makes it ready; the queued connection is taken.
        let end = Instant::now() + Duration::from_secs(5);
        while !readable(port.fd()) {
            assert!(Instant::now() < end, "the back-off never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            match port.poll(&mut out, &shared, 0).unwrap() {
                Batch::Fds(1) => break,
                Batch::WouldBlock if Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                other => panic!("{other:?} after the back-off"),
            }
        }
        assert_eq!(out.len(), 1);
    }
}
