//! Scripted tests of retries (A5, A6): a failed attempt releases everywhere,
//! then waits longer than an attempt took plus jitter, a bounded number of
//! times.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::{Acquire, Config, Duration, FailureKind, Operation, Retry, ServerId, Servers};

#[test]
fn retries_wait_longer_than_an_attempt_and_are_bounded() {
    let config = retrying(2, 200);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    let token = d.op.token().as_bytes().to_vec();
    let mut now = ms(0);
    for attempt in 1..=3u32 {
        let sets = d.sent(now);
        assert_eq!(sets.len(), 3);
        assert!(
            sets.iter()
                .all(|s| s.name() == b"SET" && s.args[2] == token),
            "same token every attempt"
        );
        // The attempt takes 30 ms and fails.
        now = now.saturating_add(dur(30));
        for server in 0..3 {
            d.reply(now, server, b"$-1\r\n").unwrap();
        }
        let releases = d.sent(now);
        assert_eq!(releases.len(), 3, "A5 after attempt {attempt}");
        for server in 0..3 {
            d.reply(now, server, b":0\r\n").unwrap();
        }
        if attempt < 3 {
            assert!(d.outcome().is_none());
            let retry_at = d.op.poll_timeout().unwrap();
            // A6: wait = attempt time (30 ms) + jitter in 0..=200 ms.
            let wait = retry_at.saturating_duration_since(now);
            assert!(wait >= dur(30) && wait <= dur(230), "{wait:?}");
            d.op.handle_timeout(retry_at.saturating_sub(Duration::from_micros(1)));
            assert!(
                d.sent(now).is_empty(),
                "no new attempt before the wait is over"
            );
            now = retry_at;
            d.op.handle_timeout(now);
        }
    }
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.attempts, 3);
    assert_eq!(err.kind, FailureKind::Conflict);
}

#[test]
fn a_deadline_stops_retries() {
    let config = retrying(1_000, 10);
    let servers = Servers::new(1).unwrap();
    let mut d = acquire_on(&config, &servers, 1_000, Some(ms(100)), ms(0));
    let mut now = ms(0);
    let mut attempts = 0;
    loop {
        if !d.sent(now).iter().any(|s| s.name() == b"SET") {
            panic!("no attempt");
        }
        attempts += 1;
        now = now.saturating_add(dur(1));
        d.reply(now, 0, b"$-1\r\n").unwrap();
        assert_eq!(d.sent(now).len(), 1, "the release");
        d.reply(now, 0, b":0\r\n").unwrap();
        if let Some(out) = d.outcome() {
            assert_eq!(out.unwrap_err().attempts, attempts);
            break;
        }
        now = d.op.poll_timeout().unwrap();
        assert!(now <= ms(100), "a retry starts after the deadline");
        d.op.handle_timeout(now);
    }
    assert!(attempts > 3 && attempts < 100, "{attempts}");
}

#[test]
fn a_late_vote_from_an_earlier_attempt_is_not_counted() {
    let config = Config {
        retry: Retry {
            retries: 1,
            jitter: Duration::ZERO,
        },
        request_timeout: Some(dur(10)),
        ..Config::DEFAULT
    };
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    // Attempt 1: servers 0 and 1 time out, 2 votes.
    d.reply(ms(1), 2, b"+OK\r\n").unwrap();
    d.op.handle_timeout(ms(10));
    assert_eq!(d.sent(ms(10)).len(), 3, "release round");
    d.op.handle_timeout(ms(20));
    assert_eq!(d.sent(ms(20)).len(), 3, "attempt 2");
    // Server 0 finally answers attempt 1's SET, then its release, then attempt 2's SET.
    d.reply(ms(21), 0, b"+OK\r\n").unwrap();
    d.reply(ms(21), 0, b":1\r\n").unwrap();
    // Server 2 answers its release and attempt 2.
    d.reply(ms(21), 2, b":1\r\n").unwrap();
    d.reply(ms(22), 2, b"+OK\r\n").unwrap();
    assert!(
        d.outcome().is_none(),
        "only one vote counts for attempt 2 so far"
    );
    d.reply(ms(23), 0, b"+OK\r\n").unwrap();
    let lock = d.outcome().unwrap().unwrap();
    assert_eq!(lock.started(), ms(20));
}

#[test]
fn a_retry_waits_at_least_a_request_timeout_even_after_instant_failures() {
    let config = retrying(1, 0);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    // Every connection fails at once (A6: still wait longer than an attempt).
    for s in 0..3 {
        d.op.handle_connection_error(ms(0), ServerId(s));
    }
    d.sent(ms(0));
    assert_eq!(
        d.op.poll_timeout(),
        Some(ms(100)),
        "one request timeout (1% of 10 s)"
    );
}

