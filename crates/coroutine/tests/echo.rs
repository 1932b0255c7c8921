//! Blocking-style TCP on the coroutine runtime: an echo server under 500
//! concurrent clients, the edge-triggered contract, deadlines, fd adoption.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Watchdog;
use coroutine::net::{TcpListener, TcpStream};
use coroutine::{Runtime, spawn};

const CLIENTS: usize = 500;
const MESSAGES: usize = 20;

fn message(client: usize, i: usize) -> Vec<u8> {
    // Varying lengths, so reads and writes split at different places.
    let len = 1 + (client * 7 + i * 13) % 300;
    (0..len).map(|k| (client + i + k) as u8).collect()
}

#[test]
fn echo_500_clients_20_messages_each() {
    let _w = Watchdog::new(Duration::from_secs(60), "echo_500_clients");
    common::raise_fd_limit();
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let server = std::thread::spawn(move || {
        let rt = Runtime::new().unwrap();
        rt.block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let mut conns = Vec::with_capacity(CLIENTS);
            while conns.len() < CLIENTS {
                let (stream, _) = listener.accept().unwrap();
                conns.push(spawn(move || {
                    stream.set_nodelay(true).unwrap();
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = stream.read(&mut buf).unwrap();
                        if n == 0 {
                            break;
                        }
                        stream.write_all(&buf[..n]).unwrap();
                    }
                }));
            }
            // Each connection coroutine ends at its client's EOF.
            for c in conns {
                c.join().unwrap();
            }
        });
        rt.stats()
    });

    let addr = addr_rx.recv().unwrap();
    let rt = Runtime::new().unwrap();
    let checked = rt.block_on(move || {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                spawn(move || {
                    let stream = TcpStream::connect(addr).unwrap();
                    let mut bytes = 0;
                    let mut buf = vec![0u8; 512];
                    for i in 0..MESSAGES {
                        let msg = message(c, i);
                        stream.write_all(&msg).unwrap();
                        (&stream).read_exact(&mut buf[..msg.len()]).unwrap();
                        assert_eq!(&buf[..msg.len()], &msg[..], "client {c} message {i}");
                        bytes += msg.len();
                    }
                    bytes
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|c| c.join().unwrap())
            .sum::<usize>()
    });
    let expected: usize = (0..CLIENTS)
        .flat_map(|c| (0..MESSAGES).map(move |i| message(c, i).len()))
        .sum();
    assert_eq!(checked, expected);
    let server_stats = server.join().unwrap();
    assert_eq!(server_stats.completed, CLIENTS as u64 + 1);
    assert_eq!(server_stats.panicked, 0);
}

#[test]
fn partial_reader_gets_the_rest_without_a_new_edge() {
    let _w = Watchdog::new(Duration::from_secs(30), "partial_reader");
    coroutine::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = spawn(move || {
            let s = TcpStream::connect(addr).unwrap();
            s.write_all(&[9u8; 10_000]).unwrap();
            // Keep the connection open (no FIN, so no hang-up edge either).
            coroutine::sleep(Duration::from_millis(500));
        });
        let (s, _) = listener.accept().unwrap();
        s.readable(None).unwrap();
        coroutine::sleep(Duration::from_millis(20)); // all 10,000 bytes arrive
        let mut total = 0;
        let mut buf = [0u8; 100];
        let deadline = Instant::now() + Duration::from_secs(5);
        while total < 10_000 {
            // 100 bytes per read: readiness stays set between reads, and the
            // kernel sends no new edge since no new data comes.
            total += s
                .read_until(&mut buf, Some(deadline))
                .expect("reader hung: readiness was lost");
        }
        assert_eq!(total, 10_000);
        writer.abort();
    });
}

