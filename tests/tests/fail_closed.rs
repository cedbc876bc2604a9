//! Fail closed (issue 9): misconfigurations and setup errors found from
//! outside, each against real `redis-server` processes. Every test here let
//! two clients hold one lock, lost a release, or wedged a fenced resource
//! before its fix.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Instant;

use redlock_core::handshake::Step;
use redlock_core::redlock_resp::ErrorKind;
use redlock_std::{Client, Error, ServerId, ServerOutcome, SetupError};
use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::{RedisServer, Value};

const TTL: Duration = Duration::from_secs(30);

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

fn request(s: &RedisServer, args: &[&[u8]]) -> Value {
    s.conn().unwrap().request(args).unwrap()
}

/// `GET key` in database `db`.
fn get_in(s: &RedisServer, db: u32, key: &[u8]) -> Value {
    let mut c = s.conn().unwrap();
    let db = db.to_string();
    assert_eq!(
        c.request(&[b"SELECT", db.as_bytes()]).unwrap(),
        Value::Simple(b"OK".to_vec())
    );
    c.request(&[b"GET", key]).unwrap()
}

/// Adds the ACL user `name` (password `pw`) with what the client needs,
/// less the commands in `minus` (`"-select"`).
fn acl_user(s: &RedisServer, name: &str, minus: &[&str]) {
    let mut args: Vec<&[u8]> = vec![
        b"ACL",
        b"SETUSER",
        name.as_bytes(),
        b"reset",
        b"on",
        b">pw",
        b"~*",
        b"+set",
        b"+get",
        b"+del",
        b"+pexpire",
        b"+pttl",
        b"+eval",
        b"+evalsha",
        b"+script|load",
        b"+info",
        b"+select",
    ];
    args.extend(minus.iter().map(|m| m.as_bytes()));
    assert_eq!(request(s, &args), Value::Simple(b"OK".to_vec()));
}

fn urls(s: &[RedisServer], prefix: &str, suffix: &str) -> Vec<String> {
    s.iter()
        .map(|s| format!("redis://{prefix}{}{suffix}", s.addr()))
        .collect()
}

fn one_try(urls: &[String]) -> Client {
    Client::builder()
        .servers(urls)
        .retry(0, Duration::ZERO)
        .build()
        .unwrap()
}

fn unavailable(e: &Error) -> &redlock_std::Outcomes {
    match e {
        Error::Unavailable(o) => o,
        other => panic!("expected Unavailable, got {other}"),
    }
}

// Item 1: handshake errors are never ignored.

#[test]
fn a_database_out_of_range_is_an_error_not_db_0() {
    let s = servers(1);
    let c = one_try(&urls(&s, "", "/99"));
    let err = c.lock(b"res", TTL).unwrap_err();
    let o = unavailable(&err);
    assert_eq!(
        o.get(ServerId(0)),
        Some(ServerOutcome::Setup(SetupError::Refused {
            step: Step::Select,
            kind: ErrorKind::Err
        }))
    );
    // The server's own words reach the report.
    let shown = err.to_string();
    assert!(shown.contains("DB index is out of range"), "{shown}");
    assert!(shown.contains(&s[0].addr().to_string()), "{shown}");
    // Nothing was set anywhere.
    assert_eq!(request(&s[0], &[b"DBSIZE"]), Value::Integer(0));
}

