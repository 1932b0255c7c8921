//! Event-loop tracing: one line per SQE (`sqe op fd user_data`), per CQE
//! (`cqe res flags`: `MORE`, `BUFFER=id`) and per `io_uring_enter`, or the
//! same steps on a timeline. Compiled in only with the `trace` feature;
//! without it every site is `if false`.
//!
//! A line has the columns of the reactor crate's trace lines: seconds
//! since tracing started, the thread's name, the kind of step, then
//! `key=value` details. This crate writes them to stderr itself ([`enable`],
//! every line), or hands them to a program's line writer
//! ([`enable_lines`]): httplite passes the reactor's, so that the ring's
//! lines go where the other layers' go (`--trace-file`) and count against
//! the same per-thread budget (`--trace-rate`).
//!
//! A timeline is the program's: this crate writes no file and knows no
//! format. A [`Timeline`] installed with [`enable_timeline`] receives each
//! enter as a slice (its [`Timeline::begin`] before the wait, its
//! [`Timeline::end`] after the CQEs were dispatched and their futures
//! woken, so that a wake is seen inside the wait that caused it) and each
//! SQE and CQE as an instant with JSON members as arguments (`user_data`
//! as a hex string, which links an SQE to its CQEs: a JSON number loses
//! the high bits of a `u64` in a JavaScript viewer).

use std::fmt;
use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::abi::{
    Cqe, IORING_CQE_BUFFER_SHIFT, IORING_CQE_F_BUFFER, IORING_CQE_F_MORE, IORING_OP_RECV,
    IORING_RECV_MULTISHOT, Sqe, op_name,
};

