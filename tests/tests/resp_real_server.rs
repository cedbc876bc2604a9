//! The codec against a real `redis-server`: the scripts' SHA1 digests match
//! `SCRIPT LOAD`, every command the product sends is accepted, arguments are
//! binary-safe, and real server bytes (RESP2 and RESP3) parse exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_resp::script::{ALL, EXTEND, FENCE_RAISE, RELEASE};
use redlock_resp::{AggregateKind, Arg, ErrorKind, Status, encode, parse_reply};
use redlock_tests::{Conn, RedisServer, Value};

fn server() -> (RedisServer, Conn) {
    let server = RedisServer::start().expect("start redis-server");
    let conn = server.conn().expect("connect");
    (server, conn)
}

fn bulk(b: &[u8]) -> Value {
    Value::Bulk(b.to_vec())
}

fn ok() -> Value {
    Value::Simple(b"OK".to_vec())
}

/// Sends bytes made by one of the `encode` functions and reads the reply.
fn send(
    conn: &mut Conn,
    encoder: impl FnOnce(&mut [u8]) -> Result<usize, redlock_resp::EncodeError>,
) -> Value {
    let mut buf = vec![0u8; 4096];
    let n = encoder(&mut buf).expect("encode");
    conn.send_raw(&buf[..n]).expect("send");
    conn.read_reply().expect("reply")
}

#[test]
fn script_digests_match_script_load() {
    let (_server, mut conn) = server();
    for script in ALL.into_iter().chain([FENCE_RAISE]) {
        let sha = send(&mut conn, |b| {
            encode::script_load(b, script.source.as_bytes())
        });
        assert_eq!(sha, bulk(script.sha1.as_bytes()));
    }
}

#[test]
fn lock_round_trip_with_the_encoded_commands() {
    let (_server, mut conn) = server();
    let key: &[u8] = b"resource";
    let token: &[u8] = b"0123456789abcdef0123456789abcdef01234567";
    assert_eq!(
        send(&mut conn, |b| encode::set_nx_px(b, key, token, 30_000)),
        ok()
    );
    // Exact bytes from the server.
    assert_eq!(conn.last_raw(), b"+OK\r\n");
    assert_eq!(
        send(&mut conn, |b| encode::set_nx_px(b, key, b"other", 30_000)),
        Value::Nil
    );
    assert_eq!(conn.last_raw(), b"$-1\r\n");
    assert_eq!(send(&mut conn, |b| encode::get(b, key)), bulk(token));
    let Value::Integer(pttl) = send(&mut conn, |b| encode::pttl(b, key)) else {
        panic!()
    };
    assert!((29_000..=30_000).contains(&pttl), "{pttl}");

    // NOSCRIPT first (nothing loaded), then EVAL, then EVALSHA works.
    let args = [Arg::Bytes(token), Arg::Uint(60_000)];
    let Value::Error(e) = send(&mut conn, |b| {
        encode::evalsha_script(b, &EXTEND, &[key], &args)
    }) else {
        panic!()
    };
    assert_eq!(ErrorKind::classify(&e), ErrorKind::NoScript);
    assert_eq!(
        send(&mut conn, |b| encode::eval_script(
            b,
            &EXTEND,
            &[key],
            &args
        )),
        Value::Integer(1)
    );
    assert_eq!(conn.last_raw(), b":1\r\n");
    let Value::Integer(pttl) = send(&mut conn, |b| encode::pttl(b, key)) else {
        panic!()
    };
    assert!(pttl > 59_000, "{pttl}");
    // Extend with the wrong token does nothing.
    let wrong = [Arg::Bytes(b"not-mine"), Arg::Uint(1)];
    assert_eq!(
        send(&mut conn, |b| encode::evalsha_script(
            b,
            &EXTEND,
            &[key],
            &wrong
        )),
        Value::Integer(0)
    );

    // Release: wrong token leaves the key, right token deletes it, twice is 0.
    let release = |t: &'static [u8]| {
        move |b: &mut [u8]| encode::evalsha_script(b, &RELEASE, &[b"resource"], &[Arg::Bytes(t)])
    };
    send(&mut conn, |b| {
        encode::script_load(b, RELEASE.source.as_bytes())
    });
    assert_eq!(send(&mut conn, release(b"not-mine")), Value::Integer(0));
    assert_eq!(
        send(
            &mut conn,
            release(b"0123456789abcdef0123456789abcdef01234567")
        ),
        Value::Integer(1)
    );
    assert_eq!(
        send(
            &mut conn,
            release(b"0123456789abcdef0123456789abcdef01234567")
        ),
        Value::Integer(0)
    );
    assert_eq!(send(&mut conn, |b| encode::get(b, key)), Value::Nil);
    // Extend never re-creates a missing key.
    assert_eq!(
        send(&mut conn, |b| encode::evalsha_script(
            b,
            &EXTEND,
            &[key],
            &args
        )),
        Value::Integer(0)
    );
    assert_eq!(send(&mut conn, |b| encode::get(b, key)), Value::Nil);
}

