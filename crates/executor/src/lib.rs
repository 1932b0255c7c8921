//! executor (work in progress)
