//! The worker loop both stackless drivers share: take batches of
//! connections from the dispatcher's port and spawn one task per
//! connection, until the port says shutdown; then stop taking requests and
//! wait for the open connections to finish, until the deadline.
//!
//! What differs between the drivers is only how a worker waits for its
//! port to become readable (the reactor's readiness, or an io_uring poll
//! operation), how it sleeps, and how it turns an fd into a connection
//! task: each worker's context implements [`Worker`] for them.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::OwnedFd;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use dispatch::{Batch, WorkerPort};
use site::access_log::AccessLog;

/// What the shared worker loop needs of a stackless worker.
pub(crate) trait Worker: 'static {
    /// What the worker waits on for its port (dropped before the drain).
    type Handoff;
    /// Starts waiting on the port.
    fn handoff(&self, port: &mut WorkerPort) -> io::Result<Self::Handoff>;
    /// The next batch of connections (or shutdown) from the port, waiting
    /// for the port to be readable while it has none.
    fn next_batch(
        &self,
        handoff: &Self::Handoff,
        port: &mut WorkerPort,
        fds: &mut Vec<OwnedFd>,
    ) -> impl Future<Output = io::Result<Batch>>;
    /// Spawns the task that serves `fd` (closes it, and tells the port, if
    /// it cannot).
    fn serve(self: &Rc<Self>, port: &WorkerPort, fd: OwnedFd);
    /// Sleeps `d` on the driver's timers.
    fn sleep(d: Duration) -> impl Future<Output = ()> + 'static;
    /// The access log, if one is written.
    fn access_log(&self) -> Option<&AccessLog>;
    /// Stops taking requests: idle connections close, busy ones finish the
    /// request in hand.
    fn begin_shutdown(&self);
    /// The connections open (see [`Worker::all_closed`]).
    fn open(&self) -> &Cell<usize>;
    /// The waker of the drain, woken when the last connection closes.
    fn all_closed(&self) -> &RefCell<Option<Waker>>;
}

/// Runs a worker from its first batch to the end of its drain: the root
/// future of the worker's executor, polled out of line (see [`OutOfLine`]).
pub(crate) fn accept_loop<W: Worker>(
    port: &mut WorkerPort,
    ctx: Rc<W>,
) -> impl Future<Output = io::Result<()>> {
    OutOfLine(batches(port, ctx))
}

/// A future whose `poll` is never inlined into its caller. The executor's
/// loop (`block_on`) is compiled together with its root future, and with
/// this loop's states inlined into it LLVM kept more values live across
/// the whole run loop, which every request's turn then paid for (a few
/// instructions each, counted by `scripts/instructions-per-request.sh`).
/// The root future is polled only when a batch of connections arrives.
struct OutOfLine<F>(F);

impl<F: Future> Future for OutOfLine<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: a projection to the only field, which is never moved out
        // of the pinned wrapper.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll(cx)
    }
}

/// [`accept_loop`]'s states.
async fn batches<W: Worker>(port: &mut WorkerPort, ctx: Rc<W>) -> io::Result<()> {
    if ctx.access_log().is_some() {
        // Buffered lines reach the file at least once a second.
        let c = ctx.clone();
        executor::spawn(async move {
            loop {
                W::sleep(Duration::from_secs(1)).await;
                if let Some(log) = c.access_log() {
                    log.flush();
                }
            }
        });
    }
    let handoff = ctx.handoff(port)?;
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let deadline = loop {
        let batch = ctx.next_batch(&handoff, port, &mut fds).await?;
        for fd in fds.drain(..) {
            ctx.serve(port, fd);
        }
        if let Batch::Shutdown { deadline } = batch {
            break deadline;
        }
    };
    drop(handoff);
    // Stop taking requests: idle connections close now, busy ones finish the
    // request in hand (answered with `Connection: close`), until the deadline.
    ctx.begin_shutdown();
    let remaining = deadline.saturating_duration_since(Instant::now());
    let mut expired = pin!(W::sleep(remaining));
    std::future::poll_fn(|cx| {
        if ctx.open().get() == 0 || expired.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        *ctx.all_closed().borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    })
    .await;
    Ok(())
}
