//! A small single-threaded executor on the proactor: tasks in a slab, a
//! FIFO of woken task ids, and the loop that alternates "run what is ready"
//! with one [`Proactor::turn`].
//!
//! ```text
//!   loop {
//!       run every task whose waker fired (and the block_on future)
//!       proactor.turn(wait = nothing is ready)   // ONE io_uring_enter:
//!   }                                            //  submit all, wait ≥1 CQE
//!                                                //  or the nearest timer
//! ```
//!
//! A waker is an `Arc` holding the task's id and the run queue; waking from
//! another thread pushes the id and rings the proactor's [`crate::Notifier`].
//!
//! This is the stackless executor's loop in miniature. Sharing one executor
//! between the epoll reactor and this proactor (a driver trait: turn with a
//! timeout, timers, a notifier) is the next step; see the crate docs.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::{Notifier, Proactor};

const MAIN: u64 = u64::MAX;

struct Queue {
    ready: Mutex<Vec<u64>>,
    notifier: Notifier,
}

struct TaskWaker {
    id: u64,
    queued: AtomicBool,
    queue: Arc<Queue>,
}

thread_local! {
    /// The queue of the runtime running on this thread (its address), so a
    /// local wake skips the notifier.
    static LOCAL_QUEUE: Cell<usize> = const { Cell::new(0) };
    static EXEC: RefCell<Option<Rc<Exec>>> = const { RefCell::new(None) };
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return; // already in the queue
        }
        self.queue.ready.lock().unwrap().push(self.id);
        let local = LOCAL_QUEUE.with(|q| q.get()) == Arc::as_ptr(&self.queue) as usize;
        if !local {
            self.queue.notifier.notify();
        }
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

struct Slot {
    generation: u32,
    task: Option<Task>,
    waker: Option<Arc<TaskWaker>>,
}

struct Exec {
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<u32>>,
    queue: Arc<Queue>,
    live: Cell<usize>,
}

/// A proactor plus the tasks it drives, on one thread.
pub struct Runtime {
    proactor: Proactor,
    exec: Rc<Exec>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tasks", &self.exec.live.get())
            .finish()
    }
}

impl Runtime {
    /// A runtime on a default-sized proactor.
    pub fn new() -> io::Result<Runtime> {
        Runtime::with(Proactor::new()?)
    }

    /// A runtime on `proactor`.
    pub fn with(proactor: Proactor) -> io::Result<Runtime> {
        let queue = Arc::new(Queue {
            ready: Mutex::new(Vec::new()),
            notifier: proactor.notifier(),
        });
        let exec = Rc::new(Exec {
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            queue,
            live: Cell::new(0),
        });
        Ok(Runtime { proactor, exec })
    }

    /// The proactor.
    pub fn proactor(&self) -> &Proactor {
        &self.proactor
    }

    /// Runs `fut` to completion, with spawned tasks alongside.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let _p = self.proactor.enter();
        let prev_exec = EXEC.with(|e| e.borrow_mut().replace(self.exec.clone()));
        let prev_q = LOCAL_QUEUE.with(|q| q.replace(Arc::as_ptr(&self.exec.queue) as usize));
        let _restore = Restore(prev_exec, prev_q);

        let main = Arc::new(TaskWaker {
            id: MAIN,
            queued: AtomicBool::new(false),
            queue: self.exec.queue.clone(),
        });
        let main_waker = Waker::from(main.clone());
        let mut fut = std::pin::pin!(fut);
        let mut batch = Vec::new();
        let mut poll_main = true;
        loop {
            if poll_main {
                poll_main = false;
                main.queued.store(false, Ordering::Release);
                if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                    return v;
                }
            }
            std::mem::swap(&mut batch, &mut *self.exec.queue.ready.lock().unwrap());
            for id in batch.drain(..) {
                if id == MAIN {
                    poll_main = true;
                } else {
                    self.exec.run(id);
                }
            }
            let idle = !poll_main && self.exec.queue.ready.lock().unwrap().is_empty();
            if let Err(e) = self.proactor.turn(idle) {
                panic!("proactor turn failed: {e}");
            }
        }
    }
}

