//! The HTTP face of the jobs: `/_httplite/jobs` and `/_httplite/jobs/{id}`,
//! answered as [`Action`]s so that every runtime serves them alike.

use std::fmt::Write as _;

use http1::{HeaderValue, Method, Request, Status};

use super::{Cancel, JobInfo, JobValue, Jobs, Refused, kinds::PUBLIC_KINDS};
use crate::action::{Action, PREFIX};

const JSON: HeaderValue<'static> = HeaderValue::from_static("application/json");
const TEXT: HeaderValue<'static> = HeaderValue::from_static("text/plain; charset=utf-8");

/// What a client should wait before retrying a refused submission, in
/// seconds: jobs take milliseconds, so the queue moves quickly.
pub const RETRY_AFTER_SECS: u32 = 1;

fn owned(
    status: Status,
    ct: HeaderValue<'static>,
    headers: Vec<(&'static str, String)>,
    body: String,
) -> Action {
    Action::Owned {
        status,
        content_type: Some(ct),
        headers,
        body: body.into_bytes(),
    }
}

fn text(status: Status, msg: &str) -> Action {
    owned(
        status,
        TEXT,
        Vec::new(),
        format!("{} {}: {msg}\n", status.code(), status.reason()),
    )
}

fn not_allowed(allow: &'static str) -> Action {
    owned(
        Status::METHOD_NOT_ALLOWED,
        TEXT,
        vec![("Allow", allow.to_string())],
        "405 Method Not Allowed\n".into(),
    )
}

/// `/_httplite/jobs`: submitting.
const SUBMIT_METHODS: &str = "POST, OPTIONS";
/// `/_httplite/jobs/{id}`: reading and cancelling.
const JOB_METHODS: &str = "GET, HEAD, DELETE, OPTIONS";

/// The `Allow` value of `/_httplite/jobs…` (`rest` as for [`route`]);
/// `None` for a path that names no job resource.
pub fn allowed(rest: &str) -> Option<&'static str> {
    if rest.is_empty() {
        Some(SUBMIT_METHODS)
    } else {
        job_id(rest).map(|_| JOB_METHODS)
    }
}

/// The id in `/{id}` (`rest` as for [`route`]), if it names a job.
fn job_id(rest: &str) -> Option<u64> {
    rest.strip_prefix('/')?.parse().ok()
}

