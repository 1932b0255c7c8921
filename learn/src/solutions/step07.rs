//! Step 7's exercises: a `timeout` combinator, and an idle timeout.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::step06_reactor::TcpStream;
use crate::step07_timers::sleep;

/// The error of [`timeout`]: the time ran out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

// ANCHOR: timeout
/// Exercise 7.1: the output of `future`, or `Err(Elapsed)` if `duration`
/// passes first. Both are polled with the same waker, so whichever is
/// ready first wakes the task; the loser is dropped (a dropped sleep
/// removes its timer, a dropped read leaves its fd unread).
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = pin!(future);
    let mut timer = pin!(sleep(duration));
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        timer.as_mut().poll(cx).map(|()| Err(Elapsed))
    })
    .await
}
// ANCHOR_END: timeout

// ANCHOR: idle
/// Exercise 7.2: step 6's echo, closing a connection that sends nothing
/// for `idle`; returns the bytes echoed.
pub async fn echo_with_idle_timeout(stream: TcpStream, idle: Duration) -> io::Result<usize> {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        match timeout(idle, stream.read(&mut buf)).await {
            Err(Elapsed) | Ok(Ok(0)) => return Ok(total),
            Ok(Ok(n)) => {
                stream.write_all(&buf[..n]).await?;
                total += n;
            }
            Ok(Err(e)) => return Err(e),
        }
    }
}
// ANCHOR_END: idle

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step05_executor::Executor;
    use crate::step06_reactor::TcpListener;
    use crate::step07_timers::{block_on, pending_timers};
    use crate::testutil::{client, roundtrip, start};
    use std::io::Read;
    use std::time::Instant;

    #[test]
    fn the_faster_side_wins() {
        let ex = Executor::new();
        let result = block_on(&ex, async {
            let quick = timeout(Duration::from_secs(5), sleep(Duration::from_millis(10))).await;
            let slow = timeout(Duration::from_millis(10), sleep(Duration::from_secs(5))).await;
            (quick, slow, pending_timers())
        });
        assert_eq!(result, (Ok(()), Err(Elapsed), 0));
    }

    #[test]
    fn an_idle_client_is_closed() {
        let (addr, done) = start(|l| {
            let ex = Executor::new();
            let listener = TcpListener::new(l)?;
            block_on(&ex, async move {
                let stream = listener.accept().await?;
                echo_with_idle_timeout(stream, Duration::from_millis(100)).await
            })
        });
        let mut c = client(addr);
        assert_eq!(roundtrip(&mut c, b"still here"), b"still here");
        let start = Instant::now();
        let mut buf = [0u8; 1];
        assert_eq!(c.read(&mut buf).unwrap(), 0, "the server closed");
        assert!(start.elapsed() >= Duration::from_millis(90));
        assert_eq!(done.wait().unwrap(), 10);
    }
}
