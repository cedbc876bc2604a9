//! Vectors of `redlock-resp`: every reply type the parser knows, incomplete
//! and malformed input, the limits, and the encoder's exact bytes.

use redlock_resp::encode::{
    auth, auth_user, eval_script, evalsha_script, hello, ping, select, set_nx_px,
};
use redlock_resp::script::{ALL, EXTEND, RELEASE};
use redlock_resp::{
    AggregateKind, Arg, Command, EncodeError, ErrorKind, Limits, MAX_DEPTH_CAP, ParseError, Parser,
    Reply, ServerError, Status, command, parse_reply,
};

use crate::{Fail, Outcome, Vector};

/// The codec's vectors, in the order they run.
pub const VECTORS: &[Vector] = &[
    ("resp/simple-string", simple_string),
    (
        "resp/simple-string-leaves-the-rest",
        simple_string_leaves_the_rest,
    ),
    ("resp/error-kinds", error_kinds),
    ("resp/error-message-kept", error_message_kept),
    ("resp/integer", integer),
    ("resp/integer-malformed", integer_malformed),
    ("resp/bulk", bulk),
    ("resp/bulk-empty-and-binary", bulk_empty_and_binary),
    ("resp/null-bulk", null_bulk),
    ("resp/null-array", null_array),
    ("resp/array-mixed", array_mixed),
    ("resp/array-nested", array_nested),
    ("resp/array-empty", array_empty),
    ("resp3/null", resp3_null),
    ("resp3/boolean", resp3_boolean),
    ("resp3/double", resp3_double),
    ("resp3/big-number", resp3_big_number),
    ("resp3/bulk-error", resp3_bulk_error),
    ("resp3/verbatim", resp3_verbatim),
    ("resp3/map", resp3_map),
    ("resp3/set", resp3_set),
    ("resp3/push", resp3_push),
    ("resp3/attribute-skipped", resp3_attribute_skipped),
    ("resp/incomplete-at-every-cut", incomplete_at_every_cut),
    ("resp/incomplete-examples", incomplete_examples),
    ("resp/malformed-is-an-error", malformed_is_an_error),
    ("resp/mutations-never-panic", mutations_never_panic),
    ("resp/limit-bulk", limit_bulk),
    ("resp/limit-aggregate", limit_aggregate),
    ("resp/limit-depth", limit_depth),
    ("resp/limit-line", limit_line),
    ("resp/limit-frame", limit_frame),
    ("resp/pipelined-replies", pipelined_replies),
    ("encode/set-nx-px", encode_set_nx_px),
    ("encode/evalsha-release", encode_evalsha_release),
    ("encode/evalsha-extend", encode_evalsha_extend),
    ("encode/eval-script-source", encode_eval_script_source),
    ("encode/auth", encode_auth),
    ("encode/select", encode_select),
    ("encode/ping-hello", encode_ping_hello),
    ("encode/buffer-too-small", encode_buffer_too_small),
    ("encode/arg-count", encode_arg_count),
    ("encode/integers", encode_integers),
    ("encode/binary-round-trip", encode_binary_round_trip),
];

/// Bytes shown as an escaped string in failure messages.
pub struct Bytes<'a>(pub &'a [u8]);

impl core::fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("b\"")?;
        for &b in self.0 {
            for c in core::ascii::escape_default(b) {
                core::fmt::Write::write_char(f, char::from(c))?;
            }
        }
        f.write_str("\"")
    }
}

/// The reply at the start of `input`, which must be complete and take all
/// of `input`.
fn whole(input: &[u8]) -> Result<Reply<'_>, Fail> {
    match parse_reply(input) {
        Ok(Status::Complete((reply, used))) if used == input.len() => Ok(reply),
        other => Err(Fail::new(
            format_args!(
                "parse({:?}) = {:?}, expected a whole reply",
                Bytes(input),
                other
            ),
            line!(),
        )),
    }
}

/// The elements of an aggregate reply of `kind`.
fn elements<'a>(
    reply: Reply<'a>,
    kind: AggregateKind,
) -> Result<heapless::Vec<Reply<'a>, 8>, Fail> {
    let Some(agg) = reply.as_aggregate() else {
        return Err(Fail::new(
            format_args!("{reply:?} is not an aggregate"),
            line!(),
        ));
    };
    if agg.kind() != kind {
        return Err(Fail::new(
            format_args!("kind {:?}, expected {:?}", agg.kind(), kind),
            line!(),
        ));
    }
    let mut out = heapless::Vec::new();
    for e in agg.iter() {
        if out.push(e).is_err() {
            return Err(Fail::new(format_args!("more than 8 elements"), line!()));
        }
    }
    if out.len() != agg.len() {
        return Err(Fail::new(
            format_args!("iter gave {} elements, len() is {}", out.len(), agg.len()),
            line!(),
        ));
    }
    Ok(out)
}

