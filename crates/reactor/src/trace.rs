//! Event-loop tracing: one greppable line per step of every runtime layer.
//!
//! With the `trace` cargo feature compiled in and [`enable`] called (the
//! server's `--trace` flag), the reactor, the executor, the coroutine
//! scheduler and the dispatcher each print what they just did:
//!
//! ```text
//!     0.512034 w0     epoll    n=1 slept=2.4s fds=[9:IN|OUT]
//!     0.512041 w0     wake     task=3 local
//!     0.512044 w0     poll     task=3 Pending 4.1µs
//! ```
//!
//! Columns: seconds since tracing started, the thread's label
//! ([`set_thread_label`]), the kind of step, then `key=value` details.
//!
//! Without the feature, [`active`] is the constant `false`: every trace site
//! is `if trace::active() { ... }`, so the optimiser deletes the whole block
//! (and any clock read made only for it). Tracing costs nothing unless it is
//! compiled in, and one relaxed load per site when compiled in but off.
//!
//! A loaded server would drown its terminal, so each thread may print at
//! most [`enable`]'s `lines_per_second`; the excess is counted and reported
//! in one `suppressed` line when the next second opens.
//!
//! The same sites can write a timeline instead ([`enable_chrome`]): Chrome
//! Trace Event JSON for Perfetto, one track per thread, slices, instants
//! and flow arrows (see [`chrome`]). A site with more to show than a line
//! (a poll's start and end, a wake's arrow) asks [`chrome::on`] and records
//! structured events; every other line becomes an instant event.
//!
//! A server that forks a process per connection traces too: the text
//! file and the timeline ([`enable_chrome_direct`], no writer thread) are
//! opened before the first fork and appended to by every process, each
//! child labelled by [`after_fork`] and flushed by [`before_exit`].

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub mod chrome;
mod sink;

pub use sink::Summary;

/// Whether tracing was compiled in (the `trace` feature).
pub const COMPILED: bool = cfg!(feature = "trace");

static ENABLED: AtomicBool = AtomicBool::new(false);
static RATE: AtomicU32 = AtomicU32::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();
/// Where text lines go instead of stderr ([`enable_text_file`]).
static TEXT_FILE: OnceLock<File> = OnceLock::new();

/// Whether trace lines should be produced now. Guard every trace site with
/// it, including any work done only to build the line.
#[inline(always)]
pub fn active() -> bool {
    COMPILED && ENABLED.load(Ordering::Relaxed)
}

/// Turns tracing on for every thread, at most `lines_per_second` lines per
/// thread (0: no limit). Returns `false`, and does nothing, if tracing was
/// not compiled in.
pub fn enable(lines_per_second: u32) -> bool {
    if !COMPILED {
        return false;
    }
    EPOCH.get_or_init(Instant::now);
    RATE.store(lines_per_second, Ordering::Relaxed);
    ENABLED.store(true, Ordering::Relaxed);
    true
}

/// Like [`enable`], with the lines appended to the file at `path`
/// (created or truncated) instead of stderr. `Ok(false)` if tracing was
/// not compiled in.
///
/// The file is opened `O_APPEND`, so that a process forked after this call
/// (`--runtime fork`'s children) appends to it as well: each line is one
/// `write(2)` placed at the file's end, whole, whichever process writes
/// it (see [`emit`]).
pub fn enable_text_file(path: &Path, lines_per_second: u32) -> io::Result<bool> {
    if !COMPILED {
        return Ok(false);
    }
    // O_APPEND through the custom flags: std refuses `append` together
    // with `truncate`.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_APPEND)
        .open(path)?;
    let _ = TEXT_FILE.set(file);
    Ok(enable(lines_per_second))
}

/// Turns tracing on as a timeline: Chrome Trace Event JSON written to
/// `path` (created or truncated) by a writer thread, at most
/// `events_per_second` events per thread (0: no limit). Call [`finish`]
/// before the process exits, to close the file. `Ok(false)`, and nothing
/// done, if tracing was not compiled in.
pub fn enable_chrome(path: &Path, events_per_second: u32) -> io::Result<bool> {
    if !COMPILED {
        return Ok(false);
    }
    EPOCH.get_or_init(Instant::now);
    sink::start(path)?;
    chrome::set_on(true);
    Ok(enable(events_per_second))
}

