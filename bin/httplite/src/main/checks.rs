//! The flag combinations clap cannot refuse by itself (they depend on one
//! another, or on the runtime chosen), each refused in one line before
//! anything starts.

use clap::parser::ValueSource;

use httplite::cli::{BindAddr, Cli, ProxyOn, RuntimeKind, TraceFormat};

/// An `--admin` on a `--bind`'s port (or path) could not be told apart
/// from it: a connection is placed by its socket's address.
fn check_admin_binds(cli: &Cli) -> Result<(), String> {
    let default = [BindAddr::Tcp(([127, 0, 0, 1], 8080).into())];
    let binds = if cli.bind.is_empty() {
        &default[..]
    } else {
        &cli.bind
    };
    for admin in &cli.admin {
        let clash = binds.iter().find(|b| match (b, admin) {
            (BindAddr::Tcp(b), BindAddr::Tcp(a)) => {
                a.port() != 0
                    && a.port() == b.port()
                    && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
            }
            (BindAddr::Unix(b), BindAddr::Unix(a)) => a == b,
            _ => false,
        });
        if let Some(bind) = clash {
            return Err(format!(
                "--admin {admin} overlaps --bind {bind}: give the admin listener its own port"
            ));
        }
    }
    Ok(())
}

/// The flags the chosen runtime cannot honour, refused in one line.
pub(super) fn check_runtime_flags(cli: &Cli, matches: &clap::ArgMatches) -> Result<(), String> {
    let chrome = cli.trace_format == Some(TraceFormat::Chrome);
    if chrome && cli.trace_file.is_none() {
        return Err("--trace-format chrome needs --trace-file FILE".to_string());
    }
    check_admin_binds(cli)?;
    cli.upstream.settings(cli.runtime.place())?;
    if !cli.proxy_protocol.is_empty() && cli.trusted_proxy.is_empty() {
        return Err(
            "--proxy-protocol needs --trusted-proxy: the proxies allowed to send \
                    the header (every other peer is refused)"
                .to_string(),
        );
    }
    for on in &cli.proxy_protocol {
        if let ProxyOn::Bind(b) = on
            && !cli.bind.contains(b)
        {
            return Err(format!(
                "--proxy-protocol={b}: no --bind {b} (name one of the --bind values, \
                 or give --proxy-protocol alone for every listener)"
            ));
        }
    }
    if cli.runtime != RuntimeKind::Fork {
        return Ok(());
    }
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    match httplite::fork::incompatible_flag(given) {
        Some((id, why)) => Err(format!(
            "--runtime fork does not take --{}: {why} (see docs/threadpool-and-fork.md)",
            id.replace('_', "-")
        )),
        None => Ok(()),
    }
}
