use bytes::BytesMut;
use http1::{Decoder, Limits, Message, ResponseDecoder, ResponseMessage};

use super::answer::{ClientFraming, client_framing, write_response_head};
use super::forward::{BodyFraming, Forwarding, HostPolicy, write_request_head};
use super::*;

fn route(spec: &str) -> Route {
    Route::parse(spec, Balance::RoundRobin, Health::default(), in_heap).unwrap()
}

fn request(bytes: &[u8]) -> http1::Request {
    let mut buf = BytesMut::from(bytes);
    match Decoder::new(Limits::default()).decode(&mut buf) {
        Ok(Some(Message::Head(r))) => r,
        other => panic!("{other:?}"),
    }
}

fn forwarded(req: &[u8], f: Forwarding<'_>, body: BodyFraming) -> String {
    let req = request(req);
    let mut out = BytesMut::new();
    write_request_head(&mut out, &req, "/t", &f, body);
    String::from_utf8(out.to_vec()).unwrap()
}

const PLAIN: Forwarding<'static> = Forwarding {
    client: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7))),
    https: false,
    trusted_peer: false,
    host: HostPolicy::Preserve,
    upstream_authority: "127.0.0.1:3000",
    tunnel: false,
};

#[test]
fn a_prefix_matches_whole_segments_and_the_longest_wins() {
    let routes = Routes::new(vec![
        route("/api=http://127.0.0.1:1"),
        route("/api/v2/=http://127.0.0.1:2"),
    ]);
    let (r, rest) = routes.find("/api/users").unwrap();
    assert_eq!((r.prefix.as_str(), rest), ("/api", "/users"));
    assert_eq!(routes.find("/api").unwrap().1, "");
    assert!(routes.find("/apix").is_none());
    assert!(routes.find("/").is_none());
    let (r, rest) = routes.find("/api/v2/x").unwrap();
    assert_eq!((r.prefix.as_str(), rest), ("/api/v2/", "x"));
}

#[test]
fn the_target_joins_the_base_path_and_the_rest() {
    assert_eq!(upstream_target("/", "users", None), "/users");
    assert_eq!(upstream_target("/", "/users", Some("a=1")), "/users?a=1");
    assert_eq!(upstream_target("/v1", "/users", None), "/v1/users");
    assert_eq!(upstream_target("/v1/", "users", None), "/v1/users");
    assert_eq!(upstream_target("/v1", "", None), "/v1");
    assert_eq!(upstream_target("/", "", Some("q")), "/?q");
}

#[test]
fn bad_specs_say_why() {
    for (spec, says) in [
        ("/api", "PREFIX=URL"),
        ("api=http://127.0.0.1:1", "must start with '/'"),
        ("/a=https://127.0.0.1:1", "TLS to an upstream"),
        ("/a=ftp://x", "expected http://"),
        ("/a=unix:run/app.sock", "absolute"),
        ("/a=http://127.0.0.1:1/x?y", "no query"),
        ("/a=http://user@127.0.0.1:1", "expected http://"),
    ] {
        let e = Route::parse(spec, Balance::RoundRobin, Health::default(), in_heap).unwrap_err();
        assert!(e.contains(says), "{spec}: {e}");
    }
}

#[test]
fn hop_by_hop_fields_go_and_the_forwarding_fields_come() {
    let head = forwarded(
        b"GET /api/x HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, X-Secret\r\n\
          Keep-Alive: timeout=5\r\nTE: trailers\r\nX-Secret: 1\r\nProxy-Authorization: Basic x\r\n\
          Proxy-Connection: keep-alive\r\nUpgrade: websocket\r\nAccept: */*\r\n\
          X-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Forwarded-Proto: https\r\n\
          Via: 1.0 squid\r\n\r\n",
        PLAIN,
        BodyFraming::None,
    );
    assert!(
        head.starts_with("GET /t HTTP/1.1\r\nHost: example.com\r\n"),
        "{head}"
    );
    for gone in [
        "Connection",
        "Keep-Alive",
        "TE:",
        "X-Secret",
        "Proxy-",
        "Upgrade",
        "6.6.6.6",
        "Content-Length",
        "Transfer-Encoding",
    ] {
        assert!(!head.contains(gone), "{gone} in {head}");
    }
    assert!(head.contains("\r\nAccept: */*\r\n"), "{head}");
    assert!(
        head.contains("\r\nX-Forwarded-For: 192.0.2.7\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nX-Forwarded-Proto: http\r\n"), "{head}");
    assert!(
        head.contains("\r\nForwarded: for=192.0.2.7;proto=http;host=example.com\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\nVia: 1.0 squid, 1.1 httplite\r\n"),
        "{head}"
    );
    assert!(head.ends_with("\r\n\r\n"));
}

