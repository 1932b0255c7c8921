use super::*;

/// Feeds `input` in pieces of `step` bytes; returns the body or the error.
fn decode_in_steps(input: &[u8], step: usize, max_body: u64) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let mut dec = ChunkedDecoder::new();
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        while let Some(chunk) = dec.decode(&mut buf, max_body, 1024)? {
            match chunk {
                Chunk::Data(d) => {
                    assert!(!d.is_empty(), "empty data piece");
                    body.extend_from_slice(&d);
                }
                Chunk::End => return Ok((body, buf.to_vec())),
            }
        }
    }
    panic!("body did not end: {:?}", String::from_utf8_lossy(input));
}

fn decode(input: &[u8]) -> Result<Vec<u8>, u16> {
    decode_in_steps(input, input.len(), 1 << 20)
        .map(|(b, _)| b)
        .map_err(|e| e.status().code())
}

fn expect_err(input: &[u8], code: u16) {
    let mut dec = ChunkedDecoder::new();
    let mut buf = BytesMut::from(input);
    loop {
        match dec.decode(&mut buf, 100, 64) {
            Err(e) => {
                assert_eq!(
                    e.status().code(),
                    code,
                    "{:?}: {e}",
                    String::from_utf8_lossy(input)
                );
                return;
            }
            Ok(Some(Chunk::Data(_))) => continue,
            Ok(other) => panic!(
                "no error for {:?}: ended={}",
                String::from_utf8_lossy(input),
                matches!(other, Some(Chunk::End))
            ),
        }
    }
}

#[test]
fn simple_body() {
    assert_eq!(
        decode(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
        Ok(b"hello world".to_vec())
    );
    assert_eq!(decode(b"0\r\n\r\n"), Ok(Vec::new()));
    assert_eq!(
        decode(b"A\r\n0123456789\r\n0\r\n\r\n"),
        Ok(b"0123456789".to_vec())
    );
    assert_eq!(
        decode(b"00a\r\n0123456789\r\n000\r\n\r\n"),
        Ok(b"0123456789".to_vec())
    );
}

#[test]
fn extensions_and_trailers_are_ignored() {
    let input = b"5;name=value;flag\r\nhello\r\n5 ; q=\"a;b\"\r\nworld\r\n0;last\r\nExpires: never\r\nX-Sum: 1\r\n\r\n";
    assert_eq!(decode(input), Ok(b"helloworld".to_vec()));
}

#[test]
fn every_split_gives_the_same_body() {
    let input = b"3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nNEXT";
    for step in 1..input.len() {
        let (body, rest) = decode_in_steps(input, step, 1 << 20).unwrap();
        assert_eq!(body, b"abc0123456789abcdef", "step {step}");
        // Bytes after the body stay for the next request; with small steps
        // the tail may not have been fed yet when the body ended.
        assert!(b"NEXT".starts_with(&rest), "step {step}: {rest:?}");
    }
}

#[test]
fn malformed_sizes_are_400() {
    expect_err(b"\r\n", 400); // empty size
    expect_err(b"g\r\n", 400); // not hex
    expect_err(b"-1\r\n", 400);
    expect_err(b"0x5\r\nhello\r\n", 400);
    expect_err(b"5 x\r\n", 400); // whitespace may only lead to ';'
    expect_err(b"5\n", 400); // bare LF
    expect_err(b"5\rx", 400);
    expect_err(b"10000000000000000\r\n", 400); // 2^64: overflow
    expect_err(b"5;ext\nhello", 400);
}

#[test]
fn missing_crlf_after_data_is_400() {
    expect_err(b"5\r\nhelloXX", 400);
    expect_err(b"5\r\nhello\rX", 400);
    expect_err(b"5\r\nhello\n0\r\n\r\n", 400);
    expect_err(b"0\r\nTrailer: x\nmore", 400);
    expect_err(b"0\r\n\rX", 400);
    expect_err(b"0\r\n\n", 400);
}

#[test]
fn body_limit_is_413_at_exactly_one_past() {
    // Limit 100 in expect_err; 0x64 = 100 is fine, 0x65 is not.
    let mut dec = ChunkedDecoder::new();
    let mut buf = BytesMut::from(&b"64\r\n"[..]);
    assert!(dec.decode(&mut buf, 100, 64).unwrap().is_none());
    expect_err(b"65\r\n", 413);
    // The running total counts across chunks.
    let mut fifty = b"32\r\n".to_vec();
    fifty.extend_from_slice(&[b'x'; 50]);
    fifty.extend_from_slice(b"\r\n");
    expect_err(&[&fifty[..], b"33\r\n"].concat(), 413);
    // Announced sizes near u64::MAX do not overflow the total.
    expect_err(&[&fifty[..], b"ffffffffffffffff\r\n"].concat(), 413);
}

#[test]
fn long_extensions_and_trailers_are_bounded() {
    let mut ext = b"1;".to_vec();
    ext.extend(std::iter::repeat_n(b'a', MAX_EXTENSION as usize + 1));
    expect_err(&ext, 400);
    let mut trailer = b"0\r\nX: ".to_vec();
    trailer.extend(std::iter::repeat_n(b'a', 100));
    expect_err(&trailer, 431);
}

#[test]
fn decoder_resets_after_end() {
    let mut dec = ChunkedDecoder::new();
    let mut buf = BytesMut::from(&b"1\r\na\r\n0\r\n\r\n1\r\nb\r\n0\r\n\r\n"[..]);
    let mut seen = Vec::new();
    for _ in 0..2 {
        while let Chunk::Data(d) = dec.decode(&mut buf, 10, 10).unwrap().unwrap() {
            seen.extend_from_slice(&d);
        }
    }
    assert_eq!(seen, b"ab");
    assert!(buf.is_empty());
}
