//! Solutions to the exercises, one module per step.
//!
//! Each module states its exercises again, gives one solution to each,
//! and checks it with tests (`cargo test -p learn solutions`). Try the
//! exercise before reading the module: the chapters give the signature
//! to fill in.

pub mod step01;
pub mod step02;
pub mod step03;
pub mod step04;
pub mod step05;
pub mod step06;
pub mod step07;
pub mod step08;
pub mod step09;
