//! The reverse proxy's settings and its pool of idle upstream connections:
//! what every design shares. The decisions (routes, the balancer, the
//! heads) are the site's ([`site::reverse_proxy`]); each driver does the
//! waiting (the blocking designs in `blocking/conn/proxy.rs`, the
//! stackless ones in `stackless/proxy.rs`).

pub mod args;
pub mod exchange;
pub mod idle;
pub mod shared;

use std::time::Duration;

use site::reverse_proxy::Routes;
use site::reverse_proxy::forward::HostPolicy;

pub use args::ProxyArgs;

/// `--proxy` and its options, fixed at start-up.
#[derive(Debug, Clone, Default)]
pub struct ReverseProxy {
    /// The routes (none: every request is the site's).
    pub routes: Routes,
    /// How long a connect may take (`--proxy-timeout-connect`).
    pub connect_timeout: Duration,
    /// How long the upstream may take to send the first byte of its
    /// answer, and between two reads of it (`--proxy-timeout-read`).
    pub read_timeout: Duration,
    /// Idle connections kept per upstream (`--proxy-keepalive`).
    pub keepalive: usize,
    /// Which `Host` the upstream gets (`--proxy-host`).
    pub host: HostPolicy,
}

impl ReverseProxy {
    /// Adds the `"upstreams"` member to the stats document: per route, its
    /// prefix and per upstream its counters (requests, errors by kind,
    /// pooled connections).
    pub fn add_stats(&self, stats: &site::stats::Stats) {
        if self.routes.is_empty() {
            return;
        }
        let routes = self.routes.clone();
        stats.add_extra(Box::new(move |s: &mut String| {
            let now = std::time::Instant::now();
            s.push_str(",\"upstreams\":[");
            for (n, route) in routes.iter().enumerate() {
                if n > 0 {
                    s.push(',');
                }
                s.push_str("{\"prefix\":");
                site::jobs::http::json_string(s, &route.prefix);
                s.push_str(",\"servers\":[");
                route.balancer.write_json(s, now);
                s.push_str("]}");
            }
            s.push(']');
        }));
    }
}

impl crate::cli::RuntimeKind {
    /// Where this design keeps its upstreams' states: shared between the
    /// processes under `fork`, on the heap otherwise.
    pub fn place(self) -> site::reverse_proxy::Place {
        match self {
            crate::cli::RuntimeKind::Fork => shared::place,
            _ => site::reverse_proxy::in_heap,
        }
    }
}
