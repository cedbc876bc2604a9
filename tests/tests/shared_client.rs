//! One client shared by many threads: their requests are pipelined over one
//! connection per server, and no caller stalls the others.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::time::Instant;

use redlock_resp::encode;
use redlock_std::{Client, Error, ServerId, ServerOutcome};
use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::{RedisServer, Value};

const THREADS: usize = 16;

/// Waits for `cond`, failing the test with `what` after 30 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < give_up, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn sixteen_threads_pipeline_their_requests_on_one_connection_per_server() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let proxies: Vec<FaultProxy> = servers
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    let client = Client::builder()
        .servers(proxies.iter().map(|p| p.addr().to_string()))
        .request_timeout(Duration::from_secs(20))
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    // Connect (and finish the handshakes) first.
    client
        .unlock(&client.lock(b"warm", Duration::from_secs(30)).unwrap())
        .unwrap();
    for p in &proxies {
        p.set(Fault::Hold);
    }
    // Every thread's SET NX PX has the same length.
    let mut buf = [0u8; 256];
    let set_len = encode::set_nx_px(&mut buf, b"r00", &[b'0'; 40], 30_000).unwrap();
    let locks = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let client = &client;
                scope.spawn(move || {
                    client.lock(format!("r{i:02}").as_bytes(), Duration::from_secs(30))
                })
            })
            .collect();
        // All 16 requests are in flight on each server's one connection at
        // once: none waits for another's reply. (Taking turns, only one
        // request would ever be held here.)
        for p in &proxies {
            wait_for("all 16 requests in flight at once", || {
                p.held_upstream() >= THREADS * set_len
            });
        }
        for p in &proxies {
            p.set(Fault::Pass);
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (i, lock) in locks.into_iter().enumerate() {
        let lock = lock.unwrap();
        assert_eq!(lock.resource(), format!("r{i:02}").as_bytes());
        // Where the lock counted a vote, the key holds its token. (A
        // server that had not answered yet when the majority was in may
        // still be receiving its request from the proxy.)
        let mut votes = 0;
        for (server, s) in servers.iter().enumerate() {
            if lock.report().get(ServerId(server as u8)) != Some(ServerOutcome::Ok) {
                continue;
            }
            votes += 1;
            let got = s
                .conn()
                .unwrap()
                .request(&[b"GET", lock.resource()])
                .unwrap();
            assert_eq!(got, Value::Bulk(lock.token().as_bytes().to_vec()));
        }
        assert!(votes >= 2, "{:?}", lock.report());
        client.unlock(&lock).unwrap();
    }
    for p in &proxies {
        assert_eq!(p.accepted(), 1, "one connection per server");
    }
}

#[test]
fn a_caller_waiting_for_a_busy_lock_does_not_stall_the_others() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let shared = Client::builder()
        .servers(&urls)
        .retry(0, Duration::from_millis(50))
        .build()
        .unwrap();
    let holder = Client::builder().servers(&urls).build().unwrap();
    let held = holder.lock(b"busy", Duration::from_secs(60)).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(120);
            let r = shared.lock_until(b"busy", Duration::from_secs(10), deadline);
            done.store(true, Ordering::SeqCst);
            r
        });
        // Once the waiter has made two attempts it is in its retry loop,
        // and it cannot finish while `held` is held.
        wait_for("two attempts of the waiter", || set_calls(&servers[0]) >= 3);
        for _ in 0..50 {
            let lock = shared.lock(b"free", Duration::from_secs(10)).unwrap();
            shared.unlock(&lock).unwrap();
        }
        assert!(
            !done.load(Ordering::SeqCst),
            "the waiter finished while the lock was held by another client"
        );
        holder.unlock(&held).unwrap();
        let lock = waiter.join().unwrap().unwrap();
        assert_eq!(lock.resource(), b"busy");
        shared.unlock(&lock).unwrap();
    });
}

/// How many SET commands `server` has run.
fn set_calls(server: &RedisServer) -> u64 {
    let Value::Bulk(info) = server
        .conn()
        .unwrap()
        .request(&[b"INFO", b"commandstats"])
        .unwrap()
    else {
        panic!("INFO did not answer a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn threads_sharing_a_client_go_on_when_two_of_five_servers_die() {
    let mut servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
    let client = Client::builder()
        .servers(&urls)
        .retry(3, Duration::from_millis(5))
        .build()
        .unwrap();
    let cycles = AtomicUsize::new(0);
    let failures = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (client, cycles, failures) = (&client, &cycles, &failures);
            scope.spawn(move || {
                let name = format!("worker-{t}");
                for _ in 0..150 {
                    match client.lock(name.as_bytes(), Duration::from_secs(5)) {
                        Ok(lock) => {
                            client.unlock(&lock).unwrap();
                        }
                        Err(e) => {
                            eprintln!("{name}: {e}");
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    cycles.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        wait_for("200 cycles", || cycles.load(Ordering::SeqCst) >= 200);
        servers[0].kill().unwrap();
        wait_for("400 cycles", || cycles.load(Ordering::SeqCst) >= 400);
        servers[1].kill().unwrap();
    });
    assert_eq!(cycles.load(Ordering::SeqCst), 8 * 150);
    assert_eq!(failures.load(Ordering::SeqCst), 0);
    // With three of five servers left, locking still works, and a fourth
    // death makes it fail fast as unavailable.
    let lock = client.lock(b"after", Duration::from_secs(5)).unwrap();
    client.unlock(&lock).unwrap();
    servers[2].kill().unwrap();
    match client.try_lock(b"after", Duration::from_secs(5)) {
        Err(Error::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}
