//! Table tests of the reply parser: every reply type, every error, and the
//! streaming properties (prefixes are incomplete, split feeding gives the same
//! result, trailing bytes do not change what is consumed).
//!
//! They run with and without the `resp3` feature: `cargo test -p
//! redlock-resp` and `cargo test -p redlock-resp --no-default-features`. The
//! RESP3 frames are tables of their own: with the feature they parse, without
//! it each is `UnknownType` (see `mod resp2_only`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_resp::{
    AggregateKind, ErrorKind, Limits, ParseError, Parser, Reply, Status, parse_reply,
};

type Outcome<'a> = Result<Status<(Reply<'a>, usize)>, ParseError>;

fn complete(reply: Reply<'_>, used: usize) -> Outcome<'_> {
    Ok(Status::Complete((reply, used)))
}

/// The type bytes the parser accepts as the first byte of a value.
fn type_bytes() -> &'static [u8] {
    if cfg!(feature = "resp3") {
        b"+-:$*_#,(!=%~>|"
    } else {
        b"+-:$*"
    }
}

/// Valid frames and the reply each must parse to (the whole input is the frame).
fn valid_frames() -> Vec<(&'static [u8], Reply<'static>)> {
    let mut frames = resp2_frames();
    if cfg!(feature = "resp3") {
        frames.extend(resp3_frames());
    }
    frames
}

/// Valid RESP2 frames and their replies.
fn resp2_frames() -> Vec<(&'static [u8], Reply<'static>)> {
    vec![
        (b"+OK\r\n", Reply::Simple(b"OK")),
        (b"+\r\n", Reply::Simple(b"")),
        (b"+PONG\r\n", Reply::Simple(b"PONG")),
        (
            b"-ERR unknown command 'FOO'\r\n",
            err(b"ERR unknown command 'FOO'"),
        ),
        (
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
            err(b"NOSCRIPT No matching script. Please use EVAL."),
        ),
        (b":0\r\n", Reply::Integer(0)),
        (b":1\r\n", Reply::Integer(1)),
        (b":-1\r\n", Reply::Integer(-1)),
        (b":-2\r\n", Reply::Integer(-2)),
        (b":9223372036854775807\r\n", Reply::Integer(i64::MAX)),
        (b":-9223372036854775808\r\n", Reply::Integer(i64::MIN)),
        (b"$-1\r\n", Reply::Nil),
        (b"$0\r\n\r\n", Reply::Bulk(b"")),
        (b"$5\r\nhello\r\n", Reply::Bulk(b"hello")),
        (
            b"$40\r\n0123456789abcdef0123456789abcdef01234567\r\n",
            Reply::Bulk(b"0123456789abcdef0123456789abcdef01234567"),
        ),
        // Binary-safe: CR, LF, NUL, '*', '$' inside a bulk.
        (
            b"$8\r\n\r\n\0*$\r\n\xff\r\n",
            Reply::Bulk(b"\r\n\0*$\r\n\xff"),
        ),
        (b"*-1\r\n", Reply::Nil),
    ]
}

/// Valid RESP3 scalar frames and their replies (with the `resp3` feature).
fn resp3_frames() -> Vec<(&'static [u8], Reply<'static>)> {
    vec![
        (b"_\r\n", Reply::Nil),
        (b"#t\r\n", Reply::Boolean(true)),
        (b"#f\r\n", Reply::Boolean(false)),
        (b",1.23\r\n", Reply::Double(b"1.23")),
        (b",-1.5e-3\r\n", Reply::Double(b"-1.5e-3")),
        (b",10\r\n", Reply::Double(b"10")),
        (b",inf\r\n", Reply::Double(b"inf")),
        (b",-inf\r\n", Reply::Double(b"-inf")),
        (b",nan\r\n", Reply::Double(b"nan")),
        (
            b"(3492890328409238509324850943850943825024385\r\n",
            Reply::BigNumber(b"3492890328409238509324850943850943825024385"),
        ),
        (
            b"(-3492890328409238509324850943850943825024385\r\n",
            Reply::BigNumber(b"-3492890328409238509324850943850943825024385"),
        ),
        (
            b"!21\r\nSYNTAX invalid syntax\r\n",
            err(b"SYNTAX invalid syntax"),
        ),
        (
            b"=15\r\ntxt:Some string\r\n",
            Reply::Verbatim {
                format: b"txt",
                text: b"Some string",
            },
        ),
        (
            b"=4\r\nmkd:\r\n",
            Reply::Verbatim {
                format: b"mkd",
                text: b"",
            },
        ),
    ]
}