static ON: AtomicBool = AtomicBool::new(false);
static TIMELINE: OnceLock<&'static dyn Timeline> = OnceLock::new();
static LINES: OnceLock<LineWriter> = OnceLock::new();
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// A program's trace line writer: the kind of step (`sqe`, `cqe`,
/// `enter`) and its details. `reactor::trace::emit` is one.
pub type LineWriter = fn(&str, fmt::Arguments<'_>);

/// Where the ring's steps go instead of stderr lines: a program's timeline
/// writer (httplite's puts them on the worker's track).
pub trait Timeline: Sync {
    /// Opens a duration slice named `name` on the calling thread;
    /// `args` are JSON members (`"wait":true`) or nothing.
    fn begin(&self, name: &str, args: fmt::Arguments<'_>);
    /// Closes the calling thread's innermost slice, adding `args`.
    fn end(&self, args: fmt::Arguments<'_>);
    /// An instant event on the calling thread.
    fn instant(&self, name: &str, args: fmt::Arguments<'_>);
}

/// Turns tracing on (when compiled in) for every thread, as lines on
/// stderr, every one of them (no rate limit: [`enable_lines`] brings the
/// program's).
pub fn enable() {
    EPOCH.get_or_init(Instant::now);
    ON.store(true, Ordering::Relaxed);
}

/// Turns tracing on (when compiled in) as lines handed to `writer`, which
/// formats, limits and writes them. `false` if a writer was installed
/// already.
pub fn enable_lines(writer: LineWriter) -> bool {
    let fresh = LINES.set(writer).is_ok();
    enable();
    fresh
}

/// Turns tracing on as events on `timeline` (when compiled in), instead of
/// lines. `false` if a timeline was installed already.
pub fn enable_timeline(timeline: &'static dyn Timeline) -> bool {
    let fresh = TIMELINE.set(timeline).is_ok();
    enable();
    fresh
}

/// Whether trace lines are printed.
#[inline(always)]
pub fn enabled() -> bool {
    cfg!(feature = "trace") && ON.load(Ordering::Relaxed)
}

fn timeline() -> Option<&'static dyn Timeline> {
    TIMELINE.get().copied()
}

/// One trace line: to the writer of [`enable_lines`], else to stderr in
/// the same columns.
pub fn emit(kind: &str, args: fmt::Arguments<'_>) {
    if let Some(writer) = LINES.get() {
        writer(kind, args);
        return;
    }
    let elapsed = EPOCH.get().map_or(Duration::ZERO, Instant::elapsed);
    let thread = std::thread::current();
    let text = line(elapsed, thread.name().unwrap_or("?"), kind, args);
    // One write per line, as the reactor's: lines from several threads
    // interleave whole.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A line in the reactor's columns: seconds, thread, kind, details.
fn line(elapsed: Duration, label: &str, kind: &str, args: fmt::Arguments<'_>) -> String {
    let secs = elapsed.as_secs_f64();
    format!("{secs:>12.6} {label:<6} {kind:<8} {args}\n")
}

/// `trace!("kind", "fmt", args..)`: a line when tracing is enabled.
#[macro_export]
macro_rules! trace {
    ($kind:expr, $($arg:tt)*) => {
        if $crate::trace::enabled() {
            $crate::trace::emit($kind, format_args!($($arg)*));
        }
    };
}

/// One SQE queued. Call it only when [`enabled`].
pub(crate) fn sqe(sqe: &Sqe) {
    let multishot = sqe.opcode == IORING_OP_RECV && sqe.ioprio & IORING_RECV_MULTISHOT != 0;
    let op = op_name(sqe.opcode);
    let (fd, user_data) = (sqe.fd, sqe.user_data);
    match timeline() {
        Some(t) => t.instant(
            "sqe",
            format_args!(
                "\"op\":\"{op}\",\"fd\":{fd},\"user_data\":\"{user_data:#x}\",\"multishot\":{multishot}"
            ),
        ),
        None => emit(
            "sqe",
            format_args!(
                "op={op} fd={fd} user_data={user_data:#x}{}",
                if multishot { " MULTISHOT" } else { "" }
            ),
        ),
    }
}

/// One CQE reaped. Call it only when [`enabled`].
pub(crate) fn cqe(cqe: &Cqe) {
    let (user_data, res, flags) = (cqe.user_data, cqe.res, cqe.flags);
    let more = flags & IORING_CQE_F_MORE != 0;
    let buffer = (flags & IORING_CQE_F_BUFFER != 0).then_some(flags >> IORING_CQE_BUFFER_SHIFT);
    match timeline() {
        Some(t) => t.instant(
            "cqe",
            format_args!(
                "\"user_data\":\"{user_data:#x}\",\"res\":{res},\"flags\":{flags},\"more\":{more}{}",
                Buffer(buffer, ",\"buffer\":")
            ),
        ),
        None => emit(
            "cqe",
            format_args!(
                "user_data={user_data:#x} res={res} flags={}{}",
                if more { "MORE " } else { "" },
                Buffer(buffer, "BUFFER=")
            ),
        ),
    }
}

/// A provided buffer's id after `prefix`, or nothing.
struct Buffer(Option<u32>, &'static str);

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(id) => write!(f, "{}{id}", self.1),
            None => Ok(()),
        }
    }
}

/// An `io_uring_enter` begins: on a timeline, its slice opens. Call it
/// only when [`enabled`].
pub(crate) fn enter_begin(wait: bool, timeout: Option<Duration>) {
    if let Some(t) = timeline() {
        let ms = timeout.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        t.begin(
            "io_uring_enter",
            format_args!("\"wait\":{wait},\"timeout_ms\":{ms}"),
        );
    }
}

/// The enter returned with `cqes` completions after submitting
/// `submitted` SQEs: a line (the timeline's slice stays open for the
/// CQEs, until [`enter_end`]). Call it only when [`enabled`].
pub(crate) fn entered(
    started: Instant,
    submitted: u32,
    wait: bool,
    timeout: Option<Duration>,
    cqes: usize,
) {
    if timeline().is_none() {
        emit(
            "enter",
            format_args!(
                "submitted={submitted} wait={wait} timeout={timeout:?} cqes={cqes} slept={:?}",
                started.elapsed()
            ),
        );
    }
}

/// The turn's CQEs were dispatched and their wakes sent: on a timeline,
/// the enter's slice closes. Call it only when [`enabled`].
pub(crate) fn enter_end(submitted: u32, cqes: usize) {
    if let Some(t) = timeline() {
        t.end(format_args!("\"submitted\":{submitted},\"cqes\":{cqes}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_id_prints_only_when_there_is_one() {
        assert_eq!(Buffer(Some(7), "BUFFER=").to_string(), "BUFFER=7");
        assert_eq!(Buffer(None, "BUFFER=").to_string(), "");
    }

    #[test]
    fn a_line_has_the_reactor_columns() {
        let l = line(
            Duration::from_micros(512_034),
            "w0",
            "sqe",
            format_args!("op=RECV fd=7"),
        );
        assert_eq!(l, "    0.512034 w0     sqe      op=RECV fd=7\n");
    }
}
