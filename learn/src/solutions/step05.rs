//! Step 5's exercises: spawn from inside a task, and `yield_now`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::step05_executor::{Executor, JoinHandle};

// ANCHOR: spawn
thread_local! {
    /// The executor running on this thread, while [`block_on`] runs.
    static CURRENT: RefCell<Option<Executor>> = const { RefCell::new(None) };
}

/// Exercise 5.1: runs `future` on a new executor that [`spawn`] can reach.
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let executor = Executor::new();
    let previous = CURRENT.with(|c| c.replace(Some(executor.clone())));
    let output = executor.block_on(future);
    CURRENT.with(|c| *c.borrow_mut() = previous);
    output
}

/// Exercise 5.1: spawns on the executor of the current [`block_on`].
///
/// # Panics
/// Outside [`block_on`].
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .expect("spawn outside block_on")
            .spawn(future)
    })
}
// ANCHOR_END: spawn

// ANCHOR: yield_now
/// Exercise 5.2: lets every other ready task run once. Waking itself puts
/// the task at the back of the FIFO, behind those already queued.
pub fn yield_now() -> impl Future<Output = ()> {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false)
}
// ANCHOR_END: yield_now

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn tasks_spawn_tasks() {
        let total = block_on(async {
            let children: Vec<_> = (1..=10u32)
                .map(|i| spawn(async move { spawn(async move { i }).await * 2 }))
                .collect();
            let mut total = 0;
            for child in children {
                total += child.await;
            }
            total
        });
        assert_eq!(total, 110);
    }

    #[test]
    fn yielding_tasks_interleave_in_fifo_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let task = |name: &'static str, log: Arc<Mutex<Vec<String>>>| async move {
            for i in 0..3 {
                log.lock().unwrap().push(format!("{name}{i}"));
                yield_now().await;
            }
        };
        let (a, b) = (task("a", log.clone()), task("b", log.clone()));
        block_on(async move {
            let (a, b) = (spawn(a), spawn(b));
            a.await;
            b.await;
        });
        assert_eq!(*log.lock().unwrap(), ["a0", "b0", "a1", "b1", "a2", "b2"]);
    }
}
