//! Graceful shutdown: in-flight requests finish, threads join, fds are all
//! released. Alone in its binary so that the process's fd count is ours.

mod common;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Behavior, connect, localhost, read_line, read_reply, serve, wait_until};
use dispatch::{Config, Mode, Server};

const CONNS: usize = 20;
const DELAY: Duration = Duration::from_millis(300);
const GRACE: Duration = Duration::from_secs(5);

fn shutdown_with_requests_in_flight(mode: Mode) {
    let behavior = Behavior::with_delay(2, DELAY);
    let b = behavior.clone();
    let config = Config {
        workers: 2,
        mode,
        ..Config::new(localhost())
    };
    let server = Server::start(config, move |port| serve(port, &b)).unwrap();
    let addr = server.local_addr();
    let stats = server.stats().clone();

    // Every client sends a request the workers will sit on for DELAY.
    let sent_at = Instant::now();
    let mut clients: Vec<TcpStream> = (0..CONNS)
        .map(|i| {
            let mut s = connect(addr);
            s.write_all(format!("req {i}\n").as_bytes()).unwrap();
            s
        })
        .collect();
    assert!(wait_until(Duration::from_secs(5), || {
        stats.total().handed_off == CONNS as u64
    }));
    // The workers have read every request: they are truly in flight.
    assert!(wait_until(Duration::from_secs(5), || {
        behavior.received() == CONNS as u64
    }));

    let started = Instant::now();
    let handle = server.shutdown_handle();
    handle.shutdown(GRACE);
    assert!(handle.is_shutdown_requested());
    let joiner = std::thread::spawn(move || server.join());

    for (i, s) in clients.iter_mut().enumerate() {
        read_reply(s, &format!("req {i}")).expect("in-flight request answered");
        // ... and then the worker closes the connection.
        assert_eq!(read_line(s).unwrap(), None);
    }
    joiner.join().unwrap().unwrap();
    let took = started.elapsed();
    // Measured from before the first write: no reply can be due earlier.
    let since_sent = sent_at.elapsed();
    assert!(
        since_sent >= DELAY,
        "replies were not delayed? {since_sent:?}"
    );
    assert!(took < GRACE, "join took {took:?}");

    let total = stats.total();
    assert_eq!(total.closed, CONNS as u64);
    assert_eq!(total.open, 0);
    let err = TcpStream::connect(addr).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "listener closed");
    drop(handle);
}

#[test]
fn shutdown_finishes_in_flight_requests_and_releases_every_fd() {
    let baseline = dispatch::sys::open_fd_count().unwrap();
    for mode in [Mode::Acceptor, Mode::ReusePort] {
        shutdown_with_requests_in_flight(mode);
        // Client sockets are closed; every server fd must be gone too.
        let now = dispatch::sys::open_fd_count().unwrap();
        assert_eq!(now, baseline, "{mode:?}: fds leaked");
    }
}
