//! Which worker gets which connection: round-robin, batching, reuseport,
//! `max_connections`, pinning, a dead worker.

mod common;

use std::collections::HashSet;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Behavior, ask, connect, localhost, read_reply, serve, wait_until};
use dispatch::{Config, Mode, Server};

const GRACE: Duration = Duration::from_secs(2);

fn start(config: Config, behavior: &Arc<Behavior>) -> Server {
    let b = behavior.clone();
    Server::start(config, move |port| serve(port, &b)).expect("start")
}

#[test]
fn acceptor_round_robin_serves_each_connection_on_one_worker_evenly() {
    const WORKERS: usize = 3;
    const CONNS: usize = 31;
    let behavior = Behavior::new(WORKERS);
    let config = Config {
        workers: WORKERS,
        ..Config::new(localhost())
    };
    let server = start(config, &behavior);
    let mut per_worker = [0u64; WORKERS];
    let mut streams = Vec::new();
    for i in 0..CONNS {
        let mut s = connect(server.local_addr());
        let first = ask(&mut s, &format!("conn {i} a")).unwrap();
        let second = ask(&mut s, &format!("conn {i} b")).unwrap();
        assert_eq!(first, second, "a connection is served by one worker");
        per_worker[first] += 1;
        streams.push(s);
    }
    let (min, max) = (per_worker.iter().min(), per_worker.iter().max());
    assert!(max.unwrap() - min.unwrap() <= 1, "spread {per_worker:?}");
    let stats = server.stats();
    // The acceptor counts a handoff just after its write, which can be
    // after the worker already answered: give it a moment.
    let counted = |w: usize| stats.workers()[w].handed_off();
    assert!(
        wait_until(Duration::from_secs(5), || {
            (0..WORKERS).all(|w| counted(w) == per_worker[w])
        }),
        "handed_off {:?} vs served {per_worker:?}",
        (0..WORKERS).map(counted).collect::<Vec<_>>()
    );
    assert_eq!(stats.acceptor().snapshot().accepted, CONNS as u64);
    drop(streams);
    assert!(wait_until(Duration::from_secs(5), || stats.total().open == 0));
    server.shutdown(GRACE);
    server.join().unwrap();
}

#[test]
fn burst_of_1000_connects_is_handed_off_in_batches() {
    const CONNS: usize = 1000;
    dispatch::sys::raise_nofile_limit().unwrap();
    let behavior = Behavior::new(2);
    let config = Config {
        workers: 2,
        backlog: 4096,
        ..Config::new(localhost())
    };
    // Workers hold off reading their pipes until the acceptor has handed
    // off the whole burst: otherwise a slow machine (valgrind serialises
    // threads) lets a worker read each fd as it arrives, and what is
    // measured is the scheduler, not the batching.
    behavior.stall(0, true);
    behavior.stall(1, true);
    let server = start(config, &behavior);
    let streams: Vec<_> = (0..CONNS).map(|_| connect(server.local_addr())).collect();
    let stats = server.stats();
    assert!(
        wait_until(Duration::from_secs(30), || {
            stats.acceptor().snapshot().accepted == CONNS as u64
        }),
        "accepted {} of {CONNS}",
        stats.acceptor().snapshot().accepted
    );
    behavior.stall(0, false);
    behavior.stall(1, false);
    let mut streams = streams;
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(format!("{i}\n").as_bytes()).unwrap();
    }
    for (i, s) in streams.iter_mut().enumerate() {
        read_reply(s, &i.to_string()).unwrap();
    }
    assert!(wait_until(Duration::from_secs(5), || {
        stats.total().handed_off == CONNS as u64
    }));
    let total = stats.total();
    assert!(
        total.batches < total.handed_off,
        "{} reads for {} fds: no batching",
        total.batches,
        total.handed_off
    );
    eprintln!("{} fds in {} batches", total.handed_off, total.batches);
    drop(streams);
    server.shutdown(GRACE);
    server.join().unwrap();
}

#[test]
fn reuseport_connections_reach_more_than_one_worker() {
    const WORKERS: usize = 4;
    const CONNS: usize = 64;
    let behavior = Behavior::new(WORKERS);
    let config = Config {
        workers: WORKERS,
        mode: Mode::ReusePort,
        ..Config::new(localhost())
    };
    let server = start(config, &behavior);
    let mut streams: Vec<_> = (0..CONNS).map(|_| connect(server.local_addr())).collect();
    let ports: HashSet<u16> = streams
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    assert_eq!(ports.len(), CONNS, "distinct source ports");
    let mut seen = HashSet::new();
    for (i, s) in streams.iter_mut().enumerate() {
        let w = ask(s, &i.to_string()).unwrap();
        assert_eq!(ask(s, "again").unwrap(), w);
        seen.insert(w);
    }
    assert!(seen.len() > 1, "all {CONNS} connections on worker {seen:?}");
    assert_eq!(server.stats().total().handed_off, CONNS as u64);
    assert_eq!(server.stats().acceptor().snapshot().accepted, 0);
    drop(streams);
    server.shutdown(GRACE);
    server.join().unwrap();
}