#[test]
fn a_trusted_peers_forwarding_fields_are_kept_and_appended_to() {
    let f = Forwarding {
        trusted_peer: true,
        client: Some("2001:db8::1".parse().unwrap()),
        ..PLAIN
    };
    let head = forwarded(
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 198.51.100.1\r\nForwarded: for=198.51.100.1\r\n\
          X-Forwarded-Proto: https\r\n\r\n",
        f,
        BodyFraming::None,
    );
    assert!(
        head.contains("\r\nX-Forwarded-For: 198.51.100.1, 2001:db8::1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nX-Forwarded-Proto: https\r\n"), "{head}");
    assert!(
        head.contains(
            "\r\nForwarded: for=198.51.100.1, for=\"[2001:db8::1]\";proto=http;host=a\r\n"
        ),
        "{head}"
    );
}

#[test]
fn host_follows_the_policy_and_the_body_is_reframed() {
    let f = Forwarding {
        host: HostPolicy::Upstream,
        ..PLAIN
    };
    let head = forwarded(
        b"POST /x HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
        f,
        BodyFraming::Chunked,
    );
    assert!(head.contains("\r\nHost: 127.0.0.1:3000\r\n"), "{head}");
    assert!(
        head.contains("\r\nTransfer-Encoding: chunked\r\n"),
        "{head}"
    );
    assert!(!head.contains("Expect"), "{head}");
    let head = forwarded(
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
        PLAIN,
        BodyFraming::Length(5),
    );
    assert_eq!(head.matches("Content-Length: 5\r\n").count(), 1, "{head}");
}

#[test]
fn a_tunnelled_request_keeps_its_upgrade() {
    let f = Forwarding {
        tunnel: true,
        ..PLAIN
    };
    let head = forwarded(
        b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        f,
        BodyFraming::None,
    );
    assert!(head.contains("\r\nUpgrade: websocket\r\n"), "{head}");
    assert!(head.contains("\r\nConnection: upgrade\r\n"), "{head}");
    assert!(
        head.contains("\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
        "{head}"
    );
}

fn response(bytes: &[u8], head_request: bool) -> http1::ResponseHead {
    let mut d = ResponseDecoder::new(8192, u64::MAX);
    d.expect(head_request);
    let mut buf = BytesMut::from(bytes);
    match d.decode(&mut buf) {
        Ok(Some(ResponseMessage::Head(h))) => h,
        other => panic!("{other:?}"),
    }
}

fn answered(bytes: &[u8], client: http1::Version, close: bool) -> (ClientFraming, String) {
    let head = response(bytes, false);
    let framing = client_framing(&head, client);
    let mut out = BytesMut::new();
    write_response_head(&mut out, &head, framing, close);
    (framing, String::from_utf8(out.to_vec()).unwrap())
}

#[test]
fn the_answer_loses_hop_by_hop_fields_and_gains_via() {
    let (framing, head) = answered(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive, X-Internal\r\n\
          X-Internal: 1\r\nKeep-Alive: timeout=5\r\nServer: app\r\nVia: 1.1 cdn\r\n\r\n",
        http1::Version::Http11,
        false,
    );
    assert_eq!(framing, ClientFraming::Length(3));
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    for gone in ["X-Internal", "Keep-Alive", "Connection"] {
        assert!(!head.contains(gone), "{gone} in {head}");
    }
    assert!(head.contains("\r\nServer: app\r\n"), "{head}");
    assert!(
        head.contains("\r\nVia: 1.1 cdn, 1.1 httplite\r\n"),
        "{head}"
    );
    assert_eq!(head.matches("Content-Length: 3\r\n").count(), 1, "{head}");
}

#[test]
fn an_unknown_length_is_rechunked_for_11_and_closed_for_10() {
    let close_delimited = b"HTTP/1.0 200 OK\r\n\r\n";
    let (framing, head) = answered(close_delimited, http1::Version::Http11, false);
    assert_eq!(framing, ClientFraming::Chunked);
    assert!(
        head.contains("\r\nTransfer-Encoding: chunked\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nVia: 1.0 httplite\r\n"), "{head}");
    let (framing, head) = answered(close_delimited, http1::Version::Http10, false);
    assert_eq!(framing, ClientFraming::Close);
    assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    let (_, head) = answered(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n",
        http1::Version::Http11,
        true,
    );
    assert_eq!(
        head.matches("Transfer-Encoding: chunked").count(),
        1,
        "{head}"
    );
    assert!(!head.contains("Trailer"), "{head}");
    assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
}

#[test]
fn switching_protocols_keeps_its_upgrade() {
    let (framing, head) = answered(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        http1::Version::Http11,
        false,
    );
    assert_eq!(framing, ClientFraming::None);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nUpgrade: websocket\r\n"), "{head}");
    assert!(head.contains("\r\nConnection: upgrade\r\n"), "{head}");
    assert!(head.contains("Sec-WebSocket-Accept"), "{head}");
}

#[test]
fn a_head_answer_passes_its_length_on() {
    let head = response(b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", true);
    let framing = client_framing(&head, http1::Version::Http11);
    assert_eq!(framing, ClientFraming::None);
    let mut out = BytesMut::new();
    write_response_head(&mut out, &head, framing, false);
    assert!(String::from_utf8_lossy(&out).contains("\r\nContent-Length: 42\r\n"));
}
