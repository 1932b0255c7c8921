//! Pitfall: a coroutine overflows its stack and hits the guard page.
//!
//! A stackful coroutine's stack has a fixed size, chosen when it is spawned;
//! below it lies a guard page that faults on any access. A handler that
//! recurses deeper than the stack allows (here, a recursive parser of
//! nested brackets with a 512-byte buffer per level) runs into the guard
//! page, and the crate's SIGSEGV handler names the coroutine and aborts the
//! process: a clear death instead of silent corruption of whatever lies
//! below the stack.
//!
//! Since the process must die, each run happens in a child process (this
//! example, re-executed with an environment variable); the parent prints
//! what the child said and how it ended:
//!
//! 1. 64 levels of nesting on a 16 KiB stack: overflow, reported, aborted;
//! 2. the same input on the default 64 KiB stack, with watermarks on: it
//!    completes and reports how much stack it really used.
//!
//! Run: `cargo run --release -p coroutine --example pitfall_stack_overflow`
//! Explained in `docs/pitfalls/stack_overflow.md`.

use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::time::Instant;

const CHILD: &str = "PITFALL_STACK_CHILD";
const NESTING: usize = 64;
const SMALL_STACK: usize = 16 * 1024;

fn main() {
    if let Ok(size) = std::env::var(CHILD) {
        child(size.parse().expect("stack size"));
        return;
    }
    println!("a handler parses {NESTING} levels of nested brackets, recursively\n");
    parent(
        "16 KiB stack (broken)",
        SMALL_STACK,
        "the guard page caught the overflow; the process aborted",
    );
    parent(
        "default 64 KiB stack, watermarks on (fixed)",
        coroutine::DEFAULT_STACK_SIZE,
        "",
    );
    println!(
        "Size stacks from measurement (Builder::stack_watermarks or COROUTINE_WATERMARKS=1), \
         keep recursion bounded, and keep big buffers off the stack."
    );
}

fn parent(title: &str, stack: usize, on_signal: &str) {
    println!("== {title}");
    let start = Instant::now();
    let out = Command::new(std::env::current_exe().expect("own path"))
        .env(CHILD, stack.to_string())
        .output()
        .expect("run the child");
    let elapsed = start.elapsed();
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if !line.is_empty() {
            println!("   child: {line}");
        }
    }
    println!(
        "   child {} after {:.1} ms{}\n",
        describe(out.status),
        elapsed.as_secs_f64() * 1e3,
        match out.status.signal() {
            Some(_) if !on_signal.is_empty() => format!(": {on_signal}"),
            _ => String::new(),
        }
    );
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (_, Some(libc::SIGABRT)) => "died of SIGABRT".to_string(),
        (_, Some(libc::SIGSEGV)) => "died of SIGSEGV".to_string(),
        (_, Some(sig)) => format!("died of signal {sig}"),
        _ => format!("ended: {status}"),
    }
}

/// The child: one coroutine parses the nested input on a `stack`-byte stack.
fn child(stack: usize) {
    let input = format!("{}{}", "[".repeat(NESTING), "]".repeat(NESTING));
    let rt = coroutine::Builder::new()
        .stack_size(stack)
        .stack_watermarks(true)
        .build()
        .expect("runtime");
    let depth = rt.block_on(move || {
        let h = coroutine::spawn(move || parse(input.as_bytes(), 0).map(|(_, depth)| depth));
        eprintln!(
            "coroutine {} parses {NESTING} levels on a {} KiB stack",
            h.id(),
            stack / 1024
        );
        h.join().expect("no panic")
    });
    eprintln!(
        "parsed, depth {}; deepest stack use {} bytes of {}",
        depth.unwrap_or(0),
        rt.stats().stack_high_water,
        stack
    );
}

/// Parses `[...]` nesting recursively; returns the rest and the depth. Each
/// level keeps a 512-byte scratch buffer on the stack, as a real parser's
/// token buffer would.
#[inline(never)]
fn parse(input: &[u8], level: usize) -> Option<(&[u8], usize)> {
    let mut scratch = [0u8; 512];
    scratch[level % 512] = b'[';
    black_box(&mut scratch);
    match input.split_first() {
        Some((b'[', rest)) => {
            let (rest, depth) = parse(rest, level + 1)?;
            black_box(&scratch); // alive across the call, like a real token buffer
            match rest.split_first() {
                Some((b']', rest)) => Some((rest, depth)),
                _ => None,
            }
        }
        _ => Some((input, level)),
    }
}