fn err(message: &[u8]) -> Reply<'_> {
    Reply::Error(redlock_resp::ServerError::new(message))
}

/// Valid aggregate frames: (input, kind, decoded elements).
fn aggregate_frames() -> Vec<(&'static [u8], AggregateKind, Vec<Reply<'static>>)> {
    let mut frames = resp2_aggregate_frames();
    if cfg!(feature = "resp3") {
        frames.extend(resp3_aggregate_frames());
    }
    frames
}

/// Valid RESP2 aggregate frames.
fn resp2_aggregate_frames() -> Vec<(&'static [u8], AggregateKind, Vec<Reply<'static>>)> {
    vec![
        (b"*0\r\n", AggregateKind::Array, vec![]),
        (
            b"*3\r\n$3\r\nfoo\r\n:1\r\n$-1\r\n",
            AggregateKind::Array,
            vec![Reply::Bulk(b"foo"), Reply::Integer(1), Reply::Nil],
        ),
        (
            b"*2\r\n+OK\r\n-ERR x\r\n",
            AggregateKind::Array,
            vec![Reply::Simple(b"OK"), err(b"ERR x")],
        ),
    ]
}

/// Valid RESP3 aggregate frames (with the `resp3` feature): each holds a
/// RESP3 type, at its start or inside.
fn resp3_aggregate_frames() -> Vec<(&'static [u8], AggregateKind, Vec<Reply<'static>>)> {
    vec![
        (
            b"%2\r\n+first\r\n:1\r\n+second\r\n#f\r\n",
            AggregateKind::Map,
            vec![
                Reply::Simple(b"first"),
                Reply::Integer(1),
                Reply::Simple(b"second"),
                Reply::Boolean(false),
            ],
        ),
        (
            b"~2\r\n+a\r\n_\r\n",
            AggregateKind::Set,
            vec![Reply::Simple(b"a"), Reply::Nil],
        ),
        (
            b">3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$2\r\nhi\r\n",
            AggregateKind::Push,
            vec![
                Reply::Bulk(b"message"),
                Reply::Bulk(b"chan"),
                Reply::Bulk(b"hi"),
            ],
        ),
        // An attribute inside an aggregate belongs to the element after it.
        (
            b"*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\na\r\n:2\r\n",
            AggregateKind::Array,
            vec![Reply::Bulk(b"a"), Reply::Integer(2)],
        ),
    ]
}

/// Feeds `frame` to a client-style buffer in the given pieces and returns the
/// first non-incomplete outcome (as owned data for comparison).
fn feed_in_pieces(frame: &[u8], cuts: &[usize]) -> String {
    let mut buf = Vec::new();
    let mut last = 0;
    for &cut in cuts.iter().chain(core::iter::once(&frame.len())) {
        buf.extend_from_slice(&frame[last..cut]);
        last = cut;
        match parse_reply(&buf) {
            Ok(Status::Incomplete) => continue,
            other => return format!("{other:?}"),
        }
    }
    "incomplete".to_string()
}

/// The streaming properties every valid frame must have.
fn assert_streaming_properties(frame: &[u8]) {
    let whole = parse_reply(frame);
    let Ok(Status::Complete((reply, used))) = whole else {
        panic!("not a complete frame: {frame:?} -> {whole:?}");
    };
    assert_eq!(used, frame.len(), "{frame:?}");
    for len in 0..frame.len() {
        assert_eq!(
            parse_reply(&frame[..len]),
            Ok(Status::Incomplete),
            "prefix {:?}",
            &frame[..len]
        );
    }
    for trailer in [&b"+OK\r\n"[..], b"garbage", b"\r\n", b"*"] {
        let mut with = frame.to_vec();
        with.extend_from_slice(trailer);
        assert_eq!(
            parse_reply(&with),
            Ok(Status::Complete((reply, used))),
            "{with:?}"
        );
    }
    let expected = format!("{whole:?}");
    for cut in 0..=frame.len() {
        assert_eq!(feed_in_pieces(frame, &[cut]), expected, "split at {cut}");
    }
    let every_byte: Vec<usize> = (1..frame.len()).collect();
    assert_eq!(
        feed_in_pieces(frame, &every_byte),
        expected,
        "one byte at a time"
    );
}

