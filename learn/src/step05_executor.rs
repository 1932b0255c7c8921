//! Step 5: a FIFO executor with many tasks and a `JoinHandle`.
//!
//! A task is a boxed future plus a way back into the run queue: its waker
//! *is* the task (an `Arc<Task>`), and waking it pushes it to the back of
//! the queue. The executor pops tasks from the front and polls them, so
//! tasks run in the order they were woken. When the queue is empty and
//! the main task is not done, the executor calls an *idle* function: here
//! it parks the thread; in step 6 it will wait in epoll.
//!
//! Exercises (solutions in [`crate::solutions::step05`]):
//!
//! 1. A free function `spawn(future)` that works from inside a task, with
//!    no `Executor` at hand (keep the current one in a thread-local).
//! 2. `yield_now()`: a future that lets every other ready task run once.
//!    Show the FIFO order: two tasks yielding in turn interleave.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

// ANCHOR: task
/// The run queue, and the thread to unpark when a task joins it.
struct Queue {
    ready: Mutex<VecDeque<Arc<Task>>>,
    thread: Thread,
}

/// A spawned future, `None` once it finished.
struct Task {
    future: Mutex<Option<BoxFuture>>,
    queue: Arc<Queue>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        let queue = self.queue.clone();
        queue.ready.lock().unwrap().push_back(self);
        // Woken from another thread, the executor may be parked.
        queue.thread.unpark();
    }
}
// ANCHOR_END: task

// ANCHOR: join
/// The result of a task, and the waker of whoever awaits it.
struct JoinState<T> {
    result: Option<T>,
    waiter: Option<Waker>,
}

/// Awaits a spawned task's output. Dropping it lets the task run on.
pub struct JoinHandle<T>(Arc<Mutex<JoinState<T>>>);

impl<T> JoinHandle<T> {
    /// The output, if the task has finished and it was not taken yet.
    pub fn try_take(&self) -> Option<T> {
        self.0.lock().unwrap().result.take()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut state = self.0.lock().unwrap();
        match state.result.take() {
            Some(result) => Poll::Ready(result),
            None => {
                state.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
// ANCHOR_END: join

// ANCHOR: executor
/// A single-threaded FIFO executor. Clones share the same run queue.
#[derive(Clone)]
pub struct Executor {
    queue: Arc<Queue>,
}

impl Executor {
    /// An executor that runs on (and unparks) the current thread.
    pub fn new() -> Executor {
        let ready = Mutex::new(VecDeque::new());
        Executor {
            queue: Arc::new(Queue {
                ready,
                thread: thread::current(),
            }),
        }
    }

    /// Queues `future` as a new task; the handle resolves to its output.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let state = Arc::new(Mutex::new(JoinState {
            result: None,
            waiter: None,
        }));
        let shared = state.clone();
        let task = Arc::new(Task {
            future: Mutex::new(Some(Box::pin(async move {
                let result = future.await;
                let waiter = {
                    let mut state = shared.lock().unwrap();
                    state.result = Some(result);
                    state.waiter.take()
                };
                if let Some(waiter) = waiter {
                    waiter.wake();
                }
            }))),
            queue: self.queue.clone(),
        });
        self.queue.ready.lock().unwrap().push_back(task);
        JoinHandle(state)
    }

    /// Polls queued tasks, front first, until the queue is empty; returns
    /// how many polls that took.
    pub fn run_ready(&self) -> usize {
        let mut polls = 0;
        loop {
            // Pop under the lock, poll without it: the task may wake itself.
            let Some(task) = self.queue.ready.lock().unwrap().pop_front() else {
                return polls;
            };
            let waker = Waker::from(task.clone());
            let mut slot = task.future.lock().unwrap();
            // A task woken twice is queued twice; once done, it is `None`.
            if let Some(future) = slot.as_mut() {
                polls += 1;
                if future
                    .as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
                {
                    *slot = None;
                }
            }
        }
    }

    /// Runs `future` and every task it spawns until `future` is done,
    /// calling `idle` whenever no task is ready.
    pub fn block_on_with_idle<F>(&self, future: F, mut idle: impl FnMut()) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let main = self.spawn(future);
        loop {
            self.run_ready();
            if let Some(output) = main.try_take() {
                return output;
            }
            idle();
        }
    }

    /// [`Executor::block_on_with_idle`], parking the thread when idle.
    pub fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // A wake between `run_ready` and `park` leaves an unpark token:
        // `park` returns at once and the task is not forgotten.
        self.block_on_with_idle(future, thread::park)
    }
}
// ANCHOR_END: executor

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ready = self.queue.ready.lock().unwrap().len();
        f.debug_struct("Executor").field("ready", &ready).finish()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = self.0.lock().unwrap().result.is_some();
        f.debug_struct("JoinHandle").field("done", &done).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step04_future_waker::channel;
    use std::time::Duration;

    #[test]
    fn many_tasks_and_their_results() {
        let ex = Executor::new();
        let handles: Vec<_> = (0..100u64)
            .map(|i| ex.spawn(async move { i * i }))
            .collect();
        let sum = ex.block_on(async move {
            let mut sum = 0;
            for h in handles {
                sum += h.await;
            }
            sum
        });
        assert_eq!(sum, (0..100u64).map(|i| i * i).sum());
    }

    #[test]
    fn tasks_run_in_spawn_order() {
        let ex = Executor::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..5 {
            let order = order.clone();
            ex.spawn(async move { order.lock().unwrap().push(i) });
        }
        ex.run_ready();
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_wake_from_another_thread_unparks_the_executor() {
        let ex = Executor::new();
        let (tx, rx) = channel();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            tx.send("from afar");
        });
        let waiting = ex.spawn(rx);
        assert_eq!(ex.block_on(waiting), "from afar");
    }
}
