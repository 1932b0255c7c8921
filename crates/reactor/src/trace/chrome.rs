//! Timelines: the trace as Chrome Trace Event JSON, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open.
//!
//! [`super::enable_chrome`] turns it on. Each thread gets a track (a `tid`
//! with a `thread_name` metadata event); the trace sites then record
//! duration slices ([`begin`]/[`end`]: `epoll_wait`, task polls, coroutine
//! resumes, handoffs), complete slices ([`complete_since`]: HTTP requests),
//! instants ([`instant`]: wakes, timers, spawns) and flow arrows
//! ([`flow_start`], [`flow_step`], [`flow_end`]): from a handoff to the
//! connection's first poll, from a wake to the poll it causes.
//!
//! Events are appended to a buffer of the thread's own (one uncontended
//! lock per event, never a lock shared by the workers); a full buffer goes
//! to the writer thread (`trace/sink.rs`) as one chunk, and the writer
//! also collects every buffer a few times a second. The file is the JSON
//! Array Format, one event per line, each line ending in `,`: the writer
//! never writes half an event, and [`super::finish`] closes the array.
//! A process that may run no thread writes its full buffers itself
//! instead, one `write(2)` each, to a file every forked process appends to
//! ([`super::enable_chrome_direct`]).
//!
//! The rate limit is the text trace's, per thread, but by slice: a slice
//! that is not admitted takes everything inside it along (its `E`, nested
//! slices, instants, flows), so what is written always nests, and an
//! admitted slice always gets its `E`. Dropped events are counted and
//! written in the closing metadata event (`httplite_trace`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::Limiter;
use super::sink;

mod flow;

pub use flow::{
    fd_flow, flow_end, flow_start, flow_step, handoff_flow, new_flow, remote_wake, take_fd_flow,
    wake, woken_poll,
};

/// Whether events go to a chrome trace (rather than text lines).
static ON: AtomicBool = AtomicBool::new(false);
/// The next flow id (0 means "none").
static NEXT_FLOW: AtomicU64 = AtomicU64::new(1);
/// The next thread's `tid` in the file.
static NEXT_TID: AtomicU32 = AtomicU32::new(1);

/// Whether tracing is on and writes a chrome trace. Guard every
/// chrome-only site with it.
#[inline(always)]
pub fn on() -> bool {
    super::active() && ON.load(Ordering::Relaxed)
}

