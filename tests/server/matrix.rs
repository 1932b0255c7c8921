//! Which feature works on which design, and the test that shows it: the
//! table of `docs/designs.md` is generated from [`ROWS`] here, so it cannot
//! drift from the suite.
//!
//! Each cell names the test that runs that feature on that design (a test
//! that loops over `harness::runtimes()` runs it on every design of the
//! run), or the test that asserts the design's refusal. The checks below
//! fail when the page is stale, when a named test does not exist, or when a
//! cell claims a design its test does not run. Regenerate the page with
//! `HTTPLITE_REGENERATE_DOCS=1 cargo test -p httplite --test server -- matrix::`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::harness::RUNTIMES;

/// What a design does with a feature.
#[derive(Clone, Copy)]
enum Cell {
    /// Works; the test that runs it on this design.
    Yes(&'static str),
}

use Cell::Yes;

/// One feature on the six designs, in [`RUNTIMES`]' order.
struct Row {
    feature: &'static str,
    cells: [Cell; 6],
}

/// Every design the same way.
const fn all(test: &'static str) -> [Cell; 6] {
    [Yes(test); 6]
}

const TIMELINE_EPOLL: &str =
    "observability_timeline::timeline_follows_one_request_and_is_closed_by_sigterm_and_sigint";
const TIMELINE_THREADS: &str =
    "observability_timeline::timeline_on_threads_and_threadpool_has_request_slices";

const ROWS: &[Row] = &[
    Row {
        feature: "HTTP/1.1 keep-alive and pipelining",
        cells: all("pipelining::thirty_two_pipelined_requests_answered_in_order"),
    },
    Row {
        feature: "Static files, ranges, conditional requests",
        cells: all("static_files::single_ranges_get_206_and_unsatisfiable_416"),
    },
    Row {
        feature: "Directory listing",
        cells: all("static_files::listings_sort_hide_dotfiles_and_escape"),
    },
    Row {
        feature: "Precompressed files",
        cells: all("precompressed::codings_are_chosen_by_q_values_and_the_cache_keeps_them_apart"),
    },
    Row {
        feature: "HTTPS (`--tls-cert`)",
        cells: all("tls::real_clients_over_tls_on_every_runtime"),
    },
    Row {
        feature: "Certificate reload (SIGHUP)",
        cells: all("tls_reload::reload_under_load_switches_new_handshakes_only"),
    },
    Row {
        feature: "Admin listener, hidden endpoints (`--admin`)",
        cells: all("exposure::with_a_root_the_public_listener_hides_every_endpoint"),
    },
    Row {
        feature: "PROXY protocol",
        cells: all("proxy_protocol::headers_of_both_versions_name_the_logged_client"),
    },
    Row {
        feature: "Access log",
        cells: all("access_log::lines_logged_at_once_by_many_connections_are_never_cut"),
    },
    Row {
        feature: "Text trace (`--trace`)",
        cells: all("observability::trace_ties_a_proxy_headers_client_to_its_fd"),
    },
    Row {
        feature: "Timeline (`--trace-format chrome`)",
        cells: [
            Yes(TIMELINE_EPOLL),
            Yes(TIMELINE_EPOLL),
            Yes(TIMELINE_THREADS),
            Yes(TIMELINE_THREADS),
            Yes(
                "observability_timeline::fork::timeline_on_fork_has_each_childs_requests_under_its_own_pid",
            ),
            Yes(
                "observability_timeline::cross_thread::timeline_on_uring_shows_the_ring_and_one_request",
            ),
        ],
    },
    Row {
        feature: "Event stream (the dashboard's SSE)",
        cells: all("dashboard::events_stream_the_stats_and_count_their_viewers"),
    },
    Row {
        feature: "Jobs on the blocking pool",
        cells: all("jobs::ten_thousand_concurrent_jobs_complete_with_correct_results"),
    },
    Row {
        feature: "Graceful shutdown (SIGTERM)",
        cells: all("shutdown::sigterm_finishes_100_in_flight_requests_and_exits_0"),
    },
    Row {
        feature: "Drain delay and health (`--drain-delay`)",
        cells: all("drain::health_fails_during_the_drain_delay_then_the_server_stops"),
    },
    Row {
        feature: "Several listeners: IPv4, IPv6, Unix",
        cells: all("listen::ipv4_ipv6_and_unix_in_both_dispatch_modes"),
    },
    Row {
        feature: "Socket activation (systemd)",
        cells: all("listen::socket_activation_serves_on_the_inherited_sockets"),
    },
    Row {
        feature: "Binary upgrade (SIGUSR2)",
        cells: all("upgrade::upgrade_under_load_refuses_no_connection"),
    },
    Row {
        feature: "Console (`--console`)",
        cells: all("console::commands_answer_and_quit_shuts_down_gracefully"),
    },
    Row {
        feature: "2,000 keep-alive clients × 10 requests",
        cells: all("load::two_thousand_concurrent_connections_ten_requests_each"),
    },
    Row {
        feature: "Fresh clients beside slowloris ones, answered within 2 s",
        cells: all("slow_clients::fresh_clients_are_answered_at_once_beside_slowloris_clients"),
    },
    Row {
        feature: "15 heads sent in pieces, 500 ms apart",
        cells: all("slow_clients::fifteen_heads_sent_in_pieces_500_ms_apart_are_all_answered"),
    },
    Row {
        feature: "`ab -k`, 100 connections",
        cells: all("slow_clients::ab_keep_alive_with_100_connections_completes"),
    },
    Row {
        feature: "Reverse proxy (`--proxy`)",
        cells: all("reverse_proxy::heads_and_bodies_cross_both_ways"),
    },
    Row {
        feature: "WebSocket through the proxy (`101`, then a tunnel)",
        cells: all("reverse_proxy::a_websocket_upgrade_becomes_a_tunnel_until_either_side_closes"),
    },
];

/// The page: a short text, the table (each cell a test reference), and the
/// tests by number.
fn render() -> String {
    let mut numbers: BTreeMap<&str, usize> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut number = |test: &'static str| -> usize {
        *numbers.entry(test).or_insert_with(|| {
            order.push(test);
            order.len()
        })
    };
    let mut table = String::new();
    let _ = writeln!(table, "| feature | {} |", RUNTIMES.join(" | "));
    let _ = writeln!(table, "|---{}|", "|---".repeat(RUNTIMES.len()));
    for row in ROWS {
        let _ = write!(table, "| {} |", row.feature);
        for cell in row.cells {
            let Yes(test) = cell;
            let _ = write!(table, " yes [{}] |", number(test));
        }
        table.push('\n');
    }
    let mut page = String::from(
        "# Every feature on every design\n\n\
         <!-- Generated by tests/server/matrix.rs: edit the table there, then run\n\
         HTTPLITE_REGENERATE_DOCS=1 cargo test -p httplite --test server -- matrix:: -->\n\n\
         One site, one parser, one dispatch: what each design serves, each cell\n\
         with the test (numbered below) that runs that feature on that design in\n\
         the server suite, or that asserts its refusal. A test that loops over\n\
         every runtime of the run (`harness::runtimes()`) covers its whole row.\n\
         A refusal would be one line at start-up (exit status 2) that says\n\
         why; no design refuses a feature of this table.\n\n",
    );
    page.push_str(&table);
    page.push_str("\nThe tests (in `tests/server/`):\n\n");
    for (i, test) in order.iter().enumerate() {
        let _ = writeln!(page, "{}. `{test}`", i + 1);
    }
    page
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn designs_md_is_generated_from_the_table() {
    let path = repo().join("docs/designs.md");
    let page = render();
    if std::env::var_os("HTTPLITE_REGENERATE_DOCS").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == page,
        "docs/designs.md is stale: run HTTPLITE_REGENERATE_DOCS=1 cargo test -p httplite \
         --test server -- matrix::"
    );
}

