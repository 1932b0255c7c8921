//! Benchmarks live in `benches/benches/*.rs` (criterion). This crate exists so
//! that bench-only peers (tokio) stay out of every runtime crate's dependency
//! tree: they are dev-dependencies of this crate alone.