#[test]
fn releases_go_out_to_a_server_that_stopped_answering() {
    // Server 2 never answers; attempts pile up requests on it. Every SET sent
    // to it must be followed by a release (A5), even past the usual cap, with
    // fencing too (fenced SET, fence write, release per attempt).
    for fencing in [false, cfg!(feature = "fencing")] {
        let config = Config {
            fencing,
            retry: Retry {
                retries: 8,
                jitter: Duration::ZERO,
            },
            request_timeout: Some(dur(10)),
            ..Config::DEFAULT
        };
        let mut d = acquire(&config, 3, 10_000, ms(0));
        let mut now = ms(0);
        let mut to_server_2: Vec<String> = Vec::new();
        loop {
            let sent = d.sent(now);
            let any = !sent.is_empty();
            for s in sent {
                let kind = if s.name() == b"SET" {
                    "set"
                } else {
                    s.script()
                };
                if s.server == 2 {
                    to_server_2.push(kind.to_string());
                    continue;
                }
                let reply: &[u8] = match kind {
                    "set" => b"$-1\r\n",
                    // Servers 0 and 1 vote (so a fence write follows) ...
                    "fenced" => b"*2\r\n:1\r\n$1\r\n1\r\n",
                    // ... but then lose the key: the fence is not confirmed.
                    _ => b":0\r\n",
                };
                d.reply(now, s.server as u8, reply).unwrap();
            }
            if any {
                continue;
            }
            if d.op.is_finished() {
                break;
            }
            now = d.op.poll_timeout().unwrap();
            d.op.handle_timeout(now);
        }
        assert!(
            to_server_2.iter().any(|k| k == "set" || k == "fenced"),
            "{to_server_2:?}"
        );
        let last_set = to_server_2
            .iter()
            .rposition(|k| k == "set" || k == "fenced")
            .unwrap();
        assert!(
            to_server_2[last_set..].iter().any(|k| k == "release"),
            "fencing={fencing}: a SET without a release after it: {to_server_2:?}"
        );
    }
}

#[test]
fn the_releases_of_a_failed_attempt_go_out_however_late_the_platform_sends() {
    let config = retrying(1, 0);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    for s in 0..3 {
        d.reply(ms(1), s, b"$-1\r\n").unwrap();
    }
    // A5 releases are due; the platform checks the deadlines long after,
    // before sending them: they are neither dropped nor skipped by the
    // next attempt.
    d.op.handle_timeout(ms(5_000));
    let releases = d.sent(ms(5_000));
    assert_eq!(releases.len(), 3);
    assert!(releases.iter().all(|s| s.script() == "release"));
    for s in 0..3 {
        d.reply(ms(5_001), s, b":0\r\n").unwrap();
    }
    d.op.handle_timeout(ms(5_001));
    let retry = d.sent(ms(5_001));
    assert_eq!(
        retry.len(),
        3,
        "the retry starts once the releases went out"
    );
    assert!(retry.iter().all(|s| s.name() == b"SET"));
    // The last attempt fails too: its releases go out before it finishes.
    for s in 0..3 {
        d.reply(ms(5_002), s, b"$-1\r\n").unwrap();
    }
    assert!(d.outcome().unwrap().is_err());
    assert!(!d.op.is_finished(), "not finished with releases unsent");
    d.op.handle_timeout(ms(60_000));
    assert_eq!(d.sent(ms(60_000)).len(), 3);
    // Server 2's SET was in flight when the attempt was decided: its
    // release is awaited (until its timeout at the latest).
    assert!(!d.op.is_finished());
    assert_eq!(d.op.poll_timeout(), Some(ms(60_100)));
    d.op.handle_timeout(ms(60_100));
    assert!(d.op.is_finished());
}

/// The waits before the retries of an acquisition whose RNG is
/// `TestRng(seed)`: one server, ttl 1 s (request timeout 10 ms), each
/// attempt refused after 30 ms, up to 200 ms of jitter.
fn retry_waits(seed: u8, retries: u32) -> Vec<Duration> {
    let servers = Servers::new(1).unwrap();
    let op = Acquire::new(
        &retrying(retries, 200),
        &servers,
        &b"res"[..],
        dur(1_000),
        None,
        &mut TestRng(seed),
        ms(0),
    )
    .unwrap();
    let mut d = Drive::new(op);
    let mut now = ms(0);
    let mut waits = Vec::new();
    for _ in 0..retries {
        d.sent(now);
        now = now.saturating_add(dur(30));
        d.reply(now, 0, b"$-1\r\n").unwrap();
        answer_all(&mut d, now, b":0\r\n");
        let retry_at = d.op.poll_timeout().unwrap();
        waits.push(retry_at.saturating_duration_since(now));
        now = retry_at;
        d.op.handle_timeout(now);
    }
    waits
}

#[test]
fn retries_are_spread_over_the_jitter() {
    // A6: clients that failed together do not retry together. Each wait is
    // the attempt's 30 ms plus a jitter in 0..=200 ms drawn from the
    // operation's RNG; over 64 RNGs the jitters differ and cover the range.
    let jitters: Vec<u64> = (0..64u8)
        .map(|seed| {
            let wait = retry_waits(seed.wrapping_mul(37), 1)[0];
            assert!(wait >= dur(30) && wait <= dur(230), "{wait:?}");
            wait.as_micros() - 30_000
        })
        .collect();
    let mut distinct = jitters.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 60, "{jitters:?}");
    assert!(distinct[0] < 40_000 && distinct[distinct.len() - 1] > 160_000);
    // The retries of one acquisition are spread too.
    let waits = retry_waits(7, 4);
    assert!(waits.windows(2).all(|w| w[0] != w[1]), "{waits:?}");
}

#[test]
fn the_jitter_is_splitmix64_of_a_seed_from_the_rng() {
    // The seed is the 8 bytes drawn after the token's 20; the same RNG gives
    // the same waits (a simulation replays them from its seed).
    fn splitmix64(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    for seed in [0u8, 1, 100, 230] {
        let mut bytes = [0u8; 8];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = seed.wrapping_add(21).wrapping_add(i as u8);
        }
        let mut state = u64::from_le_bytes(bytes);
        let expected: Vec<Duration> = (0..3)
            .map(|_| {
                dur(30).saturating_add(Duration::from_micros(splitmix64(&mut state) % 200_001))
            })
            .collect();
        assert_eq!(retry_waits(seed, 3), expected, "seed {seed}");
    }
}