#[test]
fn every_scalar_type_parses() {
    for (frame, expected) in valid_frames() {
        assert_eq!(
            parse_reply(frame),
            complete(expected, frame.len()),
            "{:?}",
            String::from_utf8_lossy(frame)
        );
    }
}

#[test]
fn every_aggregate_type_parses_and_iterates() {
    for (frame, kind, elements) in aggregate_frames() {
        let Ok(Status::Complete((Reply::Aggregate(agg), used))) = parse_reply(frame) else {
            panic!("{frame:?}");
        };
        assert_eq!(used, frame.len());
        assert_eq!(agg.kind(), kind);
        assert_eq!(agg.len(), elements.len());
        assert_eq!(agg.iter().collect::<Vec<_>>(), elements, "{frame:?}");
    }
}

#[test]
fn nested_arrays_iterate_at_every_level() {
    let frame = b"*3\r\n*2\r\n:1\r\n*1\r\n$1\r\nx\r\n*0\r\n+end\r\n";
    let Ok(Status::Complete((Reply::Aggregate(outer), used))) = parse_reply(frame) else {
        panic!()
    };
    assert_eq!(used, frame.len());
    let items: Vec<_> = outer.iter().collect();
    assert_eq!(items.len(), 3);
    let first = items[0].as_aggregate().unwrap();
    let inner: Vec<_> = first.iter().collect();
    assert_eq!(inner[0], Reply::Integer(1));
    let deepest: Vec<_> = inner[1].as_aggregate().unwrap().iter().collect();
    assert_eq!(deepest, vec![Reply::Bulk(b"x")]);
    assert!(items[1].as_aggregate().unwrap().is_empty());
    assert_eq!(items[2], Reply::Simple(b"end"));
}

#[test]
fn only_the_type_bytes_start_a_value() {
    for b in 0..=u8::MAX {
        let expected = if type_bytes().contains(&b) {
            Ok(Status::Incomplete)
        } else {
            Err(ParseError::UnknownType(b))
        };
        assert_eq!(parse_reply(&[b]), expected, "{:?}", b as char);
        // The same inside an array.
        assert_eq!(parse_reply(&[b'*', b'1', b'\r', b'\n', b]), expected);
    }
}

#[cfg(feature = "resp3")]
#[test]
fn top_level_attribute_is_consumed_with_the_reply() {
    let frame = b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n";
    let Ok(Status::Complete((reply, used))) = parse_reply(frame) else {
        panic!()
    };
    assert_eq!(used, frame.len());
    let items: Vec<_> = reply.as_aggregate().unwrap().iter().collect();
    assert_eq!(
        items,
        vec![Reply::Integer(2039123), Reply::Integer(9543892)]
    );
    // Two attributes in a row before a scalar.
    let frame = b"|0\r\n|1\r\n+a\r\n+b\r\n:7\r\n";
    assert_eq!(parse_reply(frame), complete(Reply::Integer(7), frame.len()));
}

#[cfg(feature = "resp3")]
#[test]
fn push_is_recognisable_and_skippable() {
    let stream = b">2\r\n+invalidate\r\n*1\r\n$3\r\nkey\r\n+OK\r\n";
    let Ok(Status::Complete((push, used))) = parse_reply(stream) else {
        panic!()
    };
    assert!(push.is_push());
    assert_eq!(
        parse_reply(&stream[used..]),
        complete(Reply::Simple(b"OK"), 5)
    );
}