/// Opens `max + 2` connections: `max` are served, the others wait in the
/// backlog until a close makes room.
fn check_max_connections(mode: Mode, workers: usize) {
    const MAX: usize = 4;
    let behavior = Behavior::new(workers);
    let config = Config {
        workers,
        mode,
        max_connections: Some(MAX),
        ..Config::new(localhost())
    };
    let server = start(config, &behavior);
    let mut served: Vec<_> = (0..MAX)
        .map(|i| {
            let mut s = connect(server.local_addr());
            ask(&mut s, &format!("in {i}")).unwrap();
            s
        })
        .collect();
    let mut waiting: Vec<_> = (0..2)
        .map(|i| {
            let mut s = connect(server.local_addr());
            s.write_all(format!("wait {i}\n").as_bytes()).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            s
        })
        .collect();
    for s in &mut waiting {
        let err = read_reply(s, "-").unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err}"
        );
        s.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
    }
    let stats = server.stats();
    assert!(wait_until(Duration::from_secs(5), || {
        stats.total().open == MAX as u64
    }));
    let paused = stats.acceptor().snapshot().paused_at_max + stats.total().paused_at_max;
    assert!(paused >= 1);
    // Each close lets exactly one waiting client in.
    for (i, s) in waiting.iter_mut().enumerate() {
        drop(served.remove(0));
        read_reply(s, &format!("wait {i}")).unwrap();
    }
    assert!(wait_until(Duration::from_secs(5), || stats.total().open == MAX as u64));
    drop(served);
    drop(waiting);
    server.shutdown(GRACE);
    server.join().unwrap();
}

#[test]
fn max_connections_pauses_accepting_until_a_close() {
    check_max_connections(Mode::Acceptor, 2);
}

#[test]
fn max_connections_in_reuseport_mode_pauses_the_worker() {
    // One worker, so its share is the whole limit.
    check_max_connections(Mode::ReusePort, 1);
}

#[test]
fn pinned_workers_run_on_one_cpu_each() {
    let cpus = dispatch::sys::allowed_cpus().unwrap();
    let behavior = Behavior::new(2);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (b, s) = (behavior.clone(), seen.clone());
    let config = Config {
        workers: 2,
        pin_workers: true,
        ..Config::new(localhost())
    };
    let server = Server::start(config, move |port| {
        s.lock()
            .unwrap()
            .push((port.id(), dispatch::sys::allowed_cpus().unwrap()));
        serve(port, &b)
    })
    .unwrap();
    let mut c = connect(server.local_addr());
    ask(&mut c, "pinned").unwrap();
    // One request reached one worker; the other may still be on its way to
    // recording itself.
    let both_seen = wait_until(Duration::from_secs(5), || seen.lock().unwrap().len() == 2);
    assert!(
        both_seen,
        "only {} worker(s) started",
        seen.lock().unwrap().len()
    );
    let seen = seen.lock().unwrap().clone();
    for (id, allowed) in seen {
        assert_eq!(allowed, vec![cpus[id % cpus.len()]]);
    }
    drop(c);
    server.shutdown(GRACE);
    server.join().unwrap();
}

#[test]
fn a_dead_worker_gets_no_more_connections_and_join_reports_it() {
    let behavior = Behavior::new(2);
    let b = behavior.clone();
    let config = Config {
        workers: 2,
        ..Config::new(localhost())
    };
    let server = Server::start(config, move |port| {
        if port.id() == 0 {
            panic!("worker 0 fails on purpose");
        }
        serve(port, &b)
    })
    .unwrap();
    // Connections handed to worker 0 before it died are closed with it;
    // from its exit on, it gets none.
    let stats = server.stats().clone();
    assert!(wait_until(Duration::from_secs(10), || !stats.workers()[0].is_running()));
    let before = stats.workers()[0].handed_off();
    let mut streams = Vec::new();
    for i in 0..10 {
        let mut s = connect(server.local_addr());
        assert_eq!(ask(&mut s, &i.to_string()).unwrap(), 1);
        streams.push(s);
    }
    assert!(wait_until(Duration::from_secs(5), || {
        stats.workers()[1].handed_off() == 10
    }));
    assert_eq!(stats.workers()[0].handed_off(), before);
    drop(streams);
    server.shutdown(GRACE);
    let err = server.join().unwrap_err();
    assert!(err.to_string().contains("worker 0 panicked"), "{err}");
}

#[test]
fn dropping_a_server_shuts_it_down_and_joins() {
    let behavior = Behavior::new(1);
    let config = Config {
        workers: 1,
        ..Config::new(localhost())
    };
    let server = start(config, &behavior);
    let stats = server.stats().clone();
    drop(server);
    assert!(!stats.workers()[0].is_running());
}