/// Like [`enable_chrome`], for a process that forks a child per
/// connection and may run no thread: no writer thread is started; the
/// file is created `O_APPEND` with its opening `[` and a `process_name`
/// event naming this process `process`, and every process (this one and
/// each child forked later) writes its own events to it, a chunk of whole
/// lines per `write(2)`. Each child calls [`after_fork`] first and
/// [`before_exit`] last; this process calls [`finish`] once every child
/// has ended. `Ok(false)`, and nothing done, if tracing was not compiled
/// in.
pub fn enable_chrome_direct(
    path: &Path,
    events_per_second: u32,
    process: &str,
) -> io::Result<bool> {
    if !COMPILED {
        return Ok(false);
    }
    EPOCH.get_or_init(Instant::now);
    sink::start_direct(path, process)?;
    chrome::set_on(true);
    Ok(enable(events_per_second))
}

/// In a process just forked from a traced one, before anything else is
/// traced: labels its lines `label` ([`set_thread_label`]) with a fresh
/// rate-limit budget, and, on a timeline written in place
/// ([`enable_chrome_direct`]), drops the events copied from the parent's
/// unwritten buffer (the parent writes them) and names this process
/// `process` for its track.
pub fn after_fork(label: &str, process: &str) {
    if !active() {
        return;
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        l.label = Some(label.to_owned());
        l.limiter = Limiter::new();
    });
    if chrome::on() && sink::is_direct() {
        chrome::after_fork(process);
    }
}

/// In a forked process about to `_exit`, on a timeline written in place:
/// closes this thread's open slices and writes its events, and adds the
/// events its rate limit dropped to the count in the file's closing
/// event. Does nothing otherwise (text lines are never buffered).
pub fn before_exit() {
    if chrome::on() && sink::is_direct() {
        sink::add_dropped_by_rate(chrome::before_exit());
    }
}

/// Stops tracing; for a timeline, closes every thread's open slices, writes
/// the closing metadata event (with the count of dropped events) and `]`,
/// and waits a bounded time for the writer (or, with
/// [`enable_chrome_direct`], writes them itself). `None` unless a timeline
/// was being written.
pub fn finish() -> Option<Summary> {
    disable();
    let epoch = EPOCH.get()?;
    let now = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    sink::finish(RATE.load(Ordering::Relaxed), now)
}

/// Turns tracing off.
pub fn disable() {
    ENABLED.store(false, Ordering::Relaxed);
}

fn epoch() -> Option<Instant> {
    EPOCH.get().copied()
}

fn rate() -> u32 {
    RATE.load(Ordering::Relaxed)
}

/// This thread's label ([`set_thread_label`]), else its name, else `?`.
fn thread_label() -> String {
    let label = LOCAL.try_with(|l| l.borrow().label.clone()).ok().flatten();
    label.unwrap_or_else(|| {
        std::thread::current()
            .name()
            .map_or_else(|| "?".to_owned(), str::to_owned)
    })
}

/// Names this thread in trace lines (`w0`, `acceptor`...). Threads without
/// a label use their `std::thread` name, or `?`.
pub fn set_thread_label(label: &str) {
    LOCAL.with(|l| l.borrow_mut().label = Some(label.to_owned()));
}

/// Prints one trace line of kind `what` (a short word such as `epoll`),
/// subject to this thread's rate limit. Call it only when [`active`].
pub fn emit(what: &str, details: fmt::Arguments<'_>) {
    if chrome::on() {
        let msg = details.to_string();
        chrome::instant(what, format_args!("\"msg\":{}", chrome::Json(&msg)));
        return;
    }
    let Some(epoch) = EPOCH.get() else { return };
    let now = Instant::now();
    let rate = RATE.load(Ordering::Relaxed);
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let l = &mut *l;
        let elapsed = now.duration_since(*epoch);
        let mut suppressed = 0;
        if !l.limiter.admit(elapsed, rate, &mut suppressed) {
            return;
        }
        let label = l.label.get_or_insert_with(|| {
            std::thread::current()
                .name()
                .map_or_else(|| "?".to_owned(), str::to_owned)
        });
        l.line.clear();
        if suppressed > 0 {
            let _ = writeln!(
                l.line,
                "{} {label:<6} suppressed {suppressed} lines over the rate limit of {rate}/s",
                Seconds(elapsed),
            );
        }
        let _ = writeln!(
            l.line,
            "{} {label:<6} {what:<8} {details}",
            Seconds(elapsed)
        );
        // One write per line (stderr and the file are unbuffered): lines
        // from different threads, and from forked processes sharing the
        // open file description, interleave whole, never mid-line. The
        // file is `O_APPEND`, so each write lands at its end in one piece;
        // to a pipe, a line of at most `PIPE_BUF` bytes is written whole.
        match TEXT_FILE.get() {
            Some(mut file) => {
                let _ = file.write_all(l.line.as_bytes());
            }
            None => {
                let _ = std::io::stderr().lock().write_all(l.line.as_bytes());
            }
        }
    });
}

