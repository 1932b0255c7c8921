//! The servers behind a route: their addresses, how one is chosen for a
//! request, how a failing one is put aside (passive health), and what is
//! counted about each.
//!
//! Passive health, as nginx's `max_fails`/`fail_timeout`: an upstream that
//! fails [`Health::max_fails`] times in a row (a refused or timed-out
//! connect, a timeout waiting for its answer, a malformed or cut-short
//! response) is skipped for [`Health::fail_timeout`]; a success resets its
//! count. When every upstream of a route is put aside, the one whose time
//! out ends first is tried anyway rather than answering 502 at once: a
//! single-upstream route keeps trying its one server.
//!
//! What changes while serving (the counters, the health, the balancer's
//! turn) is an [`UpstreamState`] of plain atomics, placed where the design
//! says ([`Place`]): on the heap, or in memory that `--runtime fork`'s
//! processes share, so that every child counts into the same numbers,
//! learns that an upstream is down from the others, and takes its turn.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Where an upstream listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAddr {
    /// TCP (`http://HOST:PORT`; a name is resolved once, at start-up).
    Tcp(SocketAddr),
    /// A Unix stream socket (`unix:/run/app.sock`).
    Unix(PathBuf),
}

impl std::fmt::Display for UpstreamAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamAddr::Tcp(a) => write!(f, "{a}"),
            UpstreamAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// What is counted about one upstream (every worker adds to the same
/// counters).
#[derive(Debug, Default)]
#[repr(C)]
pub struct UpstreamStats {
    /// Requests sent to it.
    pub requests: AtomicU64,
    /// Requests it answered in full.
    pub responses: AtomicU64,
    /// Connects refused or failed.
    pub connect_failed: AtomicU64,
    /// Connects that took longer than `--proxy-timeout-connect`.
    pub connect_timeout: AtomicU64,
    /// Answers whose first byte took longer than `--proxy-timeout-read`.
    pub read_timeout: AtomicU64,
    /// Answers that were malformed (the client got 502).
    pub malformed: AtomicU64,
    /// Connections it closed before or during an answer.
    pub closed_early: AtomicU64,
    /// Requests cancelled because the client left.
    pub cancelled: AtomicU64,
    /// Requests sent on a pooled (reused) connection.
    pub reused: AtomicU64,
    /// Idle connections kept in the workers' pools now.
    pub pooled: AtomicU64,
    /// Upgrades it accepted (`101`): connections that became tunnels.
    pub tunnels: AtomicU64,
    /// Requests in flight now (the least-connections measure).
    pub in_flight: AtomicU64,
}

/// The state of one upstream that changes while serving: plain atomics with
/// no pointer inside, so that it may live in memory shared between
/// processes.
#[derive(Debug, Default)]
#[repr(C)]
pub struct UpstreamState {
    /// Its counters.
    pub stats: UpstreamStats,
    /// Failures in a row.
    fails: AtomicU32,
    /// Put aside until this many milliseconds after the balancer's epoch
    /// (0: not put aside).
    down_until_ms: AtomicU64,
    /// The route's turn (round robin), kept in its first upstream's state
    /// so that a route's whole state is its upstreams'.
    turn: AtomicUsize,
}

/// Where an [`UpstreamState`] is placed; [`in_heap`] unless the design's
/// processes must share it. It lives as long as the process: routes are
/// made once, at start-up.
pub type Place = fn() -> Result<&'static UpstreamState, String>;

/// A new state on the heap, never freed (routes live as long as the
/// process).
pub fn in_heap() -> Result<&'static UpstreamState, String> {
    Ok(Box::leak(Box::default()))
}

/// One server behind a route.
#[derive(Debug)]
pub struct Upstream {
    /// Where it listens.
    pub addr: UpstreamAddr,
    /// The path prepended to what follows the route's prefix (`/` unless
    /// the URL has one).
    pub base_path: String,
    /// `HOST[:PORT]` as the URL gave it: the `Host` sent under
    /// `--proxy-host upstream`.
    pub authority: String,
    state: &'static UpstreamState,
}

impl Upstream {
    /// Parses `http://HOST:PORT[/PATH]` or `unix:/PATH`; its state goes
    /// where `place` puts it.
    pub fn parse(url: &str, place: Place) -> Result<Upstream, String> {
        let url = url.trim();
        if let Some(path) = url.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!("{url:?}: a Unix socket path must be absolute"));
            }
            return Ok(Upstream {
                addr: UpstreamAddr::Unix(PathBuf::from(path)),
                base_path: "/".into(),
                authority: "localhost".into(),
                state: place()?,
            });
        }
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            if url.starts_with("https://") {
                format!("{url:?}: TLS to an upstream is not supported (use http:// or unix:)")
            } else {
                format!("{url:?}: expected http://HOST:PORT[/PATH] or unix:/PATH")
            }
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?}: expected http://HOST:PORT[/PATH]"));
        }
        if path.contains(['?', '#']) {
            return Err(format!(
                "{url:?}: an upstream URL takes no query or fragment"
            ));
        }
        let with_port = if has_port(authority) {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("{url:?}: cannot resolve {authority}: {e}"))?
            .next()
            .ok_or_else(|| format!("{url:?}: {authority} has no address"))?;
        Ok(Upstream {
            addr: UpstreamAddr::Tcp(addr),
            base_path: path.to_string(),
            authority: authority.to_string(),
            state: place()?,
        })
    }

    /// Its counters.
    pub fn stats(&self) -> &UpstreamStats {
        &self.state.stats
    }
}

