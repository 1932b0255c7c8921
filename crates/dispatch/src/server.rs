//! Starting the threads, and joining them.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::acceptor::{Acceptor, Parts};
use crate::config::{Config, Mode};
use crate::handoff;
use crate::listen::{Endpoint, ListenAddr, Listener};
use crate::reuseport::ListenerSource;
use crate::shared::Shared;
use crate::shutdown::ShutdownHandle;
use crate::signals;
use crate::stats::Stats;
use crate::sys;
use crate::worker::{PipeSource, Source, WorkerPort};

/// A running server: the acceptor (or control) thread and the workers.
///
/// Dropping it without [`join`](Server::join) shuts it down with no grace
/// and joins the threads, so that a forgotten server cannot leak threads or
/// fds.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    listen_addrs: Vec<ListenAddr>,
    control: Option<JoinHandle<io::Result<()>>>,
    workers: Vec<JoinHandle<()>>,
    /// Every handoff pipe's read end, drained after the threads joined.
    readers: Vec<Arc<OwnedFd>>,
}

impl Server {
    /// Binds, starts `config.workers` threads running `worker_main` with their
    /// [`WorkerPort`], and the acceptor thread. Binding and pinning errors are
    /// reported here, before anything is served.
    ///
    /// `worker_main` is the runtime's event loop: register
    /// [`WorkerPort::fd`], call [`WorkerPort::poll_batch`] on its edges, serve
    /// the connections, and return after [`Batch::Shutdown`](crate::Batch).
    pub fn start<F>(config: Config, worker_main: F) -> io::Result<Server>
    where
        F: Fn(WorkerPort) + Send + Sync + 'static,
    {
        config.validate()?;
        let copies = match config.mode {
            Mode::Acceptor => 1,
            Mode::ReusePort => config.worker_count(),
        };
        let listener = Listener::bind(&Endpoint::Tcp(config.addr), copies, config.backlog)?;
        Server::start_with(config, vec![listener], worker_main)
    }

    /// Like [`start`](Server::start), on listeners made beforehand (any
    /// number, TCP or Unix, bound by [`Listener::bind`] or inherited through
    /// [`Listener::from_fds`]); `config.addr` is not used. In acceptor mode
    /// the acceptor watches every socket of every listener. In reuseport
    /// mode a listener with one socket per worker gives each worker its
    /// own; one with a single socket (a Unix socket, an inherited one) is
    /// watched by every worker; any other count is spread so that every
    /// socket has a worker.
    pub fn start_with<F>(
        config: Config,
        listeners: Vec<Listener>,
        worker_main: F,
    ) -> io::Result<Server>
    where
        F: Fn(WorkerPort) + Send + Sync + 'static,
    {
        config.validate()?;
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no address to listen on",
            ));
        }
        let n = config.worker_count();
        let listen_addrs: Vec<ListenAddr> = listeners.iter().map(|l| l.addr().clone()).collect();
        let local_addr = listen_addrs
            .iter()
            .find_map(|a| match a {
                ListenAddr::Tcp(a) => Some(*a),
                ListenAddr::Unix(_) => None,
            })
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let guard = match config.handle_signals {
            true => Some(signals::install()?),
            false => None,
        };
        let shared = Arc::new(Shared::new(config.mode, n)?);
        let limit = config.limit_per_acceptor();

        let mut sources = Vec::with_capacity(n);
        let mut readers = Vec::new();
        let mut parts = Parts {
            listeners: Vec::new(),
            pipes: Vec::new(),
            readers: Vec::new(),
            limit,
            signals: guard,
            signal_grace: config.signal_grace,
        };
        match config.mode {
            Mode::Acceptor => {
                parts.listeners = listeners.into_iter().flat_map(Listener::into_fds).collect();
                for _ in 0..n {
                    let (tx, rx) = handoff::channel(config.pipe_size)?;
                    let rx = Arc::new(rx);
                    parts.pipes.push(tx);
                    readers.push(rx.clone());
                    sources.push(Source::Pipe(PipeSource::new(rx)));
                }
                parts.readers = readers.clone();
            }
            Mode::ReusePort => {
                for (i, fds) in spread(listeners, n).into_iter().enumerate() {
                    let room = shared.rooms[i].clone();
                    sources.push(Source::Listener(ListenerSource::new(fds, room, limit)?));
                }
            }
        }
        let acceptor = match config.mode {
            Mode::Acceptor => Some(Acceptor::new(shared.clone(), parts)?),
            Mode::ReusePort if parts.signals.is_some() => {
                Some(Acceptor::new(shared.clone(), parts)?)
            }
            Mode::ReusePort => None,
        };

        let mut server = Server {
            shared: shared.clone(),
            local_addr,
            listen_addrs,
            control: None,
            workers: Vec::with_capacity(n),
            readers,
        };
        let cpus = match config.pin_workers {
            true => Some(sys::allowed_cpus()?),
            false => None,
        };
        let worker_main = Arc::new(worker_main);
        // On any error below, `server` drops: shutdown, join what started.
        for (id, source) in sources.into_iter().enumerate() {
            let port = WorkerPort::new(id, shared.clone(), source);
            let cpu = cpus.as_ref().map(|c| c[id % c.len()]);
            match spawn_worker(port, cpu, worker_main.clone()) {
                Ok(handle) => server.workers.push(handle),
                Err(e) => {
                    // Close the pipes first, or the workers (waiting for
                    // end-of-file) would never let `server`'s drop join them.
                    drop(acceptor);
                    return Err(e);
                }
            }
        }
        if let Some(acceptor) = acceptor {
            let name = match config.mode {
                Mode::Acceptor => "dispatch-acceptor",
                Mode::ReusePort => "dispatch-signals",
            };
            let handle = thread::Builder::new().name(name.into()).spawn(move || {
                if reactor::trace::COMPILED {
                    reactor::trace::set_thread_label(name.trim_start_matches("dispatch-"));
                }
                acceptor.run()
            })?;
            server.control = Some(handle);
        }
        Ok(server)
    }

    /// The bound address (with the real port when the config said 0): the
    /// first TCP listener's, or `0.0.0.0:0` if all are Unix sockets.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every listener's address, in the order given.
    pub fn listen_addrs(&self) -> &[ListenAddr] {
        &self.listen_addrs
    }

    /// Waits until every worker is ready, that is, has set up its runtime
    /// and polled its port once; an error if a worker ended first (its
    /// set-up failed) or after `limit`. A server that announces itself
    /// before this may have a worker that never serves, whose reuseport
    /// listener still takes its share of the connections, or that fails
    /// its set-up later, when the process is out of fds.
    pub fn wait_ready(&self, limit: Duration) -> io::Result<()> {
        self.shared.wait_ready(limit)
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.workers()
    }

    /// The mode the server runs in.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// A handle that starts a graceful shutdown from any thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
    }

    /// Shorthand for `self.shutdown_handle().shutdown(grace)`.
    pub fn shutdown(&self, grace: Duration) {
        self.shared.request_shutdown(grace);
    }

    /// All counters; the `Arc` can outlive the server.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.shared.stats
    }

    /// Waits until every thread has finished (which needs a shutdown request
    /// from a handle, a signal, or a worker), then closes any connection still
    /// stranded in a pipe. Errors: the acceptor's, or a worker that panicked.
    pub fn join(mut self) -> io::Result<()> {
        self.join_threads()
    }

    fn join_threads(&mut self) -> io::Result<()> {
        let mut first_error = None;
        if let Some(control) = self.control.take() {
            match control.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_error = Some(e),
                Err(_) => first_error = Some(io::Error::other("acceptor thread panicked")),
            }
        }
        for (id, worker) in self.workers.drain(..).enumerate() {
            if worker.join().is_err() && first_error.is_none() {
                first_error = Some(io::Error::other(format!("worker {id} panicked")));
            }
        }
        // Nobody writes or reads the pipes any more: whatever is left in them
        // is owned by nobody else.
        for rd in self.readers.drain(..) {
            handoff::drain_and_close(rd.as_fd());
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.control.is_some() || !self.workers.is_empty() || !self.readers.is_empty() {
            self.shared.request_shutdown(Duration::ZERO);
            let _ = self.join_threads();
        }
    }
}

