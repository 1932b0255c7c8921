//! The reverse proxy's decisions, without I/O: which upstream a request
//! goes to, what its head becomes on the way there, and what the
//! upstream's response head becomes on the way back.
//!
//! ```text
//!   client ──▶ driver: decode the head ──▶ Routes::find(path): prefix, upstreams
//!                                          Balancer::pick ──▶ an upstream (skips the failing)
//!              forward::write_request_head  (hop-by-hop removed; Host, Via,
//!                                            X-Forwarded-*, Forwarded; body framing)
//!   upstream ◀─ driver: connect or reuse a pooled connection, send head and body
//!   upstream ──▶ driver: http1::ResponseDecoder
//!              answer::write_response_head  (hop-by-hop removed; Via; the client's framing)
//!   client ◀── driver: head, then the body streamed as it comes
//! ```
//!
//! The drivers own the waiting (connect, the pool of idle upstream
//! connections, timeouts, back-pressure); everything they need to decide
//! lives here, shared by every design, and each rule is a unit test on byte
//! strings. The header rules follow RFC 9110 §7.6 (hop-by-hop fields) and
//! §7.6.3 (`Via`), RFC 7239 (`Forwarded`) and RFC 9112 (framing).

pub mod answer;
pub mod forward;
pub mod upstream;

use std::sync::Arc;

pub use upstream::{
    Balance, Balancer, Health, Place, Upstream, UpstreamAddr, UpstreamState, UpstreamStats, in_heap,
};

/// One `--proxy PREFIX=URL[,URL...]`: requests whose path starts with
/// `prefix` go to one of `upstreams`.
#[derive(Debug, Clone)]
pub struct Route {
    /// The path prefix, as given (`/api/` or `/api`).
    pub prefix: String,
    /// Where its requests go, and how one is chosen.
    pub balancer: Arc<Balancer>,
}

impl Route {
    /// Parses `PREFIX=URL[,URL...]`; the upstreams are chosen by `balance`
    /// and put aside by `health`, and their states placed by `place`.
    pub fn parse(
        spec: &str,
        balance: Balance,
        health: Health,
        place: Place,
    ) -> Result<Route, String> {
        let (prefix, urls) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?}: expected PREFIX=URL[,URL...]"))?;
        if !prefix.starts_with('/') {
            return Err(format!("{prefix:?}: the prefix must start with '/'"));
        }
        let upstreams = urls
            .split(',')
            .map(|url| Upstream::parse(url, place))
            .collect::<Result<Vec<_>, _>>()?;
        if upstreams.is_empty() {
            return Err(format!("{spec:?}: no upstream"));
        }
        Ok(Route {
            prefix: prefix.to_string(),
            balancer: Arc::new(Balancer::new(upstreams, balance, health)),
        })
    }

    /// The part of `path` after the prefix if the route takes it: a
    /// prefix matches whole path segments (`/api` takes `/api` and
    /// `/api/x`, not `/apix`; `/api/` takes `/api/` and `/api/x`).
    pub fn rest<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        let whole_segment = self.prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/');
        whole_segment.then_some(rest)
    }
}

/// Every `--proxy` route; the longest matching prefix wins.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Arc<Route>>,
}

impl Routes {
    /// The routes, longest prefix first (the order of matching).
    pub fn new(mut routes: Vec<Route>) -> Routes {
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        Routes {
            routes: routes.into_iter().map(Arc::new).collect(),
        }
    }

    /// Whether there is no route (the common case: one branch per request).
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route for `path` and the path after its prefix.
    pub fn find<'p>(&self, path: &'p str) -> Option<(&Arc<Route>, &'p str)> {
        self.routes
            .iter()
            .find_map(|r| r.rest(path).map(|rest| (r, rest)))
    }

    /// Every route (for the stats document).
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().map(|r| &**r)
    }
}

/// The target sent upstream: the upstream's base path joined with what
/// follows the prefix, and the query unchanged.
pub fn upstream_target(base: &str, rest: &str, query: Option<&str>) -> String {
    let mut t = String::with_capacity(base.len() + rest.len() + query.map_or(0, |q| q.len() + 1));
    t.push_str(base);
    match (base.ends_with('/'), rest.strip_prefix('/')) {
        (true, Some(r)) => t.push_str(r),
        (false, None) if !rest.is_empty() => {
            t.push('/');
            t.push_str(rest);
        }
        _ => t.push_str(rest),
    }
    if t.is_empty() {
        t.push('/');
    }
    if let Some(q) = query {
        t.push('?');
        t.push_str(q);
    }
    t
}

#[cfg(test)]
mod tests;