fn simple_string() -> Outcome {
    let r = whole(b"+OK\r\n")?;
    ensure_eq!(r, Reply::Simple(b"OK"));
    ensure!(r.is_ok());
    ensure_eq!(r.as_bytes(), Some(&b"OK"[..]));
    let pong = whole(b"+PONG\r\n")?;
    ensure!(!pong.is_ok());
    ensure_eq!(whole(b"+\r\n")?, Reply::Simple(b""));
    Ok(())
}

fn simple_string_leaves_the_rest() -> Outcome {
    ensure_eq!(
        parse_reply(b"+OK\r\n:1\r\n"),
        Ok(Status::Complete((Reply::Simple(b"OK"), 5)))
    );
    Ok(())
}

fn error_kinds() -> Outcome {
    let table: [(&[u8], ErrorKind); 18] = [
        (b"-ERR unknown command\r\n", ErrorKind::Err),
        (b"-NOSCRIPT No matching script.\r\n", ErrorKind::NoScript),
        (b"-NOAUTH Authentication required.\r\n", ErrorKind::NoAuth),
        (
            b"-WRONGPASS invalid username-password pair\r\n",
            ErrorKind::WrongPass,
        ),
        (b"-NOPERM no permissions\r\n", ErrorKind::NoPerm),
        (
            b"-READONLY You can't write against a read only replica.\r\n",
            ErrorKind::ReadOnly,
        ),
        (
            b"-LOADING Redis is loading the dataset in memory\r\n",
            ErrorKind::Loading,
        ),
        (
            b"-BUSY Redis is busy running a script.\r\n",
            ErrorKind::Busy,
        ),
        (b"-OOM command not allowed\r\n", ErrorKind::Oom),
        (
            b"-WRONGTYPE Operation against a key\r\n",
            ErrorKind::WrongType,
        ),
        (
            b"-MASTERDOWN Link with MASTER is down\r\n",
            ErrorKind::MasterDown,
        ),
        (
            b"-CLUSTERDOWN The cluster is down\r\n",
            ErrorKind::ClusterDown,
        ),
        (b"-MOVED 3999 127.0.0.1:6381\r\n", ErrorKind::Moved),
        (b"-ASK 3999 127.0.0.1:6381\r\n", ErrorKind::Ask),
        (b"-TRYAGAIN Multiple keys request\r\n", ErrorKind::TryAgain),
        (b"-ERR\r\n", ErrorKind::Err),
        (b"-ERRORS are not ERR\r\n", ErrorKind::Other),
        (b"-err lowercase\r\n", ErrorKind::Other),
    ];
    for (input, kind) in table {
        let r = whole(input)?;
        let Some(e) = r.as_error() else {
            fail!("{:?} parsed as {:?}", Bytes(input), r);
        };
        ensure!(
            e.kind() == kind,
            "{:?}: kind {:?}, expected {:?}",
            Bytes(input),
            e.kind(),
            kind
        );
    }
    ensure_eq!(ErrorKind::classify(b"SOMETHING else"), ErrorKind::Other);
    ensure_eq!(ErrorKind::NoScript.as_str(), "NOSCRIPT");
    Ok(())
}

fn error_message_kept() -> Outcome {
    let r = whole(b"-ERR wrong number of arguments\r\n")?;
    ensure_eq!(
        r,
        Reply::Error(ServerError::new(b"ERR wrong number of arguments"))
    );
    let Some(e) = r.as_error() else {
        fail!("not an error: {:?}", r);
    };
    ensure_eq!(e.message(), &b"ERR wrong number of arguments"[..]);
    ensure!(r.as_bytes().is_none() && r.as_integer().is_none());
    Ok(())
}

fn integer() -> Outcome {
    let table: [(&[u8], i64); 6] = [
        (b":0\r\n", 0),
        (b":1\r\n", 1),
        (b":-1\r\n", -1),
        (b":1000\r\n", 1000),
        (b":9223372036854775807\r\n", i64::MAX),
        (b":-9223372036854775808\r\n", i64::MIN),
    ];
    for (input, n) in table {
        let r = whole(input)?;
        ensure!(r.as_integer() == Some(n), "{:?} gave {:?}", Bytes(input), r);
    }
    Ok(())
}

fn integer_malformed() -> Outcome {
    for input in [
        &b":9223372036854775808\r\n"[..],
        b":-9223372036854775809\r\n",
        b":01\r\n",
        b":-0\r\n",
        b":+1\r\n",
        b":\r\n",
        b":-\r\n",
        b":1 \r\n",
        b":12a\r\n",
    ] {
        let r = parse_reply(input);
        ensure!(
            r == Err(ParseError::InvalidInteger),
            "{:?} gave {:?}",
            Bytes(input),
            r
        );
    }
    Ok(())
}

