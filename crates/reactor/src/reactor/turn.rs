//! The loop turn: one `epoll_wait`, bounded by the nearest timer, then
//! every waker its events concern woken and the due timers fired; and the
//! trace line of each wait.

use std::io;
use std::time::{Duration, Instant};

use super::Reactor;
use crate::clock::{self, Nanos};
use crate::epoll::{self, Events};
use crate::registry::{NOTIFY_TOKEN, Registry};
use crate::trace::{self, EpollFlags, Short};

/// Timers further off than this are waited for with the cached clock.
const COARSE_HORIZON: Nanos = 250_000_000;

impl Reactor {
    /// Waits for I/O events or the nearest timer, at most `timeout` (`None`:
    /// no limit but the timers), then wakes every task they concern. Returns
    /// how many wakers were woken.
    pub fn turn(&self, timeout: Option<Duration>) -> io::Result<usize> {
        let inner = &*self.inner;
        let timeout_ms = match (timeout, inner.timers.borrow().next_deadline()) {
            (t, None) => epoll::timeout_ms(t),
            // A busy runtime only peeking: no clock read needed.
            (Some(Duration::ZERO), Some(_)) => 0,
            // A blocking wait whose nearest timer is far off (a connection's
            // idle timeout): the cached clock is good enough and saves a
            // clock read per turn. It can only lag, so the wait is at most
            // one loop iteration too long, never too short.
            (None, Some(deadline)) if deadline >= inner.now_ns.get() + COARSE_HORIZON => {
                clock::ms_until(deadline, inner.now_ns.get())
            }
            (t, Some(deadline)) => {
                let until = clock::ms_until(deadline, clock::read());
                until.min(epoll::timeout_ms(t.or(Some(Duration::MAX))))
            }
        };

        let slept_from = trace::active().then(Instant::now);
        // A timeline's `epoll_wait` slice spans the sleep and the wakes it
        // causes (the wakes' arrows start inside it); it ends below.
        let mut chrome_end = None;
        if slept_from.is_some() && trace::chrome::on() {
            trace::chrome::begin("epoll_wait", format_args!("\"timeout_ms\":{timeout_ms}"));
        }
        let mut woken = 0;
        {
            let mut events = inner.events.borrow_mut();
            let n = match inner.epoll.wait_ms(&mut events, timeout_ms) {
                Ok(n) => n,
                Err(e) => {
                    if slept_from.is_some() && trace::chrome::on() {
                        trace::chrome::end(format_args!(""));
                    }
                    return Err(e);
                }
            };
            inner.stats.waits.bump();
            inner.stats.events.add(n as u64);
            if let Some(from) = slept_from {
                chrome_end = trace_wait(
                    &events,
                    &inner.registry.borrow(),
                    from.elapsed(),
                    timeout_ms,
                );
            }
            // Wakers are woken by reference with the registry borrowed (see
            // `Registry::dispatch`): they only queue their tasks.
            let mut registry = inner.registry.borrow_mut();
            for ev in events.iter() {
                if ev.token == NOTIFY_TOKEN {
                    inner.notifier.reset();
                    inner.stats.notifies.bump();
                    continue;
                }
                match registry.dispatch(ev.token, ev.flags) {
                    Some(n) => woken += n,
                    None => inner.stats.stale_events.bump(),
                }
            }
        }
        let now = clock::read();
        inner.now_ns.set(now);
        inner.now.set(None);
        if inner
            .timers
            .borrow()
            .next_deadline()
            .is_some_and(|d| d <= now)
        {
            woken += self.fire_timers(now);
        }
        inner.stats.wakes.add(woken as u64);
        if let Some(args) = chrome_end {
            trace::chrome::end(format_args!("{args}"));
        }
        Ok(woken)
    }

    /// Fires the timers due at `now` and wakes their tasks; returns how many
    /// wakers were woken.
    #[cold]
    fn fire_timers(&self, now: Nanos) -> usize {
        let inner = &*self.inner;
        let mut wakers = inner.wake_buf.take();
        let fired = inner.timers.borrow_mut().fire_expired(now, &mut wakers);
        inner.stats.timers_fired.add(fired as u64);
        self.sync_timers();
        crate::trace!(
            "timer",
            "fired={fired} wakers={} pending={}",
            wakers.len(),
            inner.stats.timers_pending.get()
        );
        let woken = wakers.len();
        // No borrow is held here: a waker may register, drop or re-arm freely.
        for w in wakers.drain(..) {
            w.wake();
        }
        inner.wake_buf.set(wakers);
        woken
    }
}

/// The `epoll` trace line: how many events, for which fds, and how long the
/// thread slept (the timeout it asked for in brackets). On a timeline, the
/// same as the JSON members for the end of the `epoll_wait` slice, returned.
fn trace_wait(
    events: &Events,
    registry: &Registry,
    slept: Duration,
    timeout_ms: i32,
) -> Option<String> {
    use std::fmt::Write as _;
    let mut fds = String::new();
    for (i, ev) in events.iter().enumerate() {
        if i == 16 {
            fds.push_str(" ...");
            break;
        }
        let sep = if i == 0 { "" } else { " " };
        match ev.token {
            NOTIFY_TOKEN => {
                let _ = write!(fds, "{sep}notify");
            }
            token => match registry.fd_of(token) {
                Some(fd) => {
                    let _ = write!(fds, "{sep}{fd}:{}", EpollFlags(ev.flags));
                }
                None => {
                    let _ = write!(fds, "{sep}stale");
                }
            },
        }
    }
    if trace::chrome::on() {
        return Some(format!(
            "\"n\":{},\"slept_us\":{:.1},\"fds\":{}",
            events.len(),
            slept.as_secs_f64() * 1e6,
            trace::chrome::Json(&fds)
        ));
    }
    let timeout = match u64::try_from(timeout_ms) {
        Err(_) => "none".to_owned(),
        Ok(ms) => Short(Duration::from_millis(ms)).to_string(),
    };
    trace::emit(
        "epoll",
        format_args!(
            "n={} slept={} timeout={timeout} fds=[{fds}]",
            events.len(),
            Short(slept)
        ),
    );
    None
}
