//! Which listener a request came in on, and what each listener answers.
//!
//! A server on the internet answers two audiences. The *public* listener
//! (`--bind`) serves the site: files under `--root`, their error pages and
//! listings. The *admin* listener (`--admin`, meant for loopback or a Unix
//! socket) serves the operator: stats, the dashboard and its event stream,
//! jobs, echo, sleep, health. The built-in endpoints can hold connections
//! (`sleep`), run CPU work (`jobs`) and publish the server's internals
//! (`stats`), so on a public listener with a site they are off unless the
//! operator names them (`--expose`): a request for one is answered as the
//! site answers any other path, with no hint that the endpoint exists.
//!
//! Without `--root` there is no site to protect: the public listener
//! answers every endpoint (the demo and benchmark mode of a first run).

/// The listener a connection was accepted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Surface {
    /// A `--bind` listener: the site.
    #[default]
    Public = 0,
    /// An `--admin` listener: the operator's endpoints.
    Admin = 1,
}

impl Surface {
    /// `public` or `admin`, as the access log and the stats name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Public => "public",
            Surface::Admin => "admin",
        }
    }
}

/// A built-in endpoint under `/_httplite/`, as `--expose` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Endpoint {
    /// `plaintext`: the benchmarks' constant answer.
    Plaintext,
    /// `json`: the benchmarks' constant JSON answer.
    Json,
    /// `stats`: the counters document.
    Stats,
    /// The dashboard: its page (`/_httplite/`, and `/` on the admin
    /// listener), its script and style, and its event stream (`events`).
    Dashboard,
    /// `jobs`: background work on the blocking pool.
    Jobs,
    /// `echo`: the request body streamed back.
    Echo,
    /// `sleep?ms=N`: an answer after a wait.
    Sleep,
    /// `health`: 200 while serving, 503 while draining.
    Health,
}

impl Endpoint {
    /// Every endpoint, in `--expose`'s order.
    pub const ALL: [Endpoint; 8] = [
        Endpoint::Plaintext,
        Endpoint::Json,
        Endpoint::Stats,
        Endpoint::Dashboard,
        Endpoint::Jobs,
        Endpoint::Echo,
        Endpoint::Sleep,
        Endpoint::Health,
    ];

    /// Its `--expose` name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Plaintext => "plaintext",
            Endpoint::Json => "json",
            Endpoint::Stats => "stats",
            Endpoint::Dashboard => "dashboard",
            Endpoint::Jobs => "jobs",
            Endpoint::Echo => "echo",
            Endpoint::Sleep => "sleep",
            Endpoint::Health => "health",
        }
    }

    /// The endpoint `--expose NAME` names (`events` is the dashboard's).
    pub fn parse(name: &str) -> Result<Endpoint, String> {
        if name == "events" {
            return Ok(Endpoint::Dashboard);
        }
        Endpoint::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Endpoint::ALL.iter().map(|e| e.name()).collect();
                format!("{name:?} is not an endpoint (one of {})", names.join(", "))
            })
    }

    /// The endpoint a path under `/_httplite/` belongs to (`None`: no
    /// endpoint, or the tests' `panic`).
    pub fn of(rest: &str) -> Option<Endpoint> {
        Some(match rest {
            "plaintext" => Endpoint::Plaintext,
            "json" => Endpoint::Json,
            "stats" => Endpoint::Stats,
            "" | "dashboard.js" | "dashboard.css" | "events" => Endpoint::Dashboard,
            "echo" => Endpoint::Echo,
            "sleep" => Endpoint::Sleep,
            "health" => Endpoint::Health,
            jobs if jobs.starts_with("jobs")
                && matches!(jobs.as_bytes().get(4), None | Some(b'/')) =>
            {
                Endpoint::Jobs
            }
            _ => return None,
        })
    }

    const fn bit(self) -> u16 {
        1 << self as u8
    }
}

