//! Event-loop tracing: one line per SQE (`sqe op fd user_data`), per CQE
//! (`cqe res flags`: `MORE`, `BUFFER=id`) and per `io_uring_enter`. Compiled
//! in only with the `trace` feature; without it every site is `if false`.

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Turns tracing on (when compiled in) for every thread.
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether trace lines are printed.
#[inline(always)]
pub fn enabled() -> bool {
    cfg!(feature = "trace") && ON.load(Ordering::Relaxed)
}

/// Prints one trace line to stderr.
pub fn emit(kind: &str, args: std::fmt::Arguments<'_>) {
    eprintln!("[{:?}] {kind:<5} {args}", std::thread::current().id());
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
