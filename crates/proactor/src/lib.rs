//! proactor (doc written below)
#![deny(missing_docs)]
pub mod abi;
pub mod ring;
pub mod sys;
