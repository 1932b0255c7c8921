//! Routing: what to do with a request, decided without any I/O so that every
//! runtime (stackless, stackful, threads) shares it.

use std::sync::Arc;
use std::time::Duration;

use http1::{HeaderValue, Method, Request, StaticResponse, Status};

use crate::action::TEXT;
pub use crate::action::{Action, PREFIX};
use crate::events::EventsConfig;
use crate::exposure::{Endpoint, Exposure, Surface};
use crate::jobs::Jobs;
use crate::static_files::{StaticReply, StaticRoot};
use crate::stats::Stats;

/// Longest `/_httplite/sleep?ms=N` honoured.
pub const MAX_SLEEP: Duration = Duration::from_secs(60);

const HELLO: &[u8] = b"Hello, World!";
const HELLO_JSON: &[u8] = b"{\"message\":\"Hello, World!\"}";
const JSON: HeaderValue<'static> = HeaderValue::from_static("application/json");

/// `/_httplite/plaintext`.
static PLAINTEXT: StaticResponse = StaticResponse {
    status: Status::OK,
    content_type: Some(http1::TEXT_PLAIN),
    body: HELLO,
};
/// `/_httplite/json`.
static HELLO_JSON_RESPONSE: StaticResponse = StaticResponse {
    status: Status::OK,
    content_type: Some(JSON),
    body: HELLO_JSON,
};

/// The methods the server supports somewhere: `OPTIONS *`'s `Allow`, and a
/// `CONNECT`'s, whose authority-form target names no resource here.
pub const SERVER_METHODS: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS";
/// The methods of every resource that is only read: files, the index page,
/// and most built-in endpoints.
const READ_ONLY: &str = "GET, HEAD, OPTIONS";
/// `/_httplite/echo`.
const ECHO_METHODS: &str = "POST, PUT, OPTIONS";

/// Appends extra fields for worker `i` to the stats JSON object being built.
pub type WorkerExtra = Box<dyn Fn(usize, &mut String) + Send + Sync>;

/// Everything routing needs, shared by all workers.
pub struct App {
    /// Files to serve, if `--root` was given.
    pub root: Option<StaticRoot>,
    /// Server counters (for `/_httplite/stats`).
    pub stats: Arc<Stats>,
    /// Extra per-worker fields for the stats document (runtime internals).
    pub worker_extra: WorkerExtra,
    /// Enable `/_httplite/panic` (tests only; hidden flag).
    pub test_endpoints: bool,
    /// Background jobs (`/_httplite/jobs`), and through them the blocking
    /// pool that also builds directory listings.
    pub jobs: Jobs,
    /// `/_httplite/events`: how many viewers, how often.
    pub events: EventsConfig,
    /// Which endpoints each listener answers (see [`crate::exposure`]).
    pub exposure: Exposure,
    /// `--health PATH`: the health answer at this path too, on every
    /// listener (for a balancer that checks the public one).
    pub health_path: Option<String>,
    /// Most `/_httplite/sleep` requests asleep at once (`--pool-queue`,
    /// the bound jobs have too); one more is answered 503.
    pub max_sleeping: u64,
    /// `--proxy`'s routes: the requests they take go upstream.
    pub proxy: crate::reverse_proxy::Routes,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("root", &self.root)
            .field("test_endpoints", &self.test_endpoints)
            .field("exposure", &self.exposure)
            .field("health_path", &self.health_path)
            .finish()
    }
}

