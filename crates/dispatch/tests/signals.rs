//! Opt-in signal handling: SIGTERM starts a graceful shutdown. Alone in its
//! binary, since it installs process-wide handlers and raises a signal.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Behavior, connect, localhost, read_line, read_reply, serve, wait_until};
use dispatch::{Config, Mode, Server};

fn disposition(signal: libc::c_int) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is a valid buffer for the kernel to fill.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only queries the current one into `old`.
    let rc = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    assert_eq!(rc, 0);
    old
}

fn sigterm_disposition() -> libc::sighandler_t {
    disposition(libc::SIGTERM).sa_sigaction
}

fn sigterm_shuts_down(mode: Mode) {
    let behavior = Behavior::with_delay(1, Duration::from_millis(200));
    let b = behavior.clone();
    let config = Config {
        workers: 1,
        mode,
        handle_signals: true,
        signal_grace: Duration::from_secs(3),
        ..Config::new(localhost())
    };
    let server = Server::start(config.clone(), move |port| serve(port, &b)).unwrap();
    assert_ne!(sigterm_disposition(), libc::SIG_DFL, "handler installed");
    // On the alternate signal stack: a signal arriving while a coroutine is
    // deep in its stack must not need room there.
    for signal in [libc::SIGINT, libc::SIGTERM] {
        assert_ne!(
            disposition(signal).sa_flags & libc::SA_ONSTACK,
            0,
            "signal {signal} handled without SA_ONSTACK"
        );
    }

    // Only one server may own the signals.
    let second = Server::start(config, |_| {}).unwrap_err();
    assert_eq!(second.kind(), std::io::ErrorKind::AddrInUse);

    let mut client = connect(server.local_addr());
    client.write_all(b"in flight\n").unwrap();
    // The worker has read it: the request is in flight when the signal comes.
    assert!(wait_until(Duration::from_secs(5), || behavior.received() == 1));

    let started = Instant::now();
    // SAFETY: raising a signal we installed a handler for.
    assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
    read_reply(&mut client, "in flight").unwrap();
    assert_eq!(read_line(&mut client).unwrap(), None);
    server.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    // The previous (default) disposition is back: a second SIGTERM would
    // now end the process, and the next server may take the signals.
    assert_eq!(sigterm_disposition(), libc::SIG_DFL);
}

#[test]
fn sigterm_starts_a_graceful_shutdown_in_both_modes() {
    sigterm_shuts_down(Mode::Acceptor);
    sigterm_shuts_down(Mode::ReusePort);
}
