//! The blocking pool on a timeline (`--trace-format chrome`): each pool
//! thread gets a track (`pool0`, `pool1`... in the order they first run a
//! task), each task a slice named by what it is (`listing`, `sha256`...),
//! with an arrow from the poll that submitted it. The wake its completion
//! sends (a listing's waiting connection) is a cross-thread wake, drawn by
//! the executor or the coroutine scheduler from inside that slice.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use reactor::trace::{self, chrome};

/// The observer [`install`] gives the pool.
struct PoolTimeline;

/// The next pool thread's number.
static NEXT: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// Whether this pool thread has its track's name already.
    static NAMED: Cell<bool> = const { Cell::new(false) };
}

impl pool::Observer for PoolTimeline {
    fn submit(&self, _what: &'static str) -> u64 {
        if !chrome::on() {
            return 0;
        }
        let id = chrome::new_flow();
        // From the submitting poll's slice; none outside one.
        if chrome::flow_start(id) { id } else { 0 }
    }

    fn start(&self, what: &'static str, token: u64) {
        if !chrome::on() {
            return;
        }
        if !NAMED.replace(true) {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            trace::set_thread_label(&format!("pool{n}"));
        }
        chrome::begin(what, format_args!("\"job\":{}", chrome::Json(what)));
        chrome::flow_end(token);
    }

    fn finish(&self) {
        if chrome::on() {
            chrome::end(format_args!(""));
        }
    }
}

/// Puts every pool's tasks on the timeline from now on. Call it once the
/// chrome trace is on.
pub fn install() {
    static OBSERVER: PoolTimeline = PoolTimeline;
    let _ = pool::set_observer(&OBSERVER);
}
