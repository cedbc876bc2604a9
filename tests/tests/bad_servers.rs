//! Hostile and broken servers next to real ones: each misbehaviour gives a
//! typed per-server outcome within the deadline, with no panic and bounded
//! memory, and the real servers keep the lock working.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use core::sync::atomic::Ordering;
use core::time::Duration;
use std::thread;
use std::time::Instant;

use redlock_std::{Client, ServerOutcome};
use redlock_tests::RedisServer;
use redlock_tests::fake::{CASES, Fake, unsolicited};

/// The ttl of the locks here, and a bound far below it for "fast": a bad
/// server costs a request timeout (100 ms), never the ttl. The bound leaves
/// room for a loaded 2-core machine.
const TTL: Duration = Duration::from_secs(30);
const FAST: Duration = Duration::from_secs(3);

#[test]
fn every_bad_server_fails_alone_and_fast() {
    let real: Vec<RedisServer> = (0..4).map(|_| RedisServer::start().unwrap()).collect();
    for (name, behave) in CASES {
        let fake = Fake::start(behave);
        let mut urls: Vec<String> = real.iter().map(|s| s.addr().to_string()).collect();
        urls.insert(2, fake.addr.clone());
        let c = Client::builder()
            .servers(&urls)
            .request_timeout(Duration::from_millis(100))
            .retry(0, Duration::ZERO)
            .build()
            .unwrap();
        for round in 0..3 {
            let started = Instant::now();
            let lock = c
                .lock(b"res", TTL)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let took = started.elapsed();
            assert!(took < FAST, "{name} round {round}: {took:?}");
            let outcome = lock.report().get(redlock_std::ServerId(2)).unwrap();
            assert!(
                matches!(
                    outcome,
                    ServerOutcome::ConnectionError
                        | ServerOutcome::TimedOut
                        | ServerOutcome::Pending
                        // A handshake answered wrongly: not used at all.
                        | ServerOutcome::Setup(_)
                ),
                "{name}: {outcome:?}"
            );
            assert_eq!(lock.report().count(ServerOutcome::Ok), 3, "{name}");
            c.unlock(&lock).unwrap();
        }
        // With bad servers in the majority's way the lock fails, fast and typed.
        let twin = Fake::start(behave);
        let urls = [
            fake.addr.clone(),
            real[0].addr().to_string(),
            twin.addr.clone(),
        ];
        let c = Client::builder()
            .servers(&urls)
            .request_timeout(Duration::from_millis(100))
            .retry(0, Duration::ZERO)
            .build()
            .unwrap();
        let started = Instant::now();
        let err = c.lock(b"res2", TTL).unwrap_err();
        assert!(started.elapsed() < FAST, "{name}");
        assert!(
            matches!(err, redlock_std::Error::Unavailable(_)),
            "{name}: {err}"
        );
    }
}

#[test]
fn an_unsolicited_reply_closes_the_connection() {
    // The fake answers +OK to each command (a vote a client cannot tell from
    // a real one), then sends one reply more: the client must drop that
    // connection and open a new one for the next call.
    let real: Vec<RedisServer> = (0..2).map(|_| RedisServer::start().unwrap()).collect();
    let fake = Fake::start(unsolicited);
    let urls = [
        real[0].addr().to_string(),
        fake.addr.clone(),
        real[1].addr().to_string(),
    ];
    let c = Client::builder()
        .servers(&urls)
        .request_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    // The surplus reply is seen when the client next reads that socket,
    // which may be a call later (an operation decided by the two real
    // servers does not wait for the fake): within a few rounds the client
    // must have dropped the connection and reconnected, twice, with every
    // lock still working.
    let mut rounds = 0;
    while fake.accepted.load(Ordering::Relaxed) < 3 {
        rounds += 1;
        assert!(rounds <= 10, "no reconnect after {rounds} rounds");
        let lock = c.lock(b"res", Duration::from_secs(5)).unwrap();
        c.unlock(&lock).unwrap();
        thread::sleep(Duration::from_millis(30));
    }
}