pub(super) fn set_on(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// One thread's events not yet handed to the writer, and what it needs to
/// keep them nested and rate-limited.
pub(super) struct Track {
    pub(super) tid: u32,
    /// Serialized events, whole ones only.
    pub(super) bytes: Vec<u8>,
    /// How many events `bytes` holds (counted as dropped if it is).
    pub(super) events: u64,
    /// Open slices, innermost last: admitted (written) or not, and, if
    /// admitted, their start (ns since the epoch).
    open: Vec<Option<u64>>,
    /// The timestamp of the last event written (ns since the epoch).
    last_ns: u64,
    limiter: Limiter,
    /// Events dropped by the rate limit.
    pub(super) dropped: u64,
    /// Flows started by a wake, by the key of what was woken (a task or
    /// coroutine id), ended by its next poll.
    wake_flows: HashMap<u64, u64>,
    /// Set by [`super::finish`]: nothing more is recorded.
    pub(super) closed: bool,
}

impl Track {
    fn new(tid: u32, name: &str) -> Track {
        let mut t = Track {
            tid,
            bytes: Vec::with_capacity(4096),
            events: 0,
            open: Vec::new(),
            last_ns: 0,
            limiter: Limiter::new(),
            dropped: 0,
            wake_flows: HashMap::new(),
            closed: false,
        };
        let pid = std::process::id();
        let _ = writeln!(
            t.bytes,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\
             \"args\":{{\"name\":{}}}}},",
            Json(name)
        );
        let _ = writeln!(
            t.bytes,
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\
             \"args\":{{\"sort_index\":{}}}}},",
            sort_index(name, tid)
        );
        t.events = 2;
        t
    }

    /// Whether the innermost open slice (if any) was admitted: events
    /// inside a dropped slice are dropped with it.
    fn inside_admitted(&self) -> bool {
        !matches!(self.open.last(), Some(None))
    }

    /// Writes one event: `ph`, `name` (if any), `ts`, then `extra` (already
    /// JSON members, each starting with `,`).
    fn write(&mut self, ph: char, name: Option<&str>, ns: u64, extra: fmt::Arguments<'_>) {
        let ns = ns.max(self.last_ns);
        self.last_ns = ns;
        let _ = write!(self.bytes, "{{\"ph\":\"{ph}\"");
        if let Some(name) = name {
            let _ = write!(self.bytes, ",\"name\":{}", Json(name));
        }
        let _ = writeln!(
            self.bytes,
            ",\"ts\":{},\"pid\":{},\"tid\":{}{extra}}},",
            Micros(ns),
            std::process::id(),
            self.tid
        );
        self.events += 1;
    }

    /// Closes every open admitted slice at `ns` (at [`super::finish`]: a
    /// thread still inside `epoll_wait`).
    pub(super) fn close_open(&mut self, ns: u64) {
        while let Some(slice) = self.open.pop() {
            if slice.is_some() {
                self.write(
                    'E',
                    None,
                    ns,
                    format_args!(",\"args\":{{\"unfinished\":true}}"),
                );
            }
        }
    }
}

/// Where a thread's track sits in the UI: the acceptor first, then the
/// workers in order, then the pool threads in order, then the rest
/// (connection threads).
fn sort_index(name: &str, tid: u32) -> u64 {
    match name {
        "acceptor" | "signals" => 0,
        _ => {
            let numbered = |prefix| name.strip_prefix(prefix)?.parse::<u64>().ok();
            match (numbered("w"), numbered("pool")) {
                (Some(n), _) => 1 + n,
                (_, Some(n)) => 500 + n,
                _ => 1_000 + u64::from(tid),
            }
        }
    }
}

thread_local! {
    static TRACK: RefCell<Option<Arc<Mutex<Track>>>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's track (made on first use), unless tracing
/// was finished. Hands a full buffer to the writer afterwards.
fn with_track(f: impl FnOnce(&mut Track, u64)) {
    let Some(epoch) = super::epoch() else { return };
    let ns = u64::try_from(Instant::now().duration_since(epoch).as_nanos()).unwrap_or(u64::MAX);
    let _ = TRACK.try_with(|cell| {
        let mut cell = cell.borrow_mut();
        let track = cell.get_or_insert_with(new_track);
        let mut t = lock(track);
        if t.closed {
            return;
        }
        f(&mut t, ns);
        if t.bytes.len() >= sink::CHUNK {
            let bytes = std::mem::replace(&mut t.bytes, Vec::with_capacity(sink::CHUNK));
            let events = std::mem::take(&mut t.events);
            // Under the track's lock: this thread's chunks stay in order.
            sink::push(bytes, events);
        }
    });
}

/// This thread's track, registered with the sink. Its `tid` is the next
/// number, or, when every process writes the file itself, the OS thread id:
/// a fork child's counter is a copy of its parent's, and every child would
/// reuse the same numbers.
fn new_track() -> Arc<Mutex<Track>> {
    let tid = if sink::is_direct() {
        // SAFETY: gettid has no preconditions.
        u32::try_from(unsafe { libc::gettid() }).unwrap_or(0)
    } else {
        NEXT_TID.fetch_add(1, Ordering::Relaxed)
    };
    let track = Arc::new(Mutex::new(Track::new(tid, &super::thread_label())));
    sink::register(track.clone());
    track
}

/// In a fork child, right after the fork: drops the track copied from the
/// parent (its unwritten events are the parent's to write) and starts this
/// process's own, named `process` (a `process_name` event for this pid).
pub(super) fn after_fork(process: &str) {
    sink::forget_tracks();
    let _ = TRACK.try_with(|cell| {
        let track = new_track();
        let name = sink::process_name(process);
        {
            let mut t = lock(&track);
            t.bytes.extend_from_slice(name.as_bytes());
            t.events += 1;
        }
        *cell.borrow_mut() = Some(track);
    });
}

/// In a fork child about to exit: closes this thread's open slices and
/// writes its events; returns the events its rate limit dropped.
pub(super) fn before_exit() -> u64 {
    let Some(epoch) = super::epoch() else {
        return 0;
    };
    let ns = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    TRACK
        .try_with(|cell| {
            let Some(track) = cell.borrow_mut().take() else {
                return 0;
            };
            let mut t = lock(&track);
            t.close_open(ns);
            t.closed = true;
            let bytes = std::mem::take(&mut t.bytes);
            let events = std::mem::take(&mut t.events);
            sink::push(bytes, events);
            t.dropped
        })
        .unwrap_or(0)
}

/// Locks a track; a panic while one was held leaves it usable.
pub(super) fn lock(t: &Mutex<Track>) -> MutexGuard<'_, Track> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the rate limit admits one more event on this track now.
fn admit(t: &mut Track, ns: u64) -> bool {
    let rate = super::rate();
    let mut reported = 0;
    let elapsed = std::time::Duration::from_nanos(ns);
    if t.limiter.admit(elapsed, rate, &mut reported) {
        true
    } else {
        t.dropped += 1;
        false
    }
}

/// [`admit`] for an event inside the thread's open slices: dropped, and
/// counted, when an enclosing slice was itself dropped (its events would
/// hang in the air) or the rate limit says no.
fn admit_inside(t: &mut Track, ns: u64) -> bool {
    if !t.inside_admitted() {
        t.dropped += 1;
        return false;
    }
    admit(t, ns)
}

/// Opens a duration slice (`B`) named `name`; `args` are JSON members
/// (`"task":3`) or nothing. Every `begin` needs its [`end`] on the same
/// thread, properly nested.
pub fn begin(name: &str, args: fmt::Arguments<'_>) {
    with_track(|t, ns| {
        if !t.inside_admitted() {
            t.dropped += 1;
            t.open.push(None);
            return;
        }
        if !admit(t, ns) {
            t.open.push(None); // `admit` counted it
            return;
        }
        t.write('B', Some(name), ns, format_args!("{}", Args(args)));
        t.open.push(Some(t.last_ns));
    });
}

/// Closes the innermost slice (`E`), adding `args` to it.
pub fn end(args: fmt::Arguments<'_>) {
    with_track(|t, ns| match t.open.pop() {
        Some(Some(_)) => t.write('E', None, ns, format_args!("{}", Args(args))),
        Some(None) => t.dropped += 1,
        None => {} // a `begin` from before tracing started
    });
}

/// A thread-scoped instant event (`i`).
pub fn instant(name: &str, args: fmt::Arguments<'_>) {
    with_track(|t, ns| {
        if !t.inside_admitted() {
            t.dropped += 1;
        } else if admit(t, ns) {
            t.write(
                'i',
                Some(name),
                ns,
                format_args!(",\"s\":\"t\"{}", Args(args)),
            );
        }
    });
}

/// A complete slice (`X`) from `start` until now, such as one HTTP request.
/// It begins no earlier than the thread's innermost open slice or its last
/// event, so that it nests and timestamps stay in order per thread: a
/// request whose head arrived during an earlier poll shows as the part
/// handled in this one.
pub fn complete_since(name: &str, start: Instant, args: fmt::Arguments<'_>) {
    let Some(epoch) = super::epoch() else { return };
    let start_ns = u64::try_from(start.saturating_duration_since(epoch).as_nanos()).unwrap_or(0);
    with_track(|t, ns| {
        if !admit_inside(t, ns) {
            return;
        }
        let from = start_ns.max(t.last_ns).min(ns);
        t.write(
            'X',
            Some(name),
            from,
            format_args!(",\"dur\":{}{}", Micros(ns - from), Args(args)),
        );
        // The next event (another request of a pipelined batch) comes
        // after this one's end.
        t.last_ns = ns;
    });
}

/// `fmt::Arguments` of JSON members, written as `,"args":{...}` (or
/// nothing when empty).
struct Args<'a>(fmt::Arguments<'a>);

impl fmt::Display for Args<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.as_str() == Some("") {
            return Ok(());
        }
        write!(f, ",\"args\":{{{}}}", self.0)
    }
}

