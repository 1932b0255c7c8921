use std::time::{Duration, Instant};

use super::*;

fn registry(threads: usize, queue: usize, retention: Retention) -> Jobs {
    let pool = Pool::builder()
        .max_threads(threads)
        .queue_bound(queue)
        .build();
    Jobs::new(pool, retention, true)
}

const KEEP_ALL: Retention = Retention {
    max_count: 1000,
    max_age: Duration::from_secs(600),
};

/// Polls `cond` until it holds, for 10 s at most.
fn wait_until(mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits (bounded) until job `id` is finished, and returns its record.
fn finished(jobs: &Jobs, id: u64) -> JobInfo {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let info = jobs.get(id).unwrap().expect("kept");
        if !matches!(info.state, JobState::Queued | JobState::Running) || Instant::now() > end {
            return info;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_job_runs_and_keeps_its_result() {
    let jobs = registry(2, 16, KEEP_ALL);
    let id = jobs.submit(JobKind::WordCount, b"a b c".to_vec()).unwrap();
    let info = finished(&jobs, id);
    assert_eq!(info.state, JobState::Done);
    assert_eq!(info.value, Some(JobValue::Count(3)));
    assert_eq!(info.attempts, 1);
    let s = jobs.stats().unwrap().0;
    assert_eq!((s.submitted, s.done, s.queued, s.running), (1, 1, 0, 0));
}

#[test]
fn a_panicking_job_is_retried_then_failed_with_the_reason() {
    let jobs = registry(1, 16, KEEP_ALL);
    let id = jobs.submit(JobKind::TestPanic, Vec::new()).unwrap();
    let info = finished(&jobs, id);
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.attempts, 1 + MAX_RETRIES);
    let err = info.error.unwrap();
    assert!(err.contains("panicked on all 4 attempts"), "{err}");
    assert!(err.contains("on purpose"), "{err}");
    assert_eq!(jobs.stats().unwrap().0.retries, u64::from(MAX_RETRIES));
    // The pool thread survived: the next job runs.
    let ok = jobs.submit(JobKind::Echo, b"still here".to_vec()).unwrap();
    assert_eq!(finished(&jobs, ok).state, JobState::Done);
}

#[test]
fn bad_input_fails_at_once_without_retries() {
    let jobs = registry(1, 16, KEEP_ALL);
    let id = jobs.submit(JobKind::CharCount, vec![0xff]).unwrap();
    let info = finished(&jobs, id);
    assert_eq!((info.state, info.attempts), (JobState::Failed, 1));
    assert_eq!(jobs.stats().unwrap().0.retries, 0);
}

#[test]
fn a_queued_job_can_be_cancelled_a_running_one_cannot() {
    let jobs = registry(1, 16, KEEP_ALL);
    // Long enough that the cancels below happen while it runs.
    let sleeper = jobs.submit(JobKind::TestSleep, b"1000".to_vec()).unwrap();
    let queued = jobs.submit(JobKind::Echo, b"never".to_vec()).unwrap();
    wait_until(|| jobs.get(sleeper).unwrap().unwrap().state != JobState::Queued);
    assert_eq!(jobs.get(sleeper).unwrap().unwrap().state, JobState::Running);
    assert!(matches!(
        jobs.cancel(sleeper).unwrap(),
        Cancel::NotQueued(_)
    ));
    match jobs.cancel(queued).unwrap() {
        Cancel::Cancelled(info) => assert_eq!(info.state, JobState::Cancelled),
        other => panic!("{other:?}"),
    }
    assert!(matches!(jobs.cancel(12345).unwrap(), Cancel::NotFound));
    assert_eq!(finished(&jobs, sleeper).state, JobState::Done);
    // The cancelled one never ran.
    let info = jobs.get(queued).unwrap().unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Cancelled, 0));
    assert_eq!(jobs.stats().unwrap().0.cancelled, 1);
}

#[test]
fn a_full_queue_refuses_and_keeps_nothing() {
    let jobs = registry(1, 1, KEEP_ALL);
    // Long enough to still be running at the third submission.
    let a = jobs.submit(JobKind::TestSleep, b"1000".to_vec()).unwrap();
    let b = jobs.submit(JobKind::Echo, b"queued".to_vec()).unwrap();
    assert_eq!(
        jobs.submit(JobKind::Echo, b"no room".to_vec()),
        Err(Refused::Full)
    );
    let s = jobs.stats().unwrap().0;
    assert_eq!((s.submitted, s.rejected), (2, 1));
    assert!(
        jobs.get(b + 1).unwrap().is_none(),
        "a refused job leaves no record"
    );
    assert_eq!(finished(&jobs, a).state, JobState::Done);
    assert_eq!(finished(&jobs, b).state, JobState::Done);
}

#[test]
fn retention_by_count_evicts_oldest_first() {
    let jobs = registry(
        1,
        64,
        Retention {
            max_count: 3,
            max_age: Duration::from_secs(600),
        },
    );
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = jobs
            .submit(JobKind::Echo, format!("{i}").into_bytes())
            .unwrap();
        // One at a time: finishing order is submission order.
        wait_until(|| jobs.stats().unwrap().0.done > i);
        ids.push(id);
    }
    let kept: Vec<bool> = ids
        .iter()
        .map(|id| jobs.get(*id).unwrap().is_some())
        .collect();
    assert_eq!(kept, [false, false, true, true, true]);
    let s = jobs.stats().unwrap().0;
    assert_eq!((s.retained, s.evicted), (3, 2));
}

#[test]
fn retention_by_age_evicts_old_jobs() {
    let jobs = registry(
        1,
        64,
        Retention {
            max_count: 100,
            max_age: Duration::from_millis(50),
        },
    );
    let id = jobs.submit(JobKind::Echo, b"x".to_vec()).unwrap();
    // Wait on the counter, not the record: a late look would find the record
    // already evicted.
    wait_until(|| jobs.stats().unwrap().0.done >= 1);
    assert_eq!(jobs.stats().unwrap().0.done, 1);
    std::thread::sleep(Duration::from_millis(80));
    assert!(jobs.get(id).unwrap().is_none(), "older than max_age");
    assert_eq!(jobs.stats().unwrap().0.evicted, 1);
}

#[test]
fn json_shows_result_or_error_escaped() {
    let info = JobInfo {
        id: 7,
        kind: JobKind::Echo,
        state: JobState::Done,
        attempts: 1,
        value: Some(JobValue::Text("a\"b\\c\n\u{1}é".into())),
        error: None,
    };
    assert_eq!(
        http::job_json(&info),
        r#"{"id":7,"type":"echo","state":"done","attempts":1,"result":"a\"b\\c\n\u0001é"}"#
    );
    let failed = JobInfo {
        state: JobState::Failed,
        value: None,
        error: Some("bad".into()),
        ..info
    };
    assert!(http::job_json(&failed).ends_with(r#""state":"failed","attempts":1,"error":"bad"}"#));
}