#[test]
fn valid_frames_have_the_streaming_properties() {
    for (frame, _) in valid_frames() {
        assert_streaming_properties(frame);
    }
    for (frame, _, _) in aggregate_frames() {
        assert_streaming_properties(frame);
    }
    assert_streaming_properties(b"*3\r\n*2\r\n:1\r\n*1\r\n$1\r\nx\r\n*0\r\n+end\r\n");
    if cfg!(feature = "resp3") {
        assert_streaming_properties(b"|1\r\n+a\r\n+b\r\n%1\r\n_\r\n~1\r\n#t\r\n");
    }
}

#[test]
fn malformed_input_is_a_typed_error() {
    use ParseError::*;
    let cases: &[(&[u8], ParseError)] = &[
        (b"$-2\r\n", InvalidLength),
        (b"*-5\r\n", InvalidLength),
        (b"$+1\r\nx\r\n", InvalidLength),
        (b"$01\r\nx\r\n", InvalidLength),
        (b"$ 1\r\nx\r\n", InvalidLength),
        (b"$\r\n", InvalidLength),
        (b"$abc\r\n", InvalidLength),
        (b"*1a\r\n", InvalidLength),
        (b":12a\r\n", InvalidInteger),
        (b":\r\n", InvalidInteger),
        (b":+1\r\n", InvalidInteger),
        (b":-0\r\n", InvalidInteger),
        (b":007\r\n", InvalidInteger),
        (b":9223372036854775808\r\n", InvalidInteger),
        (b":-9223372036854775809\r\n", InvalidInteger),
        (b"$9999999999999999999\r\n", BulkTooLong),
        (b"$99999999999999999999999999\r\n", BulkTooLong),
        (b"*9999999999999999999\r\n", AggregateTooLong),
        (b"*4294967295\r\n", AggregateTooLong),
        (b"$3\r\nabcd\r\n", MissingCrlf),
        (b"$3\r\nabc\n\r", MissingCrlf),
        (b"$1\n", InvalidLine),
        (b"+O\nK\r\n", InvalidLine),
        (b"+OK\rX", InvalidLine),
        (b"+OK\n", InvalidLine),
        (b"?what\r\n", UnknownType(b'?')),
        (b"\r\n", UnknownType(b'\r')),
        (b"OK\r\n", UnknownType(b'O')),
        (b"$?\r\n", Streamed),
        (b"*?\r\n", Streamed),
        // Errors inside aggregates are found too.
        (b"*2\r\n:1\r\n:x\r\n", InvalidInteger),
        (b"*1\r\n*1\r\n$-2\r\n", InvalidLength),
    ];
    for &(input, expected) in cases {
        assert_eq!(
            parse_reply(input),
            Err(expected),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        // Display never panics and says something.
        assert!(!expected.to_string().is_empty());
    }
    for &(input, expected) in malformed_resp3() {
        // Without the feature, the type byte alone is enough to refuse them.
        let expected = if cfg!(feature = "resp3") {
            expected
        } else {
            UnknownType(input[0])
        };
        assert_eq!(
            parse_reply(input),
            Err(expected),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert!(!expected.to_string().is_empty());
    }
}

/// Malformed RESP3 values and their error with the `resp3` feature.
fn malformed_resp3() -> &'static [(&'static [u8], ParseError)] {
    use ParseError::*;
    &[
        (b"%-1\r\n", InvalidLength),
        (b"%4294967295\r\n", AggregateTooLong),
        (b"_x\r\n", InvalidNull),
        (b"#x\r\n", InvalidBoolean),
        (b"#\r\n", InvalidBoolean),
        (b",abc\r\n", InvalidDouble),
        (b",\r\n", InvalidDouble),
        (b"(12x\r\n", InvalidBigNumber),
        (b"(-\r\n", InvalidBigNumber),
        (b"=3\r\ntxt\r\n", InvalidVerbatim),
        (b"=4\r\ntxt-\r\n", InvalidVerbatim),
    ]
}