impl App {
    /// The answer to a `GET` or `HEAD` of a constant built-in endpoint
    /// (`plaintext`, `json`), the benchmarks' hot path; `None` for anything
    /// else, and for an endpoint listener `on` does not serve.
    /// [`route`](App::route) gives the same answers, as an [`Action`]; this
    /// decides them with two compares and a bit test, builds nothing and
    /// cannot panic.
    #[inline]
    pub fn canned(&self, req: &Request, on: &Surface) -> Option<&'static StaticResponse> {
        if !matches!(req.method(), Method::Get | Method::Head) {
            return None;
        }
        // `==` on slices becomes a length check and a few word compares; a
        // `match` on byte strings would compare byte by byte.
        let path = req.path().as_bytes();
        if path == b"/_httplite/plaintext" {
            if self.exposure.hides(on, Endpoint::Plaintext) {
                return None;
            }
            Some(&PLAINTEXT)
        } else if path == b"/_httplite/json" {
            if self.exposure.hides(on, Endpoint::Json) {
                return None;
            }
            Some(&HELLO_JSON_RESPONSE)
        } else {
            None
        }
    }

    /// Decides how to answer `req`, which came in on listener `on`. Pure:
    /// no I/O except the static file's open/stat, so the same routing
    /// serves every runtime.
    pub fn route(&self, req: &Request, on: Surface) -> Action {
        let path = req.path();
        let method = req.method();
        match method {
            Method::Options => return self.options(req, on),
            // A tunnel is a proxy's job (RFC 9110 §9.3.6); we are none.
            Method::Connect => return Action::not_allowed(SERVER_METHODS),
            _ => {}
        }
        let get_or_head = matches!(method, Method::Get | Method::Head);
        if let Some(endpoint) = self.endpoint(path, on) {
            return self.builtin(endpoint, req, get_or_head);
        }
        if self.health_path.as_deref() == Some(path) {
            return match get_or_head {
                true => self.health(),
                false => Action::not_allowed(READ_ONLY),
            };
        }
        match self.site(on) {
            Some(root) if get_or_head => Action::File(crate::file_features::serve(root, req)),
            // A path that names nothing is 404 whatever the method, as a
            // hidden endpoint's is (see `crate::exposure`).
            Some(root) => match crate::file_features::serve(root, req) {
                missing @ StaticReply::Error(Status::NOT_FOUND, _) => Action::File(missing),
                missing @ StaticReply::File {
                    status: Status::NOT_FOUND,
                    ..
                } => Action::File(missing),
                _ => Action::not_allowed(READ_ONLY),
            },
            // The built-in index is the dashboard.
            None if path == "/" && get_or_head => crate::dashboard::page(req),
            None if path == "/" => Action::not_allowed(READ_ONLY),
            None => Action::error(Status::NOT_FOUND),
        }
    }

    /// `OPTIONS` (RFC 9110 §9.3.7): 200 with the target's methods in
    /// `Allow` and no body; `*` asks about the server as a whole. A target
    /// that names nothing is 404. With `--cors`, a CORS preflight of a file
    /// path is 204 with the `Access-Control-*` answers instead.
    fn options(&self, req: &Request, on: Surface) -> Action {
        if let Some(root) = self.site(on)
            && req.target() != "*"
            && self.endpoint(req.path(), on).is_none()
            && let Some(preflight) = crate::file_features::preflight(root.features(), req)
        {
            return preflight;
        }
        let allow = if req.target() == "*" {
            Some(SERVER_METHODS)
        } else {
            self.allowed(req.path(), on)
        };
        match allow {
            Some(allow) => Action::Owned {
                status: Status::OK,
                content_type: None,
                headers: vec![("Allow", allow.to_string())],
                body: Vec::new(),
            },
            None => Action::error(Status::NOT_FOUND),
        }
    }

    /// The methods `path` answers, as an `Allow` value; `None` where
    /// nothing is.
    fn allowed(&self, path: &str, on: Surface) -> Option<&'static str> {
        if let Some(endpoint) = self.endpoint(path, on) {
            return match endpoint {
                "plaintext" | "json" | "stats" | "sleep" | "health" | "events" | ""
                | "dashboard.js" | "dashboard.css" => Some(READ_ONLY),
                "echo" => Some(ECHO_METHODS),
                jobs if jobs.starts_with("jobs") => crate::jobs::http::allowed(&jobs[4..]),
                _ => None,
            };
        }
        if self.health_path.as_deref() == Some(path) {
            return Some(READ_ONLY);
        }
        match self.site(on) {
            Some(_) => Some(READ_ONLY),
            None if path == "/" => Some(READ_ONLY),
            None => None,
        }
    }

    /// The built-in endpoint `path` names, after the prefix, if listener
    /// `on` answers it: one it serves, or any name at all where `on`
    /// answers as the admin listener (an unknown one is then its 404).
    /// `None`: the site answers the path, as any other.
    fn endpoint<'p>(&self, path: &'p str, on: Surface) -> Option<&'p str> {
        let rest = path.strip_prefix(PREFIX)?;
        let served = match Endpoint::of(rest) {
            Some(e) => self.exposure.serves(on, e),
            None => self.exposure.is_admin(on),
        };
        served.then_some(rest)
    }

    /// The files listener `on` serves: `--root`'s on the public listener;
    /// none on the admin one (its `/` is the dashboard).
    fn site(&self, on: Surface) -> Option<&StaticRoot> {
        match on {
            Surface::Public => self.root.as_ref(),
            Surface::Admin => None,
        }
    }

    fn builtin(&self, endpoint: &str, req: &Request, get_or_head: bool) -> Action {
        if get_or_head && let Some(page) = crate::dashboard::asset(endpoint, req) {
            return page;
        }
        match endpoint {
            // `canned` answers these two the same way.
            "plaintext" if get_or_head => Action::Static(&PLAINTEXT),
            "json" if get_or_head => Action::Static(&HELLO_JSON_RESPONSE),
            "stats" if get_or_head => Action::Owned {
                status: Status::OK,
                content_type: Some(JSON),
                headers: vec![("Cache-Control", "no-store".to_string())],
                body: self.stats_json().into_bytes(),
            },
            "sleep" if get_or_head => match sleep_ms(req.query()) {
                // Counted when each sleep starts: workers that check at
                // the same instant may pass the bound by one each.
                Some(_) if self.stats.total(|w| &w.sleeping) >= self.max_sleeping => {
                    Action::Owned {
                        status: Status::SERVICE_UNAVAILABLE,
                        content_type: Some(TEXT),
                        headers: vec![("Retry-After", "1".to_string())],
                        body: b"503 Service Unavailable: too many sleeps, retry later\n".to_vec(),
                    }
                }
                Some(d) => Action::Sleep(d),
                None => Action::Owned {
                    status: Status::BAD_REQUEST,
                    content_type: Some(TEXT),
                    headers: Vec::new(),
                    body: b"400 Bad Request: use /_httplite/sleep?ms=N\n".to_vec(),
                },
            },
            "health" if get_or_head => self.health(),
            "events" if get_or_head => Action::Events,
            "echo" if matches!(req.method(), Method::Post | Method::Put) => Action::Echo,
            jobs if jobs.starts_with("jobs")
                && matches!(jobs.as_bytes().get(4), None | Some(b'/')) =>
            {
                crate::jobs::http::route(&self.jobs, &jobs[4..], req)
            }
            "panic" if self.test_endpoints => panic!("handler panic requested by {PREFIX}panic"),
            "plaintext" | "json" | "stats" | "sleep" | "health" | "events" | ""
            | "dashboard.js" | "dashboard.css" => Action::not_allowed(READ_ONLY),
            "echo" => Action::not_allowed(ECHO_METHODS),
            _ => Action::error(Status::NOT_FOUND),
        }
    }
}

