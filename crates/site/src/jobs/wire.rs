//! A registry in another process: the calls of [`Jobs`] as messages.
//!
//! A driver that cannot run the pool in the process that serves a
//! connection (`--runtime fork`: a child lives as long as its connection,
//! and its parent must stay one thread) keeps one local registry in a
//! process of its own and gives every other process a [`Jobs::remote`].
//! The driver moves bytes only ([`Transport`]: one request's message in,
//! its reply's out, framed by the driver); what they mean is here, so the
//! driver never learns a job's fields and the site's HTTP side never
//! learns that the registry is elsewhere.
//!
//! ```text
//!   request  = op:u8, then   1 submit: kind:u8, input (the rest)
//!                            2 get: id:u64 · 3 cancel: id:u64
//!                            4 stats · 5 recent: n:u32
//!   reply    = tag:u8, then  0: not understood (read as Unavailable)
//!                            submit: 1 id:u64 · 2 full
//!                            get: 1 job · 3 none
//!                            cancel: 1 job (cancelled) · 2 job (not queued) · 3 none
//!                            stats: 1 ten job counters, nine pool counters (u64 each)
//!                            recent: 1 count:u32, that many jobs
//!   job      = id:u64, kind:u8, state:u8, attempts:u32,
//!              value (0 none · 1 text:str · 2 count:u64), error (0 · 1 str)
//!   str      = len:u32, UTF-8 bytes        (integers little-endian)
//! ```

use std::io;

use pool::PoolStats;

use super::{Cancel, JobInfo, JobKind, JobState, JobStats, JobValue, Jobs, Refused, Unavailable};

/// How a remote registry is reached: the driver's half of
/// [`Jobs::remote`]. It carries whole messages (framing them as it likes)
/// to a process that answers each with [`Jobs::answer`].
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Sends one request and waits for its reply. An error means the
    /// registry could not be reached (the caller answers 503); a transport
    /// should bound the wait.
    fn round_trip(&self, request: &[u8]) -> io::Result<Vec<u8>>;
}

/// Every job type, by its code on the wire (its index).
const KINDS: [JobKind; 8] = [
    JobKind::Echo,
    JobKind::WordCount,
    JobKind::CharCount,
    JobKind::Capitalize,
    JobKind::Sha256,
    JobKind::TestPanic,
    JobKind::TestSleep,
    JobKind::TestSpin,
];

const STATES: [JobState; 5] = [
    JobState::Queued,
    JobState::Running,
    JobState::Done,
    JobState::Failed,
    JobState::Cancelled,
];

const SUBMIT: u8 = 1;
const GET: u8 = 2;
const CANCEL: u8 = 3;
const STATS: u8 = 4;
const RECENT: u8 = 5;

const NOT_UNDERSTOOD: u8 = 0;
const YES: u8 = 1;
const OTHER: u8 = 2;
const NONE: u8 = 3;

fn code<T: PartialEq>(all: &[T], v: &T) -> u8 {
    all.iter().position(|k| k == v).unwrap_or(0) as u8
}

