//! Certificate reload on SIGHUP: a thread that waits for the signal with
//! `sigwait(2)` and calls [`Tls::reload`].
//!
//! `sigwait` rather than a handler: the reload reads files and takes a
//! lock, which a signal handler may not, and a thread that only waits
//! costs nothing. For it to be the one that receives SIGHUP, every thread
//! must have the signal blocked, so [`block_sighup`] runs first thing in
//! `main`, before any thread exists (threads inherit the mask).

use std::io;
use std::sync::Arc;

use super::Tls;

/// The signal set holding SIGHUP alone.
fn sighup_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it fully
    // before sigaddset and every later use reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Blocks SIGHUP in the calling thread and so in every thread it starts
/// later. Call before any other thread exists.
pub fn block_sighup() -> io::Result<()> {
    let set = sighup_set();
    // SAFETY: `set` is an initialised signal set; a null old-set pointer is
    // allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Starts the thread that reloads the certificate on each SIGHUP and logs
/// the outcome in one line on stderr. [`block_sighup`] must have run.
pub fn on_sighup(tls: Arc<Tls>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("httplite-sighup".into())
        .spawn(move || {
            let set = sighup_set();
            loop {
                let mut sig = 0;
                // SAFETY: `set` is initialised and `sig` is a valid place
                // for the signal number.
                if unsafe { libc::sigwait(&set, &mut sig) } == 0 && sig == libc::SIGHUP {
                    eprintln!("{}", tls.reload());
                }
            }
        })
        .map(drop)
}
