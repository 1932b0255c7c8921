//! A stackless connection on a `--proxy-protocol` listener: admit the
//! peer, read the PROXY header under the header timeout (see
//! [`crate::proxy`] for the rules and [`HeaderReader`] for how it never
//! reads past the header), then serve the connection as any other, with
//! the header's client as its address. A separate task future, so the
//! connection loop of the listeners without the option is untouched; the
//! connection itself is spawned as a task of its own rather than awaited
//! here, so that `Connection`'s poll keeps one caller (its task's run) and
//! stays inlined into it (awaited here as well, it was compiled out of
//! line, which cost every plaintext request instructions).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;

use executor::net::TcpStream;

use super::conn;
use super::ctx::WorkerCtx;
use super::transport::TlsStream;
use crate::proxy::{self, Refused};
use site::exposure::Surface;

/// Serves `stream` once its PROXY header is read; closes it, counted, if
/// the header is refused.
pub(super) async fn serve(ctx: Rc<WorkerCtx>, stream: TcpStream, on: Surface) {
    // Counted open from the accept: the header's wait is the connection's.
    let guard = ctx.clone().open_connection();
    let fd = stream.as_raw_fd();
    let header = async {
        ctx.config.proxy.admit(fd)?;
        let limit = ctx.config.header_timeout;
        match executor::timeout(limit, read_header(&stream)).await {
            Ok(read) => read,
            Err(_) => Err(Refused::Header(
                "no whole PROXY header within --header-timeout",
            )),
        }
    };
    let client = match header.await {
        Ok(client) => client,
        Err(refused) => {
            refused.trace(fd);
            refused.count(&ctx.stats);
            return;
        }
    };
    proxy::trace_accepted(fd, client);
    match ctx.tls.on(on) {
        None => drop(executor::spawn(conn::serve_with(stream, guard, client, on))),
        Some(tls) => {
            // As without the option: a session that cannot start closes
            // the connection (the guard counts it closed).
            if let Ok(stream) = TlsStream::new(stream, tls) {
                drop(executor::spawn(conn::serve_with(stream, guard, client, on)));
            }
        }
    }
}

/// The header's client (`None`: keep the peer), read off `stream`.
async fn read_header(stream: &TcpStream) -> Result<Option<SocketAddr>, Refused> {
    proxy::read_header(stream.as_raw_fd(), async |buf: &mut [u8]| {
        stream.read(buf).await
    })
    .await
}
