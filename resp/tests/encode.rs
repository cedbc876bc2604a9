//! The encoder: exact bytes of every command the product sends, the
//! "buffer too small" contract, and binary-safe round trips (including a
//! property test over arbitrary argument lists).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use proptest::prelude::*;
use redlock_resp::script::{EXTEND, RELEASE};
use redlock_resp::{Arg, Command, EncodeError, Reply, Status, encode, parse_reply};

/// Encodes with `f` into a large buffer and returns the bytes.
fn bytes(f: impl Fn(&mut [u8]) -> Result<usize, EncodeError>) -> Vec<u8> {
    let mut buf = vec![0u8; 1024];
    let n = f(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn every_command_encodes_exactly() {
    let token = b"0123456789abcdef0123456789abcdef01234567";
    let cases: Vec<(Vec<u8>, &[u8])> = vec![
        (
            bytes(|b| encode::set_nx_px(b, b"lock", token, 30_000)),
            b"*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$40\r\n0123456789abcdef0123456789abcdef01234567\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n",
        ),
        (bytes(|b| encode::set_nx_px(b, b"k", b"v", 0)), b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$1\r\n0\r\n"),
        (
            bytes(|b| encode::set_nx_px(b, b"k", b"v", u64::MAX)),
            b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$20\r\n18446744073709551615\r\n",
        ),
        (bytes(|b| encode::get(b, b"k")), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
        (bytes(|b| encode::pttl(b, b"k")), b"*2\r\n$4\r\nPTTL\r\n$1\r\nk\r\n"),
        (
            bytes(|b| encode::evalsha_script(b, &RELEASE, &[b"k"], &[Arg::Bytes(b"tok")])),
            b"*5\r\n$7\r\nEVALSHA\r\n$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n",
        ),
        (
            bytes(|b| encode::evalsha(b, b"abc", &[], &[])),
            b"*3\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n0\r\n",
        ),
        (
            bytes(|b| encode::eval(b, b"return 1", &[b"a", b"b"], &[Arg::Uint(7), Arg::Int(-7), Arg::Bytes(b"")])),
            b"*8\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n7\r\n$2\r\n-7\r\n$0\r\n\r\n",
        ),
        (bytes(|b| encode::script_load(b, b"return 1")), b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n"),
        (bytes(|b| encode::auth(b, b"pw")), b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"),
        (bytes(|b| encode::auth_user(b, b"u", b"pw")), b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$2\r\npw\r\n"),
        (bytes(|b| encode::select(b, 15)), b"*2\r\n$6\r\nSELECT\r\n$2\r\n15\r\n"),
        (bytes(encode::ping), b"*1\r\n$4\r\nPING\r\n"),
        (bytes(|b| encode::hello(b, 3, None)), b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"),
        (
            bytes(|b| encode::hello(b, 3, Some((b"u", b"p")))),
            b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n",
        ),
        (bytes(|b| encode::info(b, None)), b"*1\r\n$4\r\nINFO\r\n"),
        (bytes(|b| encode::info(b, Some(b"server"))), b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"),
        (bytes(|b| redlock_resp::command(b, &[])), b"*0\r\n"),
    ];
    for (got, want) in cases {
        assert_eq!(
            got,
            want,
            "\n got: {}\nwant: {}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want)
        );
    }
}

#[test]
fn extend_sends_the_ttl_as_an_argument() {
    let got = bytes(|b| {
        encode::evalsha_script(b, &EXTEND, &[b"k"], &[Arg::Bytes(b"t"), Arg::Uint(1500)])
    });
    assert!(got.ends_with(b"$1\r\nk\r\n$1\r\nt\r\n$4\r\n1500\r\n"));
    let eval =
        bytes(|b| encode::eval_script(b, &EXTEND, &[b"k"], &[Arg::Bytes(b"t"), Arg::Uint(1500)]));
    assert!(
        eval.windows(EXTEND.source.len())
            .any(|w| w == EXTEND.source.as_bytes())
    );
}

#[test]
fn a_short_buffer_reports_the_size_needed_at_every_length() {
    let full = bytes(|b| encode::set_nx_px(b, b"lock", b"token", 1234));
    for len in 0..full.len() {
        let mut buf = vec![0u8; len];
        assert_eq!(
            encode::set_nx_px(&mut buf, b"lock", b"token", 1234),
            Err(EncodeError::BufferTooSmall { needed: full.len() }),
            "buffer of {len}"
        );
    }
    let mut exact = vec![0u8; full.len()];
    assert_eq!(
        encode::set_nx_px(&mut exact, b"lock", b"token", 1234),
        Ok(full.len())
    );
    assert_eq!(exact, full);
}

#[test]
fn a_wrong_argument_count_is_an_error() {
    let mut buf = [0u8; 64];
    let mut cmd = Command::new(&mut buf, 3);
    cmd.arg(b"GET").arg(b"k");
    assert_eq!(
        cmd.finish(),
        Err(EncodeError::ArgCount {
            declared: 3,
            written: 2
        })
    );
    assert!(
        !EncodeError::ArgCount {
            declared: 3,
            written: 2
        }
        .to_string()
        .is_empty()
    );
}

/// Parses `frame` as one array of bulks and returns the arguments.
fn decode_args(frame: &[u8]) -> Vec<Vec<u8>> {
    let Ok(Status::Complete((Reply::Aggregate(array), used))) = parse_reply(frame) else {
        panic!("not a complete array: {frame:?}");
    };
    assert_eq!(used, frame.len());
    array
        .iter()
        .map(|r| match r {
            Reply::Bulk(b) => b.to_vec(),
            other => panic!("not a bulk: {other:?}"),
        })
        .collect()
}

#[test]
fn hostile_bytes_round_trip() {
    let args: Vec<&[u8]> = vec![
        b"SET",
        b"a\r\nb",
        b"\0",
        b"*1\r\n$4\r\nPING\r\n",
        b"$",
        b"\xff\xfe",
        b"",
    ];
    let frame = bytes(|b| redlock_resp::command(b, &args));
    assert_eq!(
        decode_args(&frame),
        args.iter().map(|a| a.to_vec()).collect::<Vec<_>>()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_arguments_round_trip(args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..12)) {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        // The default limits allow 1024 elements of 64 KiB: plenty here.
        let needed = match redlock_resp::command(&mut [], &refs) {
            Err(EncodeError::BufferTooSmall { needed }) => needed,
            other => panic!("{other:?}"),
        };
        let mut buf = vec![0u8; needed];
        prop_assert_eq!(redlock_resp::command(&mut buf, &refs), Ok(needed));
        prop_assert_eq!(decode_args(&buf), args);
    }

    #[test]
    fn integers_round_trip(n in any::<u64>(), i in any::<i64>()) {
        let frame = bytes(|b| redlock_resp::command_args(b, &[Arg::Uint(n), Arg::Int(i)]));
        let decoded = decode_args(&frame);
        prop_assert_eq!(decoded[0].clone(), n.to_string().into_bytes());
        prop_assert_eq!(decoded[1].clone(), i.to_string().into_bytes());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parser(data in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(Status::Complete((_, used))) = parse_reply(&data) {
            prop_assert!(used <= data.len());
        }
    }
}

#[test]
fn an_argument_in_parts_is_one_bulk() {
    let mut buf = [0u8; 64];
    let mut cmd = Command::new(&mut buf, 2);
    cmd.arg(b"GET").arg_parts(&[b"res\r\n", b":fence"]);
    let n = cmd.finish().unwrap();
    assert_eq!(
        decode_args(&buf[..n]),
        vec![b"GET".to_vec(), b"res\r\n:fence".to_vec()]
    );
}