#[test]
fn hostile_resource_names_round_trip_exactly() {
    let (_server, mut conn) = server();
    let long = vec![b'x'; 1024];
    let names: Vec<Vec<u8>> = vec![
        b"a\r\nb".to_vec(),
        b"\r\n*1\r\n$4\r\nPING\r\n".to_vec(),
        b"nul\0byte".to_vec(),
        b"$5\r\n*".to_vec(),
        vec![0xff, 0xfe, 0x80, 0x00],
        b"".to_vec(),
        long,
    ];
    send(&mut conn, |b| {
        encode::script_load(b, RELEASE.source.as_bytes())
    });
    for name in &names {
        let value: Vec<u8> = name.iter().rev().copied().chain(*b"\r\n").collect();
        assert_eq!(
            send(&mut conn, |b| encode::set_nx_px(b, name, &value, 10_000)),
            ok(),
            "{name:?}"
        );
        assert_eq!(send(&mut conn, |b| encode::get(b, name)), bulk(&value));
        assert_eq!(
            conn.request(&[b"STRLEN", name]).unwrap(),
            Value::Integer(value.len() as i64)
        );
        assert_eq!(
            send(&mut conn, |b| encode::evalsha_script(
                b,
                &RELEASE,
                &[name],
                &[Arg::Bytes(&value)]
            )),
            Value::Integer(1)
        );
    }
    // Nothing was injected: only the keys we set existed, and all are gone.
    assert_eq!(conn.request(&[b"DBSIZE"]).unwrap(), Value::Integer(0));
}

#[test]
fn connection_setup_commands() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]).unwrap();
    let mut conn = server.conn().unwrap();
    let Value::Error(e) = send(&mut conn, encode::ping) else {
        panic!()
    };
    assert_eq!(ErrorKind::classify(&e), ErrorKind::NoAuth);
    let Value::Error(e) = send(&mut conn, |b| encode::auth(b, b"wrong")) else {
        panic!()
    };
    assert_eq!(ErrorKind::classify(&e), ErrorKind::WrongPass);
    assert_eq!(send(&mut conn, |b| encode::auth(b, b"s3cret")), ok());
    assert_eq!(
        send(&mut conn, |b| encode::auth_user(b, b"default", b"s3cret")),
        ok()
    );
    assert_eq!(send(&mut conn, |b| encode::select(b, 3)), ok());
    assert_eq!(
        send(&mut conn, encode::ping),
        Value::Simple(b"PONG".to_vec())
    );
    let Value::Bulk(info) = send(&mut conn, |b| encode::info(b, Some(b"server"))) else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    let run_id = info
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .unwrap();
    assert_eq!(run_id.len(), 40);
    let Value::Bulk(all) = send(&mut conn, |b| encode::info(b, None)) else {
        panic!()
    };
    assert!(all.len() > info.len());
}

fn error_kind(v: Value) -> ErrorKind {
    match v {
        Value::Error(e) => ErrorKind::classify(&e),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn server_errors_from_a_real_server_are_classified() {
    let (_server, mut conn) = server();
    conn.request(&[b"LPUSH", b"list", b"x"]).unwrap();
    assert_eq!(
        error_kind(send(&mut conn, |b| encode::get(b, b"list"))),
        ErrorKind::WrongType
    );
    // Inside the release script the error surfaces too.
    let release = send(&mut conn, |b| {
        encode::eval_script(b, &RELEASE, &[b"list"], &[Arg::Bytes(b"t")])
    });
    assert!(matches!(release, Value::Error(_)), "{release:?}");
    assert_eq!(
        error_kind(conn.request(&[b"NOSUCHCOMMAND"]).unwrap()),
        ErrorKind::Err
    );

    // NOPERM: an ACL user without GET.
    conn.request(&[
        b"ACL", b"SETUSER", b"limited", b"on", b">pw", b"~*", b"+set",
    ])
    .unwrap();
    assert_eq!(
        send(&mut conn, |b| encode::auth_user(b, b"limited", b"pw")),
        ok()
    );
    assert_eq!(
        error_kind(send(&mut conn, |b| encode::get(b, b"k"))),
        ErrorKind::NoPerm
    );

    // OOM: a server at its memory limit that may not evict.
    let full =
        RedisServer::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]).unwrap();
    let mut c = full.conn().unwrap();
    assert_eq!(
        error_kind(send(&mut c, |b| encode::set_nx_px(b, b"k", b"v", 1000))),
        ErrorKind::Oom
    );

    // READONLY: a replica refuses writes.
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &full.port().to_string()]).unwrap();
    let mut c = replica.conn().unwrap();
    assert_eq!(
        error_kind(send(&mut c, |b| encode::set_nx_px(b, b"k", b"v", 1000))),
        ErrorKind::ReadOnly
    );
}

