//! A server restarted while a lock is held: without persistence it forgets
//! the key, and the restart guard keeps a second client from winning with
//! its vote; with `appendfsync always` the key survives.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;

use redlock_std::{Client, Error, ServerOutcome};
use redlock_tests::{RedisServer, Value};

fn client(servers: &[RedisServer], guard: Option<Duration>) -> Client {
    Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .retry(0, Duration::ZERO)
        .restart_guard(guard)
        .build()
        .unwrap()
}

/// A holds the lock on servers 0 and 1 only (2 of 3); then server 0 restarts.
fn hold_then_restart(servers: &mut [RedisServer]) -> redlock_std::Lock {
    let mut s2 = servers[2].conn().unwrap();
    s2.request(&[b"SET", b"res", b"foreign", b"PX", b"60000"])
        .unwrap();
    let a = client(servers, None);
    let lock = a.lock(b"res", Duration::from_secs(30)).unwrap();
    assert_eq!(
        &lock.report().outcomes()[..2],
        &[ServerOutcome::Ok, ServerOutcome::Ok]
    );
    assert_eq!(
        s2.request(&[b"GET", b"res"]).unwrap(),
        Value::Bulk(b"foreign".to_vec())
    );
    servers[0].kill().unwrap();
    servers[0].restart().unwrap();
    s2.request(&[b"DEL", b"res"]).unwrap();
    lock
}

#[test]
fn without_persistence_a_restart_loses_the_key_and_the_guard_refuses_its_vote() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    // The guard distrusts every server up for less than it (uptime has a
    // resolution of one second): let the others be up for longer.
    let guard = Duration::from_secs(2);
    std::thread::sleep(Duration::from_secs(3));
    let _held = hold_then_restart(&mut servers);
    assert_eq!(
        servers[0]
            .conn()
            .unwrap()
            .request(&[b"GET", b"res"])
            .unwrap(),
        Value::Nil,
        "key forgotten"
    );
    // With the guard, the restarted server's vote does not count.
    let b = client(&servers, Some(guard));
    let err = b.lock(b"res", Duration::from_secs(30)).unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        report.get(redlock_std::ServerId(0)),
        Some(ServerOutcome::Restarted),
        "{err}"
    );
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    // Without it, a second client wins while A still holds the lock: the
    // hazard the guard (or persistence) exists for.
    let c = client(&servers, None);
    let second = c.lock(b"res", Duration::from_secs(30));
    assert!(second.is_ok(), "the hazard did not show: {second:?}");
}

#[test]
fn with_persistence_the_key_survives_the_restart() {
    let mut servers: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]).unwrap()
        })
        .collect();
    let held = hold_then_restart(&mut servers);
    assert_eq!(
        servers[0]
            .conn()
            .unwrap()
            .request(&[b"GET", b"res"])
            .unwrap(),
        Value::Bulk(held.token().as_bytes().to_vec())
    );
    let b = client(&servers, None);
    assert!(matches!(
        b.lock(b"res", Duration::from_secs(30)),
        Err(Error::Conflict(_))
    ));
    // The holder's client reconnects and can still release.
    let a = client(&servers, None);
    assert_eq!(a.unlock(&held).unwrap().deleted(), 2);
}
