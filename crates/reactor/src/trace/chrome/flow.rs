//! Flow arrows: from a handoff to the connection's first poll, from a
//! wake to the poll it causes (on the same thread or from another one),
//! from a submission to the pool thread's job.
//!
//! An arrow leaves from a slice (`s`, bound to the enclosing one) and
//! arrives in one (`f`). A local wake keeps its flow id in the thread's
//! track until the woken task's poll takes it; a wake from another thread
//! cannot reach that track, so it leaves the id in [`REMOTE`], keyed by the
//! woken runtime and task, for that poll to take.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{Args, NEXT_FLOW, admit_inside, with_track};

/// A new flow id, for [`flow_start`] and its steps.
pub fn new_flow() -> u64 {
    NEXT_FLOW.fetch_add(1, Ordering::Relaxed)
}

/// A flow event's members after its name: `,"cat":"flow","id":N`.
struct FlowArgs(u64);

impl fmt::Display for FlowArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ",\"cat\":\"flow\",\"id\":{}", self.0)
    }
}

fn flow_args(id: u64) -> FlowArgs {
    FlowArgs(id)
}

/// Starts flow `id` in the current slice (`s`). Returns whether it was
/// written: only inside an admitted slice, which the arrow leaves from.
pub fn flow_start(id: u64) -> bool {
    let mut written = false;
    with_track(|t, ns| {
        if matches!(t.open.last(), Some(Some(_))) {
            t.write('s', Some("flow"), ns, format_args!("{}", flow_args(id)));
            written = true;
        }
    });
    written
}

/// A step of flow `id` in the current slice (`t`): the arrow passes
/// through it.
pub fn flow_step(id: u64) {
    if id == 0 {
        return;
    }
    with_track(|t, ns| {
        if matches!(t.open.last(), Some(Some(_))) {
            t.write('t', Some("flow"), ns, format_args!("{}", flow_args(id)));
        }
    });
}

/// Ends flow `id` (`f`): in the current slice (`"bp":"e"`, the enclosing
/// slice), or, on a thread outside any slice (a connection's own thread),
/// at the next slice that begins there.
pub fn flow_end(id: u64) {
    if id == 0 {
        return;
    }
    with_track(|t, ns| match t.open.last() {
        Some(Some(_)) => t.write(
            'f',
            Some("flow"),
            ns,
            format_args!("{},\"bp\":\"e\"", flow_args(id)),
        ),
        Some(None) => t.dropped += 1,
        None => t.write('f', Some("flow"), ns, format_args!("{}", flow_args(id))),
    });
}

/// Records a wake of `key` (a task or coroutine id) on this thread with an
/// instant event, and starts a flow that [`woken_poll`] ends when `key`
/// next runs here.
pub fn wake(key: u64, args: fmt::Arguments<'_>) {
    let id = new_flow();
    with_track(|t, ns| {
        if !admit_inside(t, ns) {
            return;
        }
        t.write(
            'i',
            Some("wake"),
            ns,
            format_args!(",\"s\":\"t\"{}", Args(args)),
        );
        if matches!(t.open.last(), Some(Some(_))) {
            t.write('s', Some("flow"), ns, format_args!("{}", flow_args(id)));
            t.wake_flows.insert(key, id);
        }
    });
}

/// Flows of wakes from other threads not yet ended: (runtime, key, flow).
static REMOTE: Mutex<Vec<(usize, u64, u64)>> = Mutex::new(Vec::new());
/// `REMOTE`'s length, read without its lock by every traced poll.
static REMOTE_LEN: AtomicUsize = AtomicUsize::new(0);
/// The most remote flows kept: a task woken and then dropped never takes
/// its flow, and must not make the list grow without end.
const REMOTE_MAX: usize = 4096;

/// Records a wake of `key` in the runtime `owner` (any number unique to
/// that runtime, such as the address of its shared state) from another
/// thread: an instant in the waking slice, or a short `wake` slice of its
/// own on a thread outside any (a pool thread's completion, a timer
/// thread), and a flow that [`woken_poll`] on the owner's thread ends.
/// Call it before the wake is queued, so that the poll finds the flow.
pub fn remote_wake(owner: usize, key: u64, args: fmt::Arguments<'_>) {
    let id = new_flow();
    let mut started = false;
    with_track(|t, ns| {
        if !admit_inside(t, ns) {
            return;
        }
        let own_slice = t.open.is_empty();
        let ph = if own_slice { 'B' } else { 'i' };
        let scope = if own_slice { "" } else { ",\"s\":\"t\"" };
        t.write(ph, Some("wake"), ns, format_args!("{scope}{}", Args(args)));
        t.write('s', Some("flow"), ns, format_args!("{}", flow_args(id)));
        if own_slice {
            // One nanosecond long: the arrow's start lies inside it.
            t.write('E', None, ns + 1, format_args!(""));
        }
        started = true;
    });
    if started {
        let mut remote = REMOTE.lock().unwrap_or_else(|e| e.into_inner());
        if remote.len() >= REMOTE_MAX {
            remote.remove(0);
        }
        remote.push((owner, key, id));
        REMOTE_LEN.store(remote.len(), Ordering::Relaxed);
    }
}

/// Ends the flows of `key`'s wakes since its last poll, local and remote,
/// if any: call it just after the [`super::begin`] of `key`'s poll or
/// resume on the thread of runtime `owner` (see [`remote_wake`]).
pub fn woken_poll(owner: usize, key: u64) {
    let mut id = 0;
    with_track(|t, _| id = t.wake_flows.remove(&key).unwrap_or(0));
    flow_end(id);
    if REMOTE_LEN.load(Ordering::Relaxed) != 0 {
        // Every wake since the last poll caused this one: all arrows end
        // here (and none is left behind to keep the list non-empty).
        let mut ids = Vec::new();
        let mut remote = REMOTE.lock().unwrap_or_else(|e| e.into_inner());
        remote.retain(|&(o, k, id)| {
            let mine = o == owner && k == key;
            if mine {
                ids.push(id);
            }
            !mine
        });
        REMOTE_LEN.store(remote.len(), Ordering::Relaxed);
        drop(remote);
        for id in ids {
            flow_end(id);
        }
    }
}

/// Flow ids of handed-off connections, by fd number: set by the acceptor,
/// read by the worker's handoff loop, taken by the connection's first poll.
/// One atomic per fd: no lock between the acceptor and the workers.
static FD_FLOWS: [AtomicU64; FD_SLOTS] = [const { AtomicU64::new(0) }; FD_SLOTS];
const FD_SLOTS: usize = 1 << 16;

/// A new flow for the connection on `fd`, remembered for the worker.
pub fn handoff_flow(fd: i32) -> u64 {
    let id = new_flow();
    if let Some(slot) = usize::try_from(fd).ok().and_then(|f| FD_FLOWS.get(f)) {
        slot.store(id, Ordering::Relaxed);
    }
    id
}

/// The flow of the connection handed over on `fd` (0: none).
pub fn fd_flow(fd: i32) -> u64 {
    usize::try_from(fd)
        .ok()
        .and_then(|f| FD_FLOWS.get(f))
        .map_or(0, |s| s.load(Ordering::Relaxed))
}

/// Takes the flow of the connection on `fd`, so that only its first poll
/// ends it (0: none, or taken already).
pub fn take_fd_flow(fd: i32) -> u64 {
    usize::try_from(fd)
        .ok()
        .and_then(|f| FD_FLOWS.get(f))
        .map_or(0, |s| s.swap(0, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_args_name_the_id() {
        assert_eq!(flow_args(7).to_string(), ",\"cat\":\"flow\",\"id\":7");
    }
}