fn bulk() -> Outcome {
    let r = whole(b"$5\r\nhello\r\n")?;
    ensure_eq!(r, Reply::Bulk(b"hello"));
    ensure_eq!(r.as_bytes(), Some(&b"hello"[..]));
    // A 40-character token, as GET returns it.
    let r = whole(b"$40\r\n0102030405060708090a0b0c0d0e0f1011121314\r\n")?;
    ensure_eq!(r, Reply::Bulk(b"0102030405060708090a0b0c0d0e0f1011121314"));
    Ok(())
}

fn bulk_empty_and_binary() -> Outcome {
    ensure_eq!(whole(b"$0\r\n\r\n")?, Reply::Bulk(b""));
    // Length-prefixed: CR, LF and any byte are data.
    ensure_eq!(
        whole(b"$6\r\na\r\n\x00\xffb\r\n")?,
        Reply::Bulk(b"a\r\n\x00\xffb")
    );
    Ok(())
}

fn null_bulk() -> Outcome {
    ensure_eq!(whole(b"$-1\r\n")?, Reply::Nil);
    Ok(())
}

fn null_array() -> Outcome {
    ensure_eq!(whole(b"*-1\r\n")?, Reply::Nil);
    Ok(())
}

fn array_mixed() -> Outcome {
    let r = whole(b"*4\r\n:1\r\n$3\r\nabc\r\n+OK\r\n$-1\r\n")?;
    let e = elements(r, AggregateKind::Array)?;
    ensure_eq!(
        e.as_slice(),
        &[
            Reply::Integer(1),
            Reply::Bulk(b"abc"),
            Reply::Simple(b"OK"),
            Reply::Nil
        ][..]
    );
    ensure!(!r.is_push());
    Ok(())
}

fn array_nested() -> Outcome {
    // The inspect script's reply shape, nested in an outer array.
    let input = b"*2\r\n*2\r\n$3\r\ntok\r\n:9500\r\n*0\r\n";
    let r = whole(input)?;
    let outer = elements(r, AggregateKind::Array)?;
    ensure_eq!(outer.len(), 2);
    let inner = elements(outer[0], AggregateKind::Array)?;
    ensure_eq!(
        inner.as_slice(),
        &[Reply::Bulk(b"tok"), Reply::Integer(9500)][..]
    );
    let Some(empty) = outer[1].as_aggregate() else {
        fail!("second element {:?}", outer[1]);
    };
    ensure!(empty.is_empty() && empty.iter().next().is_none());
    let Some(agg) = r.as_aggregate() else {
        fail!("not an aggregate");
    };
    ensure_eq!(Bytes(agg.raw()).0, &input[4..]);
    Ok(())
}

fn array_empty() -> Outcome {
    let r = whole(b"*0\r\n")?;
    let e = elements(r, AggregateKind::Array)?;
    ensure!(e.is_empty());
    Ok(())
}

fn resp3_null() -> Outcome {
    ensure_eq!(whole(b"_\r\n")?, Reply::Nil);
    ensure_eq!(parse_reply(b"_x\r\n"), Err(ParseError::InvalidNull));
    Ok(())
}

fn resp3_boolean() -> Outcome {
    ensure_eq!(whole(b"#t\r\n")?, Reply::Boolean(true));
    ensure_eq!(whole(b"#f\r\n")?, Reply::Boolean(false));
    for bad in [&b"#x\r\n"[..], b"#\r\n", b"#tt\r\n", b"#T\r\n"] {
        let r = parse_reply(bad);
        ensure!(
            r == Err(ParseError::InvalidBoolean),
            "{:?} gave {:?}",
            Bytes(bad),
            r
        );
    }
    Ok(())
}

fn resp3_double() -> Outcome {
    for text in [
        &b"1.5"[..],
        b"-0.25",
        b"3",
        b"1e10",
        b"1.2E-5",
        b"inf",
        b"-inf",
        b"nan",
    ] {
        let mut frame = [0u8; 16];
        let n = text.len() + 3;
        frame[0] = b',';
        frame[1..=text.len()].copy_from_slice(text);
        frame[n - 2..n].copy_from_slice(b"\r\n");
        ensure_eq!(whole(&frame[..n])?, Reply::Double(text));
    }
    for bad in [&b",abc\r\n"[..], b",\r\n", b",1.5x\r\n", b",Inf\r\n"] {
        let r = parse_reply(bad);
        ensure!(
            r == Err(ParseError::InvalidDouble),
            "{:?} gave {:?}",
            Bytes(bad),
            r
        );
    }
    Ok(())
}