#[test]
fn resp3_replies_from_a_real_server_parse() {
    let (_server, mut conn) = server();
    // HELLO 3 answers with a map.
    let Value::Aggregate(AggregateKind::Map, fields) =
        send(&mut conn, |b| encode::hello(b, 3, None))
    else {
        panic!("HELLO 3 did not answer with a map")
    };
    let proto = fields
        .chunks(2)
        .find(|kv| kv[0] == bulk(b"proto"))
        .map(|kv| kv[1].clone());
    assert_eq!(proto, Some(Value::Integer(3)));

    // Null is `_` in RESP3.
    assert_eq!(send(&mut conn, |b| encode::get(b, b"missing")), Value::Nil);
    assert_eq!(conn.last_raw(), b"_\r\n");
    // A double.
    conn.request(&[b"ZADD", b"z", b"1.5", b"m"]).unwrap();
    assert_eq!(
        conn.request(&[b"ZSCORE", b"z", b"m"]).unwrap(),
        Value::Double(b"1.5".to_vec())
    );
    // A boolean from a script.
    assert_eq!(
        conn.request(&[b"EVAL", b"redis.setresp(3); return true", b"0"])
            .unwrap(),
        Value::Boolean(true)
    );
    // A set.
    conn.request(&[b"SADD", b"s", b"a"]).unwrap();
    let Value::Aggregate(AggregateKind::Set, members) = conn.request(&[b"SMEMBERS", b"s"]).unwrap()
    else {
        panic!()
    };
    assert_eq!(members, vec![bulk(b"a")]);
    // A big number and a verbatim string.
    let big = conn
        .request(&[
            b"EVAL",
            b"return {big_number='123456789012345678901234567890'}",
            b"0",
        ])
        .unwrap();
    assert_eq!(
        big,
        Value::BigNumber(b"123456789012345678901234567890".to_vec())
    );
    let Value::Verbatim(text) = conn.request(&[b"INFO", b"server"]).unwrap() else {
        panic!()
    };
    assert!(text.starts_with(b"# Server"));
    // Push frames arrive between replies (client-side caching invalidation)
    // and can be skipped without losing the reply stream.
    assert_eq!(
        conn.request(&[b"CLIENT", b"TRACKING", b"on"]).unwrap(),
        ok()
    );
    conn.request(&[b"SET", b"k", b"v"]).unwrap();
    assert_eq!(conn.request(&[b"GET", b"k"]).unwrap(), bulk(b"v"));
    // This SET invalidates k: the server sends a push, then +OK.
    conn.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nw\r\n")
        .unwrap();
    // Redis sends the push next to the +OK (after it, in 7.x): read both.
    let expected_push = Value::Aggregate(
        AggregateKind::Push,
        vec![
            bulk(b"invalidate"),
            Value::Aggregate(AggregateKind::Array, vec![bulk(b"k")]),
        ],
    );
    let mut raw_push = None;
    let mut got_ok = false;
    for _ in 0..2 {
        let v = conn.read_reply().unwrap();
        if v == ok() {
            got_ok = true;
        } else {
            assert_eq!(v, expected_push);
            raw_push = Some(conn.last_raw().to_vec());
        }
    }
    assert!(got_ok);
    let raw_push = raw_push.expect("an invalidation push");
    let Ok(Status::Complete((reply, used))) = parse_reply(&raw_push) else {
        panic!()
    };
    assert!(reply.is_push() && used == raw_push.len());
    // And the stream stays in step afterwards.
    assert_eq!(
        conn.request(&[b"PING"]).unwrap(),
        Value::Simple(b"PONG".to_vec())
    );
}
