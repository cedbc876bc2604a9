//! Safety and liveness of the async API under faults and crowds, found by
//! a review (each failed before its fix): a watched lock whose extension
//! fails at once is still declared lost in time (no two holders), and a
//! crowd of contenders retrying in every slot does not starve the holder's
//! extension or unlock. Also: the driver thread ends with the last handle.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::future::Future;
use core::time::Duration;
use std::time::Instant;

use redlock_std::Client;
use redlock_tests::RedisServer;

/// Three servers, and an async client over them.
fn three_servers() -> (Vec<RedisServer>, redlock_std::AsyncClient) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    (servers, client)
}

/// A watched lock of `resource` (ttl 1 s), once extended at least once.
fn watched_and_extended(
    client: &redlock_std::AsyncClient,
    resource: &str,
) -> redlock_std::AsyncAutoLock {
    let ttl = Duration::from_millis(1000);
    let auto = futures::executor::block_on(client.lock_auto_extend(resource, ttl)).unwrap();
    let first = auto.lock().valid_until();
    let t0 = Instant::now();
    while auto.lock().valid_until() == first {
        assert!(t0.elapsed() < Duration::from_secs(5), "never extended");
        std::thread::sleep(Duration::from_millis(5));
    }
    auto
}

/// F2: a watched lock whose majority goes away must be declared lost
/// before its validity ends. When an extension fails *inside* `submit`
/// (servers in their reconnect backoff are told down synchronously), the
/// driver parks the watch in `Phase::Extending` with a done ticket, has no
/// timer for it, and sleeps on its Kick forever: never declared lost.
#[test]
fn watched_lock_is_declared_lost_when_a_majority_dies() {
    let (mut servers, client) = three_servers();
    // One extension succeeded first (the steady state).
    let auto = watched_and_extended(&client, "async-safety-f2");
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
    let (mut servers, client) = three_servers();
    let other = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap();
    let auto = watched_and_extended(&client, "async-safety-s1");
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
    let (_servers, client) = three_servers();
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
    // The guard's release ran: the key is gone from every server well
    // within its 5 s ttl. Awaited, not asked once: `driver_threads` counts
    // the drivers of every test of this binary (they run in parallel), so
    // the count may come back to `before` when another test's driver ends
    // while this one's still runs the release (which ends once every server
    // answered).
    let t = Instant::now();
    for server in &servers {
        let mut conn = server.conn().unwrap();
        loop {
            let exists = conn.request(&[b"EXISTS", b"async-safety-end-a"]).unwrap();
            if matches!(exists, redlock_tests::Value::Integer(0)) {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "the guard's key is still on {} after 1 s: not released",
                server.addr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The same inversion for a plain release: the holder's unlock waits for a
/// slot until the waiters' deadline, while they retry for the lock it is
/// trying to release.
#[test]
fn waiters_starve_the_holders_unlock() {
    let (_servers, client) = three_servers();
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

/// CPU ticks (utime + stime, 1/100 s) of the thread named `redlock-driver`.
fn driver_ticks() -> u64 {
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = e.unwrap().path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if comm.trim() == "redlock-driver" {
            let stat = std::fs::read_to_string(p.join("stat")).unwrap();
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            // fields 14 and 15 of stat; `rest` starts at field 3
            return f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        }
    }
    panic!("no driver thread")
}

/// The driver does not spin while its watched lock's extension waits for
/// a slot. (Failed before its fix.) Every slot taken by urgent operations (64 unlocks waiting for a
/// frozen server) when the watched lock's extension is due: `tend` leaves
/// `Phase::Wait(at)` with `at <= now` and sets `needs_slot`; `run` then
/// takes `next = at` (in the past), the SLOT_RETRY bound never applies, and
/// `drive(Some(past))` returns at once: a busy loop until a slot frees.
#[test]
fn the_driver_sleeps_while_an_extension_waits_for_a_slot() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .request_timeout(Duration::from_millis(1500))
        .build_async()
        .unwrap();
    let t0 = Instant::now();
    // ttl 6 s, rt 1.5 s: extend_at ~ +1.44 s, give_up_at ~ +2.94 s.
    let auto = futures::executor::block_on(
        client.lock_auto_extend("async-safety-slot-spin", Duration::from_secs(6)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(t0.elapsed()));
    servers[2].signal("STOP").unwrap();
    // 64 unlocks (urgent): every slot for ~1.5 s (until ~+2.5 s).
    let crowd = {
        let client = client.clone();
        std::thread::spawn(move || {
            futures::executor::block_on(futures::future::join_all(
                (0..64).map(|i| client.unlock_token(format!("async-safety-none-{i}"), "x")),
            ))
        })
    };
    std::thread::sleep(Duration::from_millis(1600).saturating_sub(t0.elapsed()));
    let before = driver_ticks();
    std::thread::sleep(Duration::from_millis(700));
    let used = driver_ticks() - before;
    let _ = crowd.join();
    servers[2].signal("CONT").unwrap();
    drop(auto);
    // 70 ticks of wall time: a driver that sleeps until a slot frees (or
    // 10 ms at a time) uses about none of it.
    assert!(
        used < 10,
        "the driver used {used} of 70 ticks while waiting for a slot"
    );
}

/// The driver does not spin while an extension runs past the lock's
/// give-up time. (Failed before its fix.) A watched lock whose majority is
/// frozen: each extension times out
/// after rt, the next starts rt later. With validity/3 between 4 rt and
/// 5 rt, the second attempt is still in flight at give_up_at; `tend` says
/// Pending and `next = give_up_at` (past): a busy loop until it ends.
#[test]
fn the_driver_sleeps_while_an_extension_runs_past_give_up() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .request_timeout(Duration::from_millis(600))
        .build_async()
        .unwrap();
    // validity ~8.1 s: extend_at = vu - 2.7 s, give_up_at = vu - 1.2 s;
    // attempts [vu-2.7, vu-2.1], [vu-1.5, vu-0.9].
    let auto = futures::executor::block_on(
        client.lock_auto_extend("async-safety-giveup-spin", Duration::from_millis(8200)),
    )
    .unwrap();
    let vu = auto.lock().valid_until();
    servers[0].signal("STOP").unwrap();
    servers[1].signal("STOP").unwrap();
    std::thread::sleep(
        (vu - Duration::from_millis(1250)).saturating_duration_since(Instant::now()),
    );
    let before = driver_ticks();
    let lost_before = auto.is_lost();
    std::thread::sleep((vu - Duration::from_millis(850)).saturating_duration_since(Instant::now()));
    let used = driver_ticks() - before;
    servers[0].signal("CONT").unwrap();
    servers[1].signal("CONT").unwrap();
    assert!(!lost_before);
    assert!(
        used < 10,
        "the driver used {used} of 40 ticks past give_up_at"
    );
}

/// A task's waker that panics (user code: an executor's waker) is woken on
/// the driver thread: that turn of the driver fails, and the next goes on
/// with the watched locks it holds (before the fix, they were dropped: the
/// key expired, another client took the lock, and `is_lost()` still said
/// false: two holders).
#[test]
fn a_panicking_waker_does_not_drop_watched_locks() {
    extern crate alloc;
    use alloc::sync::Arc;
    use alloc::task::Wake;
    use core::task::{Context, Waker};
    struct Boom;
    impl Wake for Boom {
        fn wake(self: Arc<Self>) {
            panic!("an executor's waker panics");
        }
    }
    let (servers, client) = three_servers();
    let other = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap();
    let auto = futures::executor::block_on(
        client.lock_auto_extend("async-safety-panic", Duration::from_millis(1000)),
    )
    .unwrap();
    // One poll with the panicking waker: submitted; the driver leads it and
    // wakes that waker when it is done.
    let waker = Waker::from(Arc::new(Boom));
    let mut fut = Box::pin(client.inspect("async-safety-other"));
    let _ = fut.as_mut().poll(&mut Context::from_waker(&waker));
    std::thread::sleep(Duration::from_millis(2500));
    let theirs = other.try_lock("async-safety-panic", Duration::from_secs(10));
    assert!(
        theirs.is_err() || auto.is_lost(),
        "two holders: another client holds the lock while the watched lock says it holds it"
    );
    drop(fut);
}