#[test]
fn reads_and_writes_time_out_at_their_deadline() {
    let _w = Watchdog::new(Duration::from_secs(30), "deadlines");
    coroutine::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().unwrap();

        // Read: the peer sends nothing.
        let start = Instant::now();
        let mut buf = [0u8; 16];
        let err = server
            .read_until(&mut buf, Some(start + Duration::from_millis(30)))
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(30));

        // The stored deadline applies to plain `read` and to std::io::Read.
        server.set_read_deadline(Some(Instant::now() + Duration::from_millis(10)));
        let err = Read::read(&mut &server, &mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        server.set_read_deadline(None);

        // Data that is there wins over an expired deadline.
        client.write_all(b"hi").unwrap();
        server.readable(None).unwrap();
        let n = server.read_until(&mut buf, Some(Instant::now())).unwrap();
        assert_eq!(&buf[..n], b"hi");

        // Write: the peer never reads, so the buffers fill up.
        let chunk = vec![0u8; 1 << 16];
        server.set_write_deadline(Some(Instant::now() + Duration::from_millis(100)));
        let err = loop {
            if let Err(e) = server.write(&chunk) {
                break e;
            }
        };
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);

        // Idle wait with a deadline, no buffer (the "hi" was a short read,
        // which cleared readiness).
        let err = server
            .readable(Some(Instant::now() + Duration::from_millis(10)))
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    });
}

#[test]
fn adopted_fds_and_wait_readable_on_a_pipe() {
    let _w = Watchdog::new(Duration::from_secs(30), "adopted_fds");
    // A connection accepted by a plain thread and handed over as an fd, the
    // way the dispatcher does it.
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let (fd_tx, fd_rx) = mpsc::channel::<OwnedFd>();
    let acceptor = std::thread::spawn(move || {
        let (s, _) = std_listener.accept().unwrap();
        fd_tx.send(OwnedFd::from(s)).unwrap();
    });
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    peer.write_all(b"handed over").unwrap();
    acceptor.join().unwrap();
    coroutine::run(move || {
        let stream = TcpStream::from_fd(fd_rx.recv().unwrap()).unwrap();
        assert_eq!(stream.peer_addr().unwrap(), peer.local_addr().unwrap());
        let mut buf = [0u8; 11];
        (&stream).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"handed over");

        // wait_readable on any registered fd: a pipe, like the handoff pipe.
        let (r, w) = std::io::pipe().unwrap();
        let r = coroutine::io::Fd::new(r).unwrap();
        let deadline = Some(Instant::now() + Duration::from_millis(10));
        let err = coroutine::io::wait_readable(r.registration(), deadline).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let writer = spawn(move || {
            coroutine::sleep(Duration::from_millis(5));
            (&w).write_all(b"x").unwrap();
        });
        coroutine::io::wait_readable(r.registration(), None).unwrap();
        let mut one = [0u8; 1];
        (&r).read_exact(&mut one).unwrap();
        writer.join().unwrap();
        drop(peer);
    });
}

#[test]
fn connect_error_is_reported() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = coroutine::run(move || TcpStream::connect(addr)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
fn poll_and_try_calls_follow_the_edge_contract() {
    let _w = Watchdog::new(Duration::from_secs(30), "poll_and_try");
    coroutine::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            coroutine::sleep(Duration::from_millis(20));
            s.write_all(b"hello").unwrap();
            let mut back = [0u8; 5];
            s.read_exact(&mut back).unwrap();
            back
        });
        let (s, _) = listener.accept().unwrap();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 64];
        // Nothing sent yet: a try says WouldBlock and leaves readiness clear.
        let e = s.try_read_uninit(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        assert!(!s.is_read_ready());
        // A wait of our own: parks until the bytes come.
        let n = coroutine::wait(|cx| s.poll_read_uninit(cx, &mut buf))
            .unwrap()
            .unwrap();
        assert_eq!(n, 5);
        // A short read emptied the queue, and says so without a syscall.
        assert!(!s.is_read_ready());
        let n = coroutine::wait(|cx| s.poll_write(cx, b"world"))
            .unwrap()
            .unwrap();
        assert_eq!(n, 5);
        assert_eq!(&client.join().unwrap(), b"world");
        // The client is gone: readable, and the read says end of stream.
        coroutine::wait(|cx| s.poll_readable(cx)).unwrap();
        assert!(s.is_read_ready());
        assert_eq!(s.try_read_uninit(&mut buf).unwrap(), 0);
    });
}
