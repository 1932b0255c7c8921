//! The jobs process of `--runtime fork`: where the blocking pool runs and
//! the one job registry lives.
//!
//! A job outlives the request that submits it, and a child lives as long
//! as its connection, so a job's record cannot be in a child; the parent
//! must stay one thread (it forks), so the pool cannot run there. So the
//! parent forks one more process at start, before any connection's child,
//! while it is still one thread: the jobs process. It never forks, so it
//! may run threads: the pool's (built after its fork, with `--pool-*`'s
//! settings), and one per channel below. Every other process holds a
//! [`site::jobs::Jobs::remote`] whose transport is a [`Door`]:
//!
//! ```text
//!   parent ──socketpair(SEQPACKET)──▶ the door: jobs process's end ◀─┐ children inherit
//!   child (first jobs call): socketpair(STREAM) = (mine, theirs)      │ the other end
//!     sendmsg(door, SCM_RIGHTS theirs) ───────────────────────────────┘
//!     mine: [len:u32 LE][request] ──▶ jobs process thread: Jobs::answer ──▶ [len][reply]
//! ```
//!
//! - **Private**: the door is an unnamed socketpair, reachable only through
//!   the fd the parent's processes inherit (no path, no abstract name);
//!   each channel is another unnamed pair, one end of which crossed the
//!   door with `SCM_RIGHTS`. A process uses its own channel only: one made
//!   by another process (the parent's, copied by a fork) is dropped.
//! - **Framed**: the door carries one message per fd (a `SEQPACKET`
//!   message is never split or merged); a channel carries a length and
//!   that many bytes each way, what they mean being the site's
//!   (`site::jobs`'s wire format). A channel's reads and writes are
//!   bounded ([`CALL_TIMEOUT`]), so a child never hangs on it.
//! - **A child that ends mid-request** (exit, crash, kill) closes its
//!   channel: the thread serving it reads the end, or fails its reply's
//!   write (`EPIPE`, no signal), and ends; a job already submitted runs
//!   on. Nothing a child does reaches the registry but whole requests.
//! - **Its name** is `httplite-jobs` (`ps`, `/proc/PID/comm`). Once named
//!   and set up it sends one message on the door, which the parent waits
//!   for before it serves (or reports a restart).
//! - **Its life**: `PR_SET_PDEATHSIG` (`SIGKILL`) ends it with the parent;
//!   the end of the door (every process that could reach it gone) too.
//!   The parent sends it `SIGTERM` once its children have ended, and
//!   reaps it ([`JobsProcess::stop`]). It ignores `SIGINT` and `SIGHUP`
//!   (a terminal's Ctrl-C reaches the whole process group: the children
//!   still draining may need it).
//! - **A crash**: the parent reaps it (`SIGCHLD`) and starts another
//!   ([`JobsProcess::ended`]), whose ids follow the last one given out
//!   (kept in the shared page), so that no id names two jobs. The jobs of
//!   the one that crashed are lost; children forked before the restart
//!   hold the old door and answer jobs with 503 until their connection
//!   ends. One that dies within [`MIN_LIFE`] of its start is not started
//!   again (it would only crash again): jobs are answered 503 from then on.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use site::jobs::{Jobs, Retention, Transport};

use super::shared::Page;

/// How long a process waits for the jobs process to take or answer one
/// request before it gives up (the client gets a 503). Registry calls take
/// microseconds; this bounds a stuck or overloaded jobs process.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A jobs process that ends sooner than this after its start is not
/// started again.
pub const MIN_LIFE: Duration = Duration::from_secs(1);

/// The largest message a channel carries: beyond any job input the body
/// limit lets through, and a bound on what a reader allocates.
const MAX_FRAME: usize = 1 << 30;

/// A channel thread's stack: it only decodes, locks and encodes.
const CHANNEL_STACK: usize = 256 * 1024;

/// How long [`JobsProcess::stop`] waits after `SIGTERM` before `SIGKILL`.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// What the jobs process builds once forked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The blocking pool (`--pool-threads`, `--pool-queue`,
    /// `--pool-priority`, `--pool-idle-timeout`), built in the jobs
    /// process (its threads take that process's CPU affinity).
    pub pool: pool::Builder,
    /// `--jobs-retain`, `--jobs-ttl`.
    pub retention: Retention,
    /// The test-only job types.
    pub test_kinds: bool,
}

