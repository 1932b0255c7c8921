//! `--trace`, `--trace-format` and `--trace-file`: which trace this process
//! writes, and where (a process started by an upgrade keeps clear of the
//! old process's file).

use anyhow::{Context as _, Result};

use httplite::cli::{Cli, RuntimeKind, TraceFormat};

/// `--trace`, `--trace-format`, `--trace-file` (each of the last two
/// implies the first). `upgraded`: this process was started by an upgrade
/// (see [`trace_file`]).
pub(super) fn start_trace(cli: &Cli, upgraded: bool) -> Result<()> {
    if !cli.trace && cli.trace_format.is_none() && cli.trace_file.is_none() {
        return Ok(());
    }
    let rate = cli.trace_rate;
    let file = cli.trace_file.as_deref().map(|f| trace_file(f, upgraded));
    let compiled = match (cli.trace_format, &file) {
        (Some(TraceFormat::Chrome), Some(path)) if reactor::trace::COMPILED => {
            // Fork's parent may start no thread: every process appends its
            // own events to the file (see reactor::trace::enable_chrome_direct).
            let started = match cli.runtime {
                RuntimeKind::Fork => {
                    reactor::trace::enable_chrome_direct(path, rate, "httplite fork parent")
                }
                _ => reactor::trace::enable_chrome(path, rate),
            };
            started.with_context(|| format!("--trace-file {}: cannot create", path.display()))?
        }
        (_, Some(path)) if reactor::trace::COMPILED => reactor::trace::enable_text_file(path, rate)
            .with_context(|| format!("--trace-file {}: cannot create", path.display()))?,
        _ => reactor::trace::enable(rate),
    };
    if let (Some(asked), Some(path)) = (&cli.trace_file, &file)
        && asked != path
        && compiled
    {
        eprintln!(
            "httplite: started by an upgrade: the trace goes to {} ({} is the old process's)",
            path.display(),
            asked.display()
        );
    }
    if !compiled {
        anyhow::bail!(
            "--trace: this build has no tracing compiled in; rebuild with \
             `cargo run --release -p httplite --features trace -- --trace`"
        );
    }
    if reactor::trace::chrome::on() {
        httplite::pool_timeline::install();
        if cli.runtime == RuntimeKind::Uring {
            httplite::uring::trace::install();
        }
    }
    Ok(())
}

/// The file `--trace-file FILE` means for this process: FILE, or, in a
/// process started by an upgrade, `FILE.PID` with this process's pid. The
/// upgrade passes the same flags, and the old process is still writing
/// FILE until it has drained: opening it again would truncate the old
/// process's timeline under its writer.
fn trace_file(asked: &std::path::Path, upgraded: bool) -> std::path::PathBuf {
    if !upgraded {
        return asked.to_path_buf();
    }
    let mut name = asked.as_os_str().to_owned();
    name.push(format!(".{}", std::process::id()));
    name.into()
}
