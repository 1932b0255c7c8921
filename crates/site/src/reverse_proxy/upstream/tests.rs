use std::time::{Duration, Instant};

use super::*;

fn balancer(n: usize, balance: Balance, health: Health) -> Balancer {
    let ups = (0..n)
        .map(|i| Upstream::parse(&format!("http://127.0.0.1:{}", 3000 + i), in_heap).unwrap())
        .collect();
    Balancer::new(ups, balance, health)
}

#[test]
fn urls_parse_into_addresses_base_paths_and_authorities() {
    let u = Upstream::parse("http://127.0.0.1:3000/app", in_heap).unwrap();
    assert_eq!(u.addr, UpstreamAddr::Tcp("127.0.0.1:3000".parse().unwrap()));
    assert_eq!(
        (u.base_path.as_str(), u.authority.as_str()),
        ("/app", "127.0.0.1:3000")
    );
    let u = Upstream::parse("http://[::1]:8080", in_heap).unwrap();
    assert_eq!(u.addr, UpstreamAddr::Tcp("[::1]:8080".parse().unwrap()));
    assert_eq!(u.base_path, "/");
    let u = Upstream::parse("http://127.0.0.1", in_heap).unwrap();
    assert_eq!(u.addr, UpstreamAddr::Tcp("127.0.0.1:80".parse().unwrap()));
    assert_eq!(
        u.authority, "127.0.0.1",
        "the Host is the URL's, without a port it did not name"
    );
    let u = Upstream::parse("unix:/run/app.sock", in_heap).unwrap();
    assert_eq!(u.addr, UpstreamAddr::Unix("/run/app.sock".into()));
    assert_eq!(u.addr.to_string(), "unix:/run/app.sock");
}

#[test]
fn round_robin_takes_each_in_turn() {
    let b = balancer(3, Balance::RoundRobin, Health::default());
    let now = Instant::now();
    let picks: Vec<usize> = (0..6).map(|_| b.pick(now, &[])).collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    for &i in &picks {
        b.finished(i, true, now);
    }
    assert!(
        b.upstreams()
            .iter()
            .all(|u| u.stats().in_flight.load(Relaxed) == 0)
    );
    assert!(
        b.upstreams()
            .iter()
            .all(|u| u.stats().responses.load(Relaxed) == 2)
    );
}

#[test]
fn least_connections_takes_the_least_busy() {
    let b = balancer(3, Balance::LeastConnections, Health::default());
    let now = Instant::now();
    let first = b.pick(now, &[]);
    let second = b.pick(now, &[]);
    assert_ne!(first, second);
    let third = b.pick(now, &[]);
    assert!(![first, second].contains(&third));
    b.finished(second, true, now);
    assert_eq!(b.pick(now, &[]), second, "the only idle one");
}

#[test]
fn a_failing_upstream_is_put_aside_then_tried_again() {
    let health = Health {
        max_fails: 2,
        fail_timeout: Duration::from_secs(10),
    };
    let b = balancer(2, Balance::RoundRobin, health);
    let t0 = Instant::now();
    let i = b.pick(t0, &[]);
    b.finished(i, false, t0);
    assert!(!b.is_down(i, t0), "one failure of two");
    let j = b.pick(t0, &[]);
    b.finished(j, true, t0);
    let k = b.pick(t0, &[]);
    assert_eq!(k, i);
    b.finished(k, false, t0);
    assert!(b.is_down(i, t0));
    for _ in 0..4 {
        let p = b.pick(t0, &[]);
        assert_ne!(p, i, "skipped while put aside");
        b.finished(p, true, t0);
    }
    let later = t0 + Duration::from_secs(11);
    assert!(!b.is_down(i, later));
    let picks: Vec<usize> = (0..2).map(|_| b.pick(later, &[])).collect();
    assert!(picks.contains(&i), "back in turn: {picks:?}");
}

#[test]
fn with_every_upstream_aside_the_one_back_soonest_is_tried() {
    let health = Health {
        max_fails: 1,
        fail_timeout: Duration::from_secs(10),
    };
    let b = balancer(2, Balance::RoundRobin, health);
    let t0 = Instant::now();
    let first = b.pick(t0, &[]);
    b.finished(first, false, t0);
    let t1 = t0 + Duration::from_secs(1);
    let second = b.pick(t1, &[]);
    assert_ne!(first, second);
    b.finished(second, false, t1);
    assert_eq!(b.pick(t1, &[]), first, "back first");
    assert_eq!(b.pick(t1, &[first]), second, "a retry goes elsewhere");
}

#[test]
fn stats_are_one_json_object_per_upstream() {
    let b = balancer(2, Balance::RoundRobin, Health::default());
    let now = Instant::now();
    let i = b.pick(now, &[]);
    b.upstreams()[i]
        .stats()
        .connect_failed
        .fetch_add(1, Relaxed);
    b.finished(i, false, now);
    let mut s = String::from("[");
    b.write_json(&mut s, now);
    s.push(']');
    assert!(
        s.starts_with("[{\"addr\":\"127.0.0.1:3000\",\"down\":true,\"requests\":1,"),
        "{s}"
    );
    assert!(s.contains("\"connect_failed\":1"), "{s}");
    assert_eq!(s.matches("\"addr\"").count(), 2);
}
