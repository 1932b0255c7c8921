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

/// The child's side: does nothing unless re-executed by the tests below.
#[test]
fn child() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    let rt = coroutine::Builder::new()
        .stack_size(16 * 1024)
        .build()
        .unwrap();
    rt.block_on(move || {
        let h = coroutine::spawn(move || {
            if mode == "overflow" {
                recurse(0)
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
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
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

fn spawned_id(stderr: &str) -> &str {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("child: spawned coroutine "))
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
        let id = spawned_id(&stderr);
        let expected = format!("coroutine {id} overflowed its stack");
        assert!(
            stderr.contains(&expected),
            "guard {guard:?}: no `{expected}` in:\n{stderr}"
        );
        assert!(stderr.contains("guard page"), "{stderr}");
    }
}

#[test]
fn other_faults_keep_the_default_action() {
    let (signal, stderr) = run_child("wild", None);
    assert_eq!(signal, Some(libc::SIGSEGV), "{stderr}");
    assert!(!stderr.contains("overflowed"), "{stderr}");
}