/// Traces one step when tracing is active: `trace!("poll", "task={id}")`.
/// The arguments are evaluated only when it is.
#[macro_export]
macro_rules! trace {
    ($what:expr, $($arg:tt)*) => {
        if $crate::trace::active() {
            $crate::trace::emit($what, format_args!($($arg)*));
        }
    };
}

/// A duration printed in the unit that suits it (`812ns`, `4.1µs`, `2.4ms`,
/// `1.2s`), for trace lines.
#[derive(Debug, Clone, Copy)]
pub struct Short(pub Duration);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        match ns {
            0..1_000 => write!(f, "{ns}ns"),
            1_000..1_000_000 => write!(f, "{:.1}µs", ns as f64 / 1e3),
            1_000_000..1_000_000_000 => write!(f, "{:.1}ms", ns as f64 / 1e6),
            _ => write!(f, "{:.1}s", ns as f64 / 1e9),
        }
    }
}

/// Epoll event flags as `IN|OUT|RDHUP|HUP|ERR`, for trace lines.
#[derive(Debug, Clone, Copy)]
pub struct EpollFlags(pub u32);

impl fmt::Display for EpollFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(i32, &str); 6] = [
            (libc::EPOLLIN, "IN"),
            (libc::EPOLLOUT, "OUT"),
            (libc::EPOLLRDHUP, "RDHUP"),
            (libc::EPOLLHUP, "HUP"),
            (libc::EPOLLERR, "ERR"),
            (libc::EPOLLPRI, "PRI"),
        ];
        let mut first = true;
        for (bit, name) in NAMES {
            if self.0 & bit as u32 != 0 {
                if !first {
                    f.write_char('|')?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_char('-')?;
        }
        Ok(())
    }
}

struct Seconds(Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>12.6}", self.0.as_secs_f64())
    }
}

struct Local {
    label: Option<String>,
    limiter: Limiter,
    line: String,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local { label: None, limiter: Limiter::new(), line: String::new() })
    };
}

/// A per-thread budget of lines per whole second since the epoch.
#[derive(Debug)]
struct Limiter {
    second: u64,
    printed: u32,
    dropped: u64,
}

impl Limiter {
    const fn new() -> Limiter {
        Limiter {
            second: 0,
            printed: 0,
            dropped: 0,
        }
    }

    /// Whether a line at `elapsed` may print under `rate` lines per second
    /// (0: unlimited). When a new second opens, `suppressed` receives how
    /// many lines the previous ones dropped.
    fn admit(&mut self, elapsed: Duration, rate: u32, suppressed: &mut u64) -> bool {
        if rate == 0 {
            return true;
        }
        let second = elapsed.as_secs();
        if second != self.second {
            self.second = second;
            self.printed = 0;
            *suppressed = std::mem::take(&mut self.dropped);
        }
        if self.printed >= rate {
            self.dropped += 1;
            return false;
        }
        self.printed += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_admits_rate_per_second_and_reports_the_rest() {
        let mut l = Limiter::new();
        let mut suppressed = 0;
        let admitted = (0..10)
            .filter(|i| l.admit(Duration::from_millis(100 + i), 3, &mut suppressed))
            .count();
        assert_eq!(admitted, 3);
        assert_eq!(suppressed, 0);
        // The next second opens: the 7 dropped lines are reported once.
        assert!(l.admit(Duration::from_millis(1_050), 3, &mut suppressed));
        assert_eq!(suppressed, 7);
        suppressed = 0;
        assert!(l.admit(Duration::from_millis(1_060), 3, &mut suppressed));
        assert_eq!(suppressed, 0);
    }

    #[test]
    fn limiter_zero_rate_is_unlimited() {
        let mut l = Limiter::new();
        let mut suppressed = 0;
        assert!((0..10_000).all(|_| l.admit(Duration::ZERO, 0, &mut suppressed)));
    }

    #[test]
    fn durations_print_in_a_fitting_unit() {
        let s = |ns| Short(Duration::from_nanos(ns)).to_string();
        assert_eq!(s(812), "812ns");
        assert_eq!(s(4_100), "4.1µs");
        assert_eq!(s(2_400_000), "2.4ms");
        assert_eq!(s(1_200_000_000), "1.2s");
    }

    #[test]
    fn epoll_flags_print_by_name() {
        let f = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP) as u32;
        assert_eq!(EpollFlags(f).to_string(), "IN|OUT|RDHUP");
        assert_eq!(EpollFlags(0).to_string(), "-");
    }

    #[test]
    fn active_follows_the_feature() {
        assert_eq!(enable(0), COMPILED);
        assert_eq!(active(), COMPILED);
        disable();
        assert!(!active());
    }
}