fn resp3_big_number() -> Outcome {
    ensure_eq!(
        whole(b"(3492890328409238509324850943850943825024385\r\n")?,
        Reply::BigNumber(b"3492890328409238509324850943850943825024385")
    );
    ensure_eq!(whole(b"(-12\r\n")?, Reply::BigNumber(b"-12"));
    for bad in [&b"(12a\r\n"[..], b"(\r\n", b"(-\r\n", b"(+1\r\n"] {
        let r = parse_reply(bad);
        ensure!(
            r == Err(ParseError::InvalidBigNumber),
            "{:?} gave {:?}",
            Bytes(bad),
            r
        );
    }
    Ok(())
}

fn resp3_bulk_error() -> Outcome {
    let r = whole(b"!21\r\nSYNTAX invalid syntax\r\n")?;
    ensure_eq!(r, Reply::Error(ServerError::new(b"SYNTAX invalid syntax")));
    ensure_eq!(r.as_error().map(|e| e.kind()), Some(ErrorKind::Other));
    let r = whole(b"!16\r\nNOSCRIPT no such\r\n")?;
    ensure_eq!(r.as_error().map(|e| e.kind()), Some(ErrorKind::NoScript));
    Ok(())
}

fn resp3_verbatim() -> Outcome {
    let r = whole(b"=15\r\ntxt:Some string\r\n")?;
    ensure_eq!(
        r,
        Reply::Verbatim {
            format: b"txt",
            text: b"Some string"
        }
    );
    ensure_eq!(r.as_bytes(), Some(&b"Some string"[..]));
    ensure_eq!(
        whole(b"=4\r\nmkd:\r\n")?,
        Reply::Verbatim {
            format: b"mkd",
            text: b""
        }
    );
    for bad in [&b"=3\r\ntxt\r\n"[..], b"=5\r\ntxt;a\r\n", b"=0\r\n\r\n"] {
        let r = parse_reply(bad);
        ensure!(
            r == Err(ParseError::InvalidVerbatim),
            "{:?} gave {:?}",
            Bytes(bad),
            r
        );
    }
    Ok(())
}

