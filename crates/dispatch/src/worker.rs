//! The worker side: what a runtime's event loop sees of dispatch.
//!
//! A [`WorkerPort`] is one fd to register in the worker's epoll
//! (edge-triggered) and one call, [`WorkerPort::poll_batch`], to run on each
//! edge until it says [`Batch::WouldBlock`]. It hides the mode: in acceptor
//! mode the fd is the read end of the handoff pipe and a batch is one `read`;
//! in reuseport mode the fd is a small epoll of the port's own (listener,
//! doorbell, timer) and a batch is up to 32 `accept4`s. Either way the
//! runtime gets owned, non-blocking, close-on-exec connection fds, and
//! shutdown arrives in-band as [`Batch::Shutdown`].
//!
//! Nothing here knows about futures, wakers or coroutines, so the stackless
//! executor, a stackful runtime and a plain test loop drive it alike.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

use crate::config::Mode;
use crate::handoff::{self, Recv};
use crate::reuseport::ListenerSource;
use crate::shared::Shared;
use crate::shutdown::ShutdownHandle;
use crate::stats::{Stats, WorkerStats};

/// What one [`WorkerPort::poll_batch`] call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// This many connections were appended to `out`. Call again: there may be
    /// more.
    Fds(usize),
    /// Nothing more for now; wait for the next edge on [`WorkerPort::fd`].
    WouldBlock,
    /// Shutdown was requested and every connection handed to this worker
    /// before it has been delivered. Stop taking new requests, let in-flight
    /// ones finish until `deadline`, close the rest, return from the worker
    /// function. Sticky: every later call says the same.
    Shutdown {
        /// When in-flight work should be cut off.
        deadline: Instant,
    },
}

/// The handoff endpoint given to each worker thread (see the module docs).
///
/// `Send` and `Sync`: `poll_batch` needs `&mut`, but the counters and
/// [`connection_closed`](WorkerPort::connection_closed) work through `&self`.
#[derive(Debug)]
pub struct WorkerPort {
    id: usize,
    shared: Arc<Shared>,
    source: Source,
    /// `poll_batch` has been called (the worker is ready).
    polled: bool,
}

#[derive(Debug)]
pub(crate) enum Source {
    Pipe(PipeSource),
    Listener(ListenerSource),
}

impl WorkerPort {
    pub(crate) fn new(id: usize, shared: Arc<Shared>, source: Source) -> WorkerPort {
        WorkerPort {
            id,
            shared,
            source,
            polled: false,
        }
    }

    pub(crate) fn server_shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// This worker's index, `0..workers`.
    pub fn id(&self) -> usize {
        self.id
    }

    /// How many workers the server runs.
    pub fn workers(&self) -> usize {
        self.shared.workers()
    }

    /// The mode the server runs in (for logs; the API is the same).
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// Reports the worker ready: its runtime is set up (whatever fds it
    /// needs exist) and it is about to wait on its port. The server's
    /// [`wait_ready`](crate::Server::wait_ready) waits for every worker's.
    /// A worker that polls its port at once needs not call it (the first
    /// [`poll_batch`](WorkerPort::poll_batch) does); one that first waits
    /// for the port to be readable must.
    pub fn ready(&mut self) {
        if !self.polled {
            self.polled = true;
            self.shared.worker_ready(self.id);
        }
    }

    /// The fd to register, readable-edge-triggered, in the worker's epoll.
    /// It stays valid while the port lives; deregister it before dropping
    /// the port.
    pub fn fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }

    /// Appends newly handed-off connections to `out` (at most 32 per call).
    ///
    /// After every readiness edge on [`fd`](WorkerPort::fd), call it until it
    /// returns [`Batch::WouldBlock`] or [`Batch::Shutdown`]: the fd is
    /// edge-triggered, so stopping early can strand connections until the
    /// next edge. Each connection is counted as open until
    /// [`connection_closed`](WorkerPort::connection_closed) is called for it.
    ///
    /// Errors are unexpected (a broken pipe protocol, a bad fd); the worker
    /// should log them and treat them like shutdown.
    ///
    /// The first call also reports the worker ready, as
    /// [`ready`](WorkerPort::ready) does.
    pub fn poll_batch(&mut self, out: &mut Vec<OwnedFd>) -> io::Result<Batch> {
        self.ready();
        match &mut self.source {
            Source::Pipe(p) => p.poll(out, &self.shared, self.id),
            Source::Listener(l) => l.poll(out, &self.shared, self.id),
        }
    }

    /// Reports that one connection from this port was closed. Feeds the open
    /// count and `max_connections`: when accepting is paused at the limit,
    /// the close that makes room wakes the acceptor.
    pub fn connection_closed(&self) {
        closed(&self.shared, self.id);
    }

    /// A cheap, cloneable, `Send` handle for reporting closes from wherever
    /// connections end (a connection task, another thread).
    pub fn closer(&self) -> Closer {
        Closer {
            shared: self.shared.clone(),
            id: self.id,
        }
    }

    /// This worker's counters.
    pub fn stats(&self) -> &WorkerStats {
        &self.shared.stats.workers()[self.id]
    }

    /// The whole server's counters (for a stats page served by any worker).
    pub fn server_stats(&self) -> &Arc<Stats> {
        &self.shared.stats
    }

    /// A handle to shut the whole server down (an admin endpoint, say).
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
    }
}

