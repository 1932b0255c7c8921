//! # coroutine: stackful coroutines, and I/O that looks blocking
//!
//! The executor crate runs *stackless* tasks: a Rust `async fn` compiles to a
//! state machine, a struct holding exactly the locals that live across an
//! `.await`, and "suspending" means returning `Poll::Pending` all the way up
//! to the executor. This crate runs *stackful* coroutines: each one gets its
//! own call stack, and suspending means saving a few registers and pointing
//! the CPU's stack pointer at another stack. The code in between is ordinary,
//! synchronous Rust.
//!
//! ```text
//!                 stackless (executor)               stackful (this crate)
//!   code          async fn, .await everywhere        plain fn; read() just returns later
//!   state         a struct sized by the compiler     the frames on its own stack
//!   suspend       return Pending up every frame      save registers, switch stacks
//!   resume        poll() down every frame again      switch back; the call returns
//!   memory        the state machine (bytes to KiB)   the stack pages touched (≥ 4 KiB)
//!   recursion,    needs boxing; traits need          just works
//!   trait objects async-trait tricks
//! ```
//!
//! Both park on the same reactor the same way: an operation that hits
//! `EAGAIN` stores a [`std::task::Waker`] in the fd's slot and gives up the
//! CPU; the reactor wakes it on the next edge. Only *what* is parked differs
//! (see `wait.rs`).
//!
//! ## What a context switch saves, and why
//!
//! The switch is an ordinary-looking function call, `switch(&mut from.sp,
//! to.sp)`. Because it is a call, the compiler has already saved every
//! *caller-saved* register it cares about; only the *callee-saved* ones (the
//! ABI promises a call leaves them intact) and the stack pointer remain.
//! On x86_64 that is `rbx`, `rbp`, `r12`–`r15` and `rsp`; on aarch64
//! `x19`–`x29`, `lr`, `sp` and `d8`–`d15`. The ABI also makes the
//! floating-point control state callee-saved (the control bits of MXCSR and
//! the x87 control word, FPCR), but Rust code cannot change it, and keeping
//! it made a round trip 3.4× slower here: only the `fp-state` cargo feature
//! keeps it (see `src/switch/x86_64.rs`). The return address pushed by the
//! call *is* the saved program counter. A dozen instructions:
//!
//! ```text
//!   coroutine A: switch(&A.sp, B.sp)        coroutine B, suspended earlier
//!   │ A's frames       │                    │ B's frames       │
//!   │ return address   │ ← pushed by call   │ return address   │
//!   │ rbx rbp r12..r15 │ ← A.sp saved here  │ rbx rbp r12..r15 │ ← B.sp
//!   then: rsp = B.sp; pop B's registers; ret → B continues after its switch()
//! ```
//!
//! `src/switch/x86_64.rs` and `src/switch/aarch64.rs` comment every line;
//! other architectures fail to compile with a message. A new coroutine's
//! first frame is forged so that the first "return" lands in a trampoline
//! that calls its entry function.
//!
//! ## A coroutine's stack
//!
//! ```text
//!   high ┌──────────────────────────────┐ top
//!        │ control block + the closure  │ written at creation, no heap
//!        │ first frame (entry, arg)     │
//!        │ the coroutine's frames ...   │ grow down
//!        │              ▼               │
//!        │  (never touched: no memory)  │ 64 KiB by default
//!        ├──────────────────────────────┤
//!        │ guard page: any access faults│ 4 KiB
//!   low  └──────────────────────────────┘
//! ```
//!
//! Stacks come from `mmap`, so only touched pages cost memory (a parked
//! connection handler: one or two pages). A finished coroutine's stack goes
//! back to a per-thread pool; the next `spawn` takes it with no syscall
//! ([`pool_stats`] proves it). The guard page below each stack turns an
//! overflow into a fault at once; a SIGSEGV handler on an alternate signal
//! stack recognises the address, prints `coroutine 17 overflowed its stack
//! ...` and aborts (`guard.rs`). Why 64 KiB: [`DEFAULT_STACK_SIZE`]. To
//! choose from measurement instead, [`Builder::stack_watermarks`] (or
//! `COROUTINE_WATERMARKS=1`, which prints a line per coroutine) fills stacks
//! with a pattern and reports how deep each one went.
//!
//! ## Scheduling and I/O
//!
//! A [`Runtime`] is a FIFO run queue on one thread over one
//! [`reactor::Reactor`] (`scheduler.rs`): [`run`] / [`Runtime::block_on`]
//! run a main coroutine to completion, [`spawn`] adds more, [`yield_now`],
//! [`sleep`], [`JoinHandle::join`]. [`net::TcpListener`] and
//! [`net::TcpStream`] have `std`-like blocking methods (and implement
//! `std::io::Read`/`Write`) that park on `EAGAIN`, with absolute deadlines
//! for servers' timeouts; [`io::wait_readable`] waits on any registered fd;
//! [`await_future`] runs any `Future` to completion from a coroutine, and
//! [`spawn_blocking`] runs really-blocking work on a [`pool::Pool`] thread
//! while the coroutine is parked.
//!
//! ```
//! use std::time::Duration;
//! let sum = coroutine::run(|| {
//!     let a = coroutine::spawn(|| 20);
//!     let b = coroutine::spawn(|| {
//!         coroutine::sleep(Duration::from_millis(1)); // parks, does not block the thread
//!         22
//!     });
//!     a.join().unwrap() + b.join().unwrap()
//! });
//! assert_eq!(sum, 42);
//! ```
//!
//! ## Rules
//!
//! - **Coroutines never migrate** and are `!Send`; so are [`Coroutine`],
//!   [`JoinHandle`] and [`Runtime`]. Their wakers are `Send + Sync` (the
//!   `Waker` contract): a wake from another thread goes through the runtime's
//!   locked inbox and the reactor's eventfd.
//! - **Panics never cross the switch.** The entry of every coroutine catches
//!   them (the assembly has no unwind tables to unwind through); a scheduled
//!   coroutine's panic is reported by [`JoinHandle::join`] as
//!   [`JoinError::Panicked`], a hand-resumed one's is re-raised by
//!   [`Coroutine::resume`]. Either way the stack is recycled.
//! - **Dropping a suspended coroutine cancels it**: it unwinds from the
//!   call it was suspended in, running every destructor on its stack, before
//!   the stack is reused ([`Cancelled`] has the details).
//! - **Valgrind**: stacks are announced with `VALGRIND_STACK_REGISTER`
//!   (`valgrind.rs`), so memcheck follows the switches.
#![deny(missing_docs)]

mod blocking;
mod coroutine;
mod guard;
pub mod io;
pub mod net;
mod raw;
mod runtime;
mod scheduler;
mod stack;
mod switch;
mod task;
mod valgrind;
mod wait;
mod watermark;

pub use blocking::{spawn_blocking, spawn_blocking_in};
pub use coroutine::{Cancelled, Coroutine, CoroutineResult, Yielder, is_cancelled};
pub use raw::current_id;
pub use runtime::{Builder, Runtime, current_stats, run, spawn, try_spawn, try_spawn_detached};
pub use scheduler::{DEFAULT_BUDGET, RuntimeStats, StatsHandle};
pub use stack::{
    DEFAULT_POOL_CAPACITY, DEFAULT_STACK_SIZE, GuardKind, PoolStats, guard_kind, page_size,
    pool_stats, set_pool_capacity,
};
pub use task::{JoinError, JoinHandle};
pub use wait::{await_future, in_coroutine, sleep, sleep_until, wait, yield_now};