#[test]
fn errors_are_found_before_the_payload_arrives() {
    // Hostile headers are refused at once, without waiting for (or
    // reserving) the bytes they announce.
    assert_eq!(
        parse_reply(b"$9999999999\r\n"),
        Err(ParseError::BulkTooLong)
    );
    assert_eq!(
        parse_reply(b"*1000000\r\n"),
        Err(ParseError::AggregateTooLong)
    );
    assert_eq!(
        parse_reply(b"$-2\r"),
        Ok(Status::Incomplete),
        "the line is not finished yet"
    );
}

fn tiny() -> Limits {
    Limits {
        max_bulk_len: 8,
        max_aggregate_len: 3,
        max_depth: 2,
        max_line_len: 10,
        max_frame_len: 40,
    }
}

#[test]
fn limits_hold_at_the_bound_and_fail_one_past_it() {
    let p = Parser::new(tiny());
    // Bulk length.
    assert!(matches!(
        p.parse(b"$8\r\n12345678\r\n"),
        Ok(Status::Complete(_))
    ));
    assert_eq!(p.parse(b"$9\r\n"), Err(ParseError::BulkTooLong));
    // Aggregate length (maps count pairs).
    assert!(matches!(
        p.parse(b"*3\r\n:1\r\n:2\r\n:3\r\n"),
        Ok(Status::Complete(_))
    ));
    assert_eq!(p.parse(b"*4\r\n"), Err(ParseError::AggregateTooLong));
    if cfg!(feature = "resp3") {
        assert!(matches!(
            p.parse(b"%1\r\n:1\r\n:2\r\n"),
            Ok(Status::Complete(_))
        ));
        assert_eq!(p.parse(b"%4\r\n"), Err(ParseError::AggregateTooLong));
        assert_eq!(p.parse(b"~4\r\n"), Err(ParseError::AggregateTooLong));
    }
    // Depth.
    assert!(matches!(
        p.parse(b"*1\r\n*1\r\n:1\r\n"),
        Ok(Status::Complete(_))
    ));
    assert_eq!(
        p.parse(b"*1\r\n*1\r\n*1\r\n:1\r\n"),
        Err(ParseError::TooDeep)
    );
    // Empty aggregates do not nest.
    assert!(matches!(
        p.parse(b"*1\r\n*1\r\n*0\r\n"),
        Ok(Status::Complete(_))
    ));
    // Line length: 10 bytes fit, 11 do not, and the 11th byte is enough to know.
    assert!(matches!(
        p.parse(b"+0123456789\r\n"),
        Ok(Status::Complete(_))
    ));
    assert_eq!(p.parse(b"+0123456789A"), Err(ParseError::LineTooLong));
    assert_eq!(p.parse(b"+0123456789"), Ok(Status::Incomplete));
    // Frame size: 40 bytes fit, 41 do not.
    let fits = b"*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n$2\r\nab\r\n";
    assert_eq!(fits.len(), 40);
    assert!(matches!(p.parse(fits), Ok(Status::Complete(_))));
    assert_eq!(
        p.parse(b"*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n$3\r\n"),
        Err(ParseError::FrameTooLarge)
    );
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    // 100k nested one-element arrays: a recursive parser would overflow its stack.
    let mut frame = b"*1\r\n".repeat(100_000);
    frame.extend_from_slice(b":1\r\n");
    assert_eq!(parse_reply(&frame), Err(ParseError::TooDeep));
    let p = Parser::new(Limits {
        max_depth: 1_000_000,
        max_frame_len: usize::MAX,
        ..Limits::DEFAULT
    });
    assert_eq!(
        p.parse(&frame),
        Err(ParseError::TooDeep),
        "the depth cap bounds any configured depth"
    );
    let ok = b"*1\r\n".repeat(redlock_resp::MAX_DEPTH_CAP);
    let mut ok = ok.clone();
    ok.extend_from_slice(b":1\r\n");
    assert!(matches!(p.parse(&ok), Ok(Status::Complete(_))));
}

