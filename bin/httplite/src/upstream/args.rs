//! The reverse proxy's command-line flags.

use std::time::Duration;

use clap::{Args, ValueEnum};
use site::reverse_proxy::forward::HostPolicy;
use site::reverse_proxy::{Balance, Health, Place, Route, Routes};

use super::ReverseProxy;
use crate::cli::parse_duration;

/// Which `Host` an upstream gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostArg {
    /// The client's.
    Preserve,
    /// The upstream URL's HOST:PORT.
    Upstream,
}

/// How an upstream is chosen among a route's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BalanceArg {
    /// In turn.
    RoundRobin,
    /// The one with the fewest requests in flight.
    LeastConn,
}

/// `--proxy` and its options.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// Forward requests whose path starts with PREFIX to an upstream;
    /// repeatable, e.g. --proxy /api/=http://127.0.0.1:3000,http://127.0.0.1:3001
    /// or --proxy /app=unix:/run/app.sock. The path after PREFIX is appended
    /// to the URL's path; the longest matching prefix wins; a prefix matches
    /// whole path segments. Everything else is the site's (--root).
    /// Upstreams speak HTTP/1.1 in clear text (no TLS to the upstream).
    /// See docs/deploy.md.
    #[arg(long = "proxy", value_name = "PREFIX=URL[,URL...]")]
    pub routes: Vec<String>,

    /// How long connecting to an upstream may take (then 504).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub proxy_timeout_connect: Duration,

    /// How long an upstream may take to send the first byte of its answer,
    /// and between two reads of it (then 504, or the connection closes if
    /// the answer has begun).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub proxy_timeout_read: Duration,

    /// Idle keep-alive connections kept per upstream for the next request
    /// (0: a new connection per request). Below the number of requests in
    /// flight at once, the rest of them open and close a connection each.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub proxy_keepalive: usize,

    /// The Host header an upstream gets.
    #[arg(long, value_enum, default_value_t = HostArg::Preserve)]
    pub proxy_host: HostArg,

    /// How a route's upstream is chosen for a request.
    #[arg(long, value_enum, default_value_t = BalanceArg::RoundRobin)]
    pub proxy_balance: BalanceArg,

    /// Failures in a row (refused or timed-out connect, timeout, malformed
    /// or cut-short answer) after which an upstream is skipped for
    /// --proxy-fail-timeout (0: never skipped).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub proxy_max_fails: u32,

    /// How long a failing upstream is skipped.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub proxy_fail_timeout: Duration,

    /// The settings, made once: the start-up check and the configuration
    /// share one name resolution and one set of counters.
    #[arg(skip)]
    parsed: std::sync::OnceLock<Result<ReverseProxy, String>>,
}

impl ProxyArgs {
    /// The settings, or why a `--proxy` value is wrong (a usage error);
    /// the upstreams' states placed by `place` (the first call's: the
    /// settings are made once).
    pub fn settings(&self, place: Place) -> Result<ReverseProxy, String> {
        self.parsed.get_or_init(|| self.parse(place)).clone()
    }

    fn parse(&self, place: Place) -> Result<ReverseProxy, String> {
        let balance = match self.proxy_balance {
            BalanceArg::RoundRobin => Balance::RoundRobin,
            BalanceArg::LeastConn => Balance::LeastConnections,
        };
        let health = Health {
            max_fails: self.proxy_max_fails,
            fail_timeout: self.proxy_fail_timeout,
        };
        let routes = (self.routes.iter())
            .map(|spec| {
                Route::parse(spec, balance, health, place).map_err(|e| format!("--proxy {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReverseProxy {
            routes: Routes::new(routes),
            connect_timeout: self.proxy_timeout_connect,
            read_timeout: self.proxy_timeout_read,
            keepalive: self.proxy_keepalive,
            host: match self.proxy_host {
                HostArg::Preserve => HostPolicy::Preserve,
                HostArg::Upstream => HostPolicy::Upstream,
            },
        })
    }
}
