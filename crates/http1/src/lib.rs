//! http1 (work in progress)
