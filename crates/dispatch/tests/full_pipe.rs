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
    assert_eq!(w0.handed_off, PIPE_FDS, "pipe 0 holds exactly one page");
    assert!(w0.pipe_full >= 1);
    assert_eq!(w0.batches, 0, "worker 0 really is stalled");
    // Worker 1 serves its connections while worker 0 stalls.
    let w1_first = CONNS - 1;
    let id = read_reply(&mut streams[w1_first], &w1_first.to_string()).unwrap();
    assert_eq!(id, 1);

    behavior.stall(0, false);
    let mut ids = expect_all_replies(&mut streams[..w1_first]);
    ids.push(id);
    let on_0 = ids.iter().filter(|&&w| w == 0).count() as u64;
    assert_eq!(on_0, PIPE_FDS);
    assert_eq!(stats.acceptor().snapshot().rejected, 0);
    drop(streams);
    server.shutdown(Duration::from_secs(2));
    server.join().unwrap();
}

#[test]
fn held_fds_are_delivered_when_the_pipe_drains() {
    const CONNS: usize = 1500;
    dispatch::sys::raise_nofile_limit().unwrap();
    let behavior = Behavior::new(1);
    behavior.stall(0, true);
    let server = start(1, &behavior);
    let stats = server.stats().clone();
    let mut streams = open_and_send(&server, CONNS);

    // The only pipe is full: the acceptor holds what it accepted beyond it
    // and leaves the rest in the kernel backlog, without blocking.
    assert!(wait_until(Duration::from_secs(10), || {
        stats.acceptor().snapshot().held > 0
    }));
    let w0 = stats.workers()[0].snapshot();
    assert_eq!(w0.handed_off, PIPE_FDS);
    assert!(w0.pipe_full >= 1);
    let acc = stats.acceptor().snapshot();
    assert!(acc.accepted < CONNS as u64, "accepting paused: {acc:?}");

    behavior.stall(0, false);
    let ids = expect_all_replies(&mut streams);
    assert!(ids.iter().all(|&w| w == 0));
    let acc = stats.acceptor().snapshot();
    assert_eq!(acc.accepted, CONNS as u64);
    assert_eq!(acc.held, 0);
    assert_eq!(acc.rejected, 0);
    assert_eq!(stats.total().handed_off, CONNS as u64);
    drop(streams);
    server.shutdown(Duration::from_secs(2));
    server.join().unwrap();
}