#[test]
fn a_user_without_select_cannot_take_a_lock_held_in_another_database() {
    let s = servers(3);
    for server in &s {
        acl_user(server, "full", &[]);
        acl_user(server, "nosel", &["-select"]);
    }
    let holder = one_try(&urls(&s, "full:pw@", "/3"));
    let lock = holder.lock(b"res", TTL).unwrap();
    for server in &s {
        assert_eq!(
            get_in(server, 3, b"res"),
            Value::Bulk(lock.token().as_bytes().to_vec())
        );
    }
    // The second client is configured for /3 too, but may not SELECT: before
    // the fix its SETs ran in db 0 and it took the lock as well.
    let other = one_try(&urls(&s, "nosel:pw@", "/3"));
    let err = other.lock(b"res", TTL).unwrap_err();
    let o = unavailable(&err);
    let refused = o
        .iter()
        .filter(|(_, outcome)| {
            *outcome
                == ServerOutcome::Setup(SetupError::Refused {
                    step: Step::Select,
                    kind: ErrorKind::NoPerm,
                })
        })
        .count();
    // Two refusals decide it (the third may not have been waited for).
    assert!(refused >= 2, "{err}");
    assert_eq!(o.count(ServerOutcome::Ok), 0, "{err}");
    assert!(err.to_string().contains("NOPERM"), "{err}");
    for server in &s {
        assert_eq!(get_in(server, 0, b"res"), Value::Nil, "nothing in db 0");
    }
    holder.unlock(&lock).unwrap();
}

#[test]
fn a_wrong_password_and_a_denied_script_load_are_refusals() {
    let s = servers(1);
    acl_user(&s[0], "noload", &["-script|load"]);
    acl_user(&s[0], "ok", &[]);
    let err = one_try(&urls(&s, "ok:wrong@", ""))
        .lock(b"res", TTL)
        .unwrap_err();
    assert!(err.to_string().contains("WRONGPASS"), "{err}");
    assert!(!err.to_string().contains("NOAUTH"), "{err}");
    assert_eq!(
        err.report().unwrap().get(ServerId(0)),
        Some(ServerOutcome::Setup(SetupError::Refused {
            step: Step::Auth,
            kind: ErrorKind::WrongPass
        }))
    );
    let err = one_try(&urls(&s, "noload:pw@", ""))
        .lock(b"res", TTL)
        .unwrap_err();
    // (A Redis needs the scripts: it has no native commands.)
    assert_eq!(
        err.report().unwrap().get(ServerId(0)),
        Some(ServerOutcome::Setup(SetupError::ScriptsDenied {
            kind: ErrorKind::NoPerm
        }))
    );
    assert!(err.to_string().contains("scripts denied"), "{err}");
    assert_eq!(request(&s[0], &[b"DBSIZE"]), Value::Integer(0));
    // The same server with a good user works: the refusal was the user's.
    let c = one_try(&urls(&s, "ok:pw@", ""));
    let lock = c.lock(b"res", TTL).unwrap();
    c.unlock(&lock).unwrap();
}

