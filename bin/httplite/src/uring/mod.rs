//! The server on the io_uring proactor (`--runtime uring`): the completion
//! model's connection driver.
//!
//! The epoll drivers wait for *readiness* and then read; this one keeps a
//! **multishot recv** armed on every connection (one SQE for its whole
//! life) and is handed *completions*: "78 bytes, in ring buffer 3". A
//! connection copies those bytes into its request state and gives the
//! buffer straight back, so an idle connection holds no buffer at all (the
//! provided-buffer ring is shared by every connection of the worker).
//! Answers leave through `IORING_OP_SEND` with the write buffer moved into
//! the operation (the kernel may read it until the CQE, see the proactor's
//! cancellation rule).
//!
//! What a request gets is decided by the same code as on every other
//! runtime (`http1` parses, `site::respond` and `site::plan` answer), and
//! the connection loop and the worker loop are the epoll driver's too
//! (`crate::stackless::answer` and `crate::stackless::accept`, generic over
//! how a driver waits); the files here only wait:
//!
//! | file | job |
//! |---|---|
//! | `worker.rs` | one worker thread: the shared executor on the proactor, its waits on the dispatch port |
//! | `ctx.rs` | what the connections of one worker share |
//! | `conn.rs` | one connection: the idle loop and the reads of the shared loop; in `conn/`, the wait for the recv (`recv.rs`), sends and closing (`send.rs`), the access-log line (`log.rs`) |
//! | `slow.rs` | the rest of its waits for the shared loop: files, event streams |
//! | `io.rs` | sends with an owned buffer, `sendfile(2)`, waits under a deadline |
//! | `tls.rs` | HTTPS: the TLS session fed from completions, records sent from owned buffers |
//! | `setup.rs` | whether io_uring is available, and the line that says why not |
//! | `trace.rs` | the ring's work and the tasks' polls on a timeline |

mod conn;
mod ctx;
mod io;
mod proxied;
pub mod setup;
mod slow;
mod tls;
pub mod trace;
mod upstream;
mod worker;

pub use worker::run;
