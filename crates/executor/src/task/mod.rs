//! Tasks: a future in a heap cell with a state word, its waker, and its
//! `JoinHandle`.

mod join;
mod raw;
mod state;

pub use join::{JoinError, JoinHandle};
pub(crate) use raw::{RunOutcome, TaskRef, wake_by_ref};
