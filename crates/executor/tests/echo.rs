//! An echo server on the executor: 1,000 concurrent clients × 100 messages,
//! every byte checked. Server and clients run on two runtimes, two threads.

mod common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use executor::net::{TcpListener, TcpStream};
use executor::{Runtime, spawn};

const CLIENTS: usize = 1000;
const MESSAGES: usize = 100;

fn message(client: usize, i: usize) -> Vec<u8> {
    // Varying lengths, so reads and writes split at different places.
    let len = 1 + (client * 7 + i * 13) % 200;
    (0..len).map(|k| (client + i + k) as u8).collect()
}

#[test]
fn echo_1000_clients_100_messages_each() {
    common::raise_fd_limit();
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let server = std::thread::spawn(move || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let mut conns = Vec::with_capacity(CLIENTS);
            while conns.len() < CLIENTS {
                let (stream, _) = listener.accept().await.unwrap();
                conns.push(spawn(async move {
                    stream.set_nodelay(true).unwrap();
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let n = stream.read(&mut buf).await.unwrap();
                        if n == 0 {
                            break;
                        }
                        stream.write_all(&buf[..n]).await.unwrap();
                    }
                }));
            }
            // Each connection task ends at its client's EOF.
            for c in conns {
                c.await.unwrap();
            }
        });
    });

    let addr = addr_rx.recv().unwrap();
    let rt = Runtime::new().unwrap();
    let checked = rt.block_on(async move {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                spawn(async move {
                    let stream = TcpStream::connect(addr).await.unwrap();
                    let mut bytes = 0;
                    let mut buf = vec![0u8; 256];
                    for i in 0..MESSAGES {
                        let msg = message(c, i);
                        stream.write_all(&msg).await.unwrap();
                        let mut got = 0;
                        while got < msg.len() {
                            let n = stream.read(&mut buf[got..msg.len()]).await.unwrap();
                            assert!(n > 0, "server closed early");
                            got += n;
                        }
                        assert_eq!(&buf[..msg.len()], &msg[..], "client {c} message {i}");
                        bytes += msg.len();
                    }
                    bytes
                })
            })
            .collect();
        let mut total = 0;
        for c in clients {
            total += c.await.unwrap();
        }
        total
    });
    let expected: usize = (0..CLIENTS)
        .flat_map(|c| (0..MESSAGES).map(move |i| message(c, i).len()))
        .sum();
    assert_eq!(checked, expected);
    server.join().unwrap();
}

#[test]
fn partial_reader_gets_the_rest_without_a_new_edge() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = spawn(async move {
            let s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&[9u8; 10_000]).await.unwrap();
            // Keep the connection open (no FIN, so no hang-up edge either)
            // until the reader is done.
            executor::sleep(Duration::from_millis(500)).await;
        });
        let (s, _) = listener.accept().await.unwrap();
        s.readable().await.unwrap();
        executor::sleep(Duration::from_millis(20)).await; // all 10,000 bytes arrive
        let mut total = 0;
        let mut buf = [0u8; 100];
        while total < 10_000 {
            // 100 bytes per read: readiness stays set between reads, and the
            // kernel sends no new edge since no new data comes.
            let n = executor::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("reader hung: readiness was lost")
                .unwrap();
            total += n;
        }
        assert_eq!(total, 10_000);
        writer.abort();
    });
}

#[test]
fn connect_error_is_reported() {
    let rt = Runtime::new().unwrap();
    // Bind then drop to get a port nobody listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = rt.block_on(TcpStream::connect(addr)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
}