/// What each listener answers: a set of [`Endpoint`]s per [`Surface`].
///
/// Built once at start-up; asking is one load and one bit test, cheap
/// enough for the plaintext path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exposure {
    /// Bit `e as u8` of entry `surface as usize` set: `e` is served there.
    sets: [u16; 2],
    /// Whether the public listener serves the whole of `/_httplite/`
    /// (demo mode): the admin's `/` page and unknown endpoints' 404s too.
    public_is_admin: bool,
    /// Whether the public listener hides a constant endpoint (`plaintext`
    /// or `json`): only then does the hot path look at the listener.
    hides_canned: bool,
}

impl Exposure {
    /// Demo mode (no `--root`): every endpoint on every listener.
    pub const DEMO: Exposure = Exposure {
        sets: [u16::MAX, u16::MAX],
        public_is_admin: true,
        hides_canned: false,
    };

    /// A site (`--root`): the admin listener serves every endpoint, the
    /// public one only `exposed` (`--expose`).
    pub fn site(exposed: &[Endpoint]) -> Exposure {
        let public = exposed.iter().fold(0, |set, e| set | e.bit());
        let canned = Endpoint::Plaintext.bit() | Endpoint::Json.bit();
        Exposure {
            sets: [public, u16::MAX],
            public_is_admin: false,
            hides_canned: public & canned != canned,
        }
    }

    /// Whether `e` is answered on `on`.
    #[inline]
    pub fn serves(&self, on: Surface, e: Endpoint) -> bool {
        self.sets[on as usize] & e.bit() != 0
    }

    /// Whether the constant endpoint `e` is hidden on the listener `*on`:
    /// the listener is read only where one is hidden at all (never in demo
    /// mode), so the plaintext path of the benchmarks does not pay for it.
    #[inline(always)]
    pub fn hides(&self, on: &Surface, e: Endpoint) -> bool {
        self.hides_canned && !self.serves(*on, e)
    }

    /// Whether `on` answers as the admin listener does: the whole of
    /// `/_httplite/`, and the dashboard at `/` when there is no site.
    #[inline]
    pub fn is_admin(&self, on: Surface) -> bool {
        on == Surface::Admin || self.public_is_admin
    }

    /// The endpoints the public listener serves, by name (for the start-up
    /// warning).
    pub fn public_names(&self) -> Vec<&'static str> {
        (Endpoint::ALL.iter())
            .filter(|e| self.serves(Surface::Public, **e))
            .map(|e| e.name())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Endpoint::ALL {
            assert_eq!(Endpoint::parse(e.name()), Ok(e));
        }
        assert_eq!(Endpoint::parse("events"), Ok(Endpoint::Dashboard));
        assert!(Endpoint::parse("panic").is_err());
        assert!(Endpoint::parse("").is_err());
    }

    #[test]
    fn paths_name_their_endpoint() {
        assert_eq!(Endpoint::of("jobs"), Some(Endpoint::Jobs));
        assert_eq!(Endpoint::of("jobs/12"), Some(Endpoint::Jobs));
        assert_eq!(Endpoint::of("jobsx"), None);
        assert_eq!(Endpoint::of(""), Some(Endpoint::Dashboard));
        assert_eq!(Endpoint::of("events"), Some(Endpoint::Dashboard));
        assert_eq!(Endpoint::of("panic"), None);
        assert_eq!(Endpoint::of("nope"), None);
    }

    #[test]
    fn a_site_exposes_only_what_is_named() {
        let x = Exposure::site(&[Endpoint::Stats]);
        assert!(x.serves(Surface::Public, Endpoint::Stats));
        assert!(!x.serves(Surface::Public, Endpoint::Plaintext));
        assert!(!x.is_admin(Surface::Public));
        for e in Endpoint::ALL {
            assert!(x.serves(Surface::Admin, e), "{e:?}");
        }
        assert_eq!(x.public_names(), ["stats"]);
        assert!(Exposure::DEMO.is_admin(Surface::Public));
        assert_eq!(Exposure::DEMO.public_names().len(), Endpoint::ALL.len());
    }
}
