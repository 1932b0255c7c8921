//! A stack overflow hits the guard page and is reported by name. Each case
//! runs in a child process (this test binary, re-executed with an
//! environment variable), since the child must die.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

const CHILD: &str = "COROUTINE_TEST_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(frame[7])
}

/// Recurses in small steps, raising SIGUSR1 at each: while there is room,
/// the handler (installed without `SA_ONSTACK`) runs on the coroutine's
/// stack; a step closer to the guard page than a signal frame's size, the
/// kernel cannot write the frame and forces a SIGSEGV instead. The steps are
/// far smaller than a frame, so that happens before the recursion itself
/// touches the guard page.
#[inline(never)]
fn recurse_raising(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 64]);
    // SAFETY: raise(3) sends a signal to this thread; its handler is a no-op.
    unsafe { libc::raise(libc::SIGUSR1) };
    if depth == u64::MAX {
        return 0;
    }
    recurse_raising(depth + 1) + u64::from(frame[7])
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// The child's side, run only by the tests below (`--ignored --exact child`
/// in a child process with `COROUTINE_TEST_CHILD` set): ignored in a normal
/// run, so that it never counts as a passing test.
#[test]
#[ignore = "a child process of the tests below"]
fn child() {
    let mode =
        std::env::var(CHILD).expect("run by the tests of this file, with COROUTINE_TEST_CHILD");
    if mode == "signal" {
        // SAFETY: all-zero is a valid sigaction to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // No SA_ONSTACK: the handler's frame goes on the interrupted stack.
        action.sa_flags = 0;
        // SAFETY: a valid action for a no-op handler; sa_mask initialised.
        unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
                0
            );
        }
    }
    if let Some(inside) = mode.strip_prefix("generator") {
        // A generator overflows: resumed from the thread's own stack
        // ("generator"), or from a scheduled coroutine ("generator-in-runtime").
        let overflow_generator = || {
            let mut g = coroutine::Coroutine::<(), u64>::with_stack_size(16 * 1024, |_| recurse(0));
            eprintln!("child: generator coroutine {}", g.id());
            let _ = g.resume();
        };
        if inside.is_empty() {
            overflow_generator();
        } else {
            coroutine::run(move || coroutine::spawn(overflow_generator).join().ok());
        }
        unreachable!("the child should have died");
    }
    let rt = coroutine::Builder::new()
        .stack_size(16 * 1024)
        .build()
        .unwrap();
    rt.block_on(move || {
        let h = coroutine::spawn(move || {
            if mode == "overflow" {
                recurse(0)
            } else if mode == "signal" {
                recurse_raising(0)
            } else {
                // A fault that is not ours: a wild pointer.
                // SAFETY: it is not; the child is meant to die here.
                u64::from(unsafe { std::ptr::read_volatile(16 as *const u8) })
            }
        });
        eprintln!("child: spawned coroutine {}", h.id());
        let _ = h.join();
    });
    unreachable!("the child should have died");
}

fn run_child(mode: &str, guard: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, mode)
    .env_remove("COROUTINE_GUARD");
    if let Some(g) = guard {
        cmd.env("COROUTINE_GUARD", g);
    }
    let out = cmd.output().unwrap();
    (
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The id the child printed for its `what` ("spawned", "generator")
/// coroutine.
fn announced_id<'a>(stderr: &'a str, what: &str) -> &'a str {
    let prefix = format!("child: {what} coroutine ");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("child did not start:\n{stderr}"))
}

#[test]
fn overflow_is_reported_with_the_coroutines_id() {
    // The default guard (a guard region where the kernel has them) and the
    // classic PROT_NONE page.
    for guard in [None, Some("mprotect")] {
        let (signal, stderr) = run_child("overflow", guard);
        assert!(
            signal == Some(libc::SIGABRT) || signal == Some(libc::SIGSEGV),
            "guard {guard:?}: child died of {signal:?}\n{stderr}"
        );
        let id = announced_id(&stderr, "spawned");
        let expected = format!("coroutine {id} overflowed its stack");
        assert!(
            stderr.contains(&expected),
            "guard {guard:?}: no `{expected}` in:\n{stderr}"
        );
        assert!(stderr.contains("guard page"), "{stderr}");
    }
}

/// Generators are found by the SIGSEGV handler too, whether or not a
/// scheduled coroutine resumed them (they do not set the thread-local that
/// names a scheduled coroutine; the handler finds them by address).
#[test]
fn a_generators_overflow_is_reported_with_its_id() {
    for mode in ["generator", "generator-in-runtime"] {
        let (signal, stderr) = run_child(mode, None);
        assert_eq!(signal, Some(libc::SIGABRT), "{mode}: {stderr}");
        let id = announced_id(&stderr, "generator");
        let expected = format!("coroutine {id} overflowed its stack");
        assert!(
            stderr.contains(&expected),
            "{mode}: no `{expected}` in:\n{stderr}"
        );
    }
}

#[test]
fn other_faults_keep_the_default_action() {
    let (signal, stderr) = run_child("wild", None);
    assert_eq!(signal, Some(libc::SIGSEGV), "{stderr}");
    assert!(!stderr.contains("overflowed"), "{stderr}");
}

/// A signal frame that does not fit above the guard page: the kernel forces
/// a SIGSEGV with `SI_KERNEL` and no fault address, which must still be
/// reported as this coroutine's overflow (before: no message, a bare
/// SIGSEGV).
#[test]
fn an_overflow_found_by_the_kernel_writing_a_signal_frame_is_reported() {
    let (signal, stderr) = run_child("signal", None);
    assert_eq!(signal, Some(libc::SIGABRT), "{stderr}");
    let id = announced_id(&stderr, "spawned");
    let expected = format!("coroutine {id} overflowed its stack: the kernel found no room");
    assert!(stderr.contains(&expected), "no `{expected}` in:\n{stderr}");
}