/// The parent's handle on its jobs process.
#[derive(Debug)]
pub struct JobsProcess {
    settings: Settings,
    page: &'static Page,
    /// The door's end the parent and its children hold, always at this fd
    /// number ([`Door`] names it): a restart moves the new door there.
    door: OwnedFd,
    /// The jobs process's end, until [`JobsProcess::start`] hands it over.
    their_end: Option<OwnedFd>,
    /// The running process, if any.
    pid: Option<libc::pid_t>,
    started: Instant,
}

/// The transport every process's [`Jobs::remote`] uses: the door, and
/// this process's own channel once it made one.
#[derive(Debug)]
pub struct Door {
    door: RawFd,
    channel: Mutex<Option<(libc::pid_t, UnixStream)>>,
}

/// A door: (the end every process but the jobs process holds, the jobs
/// process's end). A send on the first waits at most [`CALL_TIMEOUT`] for
/// room (a jobs process that stopped reading the door fills it).
fn door_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    // SAFETY: `fds` has room for the two fds socketpair writes.
    reactor::syscall!(unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) })?;
    // SAFETY: socketpair succeeded: both fds are new and ours alone.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let timeout = libc::timeval {
        tv_sec: CALL_TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: `timeout` is a valid timeval of the size given, alive for
    // the call; the option is the socket's, shared by every copy of `ours`.
    reactor::syscall!(unsafe {
        libc::setsockopt(
            ours.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&timeout as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok((ours, theirs))
}

impl JobsProcess {
    /// The door, made now so that the [`Door`] transport can name it before
    /// the process exists ([`JobsProcess::start`] forks it).
    pub fn new(settings: Settings, page: &'static Page) -> io::Result<(JobsProcess, Arc<Door>)> {
        let (door, theirs) = door_pair()?;
        let transport = Arc::new(Door {
            door: door.as_raw_fd(),
            channel: Mutex::new(None),
        });
        let process = JobsProcess {
            settings,
            page,
            door,
            their_end: Some(theirs),
            pid: None,
            started: Instant::now(),
        };
        Ok((process, transport))
    }

    /// Forks the jobs process; `close` are the parent's fds it must not
    /// keep (the listeners, the signalfd). Call on the parent's only
    /// thread, before any connection's child.
    pub fn start(&mut self, close: &[RawFd]) -> io::Result<()> {
        let theirs = match self.their_end.take() {
            Some(end) => end,
            None => {
                // A restart: a new door, moved to the old one's number so
                // that the transport (and children forked from now on)
                // reach the new process.
                let (ours, theirs) = door_pair()?;
                // SAFETY: both fds are open; dup3 closes the old door's
                // fd number and makes it the new one's, keeping CLOEXEC.
                reactor::syscall!(unsafe {
                    libc::dup3(ours.as_raw_fd(), self.door.as_raw_fd(), libc::O_CLOEXEC)
                })?;
                theirs
            }
        };
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the parent has one thread (see the module doc of
        // `fork`), so the child is a complete copy with no lock held by a
        // vanished thread.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                let door = self.door.as_raw_fd();
                run(theirs, door, close, parent, &self.settings, self.page)
            }
            pid => {
                reactor::trace!("jobs", "pid={pid}");
                self.pid = Some(pid);
                self.started = Instant::now();
                self.wait_ready();
                Ok(())
            }
        }
    }

    /// Waits (at most [`CALL_TIMEOUT`]) for the new process's one message
    /// on the door, sent once it has named itself and set its signals up,
    /// so that the server says it listens only with its jobs process
    /// ready. One that never says so is reaped and replaced like one that
    /// died, and meanwhile the calls to it wait or fail as they would.
    fn wait_ready(&self) {
        let mut pfd = libc::pollfd {
            fd: self.door.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = CALL_TIMEOUT.as_millis() as libc::c_int;
        // SAFETY: one valid pollfd, alive for the call.
        if unsafe { libc::poll(&mut pfd, 1, ms) } == 1 {
            let mut byte = 0u8;
            // SAFETY: `byte` is writable for the one byte asked for.
            unsafe {
                libc::recv(
                    self.door.as_raw_fd(),
                    (&mut byte as *mut u8).cast(),
                    1,
                    libc::MSG_DONTWAIT,
                )
            };
        }
    }

    /// Whether `pid` is the jobs process.
    pub fn is(&self, pid: libc::pid_t) -> bool {
        self.pid == Some(pid)
    }

    /// The parent reaped the jobs process (`status` from `waitpid`): it
    /// starts another unless `stopping` or it died young (see the module
    /// doc), saying so on stderr.
    pub fn ended(&mut self, status: libc::c_int, stopping: bool, close: &[RawFd]) {
        self.pid = None;
        if stopping {
            return;
        }
        self.page.jobs_restarts.fetch_add(1, Ordering::Relaxed);
        let how = super::ExitStatus(status);
        if self.started.elapsed() < MIN_LIFE {
            eprintln!(
                "httplite: the jobs process ended ({how}) within {MIN_LIFE:?} of its start; \
                 not starting another: jobs are answered 503"
            );
            return;
        }
        match self.start(close) {
            Ok(()) => eprintln!("httplite: the jobs process ended ({how}); started another"),
            Err(e) => eprintln!(
                "httplite: the jobs process ended ({how}); cannot start another ({e}): \
                 jobs are answered 503"
            ),
        }
    }

    /// Ends the jobs process (the parent is stopping and its children have
    /// ended): `SIGTERM`, then `SIGKILL` after 2 s, and reaps it.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        // SAFETY: `pid` is our child, not yet reaped (so not recycled).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let end = Instant::now() + STOP_WAIT;
        let mut status = 0;
        loop {
            // SAFETY: `status` is a valid int for waitpid to fill.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r != 0 {
                return; // reaped (or gone: ECHILD)
            }
            if Instant::now() >= end {
                // SAFETY: as above; still not reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                // SAFETY: as above.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The jobs process: signals, then the door's loop. Never returns.
fn run(
    door: OwnedFd,
    parents_end: RawFd,
    close: &[RawFd],
    parent: libc::pid_t,
    settings: &Settings,
    page: &'static Page,
) -> ! {
    if reactor::trace::active() {
        let pid = std::process::id();
        reactor::trace::after_fork("jobs", &format!("fork jobs process {pid}"));
    }
    // Its name in `ps` and /proc/PID/comm, told apart from the children.
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
    // bytes, which this literal is.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"httplite-jobs".as_ptr()) };
    for &fd in close.iter().chain([&parents_end]) {
        // SAFETY: these are this process's copies of the parent's fds; the
        // parent's owners of them are never dropped here (this process
        // leaves through `_exit` or a signal), so none is closed twice.
        unsafe { libc::close(fd) };
    }
    if let Err(e) = setup_signals(parent) {
        eprintln!("httplite: jobs process: {e}");
        // SAFETY: `_exit` skips the parent's exit handlers and its copies
        // of stdio buffers, as a fork child must.
        unsafe { libc::_exit(1) };
    }
    let jobs = Jobs::new(
        settings.pool.clone().build(),
        settings.retention,
        settings.test_kinds,
    );
    jobs.continue_after(page.jobs_last_id.load(Ordering::Relaxed));
    // Ready: the parent waits for this before it serves (`wait_ready`).
    // SAFETY: one readable byte, alive for the call.
    unsafe {
        libc::send(
            door.as_raw_fd(),
            b"r".as_ptr().cast(),
            1,
            libc::MSG_NOSIGNAL,
        )
    };
    loop {
        match recv_fd(door.as_raw_fd()) {
            Ok(Some(channel)) => {
                let jobs = jobs.clone();
                let spawned = std::thread::Builder::new()
                    .name("httplite-jobs".into())
                    .stack_size(CHANNEL_STACK)
                    .spawn(move || serve(UnixStream::from(channel), &jobs, page));
                // Without a thread the channel is dropped: its process
                // reads the end and answers 503.
                drop(spawned);
            }
            Ok(None) => break, // nobody can reach the door any more
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("httplite: jobs process: the door failed: {e}");
                break;
            }
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}

/// SIGTERM ends the process (its default action, unblocked); SIGINT and
/// SIGHUP are ignored; the parent's death sends SIGKILL.
fn setup_signals(parent: libc::pid_t) -> io::Result<()> {
    for (signal, action) in [
        (libc::SIGINT, libc::SIG_IGN),
        (libc::SIGHUP, libc::SIG_IGN),
        (libc::SIGTERM, libc::SIG_DFL),
    ] {
        // SAFETY: SIG_IGN and SIG_DFL install no handler code.
        if unsafe { libc::signal(signal, action) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    let set = super::child::sigset(&[libc::SIGTERM]);
    // SAFETY: `set` is an initialised sigset_t; the old mask is not asked
    // for. No thread runs yet: the ones started later inherit this mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; no memory is passed.
    reactor::syscall!(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) })?;
    // The parent may have died before the call above.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // SAFETY: as in `run`.
        unsafe { libc::_exit(0) };
    }
    Ok(())
}

/// One channel: a request, its answer, until the other end leaves.
fn serve(mut channel: UnixStream, jobs: &Jobs, page: &Page) {
    while let Ok(request) = read_frame(&mut channel) {
        let reply = jobs.answer(&request);
        // Kept where a restarted jobs process reads it (see the module doc).
        page.jobs_last_id
            .fetch_max(jobs.last_id(), Ordering::Relaxed);
        if write_frame(&mut channel, &reply).is_err() {
            break;
        }
    }
}

fn write_frame(s: &mut UnixStream, msg: &[u8]) -> io::Result<()> {
    let len = u32::try_from(msg.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut frame = Vec::with_capacity(4 + msg.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(msg);
    s.write_all(&frame)
}

fn read_frame(s: &mut UnixStream) -> io::Result<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut msg = vec![0; len];
    s.read_exact(&mut msg)?;
    Ok(msg)
}

impl Door {
    /// This process's channel: a new pair, one end of which is sent
    /// through the door.
    fn open(&self) -> io::Result<UnixStream> {
        let (mine, theirs) = UnixStream::pair()?;
        mine.set_read_timeout(Some(CALL_TIMEOUT))?;
        mine.set_write_timeout(Some(CALL_TIMEOUT))?;
        send_fd(self.door, theirs.as_raw_fd())?;
        Ok(mine)
    }

    fn call(channel: &mut UnixStream, request: &[u8]) -> io::Result<Vec<u8>> {
        write_frame(channel, request)?;
        read_frame(channel)
    }
}

impl Transport for Door {
    fn round_trip(&self, request: &[u8]) -> io::Result<Vec<u8>> {
        let mut slot = self.channel.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        // A channel made by another process (the parent's, copied into a
        // child by its fork) is that process's: dropping it closes only
        // this process's copy of the fd.
        if slot.as_ref().is_some_and(|(owner, _)| *owner != me) {
            *slot = None;
        }
        if let Some((_, channel)) = slot.as_mut() {
            match Door::call(channel, request) {
                Ok(reply) => return Ok(reply),
                // The jobs process that served it may have been replaced:
                // once more on a new channel. (If it had taken the request
                // before it died, its registry died with it.)
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => *slot = None,
                Err(e) => {
                    *slot = None;
                    return Err(e); // timed out: it is alive, but stuck
                }
            }
        }
        let mut channel = self.open()?;
        let reply = Door::call(&mut channel, request)?;
        *slot = Some((me, channel));
        Ok(reply)
    }
}

/// Sends `fd` through the door (one message, one byte, the fd beside it).
fn send_fd(door: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // CMSG_SPACE(sizeof(int)) is 24 bytes on Linux; u64s align it for
    // cmsghdr.
    let mut space = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid (no name, no buffers yet).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    // SAFETY: `msg` points at `space`, large enough for one header and an
    // int, so CMSG_FIRSTHDR is non-null and its data in bounds.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: `msg` and everything it points at live across the call.
    reactor::syscall!(unsafe { libc::sendmsg(door, &msg, libc::MSG_NOSIGNAL) })?;
    Ok(())
}

/// The next fd sent through the door; `None` at its end (every other end
/// closed).
fn recv_fd(door: RawFd) -> io::Result<Option<OwnedFd>> {
    loop {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 4];
        // SAFETY: an all-zero msghdr is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&space);
        // SAFETY: `msg` points at live buffers of the sizes it says.
        let n =
            reactor::syscall!(unsafe { libc::recvmsg(door, &mut msg, libc::MSG_CMSG_CLOEXEC) })?;
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: recvmsg filled `msg`'s control buffer (within `space`);
        // CMSG_FIRSTHDR returns null if it holds no header.
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        // SAFETY: non-null, it points at a whole header inside `space`.
        if !cmsg.is_null() && unsafe { (*cmsg).cmsg_type } == libc::SCM_RIGHTS {
            // SAFETY: an SCM_RIGHTS header's data holds the fd the kernel
            // installed in this process for us, ours alone from now on.
            let fd = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>()) };
            // SAFETY: as above: a new fd nobody else owns.
            return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        // A message without an fd: nothing to serve; wait for the next.
    }
}