#[test]
fn server_errors_are_classified_by_prefix() {
    let cases: &[(&[u8], ErrorKind)] = &[
        (
            b"ERR wrong number of arguments for 'set' command",
            ErrorKind::Err,
        ),
        (
            b"NOSCRIPT No matching script. Please use EVAL.",
            ErrorKind::NoScript,
        ),
        (b"NOAUTH Authentication required.", ErrorKind::NoAuth),
        (
            b"WRONGPASS invalid username-password pair or user is disabled.",
            ErrorKind::WrongPass,
        ),
        (
            b"NOPERM User locker has no permissions to run the 'get' command",
            ErrorKind::NoPerm,
        ),
        (
            b"READONLY You can't write against a read only replica.",
            ErrorKind::ReadOnly,
        ),
        (
            b"LOADING Redis is loading the dataset in memory",
            ErrorKind::Loading,
        ),
        (b"BUSY Redis is busy running a script.", ErrorKind::Busy),
        (
            b"OOM command not allowed when used memory > 'maxmemory'.",
            ErrorKind::Oom,
        ),
        (
            b"WRONGTYPE Operation against a key holding the wrong kind of value",
            ErrorKind::WrongType,
        ),
        (
            b"MASTERDOWN Link with MASTER is down",
            ErrorKind::MasterDown,
        ),
        (b"CLUSTERDOWN The cluster is down", ErrorKind::ClusterDown),
        (b"MOVED 3999 127.0.0.1:6381", ErrorKind::Moved),
        (b"ASK 3999 127.0.0.1:6381", ErrorKind::Ask),
        (
            b"TRYAGAIN Multiple keys request during rehashing of slot",
            ErrorKind::TryAgain,
        ),
        (b"ERR", ErrorKind::Err),
        (b"ERRX not a known prefix", ErrorKind::Other),
        (b"err lowercase is not ERR", ErrorKind::Other),
        (b"SOMETHING new", ErrorKind::Other),
        (b"", ErrorKind::Other),
    ];
    for &(message, kind) in cases {
        let mut frame = b"-".to_vec();
        frame.extend_from_slice(message);
        frame.extend_from_slice(b"\r\n");
        let Ok(Status::Complete((Reply::Error(e), _))) = parse_reply(&frame) else {
            panic!()
        };
        assert_eq!(e.kind(), kind, "{}", e);
        assert_eq!(e.message(), message, "other errors are kept verbatim");
    }
    // A RESP3 bulk error is classified the same way.
    if !cfg!(feature = "resp3") {
        return;
    }
    let Ok(Status::Complete((reply, _))) = parse_reply(b"!28\r\nNOSCRIPT No matching script.\r\n")
    else {
        panic!()
    };
    assert_eq!(reply.as_error().unwrap().kind(), ErrorKind::NoScript);
}

/// Without the `resp3` feature the parser accepts RESP2 only: every RESP3
/// type byte is refused as `UnknownType` wherever it appears, as soon as it
/// arrives, and the rest (RESP2, incomplete input, the limits) is unchanged.
#[cfg(not(feature = "resp3"))]
mod resp2_only {
    use super::*;

    const RESP3_TYPE_BYTES: &[u8] = b"_#,(!=%~>|";

