//! Step 6's exercises: an async `read_exact`, and an async `connect`.

use std::future::poll_fn;
use std::io::{self, ErrorKind};
use std::net::{self, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::step06_reactor::{Direction, TcpStream, poll_io};

// ANCHOR: read_exact
/// Exercise 6.1: fills `buf` completely, or fails with `UnexpectedEof`.
pub async fn read_exact(stream: &TcpStream, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match stream.read(buf).await? {
            0 => return Err(ErrorKind::UnexpectedEof.into()),
            n => buf = &mut std::mem::take(&mut buf)[n..],
        }
    }
    Ok(())
}
// ANCHOR_END: read_exact

// ANCHOR: connect
/// Exercise 6.2: connects to `addr` without blocking the thread.
///
/// A non-blocking `connect` returns `EINPROGRESS` at once; the kernel
/// finishes the handshake and reports the socket writable, successful or
/// not. `SO_ERROR` (`take_error`) then says which.
pub async fn connect(addr: SocketAddrV4) -> io::Result<TcpStream> {
    // SAFETY: no pointers are passed; the result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sin` is a valid sockaddr_in of `len` bytes for the call.
    let rc = unsafe { libc::connect(fd.as_raw_fd(), (&raw const sin).cast(), len) };
    if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
        return Err(io::Error::last_os_error());
    }
    let stream = TcpStream::new(net::TcpStream::from(fd))?;
    let raw = stream.std().as_raw_fd();
    poll_fn(|cx| {
        poll_io(raw, Direction::Write, cx, || {
            if let Some(error) = stream.std().take_error()? {
                return Err(error); // refused, unreachable, ...
            }
            match stream.std().peer_addr() {
                Ok(_) => Ok(()),
                // Still in progress: wait for the writability edge.
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                    Err(ErrorKind::WouldBlock.into())
                }
                Err(e) => Err(e),
            }
        })
    })
    .await?;
    Ok(stream)
}
// ANCHOR_END: connect

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step01_blocking_echo::serve_one_at_a_time;
    use crate::step05_executor::Executor;
    use crate::step06_reactor::block_on;
    use crate::testutil::start;
    use std::net::SocketAddr;

    fn v4(addr: SocketAddr) -> SocketAddrV4 {
        match addr {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
        }
    }

    #[test]
    fn connect_then_read_exact_an_echo() {
        let (addr, done) = start(|l| serve_one_at_a_time(&l, 1));
        let ex = Executor::new();
        let back = block_on(&ex, async move {
            let stream = connect(v4(addr)).await?;
            stream.write_all(b"async hello").await?;
            let mut back = [0u8; 11];
            read_exact(&stream, &mut back).await?;
            let mut more = [0u8; 1];
            drop(stream.std().shutdown(net::Shutdown::Write));
            let eof = read_exact(&stream, &mut more).await.unwrap_err();
            assert_eq!(eof.kind(), ErrorKind::UnexpectedEof);
            io::Result::Ok(back)
        });
        assert_eq!(&back.unwrap(), b"async hello");
        done.wait().unwrap();
    }

    #[test]
    fn connect_reports_a_refusal() {
        let closed = net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let ex = Executor::new();
        let err = block_on(&ex, async move { connect(v4(closed)).await.map(drop) }).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    }
}
