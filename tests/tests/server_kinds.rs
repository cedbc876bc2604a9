//! The harness's server kinds: Redis, Valkey 8 and Valkey 9 start, are the
//! servers they claim to be, and differ in the native compare-and-set
//! commands (`SET key value IFEQ cmp`, `DELIFEQ key value`, Valkey 9 only);
//! `swap` puts another kind on the same port.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_tests::{Conn, RedisServer, ServerKind, Value};

fn start(kind: ServerKind) -> (RedisServer, Conn) {
    let server =
        RedisServer::start_kind(kind, &[]).unwrap_or_else(|e| panic!("start {}: {e}", kind.name()));
    assert_eq!(server.kind(), kind);
    let conn = server.conn().expect("connect");
    (server, conn)
}

fn ok() -> Value {
    Value::Simple(b"OK".to_vec())
}

fn is_error(v: &Value) -> bool {
    matches!(v, Value::Error(_))
}

/// `INFO server` as text.
fn info(conn: &mut Conn) -> String {
    match conn.request(&[b"INFO", b"server"]).expect("INFO") {
        Value::Bulk(b) | Value::Verbatim(b) => String::from_utf8(b).expect("utf-8"),
        other => panic!("INFO answered {other:?}"),
    }
}

/// The value of `field:` in an INFO text.
fn field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// The kind an `INFO server` says it is.
fn kind_of(info: &str) -> ServerKind {
    match field(info, "valkey_version").and_then(|v| v.split('.').next()) {
        None => ServerKind::Redis,
        Some("8") => ServerKind::Valkey8,
        Some("9") => ServerKind::Valkey9,
        Some(v) => panic!("Valkey {v}?\n{info}"),
    }
}

/// A server without the native commands: `SET ... IFEQ` and `DELIFEQ` are
/// errors, and the key is untouched.
fn assert_no_native_commands(conn: &mut Conn) {
    assert_eq!(conn.request(&[b"SET", b"k", b"v"]).unwrap(), ok());
    let set = conn.request(&[b"SET", b"k", b"v", b"IFEQ", b"v"]).unwrap();
    assert!(is_error(&set), "SET ... IFEQ answered {set:?}");
    let del = conn.request(&[b"DELIFEQ", b"k", b"v"]).unwrap();
    assert!(is_error(&del), "DELIFEQ answered {del:?}");
    assert_eq!(
        conn.request(&[b"GET", b"k"]).unwrap(),
        Value::Bulk(b"v".to_vec())
    );
}

#[test]
fn valkey9_has_set_ifeq_and_delifeq() {
    let (_server, mut conn) = start(ServerKind::Valkey9);
    assert_eq!(conn.request(&[b"SET", b"k", b"v"]).unwrap(), ok());
    // A wrong comparison value sets nothing.
    assert_eq!(
        conn.request(&[b"SET", b"k", b"x", b"IFEQ", b"wrong", b"PX", b"5000"])
            .unwrap(),
        Value::Nil
    );
    assert_eq!(
        conn.request(&[b"SET", b"k", b"v2", b"IFEQ", b"v", b"PX", b"5000"])
            .unwrap(),
        ok()
    );
    assert_eq!(
        conn.request(&[b"GET", b"k"]).unwrap(),
        Value::Bulk(b"v2".to_vec())
    );
    match conn.request(&[b"PTTL", b"k"]).unwrap() {
        Value::Integer(ms) => assert!(0 < ms && ms <= 5000, "PTTL {ms}"),
        other => panic!("PTTL answered {other:?}"),
    }
    assert_eq!(
        conn.request(&[b"DELIFEQ", b"k", b"v"]).unwrap(),
        Value::Integer(0)
    );
    assert_eq!(
        conn.request(&[b"DELIFEQ", b"k", b"v2"]).unwrap(),
        Value::Integer(1)
    );
    assert_eq!(conn.request(&[b"EXISTS", b"k"]).unwrap(), Value::Integer(0));
}

#[test]
fn valkey8_has_neither() {
    let (_server, mut conn) = start(ServerKind::Valkey8);
    assert_no_native_commands(&mut conn);
}

#[test]
fn redis_has_neither() {
    let (_server, mut conn) = start(ServerKind::Redis);
    assert_no_native_commands(&mut conn);
}

#[test]
fn info_names_the_server() {
    for kind in ServerKind::ALL {
        let (_server, mut conn) = start(kind);
        let info = info(&mut conn);
        if kind.is_valkey() {
            assert_eq!(field(&info, "server_name"), Some("valkey"), "{info}");
            assert!(info.contains("\nvalkey_version:"), "{info}");
        } else {
            assert_eq!(field(&info, "server_name"), None, "{info}");
        }
        assert_eq!(kind_of(&info), kind, "{info}");
    }
}

#[test]
fn swap_keeps_the_port_and_changes_the_kind() {
    let (mut server, mut conn) = start(ServerKind::Redis);
    let port = server.port();
    let mut pid = server.pid();
    assert_eq!(kind_of(&info(&mut conn)), ServerKind::Redis);
    for kind in [
        ServerKind::Valkey9,
        ServerKind::Valkey8,
        ServerKind::Redis,
        ServerKind::Valkey9,
    ] {
        server.swap(kind).expect("swap");
        assert_eq!(server.kind(), kind);
        assert_eq!(server.port(), port);
        assert_ne!(server.pid(), pid);
        pid = server.pid();
        let mut conn = server.conn().expect("connect after the swap");
        let info = info(&mut conn);
        assert_eq!(kind_of(&info), kind, "{info}");
        assert_eq!(
            field(&info, "process_id"),
            Some(pid.to_string().as_str()),
            "{info}"
        );
    }
    // `restart` keeps the kind.
    server.kill().expect("kill");
    server.restart().expect("restart");
    assert_eq!(server.kind(), ServerKind::Valkey9);
    let mut conn = server.conn().expect("connect after the restart");
    assert_eq!(kind_of(&info(&mut conn)), ServerKind::Valkey9);
}

#[test]
fn binaries_are_found() {
    for kind in ServerKind::ALL {
        let bin =
            redlock_tests::server_binary(kind).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
        assert!(bin.is_file(), "{}: {}", kind.name(), bin.display());
    }
}
