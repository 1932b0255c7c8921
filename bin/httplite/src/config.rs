//! The settings every connection consults, fixed at start-up.

use std::time::Duration;

use crate::cli::Cli;
use crate::forwarded::Trusted;
use crate::proxy::{Listeners, Proxy};
use crate::surface::AdminListeners;

/// Limits and timeouts shared by all workers.
#[derive(Debug, Clone)]
pub struct Config {
    /// Parser limits (request line, head, headers, body).
    pub limits: http1::Limits,
    /// Time allowed to send a complete request head.
    pub header_timeout: Duration,
    /// Time a keep-alive connection may sit idle.
    pub idle_timeout: Duration,
    /// Time a client may stop reading before it is closed.
    pub write_timeout: Duration,
    /// Largest file body sent with `sendfile(2)`; larger ones are copied.
    pub sendfile_max: u64,
    /// `--proxy-protocol` and `--trusted-proxy` (the listeners are filled
    /// in once bound: see `main`).
    pub proxy: Proxy,
    /// The `--admin` listeners (filled in once bound: see `main`).
    pub admin: AdminListeners,
    /// `--proxy` and its options.
    pub reverse_proxy: crate::upstream::ReverseProxy,
}

impl Config {
    /// From the command line.
    pub fn from_cli(cli: &Cli) -> Config {
        Config {
            limits: http1::Limits {
                max_body: cli.max_body,
                require_host: true,
                ..http1::Limits::default()
            },
            header_timeout: cli.header_timeout,
            idle_timeout: cli.idle_timeout,
            write_timeout: cli.write_timeout,
            sendfile_max: cli.sendfile_max,
            proxy: Proxy {
                listeners: Listeners::None,
                trusted: Trusted::new(&cli.trusted_proxy),
            },
            admin: AdminListeners::default(),
            // Checked at start-up (`main`), so an error here cannot be.
            reverse_proxy: cli
                .upstream
                .settings(cli.runtime.place())
                .unwrap_or_default(),
        }
    }
}