    /// Every valid RESP3 frame of the tables, and attribute and push frames.
    fn resp3_inputs() -> Vec<&'static [u8]> {
        let mut inputs: Vec<&[u8]> = resp3_frames().into_iter().map(|(f, _)| f).collect();
        inputs.extend(
            resp3_aggregate_frames()
                .into_iter()
                .map(|(f, _, _)| f)
                .filter(|f| f[0] != b'*'),
        );
        inputs.extend([
            &b"|1\r\n+ttl\r\n:3600\r\n+OK\r\n"[..],
            b">2\r\n+invalidate\r\n*0\r\n",
            b"%0\r\n",
            b"~0\r\n",
            b"|0\r\n:1\r\n",
        ]);
        inputs
    }

    #[test]
    fn every_resp3_type_byte_is_unknown_type() {
        for &ty in RESP3_TYPE_BYTES {
            assert_eq!(parse_reply(&[ty]), Err(ParseError::UnknownType(ty)));
        }
        for input in resp3_inputs() {
            assert_eq!(
                parse_reply(input),
                Err(ParseError::UnknownType(input[0])),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            // The type byte is enough: no prefix that holds it is incomplete.
            for len in 1..=input.len() {
                assert_eq!(
                    parse_reply(&input[..len]),
                    Err(ParseError::UnknownType(input[0]))
                );
            }
            assert_eq!(parse_reply(&input[..0]), Ok(Status::Incomplete));
        }
    }

    #[test]
    fn a_resp3_value_inside_an_array_is_unknown_type() {
        for inner in resp3_inputs() {
            let ty = inner[0];
            for prefix in [
                &b"*1\r\n"[..],
                b"*2\r\n:1\r\n",
                b"*3\r\n$2\r\nab\r\n*0\r\n",
                b"*1\r\n*1\r\n*1\r\n",
                b"*2\r\n*1\r\n+a\r\n",
            ] {
                let mut frame = prefix.to_vec();
                frame.extend_from_slice(inner);
                frame.extend_from_slice(b":9\r\n");
                assert_eq!(
                    parse_reply(&frame),
                    Err(ParseError::UnknownType(ty)),
                    "{:?}",
                    String::from_utf8_lossy(&frame)
                );
                // Incomplete up to the RESP3 byte, refused from it on.
                let at = prefix.len();
                for len in 0..=frame.len() {
                    let expected = if len <= at {
                        Ok(Status::Incomplete)
                    } else {
                        Err(ParseError::UnknownType(ty))
                    };
                    assert_eq!(parse_reply(&frame[..len]), expected, "{len}");
                }
            }
        }
        // The shared table's array that holds an attribute.
        let frame = b"*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\na\r\n:2\r\n";
        assert!(resp3_aggregate_frames().iter().any(|(f, _, _)| f == frame));
        assert_eq!(parse_reply(frame), Err(ParseError::UnknownType(b'|')));
    }

    #[test]
    fn an_attribute_before_a_reply_is_unknown_type() {
        for frame in [
            &b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n"[..],
            b"|0\r\n|1\r\n+a\r\n+b\r\n:7\r\n",
            b"|1\r\n+a\r\n+b\r\n+OK\r\n",
        ] {
            assert_eq!(parse_reply(frame), Err(ParseError::UnknownType(b'|')));
        }
    }

    #[test]
    fn the_limits_and_the_order_of_errors_are_unchanged() {
        let p = Parser::new(tiny());
        // A limit broken before the RESP3 byte is reported, as any error
        // found earlier in the stream is.
        assert_eq!(p.parse(b"*4\r\n_\r\n"), Err(ParseError::AggregateTooLong));
        assert_eq!(
            p.parse(b"*1\r\n*1\r\n*1\r\n_\r\n"),
            Err(ParseError::TooDeep)
        );
        assert_eq!(
            p.parse(b"*1\r\n$9\r\n123456789\r\n"),
            Err(ParseError::BulkTooLong)
        );
        // A RESP3 byte is refused at once, whatever the limits.
        for &ty in RESP3_TYPE_BYTES {
            assert_eq!(p.parse(&[ty]), Err(ParseError::UnknownType(ty)));
            assert_eq!(
                p.parse(&[b'*', b'1', b'\r', b'\n', ty, b'9', b'9', b'9']),
                Err(ParseError::UnknownType(ty))
            );
        }
        // A depth of 0 refuses an array before its elements are read.
        let flat = Parser::new(Limits {
            max_depth: 0,
            ..Limits::DEFAULT
        });
        assert_eq!(flat.parse(b"*0\r\n"), Err(ParseError::TooDeep));
        assert_eq!(flat.parse(b"*1\r\n_\r\n"), Err(ParseError::TooDeep));
        assert_eq!(flat.parse(b"$-1\r\n"), complete(Reply::Nil, 5));
        // Null bulk and null array are RESP2 and stay accepted.
        assert_eq!(parse_reply(b"$-1\r\n"), complete(Reply::Nil, 5));
        assert_eq!(parse_reply(b"*-1\r\n"), complete(Reply::Nil, 5));
        let Ok(Status::Complete((Reply::Aggregate(nulls), 14))) =
            parse_reply(b"*2\r\n$-1\r\n*-1\r\n")
        else {
            panic!()
        };
        assert_eq!(nulls.iter().collect::<Vec<_>>(), [Reply::Nil, Reply::Nil]);
    }
}