fn resp3_map() -> Outcome {
    let r = whole(b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n")?;
    let e = elements(r, AggregateKind::Map)?;
    ensure_eq!(
        e.as_slice(),
        &[
            Reply::Simple(b"first"),
            Reply::Integer(1),
            Reply::Simple(b"second"),
            Reply::Integer(2)
        ][..]
    );
    let empty = whole(b"%0\r\n")?;
    ensure!(elements(empty, AggregateKind::Map)?.is_empty());
    Ok(())
}

fn resp3_set() -> Outcome {
    let r = whole(b"~3\r\n+a\r\n:2\r\n#t\r\n")?;
    let e = elements(r, AggregateKind::Set)?;
    ensure_eq!(
        e.as_slice(),
        &[Reply::Simple(b"a"), Reply::Integer(2), Reply::Boolean(true)][..]
    );
    Ok(())
}

fn resp3_push() -> Outcome {
    let r = whole(b">3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhello\r\n")?;
    ensure!(r.is_push());
    let e = elements(r, AggregateKind::Push)?;
    ensure_eq!(
        e.as_slice(),
        &[
            Reply::Bulk(b"message"),
            Reply::Bulk(b"chan"),
            Reply::Bulk(b"hello")
        ][..]
    );
    Ok(())
}

fn resp3_attribute_skipped() -> Outcome {
    // The example of the RESP3 specification: the attribute is consumed with
    // the reply after it, and dropped.
    let input: &[u8] = b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n";
    let r = whole(input)?;
    let e = elements(r, AggregateKind::Array)?;
    ensure_eq!(
        e.as_slice(),
        &[Reply::Integer(2039123), Reply::Integer(9543892)][..]
    );
    // Before a scalar, and inside an aggregate (where it is no element).
    ensure_eq!(whole(b"|1\r\n+ttl\r\n:3\r\n+OK\r\n")?, Reply::Simple(b"OK"));
    let r = whole(b"*2\r\n:1\r\n|1\r\n+a\r\n+b\r\n:2\r\n")?;
    ensure_eq!(elements(r, AggregateKind::Array)?.len(), 2);
    Ok(())
}

/// One frame of every type, and a few aggregates.
const FRAMES: [&[u8]; 22] = [
    b"+OK\r\n",
    b"-ERR x\r\n",
    b":-42\r\n",
    b"$5\r\nhello\r\n",
    b"$0\r\n\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"*2\r\n*1\r\n:1\r\n*0\r\n",
    b"_\r\n",
    b"#t\r\n",
    b",1.5\r\n",
    b"(12345678901234567890\r\n",
    b"!7\r\nERR bad\r\n",
    b"=9\r\ntxt:hello\r\n",
    b"%1\r\n+k\r\n$1\r\nv\r\n",
    b"~2\r\n:1\r\n:2\r\n",
    b">2\r\n+pubsub\r\n+x\r\n",
    b"|1\r\n+a\r\n:1\r\n+OK\r\n",
    b"*2\r\n:1\r\n$-1\r\n",
    b"*2\r\n:0\r\n$2\r\n41\r\n",
    b"$40\r\n0102030405060708090a0b0c0d0e0f1011121314\r\n",
];

fn incomplete_at_every_cut() -> Outcome {
    for frame in FRAMES {
        for cut in 0..frame.len() {
            let r = parse_reply(&frame[..cut]);
            ensure!(
                r == Ok(Status::Incomplete),
                "{:?} cut at {}: {:?}",
                Bytes(frame),
                cut,
                r
            );
        }
        whole(frame)?;
    }
    Ok(())
}

fn incomplete_examples() -> Outcome {
    for input in [
        &b""[..],
        b"+",
        b"+OK",
        b"+OK\r",
        b"$5\r\nhel",
        b"$5\r\nhello",
        b"$5\r\nhello\r",
        b"*3\r\n:1\r\n:2\r\n",
        b"%1\r\n+k\r\n",
        b"|1\r\n+a\r\n:1\r\n",
        // A long bulk within the limits is awaited, not refused.
        b"$32768\r\nabc",
    ] {
        let r = parse_reply(input);
        ensure!(
            r == Ok(Status::Incomplete),
            "{:?} gave {:?}",
            Bytes(input),
            r
        );
    }
    Ok(())
}

fn malformed_is_an_error() -> Outcome {
    let table: [(&[u8], ParseError); 21] = [
        (b"x\r\n", ParseError::UnknownType(b'x')),
        (b" +OK\r\n", ParseError::UnknownType(b' ')),
        (b"\r\n", ParseError::UnknownType(b'\r')),
        (b"*1\r\nx\r\n", ParseError::UnknownType(b'x')),
        (b"$-2\r\n", ParseError::InvalidLength),
        (b"$01\r\na\r\n", ParseError::InvalidLength),
        (b"$\r\n", ParseError::InvalidLength),
        (b"$+1\r\na\r\n", ParseError::InvalidLength),
        (b"* 1\r\n", ParseError::InvalidLength),
        (b"%-1\r\n", ParseError::InvalidLength),
        (b"!-1\r\n", ParseError::InvalidLength),
        (b"$3\r\nabcXY", ParseError::MissingCrlf),
        (b"$3\r\nabc\n\r", ParseError::MissingCrlf),
        (b"+O\nK\r\n", ParseError::InvalidLine),
        (b"+OK\rX\r\n", ParseError::InvalidLine),
        (b":1\n", ParseError::InvalidLine),
        (b"$?\r\n", ParseError::Streamed),
        (b"*?\r\n", ParseError::Streamed),
        (b"$99999999999999999999999\r\n", ParseError::BulkTooLong),
        (
            b"*99999999999999999999999\r\n",
            ParseError::AggregateTooLong,
        ),
        (b"*1\r\n$-2\r\n", ParseError::InvalidLength),
    ];
    for (input, error) in table {
        let r = parse_reply(input);
        ensure!(
            r == Err(error),
            "{:?} gave {:?}, expected {:?}",
            Bytes(input),
            r,
            error
        );
    }
    Ok(())
}

fn mutations_never_panic() -> Outcome {
    // Every byte of every frame replaced by bytes that matter to the
    // grammar, under the default and under tight limits: an answer each
    // time (a panic would end the run), and a complete reply never claims
    // more bytes than it was given.
    let tight = Parser::new(Limits {
        max_bulk_len: 4,
        max_aggregate_len: 2,
        max_depth: 1,
        max_line_len: 8,
        max_frame_len: 24,
    });
    let parsers = [Parser::default(), tight];
    let replacements = [
        0u8, b'\r', b'\n', b'-', b'0', b'9', b'*', b'$', b'|', b'x', 0xff,
    ];
    let mut checked = 0u32;
    for frame in FRAMES {
        let mut buf = [0u8; 64];
        let buf = &mut buf[..frame.len()];
        for i in 0..frame.len() {
            for &b in &replacements {
                buf.copy_from_slice(frame);
                buf[i] = b;
                for parser in &parsers {
                    for end in [buf.len(), i + 1] {
                        let input = &buf[..end];
                        if let Ok(Status::Complete((reply, used))) = parser.parse(input) {
                            ensure!(
                                used > 0 && used <= input.len(),
                                "{:?}: used {}",
                                Bytes(input),
                                used
                            );
                            if let Some(agg) = reply.as_aggregate() {
                                ensure!(agg.iter().count() == agg.len(), "{:?}", Bytes(input));
                            }
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    ensure!(checked > 5_000, "only {} inputs", checked);
    Ok(())
}

fn limit_bulk() -> Outcome {
    let p = Parser::new(Limits {
        max_bulk_len: 8,
        ..Limits::DEFAULT
    });
    ensure_eq!(p.limits().max_bulk_len, 8);
    ensure_eq!(
        p.parse(b"$8\r\n12345678\r\n"),
        Ok(Status::Complete((Reply::Bulk(b"12345678"), 14)))
    );
    // Refused on the header, before the payload is awaited.
    ensure_eq!(p.parse(b"$9\r\n"), Err(ParseError::BulkTooLong));
    ensure_eq!(
        p.parse(b"$9\r\n123456789\r\n"),
        Err(ParseError::BulkTooLong)
    );
    ensure_eq!(
        p.parse(b"!9\r\nERR 12345\r\n"),
        Err(ParseError::BulkTooLong)
    );
    ensure_eq!(
        p.parse(b"=9\r\ntxt:12345\r\n"),
        Err(ParseError::BulkTooLong)
    );
    ensure_eq!(p.parse(b"*1\r\n$9\r\n"), Err(ParseError::BulkTooLong));
    // The default: 32 KiB.
    ensure_eq!(Limits::default(), Limits::DEFAULT);
    ensure_eq!(parse_reply(b"$32769\r\n"), Err(ParseError::BulkTooLong));
    Ok(())
}

fn limit_aggregate() -> Outcome {
    let p = Parser::new(Limits {
        max_aggregate_len: 2,
        ..Limits::DEFAULT
    });
    ensure!(matches!(
        p.parse(b"*2\r\n:1\r\n:2\r\n"),
        Ok(Status::Complete(_))
    ));
    ensure_eq!(p.parse(b"*3\r\n"), Err(ParseError::AggregateTooLong));
    ensure_eq!(p.parse(b"~3\r\n"), Err(ParseError::AggregateTooLong));
    ensure_eq!(p.parse(b">3\r\n"), Err(ParseError::AggregateTooLong));
    // Maps and attributes count pairs.
    ensure!(matches!(
        p.parse(b"%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n"),
        Ok(Status::Complete(_))
    ));
    ensure_eq!(p.parse(b"%3\r\n"), Err(ParseError::AggregateTooLong));
    ensure_eq!(p.parse(b"|3\r\n"), Err(ParseError::AggregateTooLong));
    ensure_eq!(parse_reply(b"*1025\r\n"), Err(ParseError::AggregateTooLong));
    Ok(())
}

fn limit_depth() -> Outcome {
    let p = Parser::new(Limits {
        max_depth: 2,
        ..Limits::DEFAULT
    });
    ensure!(matches!(
        p.parse(b"*1\r\n*1\r\n:1\r\n"),
        Ok(Status::Complete((_, 12)))
    ));
    ensure_eq!(
        p.parse(b"*1\r\n*1\r\n*1\r\n:1\r\n"),
        Err(ParseError::TooDeep)
    );
    ensure_eq!(p.parse(b"*1\r\n%1\r\n~1\r\n"), Err(ParseError::TooDeep));
    let flat = Parser::new(Limits {
        max_depth: 0,
        ..Limits::DEFAULT
    });
    ensure_eq!(flat.parse(b"*0\r\n"), Err(ParseError::TooDeep));
    ensure_eq!(
        flat.parse(b":1\r\n"),
        Ok(Status::Complete((Reply::Integer(1), 4)))
    );
    // Above the cap acts as the cap: 33 nested arrays are too deep.
    let deep = Parser::new(Limits {
        max_depth: usize::MAX,
        ..Limits::DEFAULT
    });
    let mut frame = [0u8; 4 * (MAX_DEPTH_CAP + 1) + 4];
    for chunk in frame.chunks_exact_mut(4).take(MAX_DEPTH_CAP + 1) {
        chunk.copy_from_slice(b"*1\r\n");
    }
    let n = frame.len();
    frame[n - 4..].copy_from_slice(b":1\r\n");
    ensure_eq!(deep.parse(&frame), Err(ParseError::TooDeep));
    ensure!(matches!(deep.parse(&frame[4..]), Ok(Status::Complete(_))));
    Ok(())
}

fn limit_line() -> Outcome {
    let p = Parser::new(Limits {
        max_line_len: 4,
        ..Limits::DEFAULT
    });
    ensure_eq!(
        p.parse(b"+abcd\r\n"),
        Ok(Status::Complete((Reply::Simple(b"abcd"), 7)))
    );
    ensure_eq!(p.parse(b"+abcde\r\n"), Err(ParseError::LineTooLong));
    // Refused before its end arrives.
    ensure_eq!(p.parse(b"+abcde"), Err(ParseError::LineTooLong));
    ensure_eq!(p.parse(b":123456"), Err(ParseError::LineTooLong));
    ensure_eq!(p.parse(b"+abc"), Ok(Status::Incomplete));
    Ok(())
}

fn limit_frame() -> Outcome {
    let p = Parser::new(Limits {
        max_frame_len: 16,
        ..Limits::DEFAULT
    });
    ensure!(matches!(
        p.parse(b"*1\r\n$5\r\nhello\r\n"),
        Ok(Status::Complete((_, 15)))
    ));
    ensure_eq!(
        p.parse(b"*2\r\n$5\r\nhello\r\n$5\r\nworld\r\n"),
        Err(ParseError::FrameTooLarge)
    );
    // Known from the header of the bulk that would cross the limit.
    ensure_eq!(
        p.parse(b"*2\r\n$5\r\nhello\r\n$5\r\n"),
        Err(ParseError::FrameTooLarge)
    );
    ensure_eq!(p.parse(b"$20\r\n"), Err(ParseError::FrameTooLarge));
    Ok(())
}

fn pipelined_replies() -> Outcome {
    let input: &[u8] = b"+OK\r\n:1\r\n$-1\r\n*1\r\n+x\r\n_\r\n";
    let expected = [
        Reply::Simple(b"OK"),
        Reply::Integer(1),
        Reply::Nil,
        Reply::Nil, // placeholder for the array, checked by kind below
        Reply::Nil,
    ];
    let mut rest = input;
    for (i, want) in expected.iter().enumerate() {
        let Ok(Status::Complete((reply, used))) = parse_reply(rest) else {
            fail!("reply {} of {:?}", i, Bytes(input));
        };
        if i == 3 {
            ensure_eq!(
                elements(reply, AggregateKind::Array)?.as_slice(),
                &[Reply::Simple(b"x")][..]
            );
        } else {
            ensure!(
                reply == *want,
                "reply {}: {:?}, expected {:?}",
                i,
                reply,
                want
            );
        }
        rest = &rest[used..];
    }
    ensure!(rest.is_empty());
    Ok(())
}

/// Runs an encoder into a 512-byte buffer and compares its bytes.
fn encodes(
    what: &str,
    f: impl FnOnce(&mut [u8]) -> Result<usize, EncodeError>,
    expected: &[u8],
) -> Outcome {
    let mut buf = [0u8; 512];
    match f(&mut buf) {
        Ok(n) if &buf[..n] == expected => Ok(()),
        Ok(n) => Err(Fail::new(
            format_args!(
                "{what}: {:?}, expected {:?}",
                Bytes(&buf[..n]),
                Bytes(expected)
            ),
            line!(),
        )),
        Err(e) => Err(Fail::new(format_args!("{what}: {e:?}"), line!())),
    }
}

const SET_FRAME: &[u8] = b"*6\r\n$3\r\nSET\r\n$6\r\nlock:a\r\n$16\r\n0123456789abcdef\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n";

fn encode_set_nx_px() -> Outcome {
    encodes(
        "set_nx_px",
        |b| set_nx_px(b, b"lock:a", b"0123456789abcdef", 30_000),
        SET_FRAME,
    )?;
    encodes(
        "set_nx_px 1 ms",
        |b| set_nx_px(b, b"k", b"t", 1),
        b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$1\r\n1\r\n",
    )
}

fn encode_evalsha_release() -> Outcome {
    ensure_eq!(RELEASE.sha1, "b70c2384248f88e6b75b9f89241a180f856ad852");
    encodes(
        "evalsha release",
        |b| evalsha_script(b, &RELEASE, &[b"res"], &[Arg::Bytes(b"tok")]),
        b"*5\r\n$7\r\nEVALSHA\r\n$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n$1\r\n1\r\n$3\r\nres\r\n$3\r\ntok\r\n",
    )
}

fn encode_evalsha_extend() -> Outcome {
    encodes(
        "evalsha extend",
        |b| {
            evalsha_script(
                b,
                &EXTEND,
                &[b"res"],
                &[Arg::Bytes(b"tok"), Arg::Uint(10_000)],
            )
        },
        b"*6\r\n$7\r\nEVALSHA\r\n$40\r\n36e94d1c6e02fcefaa7ee5d79eee614dbac55f10\r\n$1\r\n1\r\n$3\r\nres\r\n$3\r\ntok\r\n$5\r\n10000\r\n",
    )
}

fn encode_eval_script_source() -> Outcome {
    let mut buf = [0u8; 512];
    let n = match eval_script(&mut buf, &RELEASE, &[b"res"], &[Arg::Bytes(b"tok")]) {
        Ok(n) => n,
        Err(e) => fail!("{:?}", e),
    };
    let r = whole(&buf[..n])?;
    let args = elements(r, AggregateKind::Array)?;
    let want = [
        Reply::Bulk(b"EVAL"),
        Reply::Bulk(RELEASE.source.as_bytes()),
        Reply::Bulk(b"1"),
        Reply::Bulk(b"res"),
        Reply::Bulk(b"tok"),
    ];
    ensure_eq!(args.as_slice(), &want[..]);
    // Every script: 40 lowercase hex digits.
    for s in ALL {
        ensure!(
            s.sha1.len() == 40
                && s.sha1
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "sha1 {}",
            s.sha1
        );
    }
    Ok(())
}

fn encode_auth() -> Outcome {
    encodes(
        "auth",
        |b| auth(b, b"s3cret"),
        b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n",
    )?;
    encodes(
        "auth user",
        |b| auth_user(b, b"app", b"pw"),
        b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$2\r\npw\r\n",
    )
}

fn encode_select() -> Outcome {
    encodes(
        "select 3",
        |b| select(b, 3),
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n",
    )?;
    encodes(
        "select 15",
        |b| select(b, 15),
        b"*2\r\n$6\r\nSELECT\r\n$2\r\n15\r\n",
    )
}

fn encode_ping_hello() -> Outcome {
    encodes("ping", ping, b"*1\r\n$4\r\nPING\r\n")?;
    encodes(
        "hello 3",
        |b| hello(b, 3, None),
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
    )?;
    encodes(
        "hello 3 auth",
        |b| hello(b, 3, Some((b"u", b"p"))),
        b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n",
    )
}

fn encode_buffer_too_small() -> Outcome {
    ensure_eq!(SET_FRAME.len(), 75);
    for size in [0usize, 1, 10, 74] {
        let mut buf = [0u8; 80];
        let r = set_nx_px(&mut buf[..size], b"lock:a", b"0123456789abcdef", 30_000);
        ensure!(
            r == Err(EncodeError::BufferTooSmall { needed: 75 }),
            "buffer of {}: {:?}",
            size,
            r
        );
    }
    let mut buf = [0u8; 75];
    ensure_eq!(
        set_nx_px(&mut buf, b"lock:a", b"0123456789abcdef", 30_000),
        Ok(75)
    );
    ensure_eq!(&buf[..], SET_FRAME);
    let mut small = [0u8; 8];
    ensure_eq!(
        select(&mut small, 3),
        Err(EncodeError::BufferTooSmall { needed: 23 })
    );
    Ok(())
}

fn encode_arg_count() -> Outcome {
    let mut buf = [0u8; 64];
    let mut cmd = Command::new(&mut buf, 3);
    cmd.arg(b"GET").arg(b"k");
    ensure_eq!(
        cmd.finish(),
        Err(EncodeError::ArgCount {
            declared: 3,
            written: 2
        })
    );
    let mut cmd = Command::new(&mut buf, 2);
    cmd.arg(b"GET").arg_parts(&[b"lock", b":fence"]);
    ensure!(!cmd.is_empty());
    ensure_eq!(cmd.len(), 30);
    ensure_eq!(cmd.finish(), Ok(30));
    ensure_eq!(&buf[..30], &b"*2\r\n$3\r\nGET\r\n$10\r\nlock:fence\r\n"[..]);
    Ok(())
}

fn encode_integers() -> Outcome {
    encodes(
        "integers",
        |b| {
            redlock_resp::command_args(
                b,
                &[
                    Arg::Uint(0),
                    Arg::Uint(u64::MAX),
                    Arg::Int(-12),
                    Arg::Int(i64::MIN),
                    Arg::Uint(4_294_967_296),
                ],
            )
        },
        b"*5\r\n$1\r\n0\r\n$20\r\n18446744073709551615\r\n$3\r\n-12\r\n$20\r\n-9223372036854775808\r\n$10\r\n4294967296\r\n",
    )
}

fn encode_binary_round_trip() -> Outcome {
    let key: &[u8] = b"a\r\nb\x00\xff$*";
    let mut buf = [0u8; 64];
    let n = match command(&mut buf, &[b"DEL", key]) {
        Ok(n) => n,
        Err(e) => fail!("{:?}", e),
    };
    let r = whole(&buf[..n])?;
    ensure_eq!(
        elements(r, AggregateKind::Array)?.as_slice(),
        &[Reply::Bulk(b"DEL"), Reply::Bulk(key)][..]
    );
    Ok(())
}