/// Which sockets each of `n` workers watches in reuseport mode: worker `i`
/// takes socket `j` of a listener when `j % n == i`, and when a listener
/// has fewer sockets than workers, worker `i` also watches socket
/// `i % len`, so every socket has a worker and every worker has each
/// listener.
fn spread(listeners: Vec<Listener>, n: usize) -> Vec<Vec<Arc<OwnedFd>>> {
    let mut per_worker: Vec<Vec<Arc<OwnedFd>>> = (0..n).map(|_| Vec::new()).collect();
    for l in listeners {
        let fds: Vec<Arc<OwnedFd>> = l.into_fds().into_iter().map(Arc::new).collect();
        let len = fds.len();
        for (j, fd) in fds.iter().enumerate() {
            per_worker[j % n].push(fd.clone());
        }
        if len < n {
            for (i, mine) in per_worker.iter_mut().enumerate().skip(len) {
                mine.push(fds[i % len].clone());
            }
        }
    }
    per_worker
}

/// Marks the worker gone however `worker_main` ends, panics included.
struct ExitGuard {
    shared: Arc<Shared>,
    id: usize,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.shared.worker_exited(self.id);
    }
}

/// Spawns one worker thread; with `cpu`, pins it first and reports the
/// outcome before `worker_main` runs, so that a bad pin fails `start`.
fn spawn_worker<F>(
    port: WorkerPort,
    cpu: Option<usize>,
    worker_main: Arc<F>,
) -> io::Result<JoinHandle<()>>
where
    F: Fn(WorkerPort) + Send + Sync + 'static,
{
    let id = port.id();
    let shared = port.server_shared();
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .name(format!("dispatch-w{id}"))
        .spawn(move || {
            let _exit = ExitGuard { shared, id };
            if reactor::trace::COMPILED {
                reactor::trace::set_thread_label(&format!("w{id}"));
            }
            let pinned = cpu.map_or(Ok(()), sys::pin_current_thread);
            let ok = pinned.is_ok();
            let _ = tx.send(pinned);
            if ok {
                worker_main(port);
            }
        })?;
    match rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(io::Error::other(format!("worker {id} died while starting")))
        }
    }
}