/// The body of test `module::[submodule::]name` in `tests/server/`, as
/// far as the next test (enough to see which designs it runs).
fn test_body(test: &str) -> Option<String> {
    let module = test.split("::").next()?;
    let name = test.rsplit("::").next()?;
    let dir = repo().join("tests/server");
    let source = [dir.join(format!("{module}.rs")), dir.join(module)]
        .iter()
        .flat_map(|p| match p.is_dir() {
            true => std::fs::read_dir(p)
                .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
                .unwrap_or_default(),
            false => vec![p.clone()],
        })
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .find(|s| s.contains(&format!("fn {name}()")))?;
    let start = source.find(&format!("fn {name}()"))?;
    let rest = &source[start..];
    let end = rest[1..].find("#[test]").map_or(rest.len(), |e| e + 1);
    Some(rest[..end].to_string())
}

#[test]
fn every_cell_names_a_test_that_runs_its_design() {
    let mut wrong = Vec::new();
    for row in ROWS {
        for (design, cell) in RUNTIMES.iter().zip(row.cells) {
            let Yes(test) = cell;
            let Some(body) = test_body(test) else {
                wrong.push(format!("{}: {design}: no test {test}", row.feature));
                continue;
            };
            let named = body.contains(&format!("\"{design}\""));
            let every = body.contains("runtimes()");
            let runs = named || every;
            if !runs {
                wrong.push(format!("{}: {design}: {test} does not run it", row.feature));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