impl App {
    /// `/_httplite/health` (and `--health`'s path): 200 while serving; 503 with `Connection: close`
    /// once draining (see [`Stats::set_draining`]), so that a balancer's
    /// health check takes this instance out before it stops accepting.
    fn health(&self) -> Action {
        let (status, body) = match self.stats.is_draining() {
            false => (Status::OK, &b"ok\n"[..]),
            true => (Status::SERVICE_UNAVAILABLE, &b"draining\n"[..]),
        };
        let mut headers = vec![("Cache-Control", "no-store".to_string())];
        if self.stats.is_draining() {
            headers.push(("Connection", "close".to_string()));
        }
        Action::Owned {
            status,
            content_type: Some(TEXT),
            headers,
            body: body.to_vec(),
        }
    }

    /// The `/_httplite/stats` document: the server's counters plus the
    /// blocking pool's and the jobs'.
    pub fn stats_json(&self) -> String {
        let mut s = self.stats.to_json(&*self.worker_extra);
        s.pop(); // the closing brace, to add members before it
        crate::jobs::http::stats_members(&self.jobs, &mut s);
        if let Some(cache) = self.root.as_ref().and_then(StaticRoot::file_cache) {
            cache.stats_members(&mut s);
        }
        s.push('}');
        s
    }
}

