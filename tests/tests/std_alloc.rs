//! Zero heap allocations per lock + unlock cycle once connected, counted by
//! a global allocator (the harness's `alloc_count`; this test binary has
//! only this test, so nothing else allocates meanwhile).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;

use redlock_std::Client;
use redlock_tests::RedisServer;
use redlock_tests::alloc_count::{self, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn lock_and_unlock_allocate_nothing_once_connected() {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(10);
    // Warm up: connections, handshakes, buffers at their working size.
    for _ in 0..50 {
        let lock = client.lock(b"resource:orders:42", ttl).unwrap();
        client.unlock(&lock).unwrap();
    }
    alloc_count::start();
    for _ in 0..1_000 {
        let lock = client.lock(b"resource:orders:42", ttl).unwrap();
        client.unlock(&lock).unwrap();
    }
    alloc_count::stop();
    assert_eq!(
        alloc_count::count(),
        0,
        "allocations in 1000 lock+unlock cycles"
    );

    // Four threads sharing the client: their requests are pipelined, replies
    // handed between threads through per-operation mailboxes, and still
    // nothing is allocated per cycle. The threads and the counting window
    // meet through atomics, not a barrier: a thread that fails (its panic
    // is re-raised below) must not leave the others waiting forever.
    let ready = AtomicUsize::new(0);
    let go = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4u8)
            .map(|t| {
                let (client, ready, go) = (&client, &ready, &go);
                scope.spawn(move || {
                    let name = [b'r', b'0' + t];
                    for _ in 0..50 {
                        client.unlock(&client.lock(name, ttl).unwrap()).unwrap();
                    }
                    ready.fetch_add(1, Ordering::SeqCst);
                    while !go.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    for _ in 0..250 {
                        client.unlock(&client.lock(name, ttl).unwrap()).unwrap();
                    }
                })
            })
            .collect();
        let settled = |n| ready.load(Ordering::SeqCst) + n >= 4;
        while !settled(workers.iter().filter(|w| w.is_finished()).count()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        alloc_count::start();
        go.store(true, Ordering::SeqCst);
        while !workers.iter().all(|w| w.is_finished()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        alloc_count::stop();
        for w in workers {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    assert_eq!(
        alloc_count::count(),
        0,
        "allocations in 4 x 250 lock+unlock cycles from 4 threads"
    );
}