/// Reads a message front to back; `None` once it is short or malformed.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn kind(&mut self) -> Option<JobKind> {
        KINDS.get(usize::from(self.u8()?)).copied()
    }
    fn job(&mut self) -> Option<JobInfo> {
        Some(JobInfo {
            id: self.u64()?,
            kind: self.kind()?,
            state: *STATES.get(usize::from(self.u8()?))?,
            attempts: self.u32()?,
            value: match self.u8()? {
                0 => None,
                1 => Some(JobValue::Text(self.str()?)),
                2 => Some(JobValue::Count(self.u64()?)),
                _ => return None,
            },
            error: match self.u8()? {
                0 => None,
                1 => Some(self.str()?),
                _ => return None,
            },
        })
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_job(out: &mut Vec<u8>, job: &JobInfo) {
    out.extend_from_slice(&job.id.to_le_bytes());
    out.push(code(&KINDS, &job.kind));
    out.push(code(&STATES, &job.state));
    out.extend_from_slice(&job.attempts.to_le_bytes());
    match &job.value {
        None => out.push(0),
        Some(JobValue::Text(t)) => {
            out.push(1);
            put_str(out, t);
        }
        Some(JobValue::Count(n)) => {
            out.push(2);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    match &job.error {
        None => out.push(0),
        Some(e) => {
            out.push(1);
            put_str(out, e);
        }
    }
}

/// One round trip, its reply read by `read` (`None`: malformed).
fn call<T>(
    t: &dyn Transport,
    request: &[u8],
    read: impl FnOnce(u8, &mut Reader<'_>) -> Option<T>,
) -> Result<T, Unavailable> {
    let reply = t.round_trip(request).map_err(|_| Unavailable)?;
    let mut r = Reader(&reply);
    let tag = r.u8().ok_or(Unavailable)?;
    read(tag, &mut r).ok_or(Unavailable)
}

fn with_id(op: u8, id: u64) -> [u8; 9] {
    let mut m = [op; 9];
    m[1..].copy_from_slice(&id.to_le_bytes());
    m
}

pub(super) fn submit(t: &dyn Transport, kind: JobKind, input: &[u8]) -> Result<u64, Refused> {
    let mut m = Vec::with_capacity(2 + input.len());
    m.extend_from_slice(&[SUBMIT, code(&KINDS, &kind)]);
    m.extend_from_slice(input);
    call(t, &m, |tag, r| match tag {
        YES => r.u64().map(Ok),
        OTHER => Some(Err(Refused::Full)),
        _ => None,
    })
    .unwrap_or(Err(Refused::Unavailable))
}

pub(super) fn get(t: &dyn Transport, id: u64) -> Result<Option<JobInfo>, Unavailable> {
    call(t, &with_id(GET, id), |tag, r| match tag {
        YES => r.job().map(Some),
        NONE => Some(None),
        _ => None,
    })
}

pub(super) fn cancel(t: &dyn Transport, id: u64) -> Result<Cancel, Unavailable> {
    call(t, &with_id(CANCEL, id), |tag, r| match tag {
        YES => r.job().map(Cancel::Cancelled),
        OTHER => r.job().map(Cancel::NotQueued),
        NONE => Some(Cancel::NotFound),
        _ => None,
    })
}

pub(super) fn stats(t: &dyn Transport) -> Result<(JobStats, PoolStats), Unavailable> {
    call(t, &[STATS], |tag, r| {
        if tag != YES {
            return None;
        }
        let jobs = JobStats {
            submitted: r.u64()?,
            rejected: r.u64()?,
            queued: r.u64()?,
            running: r.u64()?,
            done: r.u64()?,
            failed: r.u64()?,
            cancelled: r.u64()?,
            retries: r.u64()?,
            retained: r.u64()?,
            evicted: r.u64()?,
        };
        let pool = PoolStats {
            queued: r.u64()? as usize,
            alive: r.u64()? as usize,
            busy: r.u64()? as usize,
            completed: r.u64()?,
            panicked: r.u64()?,
            rejected: r.u64()?,
            threads_started: r.u64()?,
            max_threads: r.u64()? as usize,
            queue_bound: r.u64()? as usize,
        };
        Some((jobs, pool))
    })
}

pub(super) fn recent(t: &dyn Transport, n: usize) -> Result<Vec<JobInfo>, Unavailable> {
    let mut m = vec![RECENT];
    m.extend_from_slice(&(n.min(u32::MAX as usize) as u32).to_le_bytes());
    call(t, &m, |tag, r| {
        if tag != YES {
            return None;
        }
        let count = r.u32()?;
        (0..count).map(|_| r.job()).collect()
    })
}

/// The serving side: `request` run on `jobs` (a local registry), its reply.
pub(super) fn answer(jobs: &Jobs, request: &[u8]) -> Vec<u8> {
    answer_or_none(jobs, request).unwrap_or_else(|| vec![NOT_UNDERSTOOD])
}

fn answer_or_none(jobs: &Jobs, request: &[u8]) -> Option<Vec<u8>> {
    let mut r = Reader(request);
    let mut out = Vec::new();
    let job_or_none = |out: &mut Vec<u8>, tag: u8, job: Option<&JobInfo>| match job {
        Some(job) => {
            out.push(tag);
            put_job(out, job);
        }
        None => out.push(NONE),
    };
    match r.u8()? {
        SUBMIT => {
            let kind = r.kind()?;
            match jobs.submit(kind, r.0.to_vec()) {
                Ok(id) => {
                    out.push(YES);
                    out.extend_from_slice(&id.to_le_bytes());
                }
                Err(Refused::Full) => out.push(OTHER),
                Err(Refused::Unavailable) => return None,
            }
        }
        GET => job_or_none(&mut out, YES, jobs.get(r.u64()?).ok()?.as_ref()),
        CANCEL => match jobs.cancel(r.u64()?).ok()? {
            Cancel::Cancelled(job) => job_or_none(&mut out, YES, Some(&job)),
            Cancel::NotQueued(job) => job_or_none(&mut out, OTHER, Some(&job)),
            Cancel::NotFound => out.push(NONE),
        },
        STATS => {
            let (j, p) = jobs.stats().ok()?;
            out.push(YES);
            let numbers = [
                j.submitted,
                j.rejected,
                j.queued,
                j.running,
                j.done,
                j.failed,
                j.cancelled,
                j.retries,
                j.retained,
                j.evicted,
                p.queued as u64,
                p.alive as u64,
                p.busy as u64,
                p.completed,
                p.panicked,
                p.rejected,
                p.threads_started,
                p.max_threads as u64,
                p.queue_bound as u64,
            ];
            for n in numbers {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
        RECENT => {
            let recent = jobs.recent(r.u32()? as usize).ok()?;
            out.push(YES);
            out.extend_from_slice(&(recent.len() as u32).to_le_bytes());
            for job in &recent {
                put_job(&mut out, job);
            }
        }
        _ => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::jobs::Retention;

    /// A transport that answers in the same process, through the bytes.
    #[derive(Debug)]
    struct Loopback(Jobs);

    impl Transport for Loopback {
        fn round_trip(&self, request: &[u8]) -> io::Result<Vec<u8>> {
            Ok(self.0.answer(request))
        }
    }

    #[derive(Debug)]
    struct Down;

    impl Transport for Down {
        fn round_trip(&self, _: &[u8]) -> io::Result<Vec<u8>> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    fn pair(threads: usize, queue: usize) -> (Jobs, Jobs) {
        let pool = pool::Pool::builder()
            .max_threads(threads)
            .queue_bound(queue)
            .build();
        let retention = Retention {
            max_count: 100,
            max_age: Duration::from_secs(600),
        };
        let local = Jobs::new(pool, retention, true);
        let closed = pool::Pool::builder().build();
        closed.close();
        let remote = Jobs::remote(closed, true, Arc::new(Loopback(local.clone())));
        (local, remote)
    }

    fn wait_done(jobs: &Jobs, id: u64) -> JobInfo {
        for _ in 0..10_000 {
            let job = jobs.get(id).unwrap().unwrap();
            if matches!(job.state, JobState::Done | JobState::Failed) {
                return job;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("job {id} never finished");
    }

    #[test]
    fn every_call_crosses_the_wire_intact() {
        let (local, remote) = pair(1, 1);
        let id = remote.submit(JobKind::Capitalize, b"hello you".to_vec());
        let id = id.unwrap();
        let job = wait_done(&remote, id);
        assert_eq!(job.value, Some(JobValue::Text("Hello You".into())));
        assert_eq!(job.kind, JobKind::Capitalize);
        let count = remote
            .submit(JobKind::WordCount, b"a b c".to_vec())
            .unwrap();
        assert_eq!(wait_done(&remote, count).value, Some(JobValue::Count(3)));
        let bad = remote.submit(JobKind::CharCount, vec![0xff]).unwrap();
        assert!(wait_done(&remote, bad).error.unwrap().contains("UTF-8"));
        assert_eq!(remote.get(999).unwrap(), None);
        assert!(matches!(remote.cancel(999), Ok(Cancel::NotFound)));
        assert!(matches!(remote.cancel(id), Ok(Cancel::NotQueued(j)) if j.id == id));
        // Hold the thread, fill the queue: the next is refused, the
        // queued one can be cancelled.
        let sleeper = remote.submit(JobKind::TestSleep, b"300".to_vec()).unwrap();
        while remote.get(sleeper).unwrap().unwrap().state != JobState::Running {
            std::thread::sleep(Duration::from_millis(1));
        }
        let queued = remote.submit(JobKind::Echo, b"x".to_vec()).unwrap();
        assert_eq!(
            remote.submit(JobKind::Echo, b"y".to_vec()),
            Err(Refused::Full)
        );
        assert!(matches!(remote.cancel(queued), Ok(Cancel::Cancelled(_))));
        assert_eq!(remote.stats(), local.stats());
        let (j, p) = remote.stats().unwrap();
        assert_eq!((j.submitted, j.rejected, j.cancelled), (5, 1, 1));
        assert_eq!(p.max_threads, 1);
        let ids: Vec<u64> = remote.recent(2).unwrap().iter().map(|j| j.id).collect();
        assert_eq!(ids, [queued, sleeper]);
        // The refused submission took an id too (and kept nothing).
        assert_eq!(local.last_id(), queued + 1);
    }

    #[test]
    fn an_unreachable_registry_is_unavailable_and_garbage_is_not_understood() {
        let closed = pool::Pool::builder().build();
        let down = Jobs::remote(closed, false, Arc::new(Down));
        assert_eq!(
            down.submit(JobKind::Echo, vec![]),
            Err(Refused::Unavailable)
        );
        assert_eq!(down.get(1), Err(Unavailable));
        assert!(down.stats().is_err());
        let (local, _) = pair(1, 1);
        for garbage in [&[][..], &[9], &[SUBMIT, 200], &[GET, 1, 2]] {
            assert_eq!(local.answer(garbage), [NOT_UNDERSTOOD], "{garbage:?}");
        }
    }

    #[test]
    fn a_replacing_registry_continues_the_ids() {
        let (local, _) = pair(1, 1);
        local.continue_after(41);
        assert_eq!(local.submit(JobKind::Echo, vec![]), Ok(42));
    }
}