/// Answers `/_httplite/jobs…`; `rest` is what follows `jobs` in the path.
/// A valid submission becomes [`Action::Job`]: its body must be read before
/// [`submitted`] can answer.
pub fn route(jobs: &Jobs, rest: &str, req: &Request) -> Action {
    let method = req.method();
    if rest.is_empty() {
        if method != Method::Post {
            return not_allowed(SUBMIT_METHODS);
        }
        let name = req
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("type=")));
        return match name.and_then(|n| jobs.kind(n)) {
            Some(kind) => Action::Job(kind),
            None => {
                let names: Vec<&str> = PUBLIC_KINDS.iter().map(|k| k.name()).collect();
                let what = match name {
                    Some(n) => format!("unknown job type {:?}", truncate(n, 64)),
                    None => "missing ?type=".to_string(),
                };
                text(
                    Status::BAD_REQUEST,
                    &format!("{what}; use one of: {}", names.join(", ")),
                )
            }
        };
    }
    let Some(id) = job_id(rest) else {
        return text(Status::NOT_FOUND, "no such job");
    };
    match method {
        Method::Get | Method::Head => match jobs.get(id) {
            Ok(Some(info)) => job_answer(Status::OK, &info),
            Ok(None) => text(Status::NOT_FOUND, "no such job (unknown, or evicted)"),
            Err(_) => unavailable(),
        },
        Method::Delete => match jobs.cancel(id) {
            Ok(Cancel::Cancelled(info)) => job_answer(Status::OK, &info),
            Ok(Cancel::NotQueued(info)) => job_answer(Status::CONFLICT, &info),
            Ok(Cancel::NotFound) => text(Status::NOT_FOUND, "no such job (unknown, or evicted)"),
            Err(_) => unavailable(),
        },
        _ => not_allowed(JOB_METHODS),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A `503` with `Retry-After` saying why.
fn retry_later(why: &str) -> Action {
    owned(
        Status::SERVICE_UNAVAILABLE,
        TEXT,
        vec![("Retry-After", RETRY_AFTER_SECS.to_string())],
        format!("503 Service Unavailable: {why}, retry later\n"),
    )
}

/// The registry could not be reached (it lives in another process: see
/// [`super::Transport`]).
fn unavailable() -> Action {
    retry_later("the job registry cannot be reached")
}

/// The answer to a submission whose input has been read: `202` with the
/// job's id and `Location`, or `503` with `Retry-After` when the pool's
/// queue is full or the registry cannot be reached.
pub fn submitted(jobs: &Jobs, kind: super::JobKind, input: Vec<u8>) -> Action {
    match jobs.submit(kind, input) {
        Ok(id) => {
            let location = format!("{PREFIX}jobs/{id}");
            let body = format!(
                "{{\"id\":{id},\"type\":\"{}\",\"state\":\"queued\",\"location\":\"{location}\"}}",
                kind.name()
            );
            owned(Status::ACCEPTED, JSON, vec![("Location", location)], body)
        }
        Err(Refused::Full) => retry_later("the job queue is full"),
        Err(Refused::Unavailable) => unavailable(),
    }
}

fn job_answer(status: Status, info: &JobInfo) -> Action {
    owned(
        status,
        JSON,
        vec![("Cache-Control", "no-store".to_string())],
        job_json(info),
    )
}

/// One job as JSON: `{"id","type","state","attempts"}` plus `result` once
/// done or `error` once failed.
pub fn job_json(info: &JobInfo) -> String {
    let mut s = format!(
        "{{\"id\":{},\"type\":\"{}\",\"state\":\"{}\",\"attempts\":{}",
        info.id,
        info.kind.name(),
        info.state.name(),
        info.attempts
    );
    match &info.value {
        Some(JobValue::Count(n)) => {
            let _ = write!(s, ",\"result\":{n}");
        }
        Some(JobValue::Text(t)) => {
            s.push_str(",\"result\":");
            json_string(&mut s, t);
        }
        None => {}
    }
    if let Some(e) = &info.error {
        s.push_str(",\"error\":");
        json_string(&mut s, e);
    }
    s.push('}');
    s
}

/// Appends `v` as a JSON string literal (RFC 8259 §7).
pub fn json_string(out: &mut String, v: &str) {
    out.reserve(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The `"pool"` and `"jobs"` members of the stats document (with a leading
/// comma, to append inside its top-level object): the pool jobs run on and
/// the registry's counters, all zero while the registry cannot be reached.
pub fn stats_members(jobs: &Jobs, out: &mut String) {
    let (j, p) = jobs.stats().unwrap_or_default();
    let _ = write!(
        out,
        ",\"pool\":{{\"queued\":{},\"threads_alive\":{},\"threads_busy\":{},\"completed\":{},\
         \"panicked\":{},\"rejected\":{},\"threads_started\":{},\"max_threads\":{},\"queue_bound\":{}}}",
        p.queued,
        p.alive,
        p.busy,
        p.completed,
        p.panicked,
        p.rejected,
        p.threads_started,
        p.max_threads,
        p.queue_bound
    );
    let _ = write!(
        out,
        ",\"jobs\":{{\"submitted\":{},\"rejected\":{},\"queued\":{},\"running\":{},\"done\":{},\
         \"failed\":{},\"cancelled\":{},\"retries\":{},\"retained\":{},\"evicted\":{}}}",
        j.submitted,
        j.rejected,
        j.queued,
        j.running,
        j.done,
        j.failed,
        j.cancelled,
        j.retries,
        j.retained,
        j.evicted
    );
}
