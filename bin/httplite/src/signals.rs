//! The process's signals, taken by one thread with `sigwait(2)`:
//!
//! | signal | what it does |
//! |---|---|
//! | SIGTERM, SIGINT | drain (see [`Lifecycle::drain`]); once stopping, a further one kills the process the default way |
//! | SIGHUP | reopen the access log file and reload the TLS certificate ([`Reloads`]) |
//! | SIGUSR2 | binary upgrade ([`Upgrader`]) |
//!
//! `sigwait` rather than handlers: what the signals start opens files,
//! takes locks and spawns processes, which a handler may not. For the
//! thread to be the one that receives them, every thread must have them
//! blocked, so [`block`] runs first thing in `main`, before any thread
//! exists (threads inherit the mask; a process we start does not: `std`
//! resets the mask before `exec`).

use std::io;
use std::sync::Arc;

use site::access_log::LogSink;

use crate::lifecycle::Lifecycle;
use crate::upgrade::Upgrader;

const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR2];

fn set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it fully
    // before sigaddset and every later use reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the signals in the calling thread and so in every thread it
/// starts later. Call before any other thread exists.
pub fn block() -> io::Result<()> {
    let set = set();
    // SAFETY: `set` is an initialised signal set; a null old-set pointer is
    // allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// What SIGHUP (and the console's `reload` and `reopen`) act on.
#[derive(Debug, Clone, Default)]
pub struct Reloads {
    /// The access log, if it goes to a file.
    pub log: Option<LogSink>,
    /// TLS, if served (`--tls-cert`, `--admin-tls-cert`).
    pub tls: crate::tls::TlsByListener,
}

impl Reloads {
    /// Reopens the access log file; one line saying how it went.
    pub fn reopen_log(&self) -> String {
        match &self.log {
            None => "access log: none to reopen (no --access-log)".to_string(),
            Some(log) => match log.reopen() {
                Ok(line) => line,
                Err(e) => format!("access log: reopen failed ({e}); still writing to the old file"),
            },
        }
    }

    /// Reloads the certificate; one line saying how it went.
    pub fn reload_tls(&self) -> String {
        self.tls.reload()
    }
}

/// Starts the thread that waits for the signals. [`block`] must have run.
pub fn start(
    lifecycle: Arc<Lifecycle>,
    reloads: Reloads,
    upgrader: Arc<Upgrader>,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("httplite-signals".into())
        .spawn(move || {
            let set = set();
            loop {
                let mut sig = 0;
                // SAFETY: `set` is initialised and `sig` is a valid place
                // for the signal number.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                match sig {
                    libc::SIGHUP => {
                        if reloads.log.is_some() {
                            eprintln!("httplite: {}", reloads.reopen_log());
                        }
                        if reloads.tls.any() {
                            eprintln!("{}", reloads.reload_tls());
                        }
                    }
                    libc::SIGUSR2 => upgrader.start(&lifecycle),
                    _ if lifecycle.is_stopping() => die_by(sig),
                    _ => lifecycle.drain(),
                }
            }
        })
        .map(drop)
}

/// A signal while a shutdown hangs: the default action, as if we had never
/// caught it (the exit status says which signal).
fn die_by(sig: libc::c_int) -> ! {
    // SAFETY: restoring the default disposition and unblocking the signal
    // in this thread involve no handler code; `raise` then delivers it to
    // this thread, whose default action ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
