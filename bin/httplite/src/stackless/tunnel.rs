//! A tunnel in the stackless model: after an upstream's `101 Switching
//! Protocols` (a WebSocket handshake), the client's connection and the
//! upstream's carry bytes both ways, unread, until either side ends. The
//! blocking designs' tunnel (`blocking/conn/tunnel.rs`) explains the
//! steps; here the wait for either side is one future polling the two
//! reads (the client's, [`Waits::read_client`], and the upstream's), and
//! the one that is not ready is dropped, having taken nothing.
//!
//! One task runs both directions: while a write waits for its peer, the
//! other direction waits too. Either side's end closes both, once what the
//! other had sent is passed on.

use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Instant;

use bytes::BytesMut;
use site::stats::TimeoutKind;

use super::answer::{Stop, Waits};
use super::proxy::{read, write_all};
use super::upstream::UpstreamSocket as _;

/// What a wait for either side brought.
pub(super) enum Read {
    /// The client's read (into its `rbuf`).
    Client(io::Result<usize>),
    /// The upstream's (into `ubuf`).
    Upstream(io::Result<usize>),
}

/// The first of the client's read and the upstream's, both until `at`;
/// the other is dropped, having taken nothing. The upstream's read waits
/// for readiness first: while it waits, `ubuf` gets no room (an empty
/// buffer holds no memory), and no `recv` is spent on an `EAGAIN`.
pub(super) async fn either<C: Waits>(
    conn: &mut C,
    up: &mut C::Upstream,
    ubuf: &mut BytesMut,
    at: Instant,
) -> Read {
    let mut client = pin!(conn.read_client(at));
    let mut upstream = pin!(async {
        up.readable(at).await?;
        read(up, ubuf, at).await
    });
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = client.as_mut().poll(cx) {
            return Poll::Ready(Read::Client(r));
        }
        if let Poll::Ready(r) = upstream.as_mut().poll(cx) {
            return Poll::Ready(Read::Upstream(r));
        }
        Poll::Pending
    })
    .await
}

/// Runs the tunnel to its end: the bytes the client got through it, and
/// why the client's side stopped, if not by an end (a timeout, or its
/// socket's error). `ubuf` holds what the upstream sent after its `101`;
/// the client's `rbuf`, what the client sent after its head.
pub(crate) async fn tunnel<C: Waits>(
    conn: &mut C,
    up: &mut C::Upstream,
    ubuf: &mut BytesMut,
) -> (u64, Option<Stop>) {
    let idle = conn.idle_timeout();
    let mut sent = 0u64;
    loop {
        let at = conn.now() + idle;
        let mut parts = conn.parts();
        let rbuf = &mut parts.io().rbuf;
        if !rbuf.is_empty() {
            let written = write_all(up, rbuf, at).await;
            rbuf.clear();
            if written.is_err() {
                return (sent, None);
            }
        }
        if !ubuf.is_empty() {
            sent += ubuf.len() as u64;
            conn.parts().io().wbuf.extend_from_slice(ubuf);
            ubuf.clear();
        }
        // Also what a TLS session queued while reading (a key update's
        // answer).
        if let Err(stop) = conn.flush().await {
            return (sent, Some(stop));
        }
        let at = conn.now() + idle;
        match either(conn, up, ubuf, at).await {
            Read::Client(Ok(0)) | Read::Upstream(Ok(0)) => return (sent, None),
            Read::Client(Ok(_)) | Read::Upstream(Ok(_)) => {}
            Read::Client(Err(e)) | Read::Upstream(Err(e))
                if e.kind() == io::ErrorKind::TimedOut =>
            {
                return (sent, Some(Stop::Timeout(TimeoutKind::Idle)));
            }
            Read::Client(Err(e)) => return (sent, Some(Stop::Io(e))),
            // The upstream failed: both close.
            Read::Upstream(Err(_)) => return (sent, None),
        }
    }
}