/// `ms=N` from a query string, capped at [`MAX_SLEEP`].
fn sleep_ms(query: Option<&str>) -> Option<Duration> {
    let ms = query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("ms="))?
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_millis(ms).min(MAX_SLEEP))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use bytes::BytesMut;
    use http1::{Decoder, Limits, Message};

    use crate::jobs::Retention;

    /// A one-worker app over `root` with a one-thread pool, for the site's
    /// unit tests (no sockets).
    pub(crate) fn app(root: Option<StaticRoot>) -> App {
        let pool = pool::Pool::builder().max_threads(1).build();
        let retention = Retention {
            max_count: 16,
            max_age: Duration::from_secs(60),
        };
        App {
            exposure: match root {
                None => Exposure::DEMO,
                // The plans' tests use the endpoints beside a site.
                Some(_) => Exposure::site(&Endpoint::ALL),
            },
            root,
            stats: Arc::new(Stats::new(1)),
            worker_extra: Box::new(|_, _| {}),
            test_endpoints: false,
            jobs: Jobs::new(pool, retention, false),
            events: EventsConfig::default(),
            health_path: None,
            max_sleeping: 1024,
            proxy: Default::default(),
        }
    }

    fn request(head: &str) -> Request {
        let mut buf = BytesMut::from(head.as_bytes());
        match Decoder::new(Limits::default()).decode(&mut buf) {
            Ok(Some(Message::Head(req))) => req,
            other => panic!("{head:?}: {other:?}"),
        }
    }

    #[test]
    fn canned_answers_are_the_routed_ones() {
        let dir = std::env::temp_dir();
        let root = || StaticRoot::new(&dir, false).expect("the temporary directory");
        let mut hidden = app(Some(root()));
        hidden.exposure = Exposure::site(&[]);
        for app in [app(None), app(Some(root())), hidden] {
            for on in [Surface::Public, Surface::Admin] {
                for method in ["GET", "HEAD", "POST", "PUT", "get"] {
                    for path in [
                        "/_httplite/plaintext",
                        "/_httplite/json",
                        "/_httplite/plaintext?x=1",
                        "/_httplite/plaintex",
                        "/_httplite/jsonx",
                        "/_httplite/stats",
                        "/",
                    ] {
                        let req = request(&format!("{method} {path} HTTP/1.1\r\nHost: a\r\n\r\n"));
                        let routed = match app.route(&req, on) {
                            Action::Static(r) => Some(r),
                            _ => None,
                        };
                        match app.canned(&req, &on) {
                            // The very same response, not just an equal one.
                            Some(canned) => assert!(
                                routed.is_some_and(|r| std::ptr::eq(r, canned)),
                                "{on:?} {method} {path}"
                            ),
                            None => assert!(routed.is_none(), "{on:?} {method} {path}"),
                        }
                    }
                }
            }
        }
        let req = request("GET /_httplite/plaintext HTTP/1.1\r\n\r\n");
        assert!(
            app(None)
                .canned(&req, &Surface::Public)
                .is_some_and(|r| r.body == HELLO)
        );
    }

    /// The status and `Allow` of `head` on `on`.
    fn answer(app: &App, head: &str, on: Surface) -> (u16, Option<String>) {
        let req = request(head);
        match app.route(&req, on) {
            Action::Owned {
                status, headers, ..
            } => {
                let allow = headers.iter().find(|(n, _)| *n == "Allow");
                (status.code(), allow.map(|(_, v)| v.clone()))
            }
            Action::Static(r) => (r.status.code(), None),
            Action::File(StaticReply::Error(status, _)) => (status.code(), None),
            Action::File(_) => (200, None),
            Action::Echo | Action::Sleep(_) | Action::Events | Action::Job(_) => (0, None),
        }
    }

    #[test]
    fn a_site_hides_the_endpoints_it_does_not_expose() {
        let dir = std::env::temp_dir().join(format!("site-hide-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), b"a").unwrap();
        let mut app = app(Some(StaticRoot::new(&dir, false).unwrap()));
        app.exposure = Exposure::site(&[Endpoint::Stats]);
        app.health_path = Some("/healthz".to_string());
        let public = |head: &str| answer(&app, head, Surface::Public);
        // Each hidden endpoint is answered as the missing path beside it.
        for (hidden, missing) in [
            ("GET /_httplite/plaintext", "GET /_httplitx/plaintext"),
            ("GET /_httplite/", "GET /_httplitx/"),
            ("GET /_httplite/events", "GET /_httplitx/events"),
            ("POST /_httplite/jobs?type=sha256", "POST /_httplitx/jobs"),
            ("POST /_httplite/echo", "POST /_httplitx/echo"),
            ("GET /_httplite/sleep?ms=1", "GET /_httplitx/sleep"),
            ("GET /_httplite/health", "GET /_httplitx/health"),
            ("OPTIONS /_httplite/echo", "OPTIONS /_httplitx/echo"),
            ("GET /_httplite/nope", "GET /_httplitx/nope"),
        ] {
            let with = |line: &str| format!("{line} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(public(&with(hidden)), public(&with(missing)), "{hidden}");
        }
        assert_eq!(
            public("GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\n\r\n").0,
            404
        );
        assert_eq!(public("POST /nothing HTTP/1.1\r\nHost: a\r\n\r\n").0, 404);
        let (status, allow) = public("POST /a.txt HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!((status, allow.as_deref()), (405, Some(READ_ONLY)));
        // What is exposed, and the health path.
        assert_eq!(
            public("GET /_httplite/stats HTTP/1.1\r\nHost: a\r\n\r\n").0,
            200
        );
        assert_eq!(public("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n").0, 200);
        // The admin listener: every endpoint, the dashboard at `/`, no files.
        let admin = |head: &str| answer(&app, head, Surface::Admin);
        assert_eq!(
            admin("GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\n\r\n").0,
            200
        );
        assert_eq!(
            admin("GET /_httplite/health HTTP/1.1\r\nHost: a\r\n\r\n").0,
            200
        );
        assert_eq!(
            admin("GET /_httplite/sleep?ms=1 HTTP/1.1\r\nHost: a\r\n\r\n").0,
            0
        );
        assert_eq!(
            admin("GET /_httplite/nope HTTP/1.1\r\nHost: a\r\n\r\n").0,
            404
        );
        assert_eq!(admin("GET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n").0, 404);
        assert_ne!(admin("GET / HTTP/1.1\r\nHost: a\r\n\r\n").0, 404);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sleeps_beyond_the_bound_are_503() {
        let mut app = app(None);
        app.max_sleeping = 2;
        let head = "GET /_httplite/sleep?ms=5 HTTP/1.1\r\nHost: a\r\n\r\n";
        let worker = app.stats.worker(0);
        let first = worker.sleeping();
        assert_eq!(answer(&app, head, Surface::Admin).0, 0, "a sleep");
        let second = worker.sleeping();
        assert_eq!(answer(&app, head, Surface::Admin).0, 503);
        drop((first, second));
        assert_eq!(answer(&app, head, Surface::Admin).0, 0, "room again");
    }

    #[test]
    fn options_names_every_endpoint_that_answers() {
        let app = app(None);
        for path in ["health", "stats", "plaintext", "sleep", "events", ""] {
            let head = format!("OPTIONS /_httplite/{path} HTTP/1.1\r\nHost: a\r\n\r\n");
            let (status, allow) = answer(&app, &head, Surface::Public);
            assert_eq!((status, allow.as_deref()), (200, Some(READ_ONLY)), "{path}");
        }
    }

    #[test]
    fn sleep_query() {
        assert_eq!(sleep_ms(Some("ms=250")), Some(Duration::from_millis(250)));
        assert_eq!(sleep_ms(Some("a=1&ms=5")), Some(Duration::from_millis(5)));
        assert_eq!(sleep_ms(Some("ms=999999999")), Some(MAX_SLEEP));
        assert_eq!(sleep_ms(Some("ms=x")), None);
        assert_eq!(sleep_ms(None), None);
    }
}
