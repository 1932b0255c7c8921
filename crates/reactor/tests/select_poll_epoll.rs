//! The select/poll/epoll example, run small: every interface must report
//! exactly the active connection on every wait, and `select` must stop with
//! an error, not a crash, once an fd reaches `FD_SETSIZE`.

#[path = "../examples/select_poll_epoll.rs"]
mod example;

#[test]
fn each_wait_reports_only_the_active_connection_and_select_stops_at_fd_setsize() {
    example::raise_fd_limit().unwrap();
    // 1,100 idle connections: past FD_SETSIZE (1,024), still quick.
    let rows = example::measure(&[10, 100, 1100], 50).unwrap();
    let idle: Vec<usize> = rows.iter().map(|r| r.idle).collect();
    assert_eq!(idle, [10, 100, 1100]);
    assert!(rows[0].select.is_ok() && rows[1].select.is_ok());
    let err = rows[2].select.as_ref().unwrap_err();
    assert!(err.contains("FD_SETSIZE (1024)"), "{err}");
    let table = example::table(&rows);
    assert_eq!(table.lines().count(), 2 + rows.len(), "{table}");
    assert!(table.contains("| 1100 | error: fd "), "{table}");
}
