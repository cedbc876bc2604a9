//! Safety and liveness of the async API under faults and crowds, found by
//! a review (each failed before its fix): a watched lock whose extension
//! fails at once is still declared lost in time (no two holders), and a
//! crowd of contenders retrying in every slot does not starve the holder's
//! extension or unlock. Also: the driver thread ends with the last handle.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

/// F2: a watched lock whose majority goes away must be declared lost
/// before its validity ends. When an extension fails *inside* `submit`
/// (servers in their reconnect backoff are told down synchronously), the
/// driver parks the watch in `Phase::Extending` with a done ticket, has no
/// timer for it, and sleeps on its Kick forever: never declared lost.
#[test]
fn watched_lock_is_declared_lost_when_a_majority_dies() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    let ttl = Duration::from_millis(1000);
    let auto =
        futures::executor::block_on(client.lock_auto_extend("async-safety-f2", ttl)).unwrap();
    // Let one extension succeed first (the steady state).
    let first = auto.lock().valid_until();
    let t0 = Instant::now();
    while auto.lock().valid_until() == first {
        assert!(t0.elapsed() < Duration::from_secs(5), "never extended");
        std::thread::sleep(Duration::from_millis(5));
    }
    servers[1].kill().unwrap();
    servers[2].kill().unwrap();
    let valid_until = auto.lock().valid_until();
    let t1 = Instant::now();
    while !auto.is_lost() && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let now = Instant::now();
    assert!(
        auto.is_lost(),
        "a lock whose majority is gone was never declared lost"
    );
    assert!(
        now <= valid_until,
        "declared lost {:?} after its validity ended",
        now - valid_until
    );
    drop(auto);
}

/// The consequence of the above (S1): the key expires, the servers come
/// back, another client takes the lock, and the watched lock still says
/// it is held.
#[test]
fn two_holders_after_a_silent_loss() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    let other = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap();
    let ttl = Duration::from_millis(1000);
    let auto =
        futures::executor::block_on(client.lock_auto_extend("async-safety-s1", ttl)).unwrap();
    let first = auto.lock().valid_until();
    let t0 = Instant::now();
    while auto.lock().valid_until() == first {
        assert!(t0.elapsed() < Duration::from_secs(5), "never extended");
        std::thread::sleep(Duration::from_millis(5));
    }
    servers[1].kill().unwrap();
    servers[2].kill().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    servers[1].restart().unwrap();
    servers[2].restart().unwrap();
    let theirs = other.try_lock("async-safety-s1", Duration::from_secs(10));
    assert!(
        theirs.is_err() || auto.is_lost(),
        "two holders: another client holds the lock while the watched lock says it holds it"
    );
}

/// Liveness: 64 tasks of the same client waiting (with retries) for a lock
/// occupy every slot for their whole retry loop; the holder's watchdog
/// extension never gets a slot and the holder's lock is declared lost,
/// though every server is up and nobody else could take it.
#[test]
fn waiters_starve_the_holders_extension() {
    // As many waiters as the client has slots (64).
    let waiters_n = 64;
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    let ttl = Duration::from_millis(1000);
    let auto =
        futures::executor::block_on(client.lock_auto_extend("async-safety-starve", ttl)).unwrap();
    let waiters = {
        let client = client.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(3);
            futures::executor::block_on(futures::future::join_all((0..waiters_n).map(|_| {
                client.lock_until("async-safety-starve", Duration::from_secs(1), deadline)
            })))
        })
    };
    std::thread::sleep(Duration::from_millis(2500));
    let lost = auto.lost();
    let _ = waiters.join();
    assert!(
        lost.is_none(),
        "the holder's lock was declared lost: {lost:?}"
    );
}

fn driver_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "redlock-driver")
        .count()
}

/// The driver ends once every handle is gone (guards dropped last included).
#[test]
fn the_driver_ends_with_the_last_handle() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let before = driver_threads();
    {
        let client = Client::builder()
            .servers(servers.iter().map(|s| s.addr().to_string()))
            .build_async()
            .unwrap();
        let (guard, auto) = futures::executor::block_on(async {
            let g = client
                .lock_guard("async-safety-end-a", Duration::from_secs(5))
                .await
                .unwrap();
            let a = client
                .lock_auto_extend("async-safety-end-b", Duration::from_secs(5))
                .await
                .unwrap();
            (g, a)
        });
        drop(client);
        drop(guard);
        drop(auto);
    }
    let t = Instant::now();
    while driver_threads() > before && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        driver_threads(),
        before,
        "the driver thread outlived every handle"
    );
    assert!(matches!(
        servers[0]
            .conn()
            .unwrap()
            .request(&[b"EXISTS", b"async-safety-end-a"])
            .unwrap(),
        redlock_tests::Value::Integer(0)
    ));
}

/// The same inversion for a plain release: the holder's unlock waits for a
/// slot until the waiters' deadline, while they retry for the lock it is
/// trying to release.
#[test]
fn waiters_starve_the_holders_unlock() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    let lock =
        futures::executor::block_on(client.lock("async-safety-unlock", Duration::from_secs(10)))
            .unwrap();
    let waiters = {
        let client = client.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(4);
            futures::executor::block_on(futures::future::join_all((0..64).map(|_| {
                client.lock_until("async-safety-unlock", Duration::from_secs(10), deadline)
            })))
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    futures::executor::block_on(client.unlock(&lock)).unwrap();
    // Had the unlock waited for a slot until the waiters' deadline, none of
    // them could have taken the lock after it.
    let got = waiters
        .join()
        .unwrap()
        .into_iter()
        .filter(Result::is_ok)
        .count();
    assert!(got >= 1, "no waiter took the lock: the unlock was starved");
}
