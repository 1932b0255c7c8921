//! Whole-binary tests for `httplite`: the real binary, started per test on
//! an ephemeral port, driven over real sockets by a hand-written raw
//! HTTP/1.1 client (`harness`) and by the real `curl`.
//!
//! Every behavioural test loops over [`harness::runtimes()`], so a new runtime
//! is covered by adding its name there. Run with
//! `cargo test -p httplite --test server`.

mod harness;
mod pki;

mod accept_storm;
mod access_log;
mod access_log_format;
mod basics;
mod conformance;
mod console;
mod curl;
mod dashboard;
mod designs;
mod drain;
mod exposure;
mod file_cache;
mod file_cache_fds;
mod file_features;
mod jobs;
mod large_files;
mod limits;
mod listen;
mod load;
mod matrix;
mod observability;
mod observability_timeline;
mod pipelining;
mod precompressed;
mod proxy_protocol;
mod reverse_proxy;
mod shutdown;
mod sigterm_load;
mod slow_clients;
mod startup;
mod static_files;
mod timeouts;
mod tls;
mod tls_reload;
mod upgrade;
mod uring;