/// Whether `authority` ends in `:PORT` (an IPv6 literal's colons are inside
/// its brackets).
fn has_port(authority: &str) -> bool {
    match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']') && authority[i + 1..].parse::<u16>().is_ok(),
        None => false,
    }
}

/// How an upstream is chosen among a route's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    /// In turn.
    #[default]
    RoundRobin,
    /// The one with the fewest requests in flight (ties in turn).
    LeastConnections,
}

/// When an upstream is put aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    /// Failures in a row that put it aside (0: never).
    pub max_fails: u32,
    /// For how long.
    pub fail_timeout: Duration,
}

impl Default for Health {
    /// nginx's defaults: one failure puts an upstream aside for 10 s.
    fn default() -> Health {
        Health {
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
        }
    }
}

/// A route's upstreams and the choice among them.
#[derive(Debug)]
pub struct Balancer {
    upstreams: Vec<Upstream>,
    balance: Balance,
    health: Health,
    /// Made before any fork, so that every process reads its
    /// milliseconds from the same instant.
    epoch: Instant,
}

impl Balancer {
    /// Chooses among `upstreams` (at least one).
    pub fn new(upstreams: Vec<Upstream>, balance: Balance, health: Health) -> Balancer {
        assert!(!upstreams.is_empty(), "a route has at least one upstream");
        Balancer {
            upstreams,
            balance,
            health,
            epoch: Instant::now(),
        }
    }

    /// Every upstream, by index.
    pub fn upstreams(&self) -> &[Upstream] {
        &self.upstreams
    }

    /// The upstream for the next request (an index into
    /// [`upstreams`](Balancer::upstreams)), other than those in `tried`
    /// where there is one. It counts as in flight until
    /// [`finished`](Balancer::finished).
    pub fn pick(&self, now: Instant, tried: &[usize]) -> usize {
        let now_ms = self.ms(now);
        let n = self.upstreams.len();
        let start = self.upstreams[0].state.turn.fetch_add(1, Relaxed) % n;
        let usable = |i: usize| {
            !tried.contains(&i) && self.upstreams[i].state.down_until_ms.load(Relaxed) <= now_ms
        };
        let order = (0..n).map(|k| (start + k) % n);
        let chosen = match self.balance {
            Balance::RoundRobin => order.clone().find(|&i| usable(i)),
            Balance::LeastConnections => order
                .clone()
                .filter(|&i| usable(i))
                .min_by_key(|&i| self.upstreams[i].state.stats.in_flight.load(Relaxed)),
        };
        // All put aside (or tried): the one back soonest, untried first.
        let i = chosen.unwrap_or_else(|| {
            order
                .min_by_key(|&i| {
                    let u = &self.upstreams[i];
                    (tried.contains(&i), u.state.down_until_ms.load(Relaxed))
                })
                .unwrap_or(start)
        });
        let stats = &self.upstreams[i].state.stats;
        stats.in_flight.fetch_add(1, Relaxed);
        stats.requests.fetch_add(1, Relaxed);
        i
    }

    /// The request sent to upstream `i` is over: `ok` if it answered (any
    /// status: a 500 is an answer), or a failure that counts towards
    /// putting it aside.
    pub fn finished(&self, i: usize, ok: bool, now: Instant) {
        let u = self.upstreams[i].state;
        u.stats.in_flight.fetch_sub(1, Relaxed);
        if ok {
            u.stats.responses.fetch_add(1, Relaxed);
            u.fails.store(0, Relaxed);
            return;
        }
        let fails = u.fails.fetch_add(1, Relaxed) + 1;
        if self.health.max_fails > 0 && fails >= self.health.max_fails {
            let until = self.ms(now + self.health.fail_timeout).max(1);
            u.down_until_ms.store(until, Relaxed);
            u.fails.store(0, Relaxed);
        }
    }

    /// Whether upstream `i` is put aside now.
    pub fn is_down(&self, i: usize, now: Instant) -> bool {
        self.upstreams[i].state.down_until_ms.load(Relaxed) > self.ms(now)
    }

    fn ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// The stats document's members for this route's upstreams: one object
    /// each, appended to `s` (comma-separated).
    pub fn write_json(&self, s: &mut String, now: Instant) {
        use std::fmt::Write as _;
        for (i, u) in self.upstreams.iter().enumerate() {
            let st = &u.state.stats;
            let n = |c: &AtomicU64| c.load(Relaxed);
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"addr\":");
            crate::jobs::http::json_string(s, &u.addr.to_string());
            let _ = write!(
                s,
                ",\"down\":{},\"requests\":{},\"responses\":{},\"in_flight\":{},\
                 \"reused\":{},\"pooled\":{},\"tunnels\":{},\"errors\":{{\"connect_failed\":{},\
                 \"connect_timeout\":{},\"read_timeout\":{},\"malformed\":{},\
                 \"closed_early\":{},\"cancelled\":{}}}}}",
                self.is_down(i, now),
                n(&st.requests),
                n(&st.responses),
                n(&st.in_flight),
                n(&st.reused),
                n(&st.pooled),
                n(&st.tunnels),
                n(&st.connect_failed),
                n(&st.connect_timeout),
                n(&st.read_timeout),
                n(&st.malformed),
                n(&st.closed_early),
                n(&st.cancelled),
            );
        }
    }
}

#[cfg(test)]
mod tests;