struct Restore(Option<Rc<Exec>>, usize);

impl Drop for Restore {
    fn drop(&mut self) {
        let e = self.0.take();
        EXEC.with(|x| *x.borrow_mut() = e);
        LOCAL_QUEUE.with(|q| q.set(self.1));
    }
}

impl Exec {
    fn spawn(&self, task: Task) {
        let idx = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(Slot {
                    generation: 0,
                    task: None,
                    waker: None,
                });
                (slots.len() - 1) as u32
            }
        };
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[idx as usize];
        let id = (slot.generation as u64) << 32 | idx as u64;
        slot.task = Some(task);
        let w = Arc::new(TaskWaker {
            id,
            queued: AtomicBool::new(false),
            queue: self.queue.clone(),
        });
        slot.waker = Some(w.clone());
        self.live.set(self.live.get() + 1);
        drop(slots);
        w.wake_by_ref();
    }

    fn run(&self, id: u64) {
        let idx = (id & 0xffff_ffff) as usize;
        let (mut task, w) = {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(idx) else {
                return;
            };
            if slot.generation != (id >> 32) as u32 {
                return; // a wake for a finished task
            }
            let Some(task) = slot.task.take() else { return };
            (task, slot.waker.clone().expect("waker"))
        };
        w.queued.store(false, Ordering::Release);
        let waker = Waker::from(w);
        let done = task
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[idx];
        if done {
            slot.generation = slot.generation.wrapping_add(1);
            slot.waker = None;
            self.free.borrow_mut().push(idx as u32);
            self.live.set(self.live.get() - 1);
            drop(slots);
            drop(task); // outside the borrow: its drop may release operations
        } else {
            slot.task = Some(task);
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Dropping tasks releases their operations (parking buffers), which
        // needs the proactor entered; take them out of the slab first.
        let _p = self.proactor.enter();
        let tasks: Vec<Task> = self
            .exec
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| s.task.take())
            .collect();
        drop(tasks);
    }
}

/// Spawns a task on the runtime running on this thread. The returned
/// handle is a future of the task's output; dropping it detaches the task.
///
/// # Panics
/// Outside [`Runtime::block_on`].
pub fn spawn<F: Future + 'static>(fut: F) -> JoinHandle<F::Output> {
    let state = Rc::new(JoinState {
        out: Cell::new(None),
        waker: Cell::new(None),
    });
    let st = state.clone();
    let task = Box::pin(async move {
        let v = fut.await;
        st.out.set(Some(v));
        if let Some(w) = st.waker.take() {
            w.wake();
        }
    });
    EXEC.with(|e| {
        e.borrow()
            .as_ref()
            .expect("spawn outside Runtime::block_on")
            .spawn(task)
    });
    JoinHandle { state }
}

struct JoinState<T> {
    out: Cell<Option<T>>,
    waker: Cell<Option<Waker>>,
}

/// The output of a spawned task, as a future.
pub struct JoinHandle<T> {
    state: Rc<JoinState<T>>,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinHandle")
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.state.out.take() {
            Some(v) => Poll::Ready(v),
            None => {
                self.state.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

/// Wakes every task of the runtime running on this thread once (each is
/// polled again and sees whatever changed, e.g. a shutdown flag), so that
/// waiting tasks need not each register for a rare event. Does nothing
/// outside [`Runtime::block_on`].
pub fn wake_all() {
    let wakers: Vec<Arc<TaskWaker>> = EXEC.with(|e| match e.borrow().as_ref() {
        Some(exec) => exec
            .slots
            .borrow()
            .iter()
            .filter(|s| s.task.is_some())
            .filter_map(|s| s.waker.clone())
            .collect(),
        None => Vec::new(),
    });
    for w in wakers {
        w.wake_by_ref();
    }
}

/// Yields once to the other ready tasks.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}
