//! Whether this machine lets us use io_uring, checked once before any
//! worker starts, and the one line that says why not. There is no silent
//! fallback: an operator who asked for `--runtime uring` learns that it is
//! unavailable and what to run instead.

use std::io;

/// Sets up (and drops) one proactor of the size the workers use: the
/// errors a worker would meet, met on the main thread first.
pub fn check() -> Result<(), String> {
    match super::worker::builder().build() {
        Ok(p) => {
            drop(p);
            Ok(())
        }
        Err(e) => Err(unavailable(&e)),
    }
}

/// The line for an io_uring set-up that failed with `e`: the cause, and
/// `--runtime stackless` as the alternative.
pub fn unavailable(e: &io::Error) -> String {
    let cause = match e.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no io_uring (ENOSYS)".to_string(),
        Some(libc::EPERM) => "io_uring is not permitted here (EPERM: \
             kernel.io_uring_disabled, or a seccomp filter such as a container's)"
            .to_string(),
        Some(libc::ENOMEM) => "the ring's memory cannot be allocated or locked \
             (ENOMEM: raise RLIMIT_MEMLOCK, ulimit -l)"
            .to_string(),
        _ => format!("io_uring cannot be set up ({e})"),
    };
    format!("--runtime uring: {cause}; use --runtime stackless instead")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each documented cause is named, with the alternative.
    #[test]
    fn each_cause_is_named_with_the_alternative() {
        for (errno, word) in [
            (libc::ENOSYS, "ENOSYS"),
            (libc::EPERM, "EPERM"),
            (libc::ENOMEM, "RLIMIT_MEMLOCK"),
            (libc::EINVAL, "cannot be set up"),
        ] {
            let line = unavailable(&io::Error::from_raw_os_error(errno));
            assert!(line.contains(word), "{line}");
            assert!(line.contains("--runtime stackless"), "{line}");
            assert!(!line.contains('\n'), "one line: {line}");
        }
    }
}
