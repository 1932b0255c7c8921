//! A stalled worker fills its handoff pipe: the acceptor must neither block
//! nor lose a connection.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::{Behavior, connect, localhost, read_reply, serve, wait_until};
use dispatch::{Config, Server};

/// One page: 1,024 fds fill it.
const PIPE: usize = 4096;
const PIPE_FDS: u64 = (PIPE / 4) as u64;

fn start(workers: usize, behavior: &Arc<Behavior>) -> Server {
    let b = behavior.clone();
    let config = Config {
        workers,
        backlog: 4096,
        pipe_size: Some(PIPE),
        ..Config::new(localhost())
    };
    Server::start(config, move |port| serve(port, &b)).unwrap()
}

/// Writes are batches of up to 32 records and a batch that does not fit
/// waits whole, so a full page holds a little less than 1,024 fds.
fn assert_pipe_filled(handed_off: u64) {
    assert!(
        handed_off > PIPE_FDS - 32 && handed_off <= PIPE_FDS,
        "{handed_off} fds in a one-page pipe"
    );
}

fn open_and_send(server: &Server, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = connect(server.local_addr());
            s.write_all(format!("{i}\n").as_bytes()).unwrap();
            s
        })
        .collect()
}

fn expect_all_replies(streams: &mut [TcpStream]) -> Vec<usize> {
    streams
        .iter_mut()
        .enumerate()
        .map(|(i, s)| read_reply(s, &i.to_string()).expect("served"))
        .collect()
}

#[test]
fn stalled_worker_does_not_block_the_acceptor() {
    const CONNS: usize = 2400;
    dispatch::sys::raise_nofile_limit().unwrap();
    let behavior = Behavior::new(2);
    behavior.stall(0, true);
    let server = start(2, &behavior);
    let stats = server.stats().clone();
    let mut streams = open_and_send(&server, CONNS);

    // Worker 0 reads nothing; still every connection is handed off: its pipe
    // fills, and the rest goes to worker 1.
    assert!(
        wait_until(Duration::from_secs(10), || {
            stats.total().handed_off == CONNS as u64
        }),
        "{:?}",
        stats.total()
    );
    let w0 = stats.workers()[0].snapshot();
    assert_pipe_filled(w0.handed_off);
    assert!(w0.pipe_full >= 1);
    assert_eq!(w0.batches, 0, "worker 0 really is stalled");
    // Worker 1 serves all of its connections while worker 0 stalls.
    let w1 = stats.workers()[1].handed_off();
    assert_eq!(w1, CONNS as u64 - w0.handed_off);
    assert!(
        wait_until(Duration::from_secs(10), || behavior.served(1) == w1),
        "worker 1 served {} of {w1}: {:?}",
        behavior.served(1),
        stats.workers()[1].snapshot()
    );
    assert_eq!(behavior.served(0), 0);

    behavior.stall(0, false);
    let ids = expect_all_replies(&mut streams);
    let on_0 = ids.iter().filter(|&&w| w == 0).count() as u64;
    assert_eq!(on_0, w0.handed_off);
    assert_eq!(stats.acceptor().snapshot().rejected, 0);
    drop(streams);
    server.shutdown(Duration::from_secs(2));
    server.join().unwrap();
}

/// One stalled worker and `conns` clients that each sent a line: the only
/// pipe is full, the acceptor holds what it accepted beyond it and leaves
/// the rest in the kernel backlog, without blocking.
fn fill_the_only_pipe(conns: usize) -> (Arc<Behavior>, Server, Vec<TcpStream>) {
    dispatch::sys::raise_nofile_limit().unwrap();
    let behavior = Behavior::new(1);
    behavior.stall(0, true);
    let server = start(1, &behavior);
    let streams = open_and_send(&server, conns);
    let stats = server.stats();
    assert!(wait_until(Duration::from_secs(10), || {
        stats.acceptor().snapshot().held > 0
    }));
    (behavior, server, streams)
}

#[test]
fn held_fds_are_delivered_when_the_pipe_drains() {
    const CONNS: usize = 1500;
    let (behavior, server, mut streams) = fill_the_only_pipe(CONNS);
    let stats = server.stats().clone();
    let w0 = stats.workers()[0].snapshot();
    assert_pipe_filled(w0.handed_off);
    assert!(w0.pipe_full >= 1);
    let acc = stats.acceptor().snapshot();
    assert!(acc.accepted < CONNS as u64, "accepting paused: {acc:?}");

    behavior.stall(0, false);
    let ids = expect_all_replies(&mut streams);
    assert!(ids.iter().all(|&w| w == 0));
    let acc = stats.acceptor().snapshot();
    assert_eq!(acc.accepted, CONNS as u64);
    assert!(wait_until(Duration::from_secs(5), || {
        stats.acceptor().snapshot().held == 0
    }));
    assert_eq!(acc.rejected, 0);
    assert!(wait_until(Duration::from_secs(5), || {
        stats.total().handed_off == CONNS as u64
    }));
    drop(streams);
    server.shutdown(Duration::from_secs(2));
    server.join().unwrap();
}

/// Shutdown while the only worker is stalled, its pipe full, fds held and
/// more connections waiting in the kernel's accept queue, each with its
/// request sent: every client is answered (and then sees end of stream),
/// none is reset, nothing is rejected, and the server is done within the
/// grace period. (A signal starts the same shutdown: `tests/signals.rs`.)
#[test]
fn shutdown_with_a_full_pipe_answers_every_client() {
    const CONNS: usize = 1500;
    const GRACE: Duration = Duration::from_secs(5);
    let (_behavior, server, mut streams) = fill_the_only_pipe(CONNS);
    let stats = server.stats().clone();
    let acc = stats.acceptor().snapshot();
    assert!(
        acc.accepted < CONNS as u64,
        "some connections must still be in the accept queue: {acc:?}"
    );

    let started = std::time::Instant::now();
    // The stalled worker honours the shutdown (see `Behavior`), as a busy
    // worker would once its current work is done.
    server.shutdown(GRACE);
    for (i, s) in streams.iter_mut().enumerate() {
        let msg = i.to_string();
        match read_reply(s, &msg) {
            Ok(0) => {}
            other => panic!("client {i}: {other:?} (accepted before shutdown: {acc:?})"),
        }
        // Then an orderly end of stream, not a reset.
        assert_eq!(common::read_line(s).unwrap(), None, "client {i}");
    }
    server.join().unwrap();
    assert!(started.elapsed() < GRACE, "took {:?}", started.elapsed());
    let acc = stats.acceptor().snapshot();
    assert_eq!(acc.accepted, CONNS as u64, "{acc:?}");
    assert_eq!(acc.rejected, 0, "{acc:?}");
}
