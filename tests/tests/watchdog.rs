//! The watchdog (SPEC F2) and the lock guard, against real servers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

extern crate alloc;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::time::Instant;

use redlock_std::{Client, Lost};
use redlock_tests::{RedisServer, Value};

fn setup(n: usize) -> (Vec<RedisServer>, Client) {
    let s: Vec<RedisServer> = (0..n).map(|_| RedisServer::start().unwrap()).collect();
    let c = Client::builder()
        .servers(s.iter().map(|x| x.addr().to_string()))
        .build()
        .unwrap();
    (s, c)
}

#[test]
fn the_watchdog_holds_a_lock_for_five_times_its_ttl() {
    let (s, c) = setup(3);
    let ttl = Duration::from_millis(300);
    let auto = c.lock_auto_extend(b"res", ttl).unwrap();
    let token = auto.lock().token().to_string();
    let started = Instant::now();
    while started.elapsed() < ttl * 5 {
        assert!(!auto.is_lost());
        // Nobody else can take it meanwhile.
        assert!(c.try_lock(b"res", ttl).is_err());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        auto.lock().extensions() >= 5,
        "{}",
        auto.lock().extensions()
    );
    assert_eq!(
        s[0].conn().unwrap().request(&[b"GET", b"res"]).unwrap(),
        Value::Bulk(token.into_bytes())
    );
    auto.release().unwrap();
    assert_eq!(
        s[0].conn().unwrap().request(&[b"GET", b"res"]).unwrap(),
        Value::Nil
    );
}

#[test]
fn the_watchdog_reports_a_loss_before_the_validity_ends() {
    let (s, c) = setup(3);
    let ttl = Duration::from_millis(600);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let auto = c
        .lock_auto_extend_with(b"res", ttl, move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    // The keys are deleted behind its back.
    for server in &s {
        server.conn().unwrap().request(&[b"DEL", b"res"]).unwrap();
    }
    let deleted_at = Instant::now();
    let valid_until = auto.lock().valid_until();
    let why = auto
        .wait_lost(Duration::from_secs(5))
        .expect("the loss is reported");
    assert_eq!(why, Lost::NotHeld);
    assert!(
        Instant::now() < valid_until,
        "reported after the validity ended"
    );
    assert!(deleted_at.elapsed() < ttl, "{:?}", deleted_at.elapsed());
    assert!(auto.is_lost());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn the_extension_cap_is_honoured() {
    let s: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let c = Client::builder()
        .servers(s.iter().map(|x| x.addr().to_string()))
        .max_extensions(2)
        .build()
        .unwrap();
    let ttl = Duration::from_millis(300);
    let auto = c.lock_auto_extend(b"res", ttl).unwrap();
    let why = auto.wait_lost(Duration::from_secs(5)).expect("given up");
    assert_eq!(why, Lost::ExtensionLimit);
    let lock = auto.lock();
    assert_eq!(lock.extensions(), 2);
    assert!(
        Instant::now() < lock.valid_until(),
        "given up before the validity ended"
    );
}

#[test]
fn a_guard_releases_on_drop() {
    let (s, c) = setup(3);
    {
        let guard = c.lock_guard(b"res", Duration::from_secs(10)).unwrap();
        assert_eq!(guard.resource(), b"res");
        assert!(c.try_lock(b"res", Duration::from_secs(1)).is_err());
    }
    assert_eq!(
        s[1].conn().unwrap().request(&[b"GET", b"res"]).unwrap(),
        Value::Nil
    );
    let lock = c
        .lock_guard(b"res", Duration::from_secs(10))
        .unwrap()
        .into_lock()
        .unwrap();
    assert!(matches!(
        s[1].conn().unwrap().request(&[b"GET", b"res"]).unwrap(),
        Value::Bulk(_)
    ));
    c.unlock(&lock).unwrap();
}