/// Nanoseconds written as microseconds with three decimals (the format's
/// unit is the microsecond).
struct Micros(u64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1_000, self.0 % 1_000)
    }
}

/// A string as a JSON string literal, quoted and escaped.
#[derive(Debug, Clone, Copy)]
pub struct Json<'a>(pub &'a str);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        let s = Json("a\"b\\c\nd\u{1}é").to_string();
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }

    #[test]
    fn micros_keep_nanoseconds() {
        assert_eq!(Micros(1_234_567).to_string(), "1234.567");
        assert_eq!(Micros(5).to_string(), "0.005");
    }

    #[test]
    fn empty_args_write_nothing() {
        assert_eq!(Args(format_args!("")).to_string(), "");
        assert_eq!(
            Args(format_args!("\"a\":1")).to_string(),
            ",\"args\":{\"a\":1}"
        );
    }

    #[test]
    fn tracks_sort_acceptor_then_workers_then_the_rest() {
        assert_eq!(sort_index("acceptor", 9), 0);
        assert_eq!(sort_index("w0", 9), 1);
        assert_eq!(sort_index("w12", 9), 13);
        assert_eq!(sort_index("pool3", 9), 503);
        assert_eq!(sort_index("httplite-pool", 9), 1_009);
    }

    #[test]
    fn a_dropped_slice_takes_its_contents_and_end_along() {
        let mut t = Track::new(1, "w0");
        t.open.push(None);
        assert!(!t.inside_admitted());
        t.open.pop();
        t.open.push(Some(5));
        assert!(t.inside_admitted());
        t.write('B', Some("x"), 10, format_args!(""));
        t.write('E', None, 3, format_args!(""));
        let text = String::from_utf8(t.bytes.clone()).unwrap();
        // A clock read that went backwards is written at the last time.
        assert!(text.contains("\"ph\":\"E\",\"ts\":0.010"), "{text}");
        t.close_open(20);
        assert!(
            String::from_utf8(t.bytes)
                .unwrap()
                .contains("\"unfinished\":true")
        );
    }
}