impl AsRawFd for WorkerPort {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl AsFd for WorkerPort {
    /// The fd of [`WorkerPort::fd`], borrowed from the port that owns it
    /// (the pipe's read end, or the port's own epoll).
    fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.source {
            Source::Pipe(p) => p.rd.as_fd(),
            Source::Listener(l) => l.fd(),
        }
    }
}

/// Reports connection closes for one worker; see
/// [`WorkerPort::connection_closed`].
#[derive(Debug, Clone)]
pub struct Closer {
    shared: Arc<Shared>,
    id: usize,
}

impl Closer {
    /// Same as [`WorkerPort::connection_closed`].
    pub fn connection_closed(&self) {
        closed(&self.shared, self.id);
    }
}

fn closed(shared: &Shared, id: usize) {
    // SeqCst: this add and the doorbell check are the closer's half of the
    // pause handshake (wake.rs). On x86 any atomic add is a locked
    // instruction anyway, so the stronger order costs nothing there.
    shared.stats.workers()[id].closed.fetch_add(1, SeqCst);
    shared.rooms[id].ring_if_armed();
}

/// The worker side of acceptor mode: the read end of the handoff pipe.
#[derive(Debug)]
pub(crate) struct PipeSource {
    /// Shared with the server, which drains it after the threads joined so
    /// that no fd can be stranded in it.
    rd: Arc<OwnedFd>,
    drained: bool,
    closed: bool,
}

impl PipeSource {
    pub(crate) fn new(rd: Arc<OwnedFd>) -> PipeSource {
        PipeSource {
            rd,
            drained: false,
            closed: false,
        }
    }

    fn poll(&mut self, out: &mut Vec<OwnedFd>, shared: &Shared, id: usize) -> io::Result<Batch> {
        if self.closed {
            return Ok(Batch::Shutdown {
                deadline: shared.shutdown.deadline(),
            });
        }
        // The last read was short, so the pipe was empty then; anything
        // written since raised a new edge. Skip the read that would only say
        // EAGAIN: one read per batch, not two. Not after shutdown began: the
        // acceptor's last write and its close can come before that short
        // read, as one edge, and then only this read finds the end of file.
        if std::mem::take(&mut self.drained) && !shared.shutdown.is_requested() {
            return Ok(Batch::WouldBlock);
        }
        match handoff::recv(self.rd.as_fd(), out)? {
            Recv::Fds { n, drained } => {
                shared.stats.workers()[id].batches.fetch_add(1, Relaxed);
                if reactor::trace::chrome::on() {
                    trace_received(&out[out.len() - n..]);
                } else {
                    reactor::trace!(
                        "handoff",
                        "received fds={:?}",
                        out[out.len() - n..]
                            .iter()
                            .map(|f| f.as_raw_fd())
                            .collect::<Vec<_>>()
                    );
                }
                self.drained = drained;
                Ok(Batch::Fds(n))
            }
            Recv::Empty => Ok(Batch::WouldBlock),
            Recv::Closed => {
                self.closed = true;
                Ok(Batch::Shutdown {
                    deadline: shared.shutdown.deadline(),
                })
            }
        }
    }
}

/// A timeline's `handoff received` instant, each fd's flow arrow passing
/// through the handoff loop's poll on its way to the connection.
#[cold]
fn trace_received(fds: &[OwnedFd]) {
    use reactor::trace::chrome;
    use std::fmt::Write as _;
    let mut list = String::new();
    for (i, f) in fds.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(list, "{sep}{}", f.as_raw_fd());
    }
    chrome::instant("handoff received", format_args!("\"fds\":[{list}]"));
    for f in fds {
        chrome::flow_step(chrome::fd_flow(f.as_raw_fd()));
    }
}