#[test]
fn a_refused_server_is_retried_with_backoff_and_used_once_it_accepts() {
    let s = servers(1);
    acl_user(&s[0], "later", &["-select"]);
    let c = one_try(&urls(&s, "later:pw@", "/2"));
    assert!(c.lock(b"res", TTL).is_err());
    // The operator grants SELECT: the client reconnects (after its backoff)
    // and the next call goes through, in database 2.
    acl_user(&s[0], "later", &[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let lock = loop {
        match c.lock(b"res", TTL) {
            Ok(lock) => break lock,
            Err(e) if Instant::now() < deadline => {
                assert!(e.to_string().contains("NOPERM"), "{e}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("still refused: {e}"),
        }
    };
    assert_eq!(
        get_in(&s[0], 2, b"res"),
        Value::Bulk(lock.token().as_bytes().to_vec())
    );
    c.unlock(&lock).unwrap();
}

// Item 2: the restart guard fails closed.

#[test]
fn with_the_restart_guard_info_denied_means_no_vote() {
    let mut s = servers(3);
    for server in &s {
        acl_user(server, "noinfo", &["-info"]);
        acl_user(server, "full", &[]);
    }
    let guard = Some(Duration::from_secs(30));
    // The holder, with every permission.
    let holder = Client::builder()
        .servers(urls(&s, "full:pw@", ""))
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    let lock = holder.lock(b"res", TTL).unwrap();
    // Two servers restart without persistence: they forget the key (and
    // their ACL users, which the operator recreates).
    for server in &mut s[..2] {
        server.kill().unwrap();
        server.restart().unwrap();
        acl_user(server, "noinfo", &["-info"]);
    }
    // A guarded client that may not read INFO cannot know they restarted:
    // their votes must not count (before the fix it took the lock).
    let taker = Client::builder()
        .servers(urls(&s, "noinfo:pw@", ""))
        .retry(0, Duration::ZERO)
        .restart_guard(guard)
        .build()
        .unwrap();
    let err = taker.lock(b"res", TTL).unwrap_err();
    let o = unavailable(&err);
    assert!(
        err.to_string()
            .contains("restart time unknown: INFO denied"),
        "{err}"
    );
    let denied = ServerOutcome::Setup(SetupError::Refused {
        step: Step::Info,
        kind: ErrorKind::NoPerm,
    });
    assert!(o.count(denied) >= 2, "{err}");
    assert_eq!(o.count(ServerOutcome::Ok), 0, "{err}");
    // Nothing was set through the refused connections.
    for server in &s[..2] {
        assert_eq!(request(server, &[b"GET", b"res"]), Value::Nil);
    }
    // Without the guard nothing needs INFO: the same user may lock another
    // resource.
    let unguarded = one_try(&urls(&s[..2], "noinfo:pw@", ""));
    let other = unguarded.lock(b"other", TTL).unwrap();
    unguarded.unlock(&other).unwrap();
    drop(lock);
}

/// Review finding: an acquisition that outlives a reconnect made by
/// another call (the watchdog, another thread) must judge a vote by the
/// incarnation of the connection it arrived on, not by what was known when
/// it began.
#[test]
fn a_vote_counts_by_the_incarnation_of_its_connection() {
    let mut s = servers(3);
    // Long enough up for a 4 s guard (uptime is read in whole seconds);
    // the guard leaves a loaded machine seconds for the steps below.
    std::thread::sleep(Duration::from_millis(5100));
    let c = Client::builder()
        .servers(urls(&s, "", ""))
        .restart_guard(Some(Duration::from_secs(4)))
        .build()
        .unwrap();
    let warm = c.lock(b"warm", TTL).unwrap();
    assert!(warm.report().count(ServerOutcome::Ok) >= 2);
    c.unlock(&warm).unwrap();
    // Another client holds the resource on servers 1 and 2 for now.
    for server in &s[1..] {
        request(server, &[b"SET", b"res", b"theirs"]);
    }
    let waiting = {
        let c = c.clone();
        std::thread::spawn(move || {
            c.lock_until(
                b"res",
                TTL,
                std::time::Instant::now() + Duration::from_secs(20),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    // Server 0 restarts (it forgets nothing we need: it never held res);
    // this thread's call reconnects it and reads its new uptime.
    s[0].kill().unwrap();
    s[0].restart().unwrap();
    let _ = c.inspect(b"res");
    let _ = c.inspect(b"res");
    for server in &s[1..] {
        request(server, &[b"DEL", b"res"]);
    }
    let lock = waiting.join().unwrap().unwrap();
    // Servers 1 and 2 gave the lock; server 0, up for less than the guard
    // on the connection the vote came on, did not count (it may answer
    // "restarted", or not have been waited for).
    assert_ne!(lock.report().get(ServerId(0)), Some(ServerOutcome::Ok));
    c.unlock(&lock).unwrap();
}

/// A fake server whose `INFO` has no `uptime_in_seconds`.
fn start_fake_without_uptime() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let n = match conn.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while let Ok(redlock_core::redlock_resp::Status::Complete((_, used))) =
                        redlock_core::redlock_resp::parse_reply(&buf)
                    {
                        let command = buf.drain(..used).collect::<Vec<u8>>();
                        let answer = if command.windows(4).any(|w| w == b"INFO") {
                            let body = "# Server\r\nrun_id:nope\r\n";
                            format!("${}\r\n{body}\r\n", body.len()).into_bytes()
                        } else {
                            redlock_tests::fake_answer(&command, 7)
                        };
                        if conn.write_all(&answer).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn with_the_restart_guard_an_info_without_uptime_means_no_vote() {
    let fake = start_fake_without_uptime();
    let c = Client::builder()
        .servers([&fake])
        .retry(0, Duration::ZERO)
        .restart_guard(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let err = c.lock(b"res", TTL).unwrap_err();
    assert_eq!(
        err.report().unwrap().get(ServerId(0)),
        Some(ServerOutcome::Setup(SetupError::NoUptime))
    );
    assert!(err.to_string().contains("no uptime_in_seconds"), "{err}");
    // Without the guard the fake's vote counts (it answers OK).
    let c = one_try(&[fake]);
    assert!(c.lock(b"res", TTL).is_ok());
}

// Item 3: one server, one vote.

#[test]
fn two_entries_for_one_server_are_rejected_when_the_client_is_built() {
    let s = servers(2);
    let (a, b) = (s[0].addr(), s[1].addr());
    let port = s[0].port();
    for list in [
        vec![a.to_string(), a.to_string(), b.to_string()],
        vec![
            format!("redis://{a}/0"),
            format!("redis://{a}/1"),
            b.to_string(),
        ],
        vec![
            format!("redis://:x@{a}"),
            format!("redis://user:y@{a}/4"),
            b.to_string(),
        ],
        vec![
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            b.to_string(),
        ],
    ] {
        let err = Client::builder().servers(&list).build().unwrap_err();
        assert!(
            matches!(err, Error::DuplicateServer { .. }),
            "{list:?}: {err}"
        );
        let shown = err.to_string();
        assert!(shown.contains("same server"), "{shown}");
        assert!(!shown.contains(":x@") && !shown.contains(":y@"), "{shown}");
    }
}

#[test]
fn one_process_behind_two_addresses_gets_one_vote() {
    let mut s = servers(2);
    // The same server under a second address (a proxy, NAT, another name).
    let twin = FaultProxy::start(s[0].addr()).unwrap();
    let list = [
        s[0].addr().to_string(),
        twin.addr().to_string(),
        s[1].addr().to_string(),
    ];
    let c = one_try(&list);
    // The twin's handshake (or the original's, whichever came second) is
    // refused: never do both vote.
    for round in 0..5 {
        let lock = c.lock(b"res", TTL).unwrap();
        let twins = [
            lock.report().get(ServerId(0)),
            lock.report().get(ServerId(1)),
        ];
        assert!(
            twins.iter().any(|o| *o != Some(ServerOutcome::Ok)),
            "round {round}: {twins:?}"
        );
        c.unlock(&lock).unwrap();
    }
    // With the other real server gone, one process is not a majority of
    // three (before the fix it voted twice and the lock was taken).
    s[1].kill().unwrap();
    assert!(c.lock(b"res2", TTL).is_err());
}

// Item 7: releases reach servers that were reconnecting.

#[test]
fn an_unlock_reaches_a_server_whose_connection_broke() {
    let s = servers(3);
    let c = one_try(&urls(&s, "", ""));
    let lock = c.lock(b"res", TTL).unwrap();
    // The server drops the client's connection while the lock is held.
    let killed = request(
        &s[0],
        &[b"CLIENT", b"KILL", b"TYPE", b"normal", b"SKIPME", b"yes"],
    );
    assert_eq!(killed, Value::Integer(1));
    let released = c.unlock(&lock).unwrap();
    assert_eq!(released.report.get(ServerId(0)), Some(ServerOutcome::Ok));
    assert_eq!(request(&s[0], &[b"GET", b"res"]), Value::Nil);
}

#[test]
fn a_failed_attempt_releases_where_its_reply_was_lost() {
    let s = servers(3);
    let proxy = FaultProxy::start(s[0].addr()).unwrap();
    let list = [
        proxy.addr().to_string(),
        s[1].addr().to_string(),
        s[2].addr().to_string(),
    ];
    let c = one_try(&list);
    // Connections up.
    let warm = c.lock(b"warm", TTL).unwrap();
    c.unlock(&warm).unwrap();
    // Another holder has the resource on servers 1 and 2.
    for server in &s[1..] {
        request(server, &[b"SET", b"res", b"theirs", b"PX", b"30000"]);
    }
    // Server 0 runs our SET, but the connection breaks before its reply:
    // the attempt fails (conflict) and must release on server 0 although
    // its connection is being re-established.
    proxy.set(Fault::CutReply);
    let err = c.lock(b"res", TTL).unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    // The release goes out behind the reconnect and its handshake, within
    // about a request's timeout; allow a loaded machine some seconds.
    let deadline = Instant::now() + Duration::from_secs(5);
    while request(&s[0], &[b"GET", b"res"]) != Value::Nil {
        assert!(
            Instant::now() < deadline,
            "our key stayed on server 0: {:?}",
            request(&s[0], &[b"GET", b"res"])
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

// Item 8: a fenced resource is never stuck for good.

#[test]
fn lost_fence_counters_have_their_own_error_and_a_safe_repair() {
    let mut s = servers(3);
    let c = Client::builder()
        .servers(urls(&s, "", ""))
        .fencing(true)
        .build()
        .unwrap();
    let mut highest = 0;
    for _ in 0..2 {
        let lock = c.lock(b"res", TTL).unwrap();
        highest = lock.fence().unwrap();
        c.unlock(&lock).unwrap();
    }
    assert_eq!(highest, 2);
    // A majority restarts without persistence: the counters are gone there.
    for server in &mut s[..2] {
        server.kill().unwrap();
        server.restart().unwrap();
    }
    let started = Instant::now();
    let err = c.lock(b"res", TTL).unwrap_err();
    let o = match &err {
        Error::FenceLost(o) => o,
        other => panic!("expected FenceLost, got {other}"),
    };
    // Every server answered (and voted): not "too few servers answered",
    // and no retries.
    assert_eq!(o.count(ServerOutcome::Ok), 3, "{err}");
    let shown = err.to_string();
    assert!(!shown.contains("too few servers answered"), "{shown}");
    assert!(shown.contains("fence-repair"), "{shown}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Nothing is left behind by the refused attempt (A5).
    for server in &s {
        assert_eq!(request(server, &[b"GET", b"res"]), Value::Nil);
    }
    // The operator knows the resource accepted fence 2.
    let repaired = c.fence_repair(b"res", highest).unwrap();
    assert!(repaired.complete());
    assert_eq!(repaired.counter, highest);
    let lock = c.lock(b"res", TTL).unwrap();
    assert!(lock.fence().unwrap() > highest);
    let after = lock.fence().unwrap();
    c.unlock(&lock).unwrap();
    // A repair never lowers a counter.
    let again = c.fence_repair(b"res", 1).unwrap();
    assert_eq!(again.counter, after);
    for server in &s {
        assert_eq!(
            request(server, &[b"GET", b"res:fence"]),
            Value::Bulk(after.to_string().into_bytes())
        );
    }
}

// Item 9: servers a WAN round trip away work with the defaults.

#[test]
fn the_default_timeouts_reach_servers_80_ms_away() {
    let s = servers(3);
    let proxies: Vec<FaultProxy> = s
        .iter()
        .map(|server| {
            let p = FaultProxy::start(server.addr()).unwrap();
            // 40 ms each way: 80 ms of added round trip.
            p.set(Fault::Delay(Duration::from_millis(40)));
            p
        })
        .collect();
    let list: Vec<String> = proxies.iter().map(|p| p.addr().to_string()).collect();
    let c = Client::builder().servers(&list).build().unwrap();
    let lock = c.lock(b"res", TTL).unwrap();
    assert!(lock.remaining() > Duration::from_secs(20));
    c.unlock(&lock).unwrap();
    for server in &s {
        assert_eq!(request(server, &[b"GET", b"res"]), Value::Nil);
    }
}
