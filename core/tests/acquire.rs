//! Scripted tests of acquisition (R1, A1-A6): the votes, the quorum, the
//! validity, and how a failed attempt is reported and released.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::{
    Acquire, ArgumentError, Config, Drift, Duration, FailureKind, Instant, Operation, ServerId,
    ServerOutcome, Servers, Unsolicited,
};

#[test]
fn acquire_sends_set_nx_px_to_every_server_then_succeeds_on_a_majority() {
    let mut d = acquire(&no_retry(), 5, 10_000, ms(100));
    let sent = d.sent(ms(100));
    assert_eq!(sent.len(), 5);
    let token = d.op.token().as_bytes().to_vec();
    for (i, s) in sent.iter().enumerate() {
        assert_eq!(s.server, i);
        assert_eq!(
            s.args,
            vec![
                b"SET".to_vec(),
                b"res".to_vec(),
                token.clone(),
                b"NX".to_vec(),
                b"PX".to_vec(),
                b"10000".to_vec()
            ]
        );
    }
    // A2: the request timeout is 1% of the ttl clamped to 5-500 ms: 100 ms.
    assert_eq!(d.op.poll_timeout(), Some(ms(200)));
    d.reply(ms(101), 0, b"+OK\r\n").unwrap();
    d.reply(ms(102), 3, b"+OK\r\n").unwrap();
    assert!(
        d.outcome().is_none(),
        "two votes of five are not a majority"
    );
    d.reply(ms(103), 4, b"+OK\r\n").unwrap();
    // Decided at once, without waiting for servers 1 and 2.
    let lock = d.outcome().unwrap().unwrap();
    // A4: validity = ttl - elapsed - drift = 10000 - 3 - (100 + 2) ms.
    assert_eq!(lock.validity(), dur(9_895));
    assert_eq!(lock.valid_until(), ms(103 + 9_895));
    assert_eq!(lock.token().as_bytes(), &token[..]);
    assert_eq!(lock.fence(), None);
    assert_eq!(
        lock.report().outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Pending,
            ServerOutcome::Pending,
            ServerOutcome::Ok,
            ServerOutcome::Ok
        ]
    );
    assert!(
        d.sent(ms(103)).is_empty(),
        "nothing to release after a success"
    );
    assert!(d.op.is_finished());
    assert_eq!(d.op.poll_timeout(), None);
    assert!(d.outcome().is_none(), "the outcome comes once");
}

#[test]
fn stragglers_after_a_success_are_ignored() {
    let mut d = acquire(&no_retry(), 3, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    d.reply(ms(1), 1, b"+OK\r\n").unwrap();
    assert!(d.outcome().unwrap().is_ok());
    d.reply(ms(2), 2, b"$-1\r\n").unwrap();
    // But a second reply from the same server answers nothing it asked.
    assert_eq!(d.reply(ms(2), 2, b"+OK\r\n"), Err(Unsolicited));
}

#[test]
fn conflict_is_decided_as_soon_as_a_majority_is_impossible_and_releases_everywhere() {
    let mut d = acquire(&no_retry(), 5, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    d.reply(ms(1), 1, b"$-1\r\n").unwrap();
    d.reply(ms(2), 2, b"$-1\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.reply(ms(3), 3, b"$-1\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Conflict);
    assert_eq!(err.attempts, 1);
    assert_eq!(err.report.count(ServerOutcome::Held), 3);
    assert_eq!(err.report.get(ServerId(4)), Some(ServerOutcome::Pending));
    assert_eq!(
        err.to_string(),
        "lock not acquired after 1 attempt(s): held by another client"
    );
    // A5: the release goes to all five, including those that said no.
    let sent = d.sent(ms(3));
    assert_eq!(
        sent.iter().map(|s| s.server).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    // As EVAL: a NOSCRIPT could not be retried once the next attempt starts.
    assert!(
        sent.iter()
            .all(|s| s.name() == b"EVAL" && s.script() == "release")
    );
    // The releases are awaited where our key may be (0 voted for us, 4's
    // SET is still in flight), so that one lost with a broken connection
    // is sent again; not where the key is another's.
    assert!(!d.op.is_finished());
    d.reply(ms(4), 4, b"+OK\r\n").unwrap(); // the late vote: a straggler
    d.reply(ms(4), 0, b":1\r\n").unwrap();
    assert!(!d.op.is_finished());
    d.reply(ms(4), 4, b":1\r\n").unwrap();
    assert!(d.op.is_finished());
}

#[test]
fn a_held_key_with_a_minority_down_is_a_conflict_and_with_a_majority_down_unavailable() {
    // Two of five down: the one "held" decides it (3 = quorum can no longer
    // say OK), and the lock being held is what stood in the way.
    let mut d = acquire(&no_retry(), 5, 10_000, ms(0));
    d.sent(ms(0));
    d.op.handle_connection_error(ms(1), ServerId(3));
    d.op.handle_connection_error(ms(1), ServerId(4));
    assert!(d.outcome().is_none());
    d.reply(ms(2), 0, b"$-1\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Conflict);
    // One "held", then the other four time out together: the failures
    // alone block a majority, so unavailable.
    let mut d = acquire(&no_retry(), 5, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"$-1\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.op.handle_timeout(ms(100));
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
}

#[test]
fn silent_servers_cost_one_request_timeout_and_fail_as_unavailable() {
    let mut d = acquire(&no_retry(), 3, 2_000, ms(0));
    d.sent(ms(0));
    // 1% of 2 s is 20 ms.
    assert_eq!(d.op.poll_timeout(), Some(ms(20)));
    d.reply(ms(5), 0, b"+OK\r\n").unwrap();
    d.op.handle_timeout(ms(19));
    assert!(d.outcome().is_none());
    d.op.handle_timeout(ms(20));
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(
        err.report.outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::TimedOut,
            ServerOutcome::TimedOut
        ]
    );
    assert_eq!(d.sent(ms(20)).len(), 3);
}

#[test]
fn request_timeouts_are_clamped_and_configurable() {
    for (ttl, expected) in [
        (100, 5),
        (1_000, 10),
        (3_000, 30),
        (30_000, 300),
        (60_000, 500),
        (600_000, 500),
    ] {
        let mut d = acquire(&no_retry(), 1, ttl, ms(0));
        d.sent(ms(0));
        assert_eq!(d.op.poll_timeout(), Some(ms(expected)), "ttl {ttl}");
    }
    let config = request_timeout(7);
    let mut d = acquire(&config, 1, 60_000, ms(0));
    d.sent(ms(0));
    assert_eq!(d.op.poll_timeout(), Some(ms(7)));
}

#[test]
fn a_majority_too_late_is_expired_and_released() {
    // ttl 1000, drift 12 ms: validity is gone once 988 ms have elapsed.
    let config = request_timeout(5_000);
    let mut d = acquire(&config, 3, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(100), 0, b"+OK\r\n").unwrap();
    d.reply(ms(988), 1, b"+OK\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Expired);
    assert_eq!(d.sent(ms(988)).len(), 3);

    // One millisecond earlier there is exactly 1 ms left.
    let mut d = acquire(&config, 3, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(100), 0, b"+OK\r\n").unwrap();
    d.reply(ms(987), 1, b"+OK\r\n").unwrap();
    assert_eq!(d.outcome().unwrap().unwrap().validity(), dur(1));
}

#[test]
fn ttl_edges_never_panic() {
    let servers = Servers::new(1).unwrap();
    let config = no_retry();
    // 0 ms (and anything under 1 ms) is refused.
    for micros in [0, 1, 999] {
        let r = Acquire::new(
            &config,
            &servers,
            b"r",
            Duration::from_micros(micros),
            None,
            &mut TestRng(0),
            ms(0),
        );
        assert_eq!(r.err(), Some(ArgumentError::Ttl));
    }
    // 1 ms is accepted, but the 2 ms drift leaves no validity.
    let mut d = acquire(&config, 1, 1, ms(0));
    assert_eq!(d.sent(ms(0))[0].args[5], b"1");
    d.reply(ms(0), 0, b"+OK\r\n").unwrap();
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Expired);
    // Fractions of a millisecond are cut: PX gets whole milliseconds, and
    // the validity is computed from what PX got.
    let mut d = Drive::new(
        Acquire::new(
            &config,
            &servers,
            b"r",
            Duration::from_micros(10_999_999),
            None,
            &mut TestRng(0),
            ms(0),
        )
        .unwrap(),
    );
    assert_eq!(d.sent(ms(0))[0].args[5], b"10999");
    d.reply(ms(0), 0, b"+OK\r\n").unwrap();
    // drift = 10999 ms / 100 (rounded up to the microsecond) + 2 ms.
    assert_eq!(
        d.outcome().unwrap().unwrap().validity(),
        Duration::from_micros(10_999_000 - 109_990 - 2_000)
    );
    // The largest ttl does not overflow anything.
    let mut d = Drive::new(
        Acquire::new(
            &config,
            &servers,
            b"r",
            Duration::MAX,
            None,
            &mut TestRng(0),
            Instant::from_micros(u64::MAX - 5),
        )
        .unwrap(),
    );
    d.sent(Instant::from_micros(u64::MAX - 5));
    d.reply(Instant::from_micros(u64::MAX), 0, b"+OK\r\n")
        .unwrap();
    assert!(d.outcome().unwrap().is_ok());
}

#[test]
fn drift_is_configurable() {
    let config = Config {
        drift: Drift {
            ratio_num: 5,
            ratio_den: 100,
            constant: dur(10),
        },
        ..no_retry()
    };
    let mut d = acquire(&config, 1, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(0), 0, b"+OK\r\n").unwrap();
    assert_eq!(
        d.outcome().unwrap().unwrap().validity(),
        dur(1_000 - 50 - 10)
    );
    let config = Config {
        drift: Drift {
            ratio_num: 0,
            ratio_den: 1,
            constant: Duration::ZERO,
        },
        ..no_retry()
    };
    let mut d = acquire(&config, 1, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(0), 0, b"+OK\r\n").unwrap();
    assert_eq!(d.outcome().unwrap().unwrap().validity(), dur(1_000));
}

#[test]
fn every_server_error_kind_is_reported() {
    let kinds: [(&[u8], ErrorKind); 16] = [
        (b"-ERR x\r\n", ErrorKind::Err),
        (b"-NOSCRIPT x\r\n", ErrorKind::NoScript),
        (b"-NOAUTH Authentication required.\r\n", ErrorKind::NoAuth),
        (b"-WRONGPASS x\r\n", ErrorKind::WrongPass),
        (b"-NOPERM x\r\n", ErrorKind::NoPerm),
        (b"-READONLY x\r\n", ErrorKind::ReadOnly),
        (b"-LOADING x\r\n", ErrorKind::Loading),
        (b"-BUSY x\r\n", ErrorKind::Busy),
        (b"-OOM x\r\n", ErrorKind::Oom),
        (b"-WRONGTYPE x\r\n", ErrorKind::WrongType),
        (b"-MASTERDOWN x\r\n", ErrorKind::MasterDown),
        (b"-CLUSTERDOWN x\r\n", ErrorKind::ClusterDown),
        (b"-MOVED 1 h:1\r\n", ErrorKind::Moved),
        (b"-ASK 1 h:1\r\n", ErrorKind::Ask),
        (b"-TRYAGAIN x\r\n", ErrorKind::TryAgain),
        (b"-WHATEVER x\r\n", ErrorKind::Other),
    ];
    for (bytes, kind) in kinds {
        let mut d = acquire(&no_retry(), 1, 1_000, ms(0));
        d.sent(ms(0));
        d.reply(ms(1), 0, bytes).unwrap();
        let err = d.outcome().unwrap().unwrap_err();
        assert_eq!(err.kind, FailureKind::Unavailable);
        assert_eq!(err.report.outcomes(), &[ServerOutcome::ServerError(kind)]);
    }
    // A reply of the wrong shape.
    let mut d = acquire(&no_retry(), 1, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b":1\r\n").unwrap();
    assert_eq!(
        d.outcome().unwrap().unwrap_err().report.outcomes(),
        &[ServerOutcome::UnexpectedReply]
    );
}

#[test]
fn connection_errors_count_as_failures_and_releases_still_go_out() {
    let mut d = acquire(&no_retry(), 3, 1_000, ms(0));
    d.sent(ms(0));
    d.op.handle_connection_error(ms(1), ServerId(0));
    d.op.handle_connection_error(ms(1), ServerId(1));
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(err.report.count(ServerOutcome::ConnectionError), 2);
    // The release round still targets them (the platform reconnects).
    assert_eq!(d.sent(ms(1)).len(), 3);
    // And a reply from the reconnected server 0 answers the release.
    d.reply(ms(2), 0, b":0\r\n").unwrap();
}

#[test]
fn waiting_stops_when_no_validity_can_be_left() {
    // A request timeout longer than the ttl: the attempt still ends when its
    // validity would be gone (ttl - drift), as expired.
    let config = request_timeout(60_000);
    let mut d = acquire(&config, 3, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    assert_eq!(d.op.poll_timeout(), Some(ms(988)));
    d.op.handle_timeout(ms(988));
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Expired);
    assert_eq!(d.sent(ms(988)).len(), 3, "released everywhere");
}

#[test]
fn tokens_are_40_lowercase_hex_and_rng_failure_is_an_error() {
    let mut rng = TestRng(0);
    let a = redlock_core::Token::generate(&mut rng).unwrap();
    let b = redlock_core::Token::generate(&mut rng).unwrap();
    assert_ne!(a, b);
    assert_eq!(a.as_bytes().len(), 40);
    assert!(
        a.as_str()
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    );
    assert_eq!(a.as_str(), "0102030405060708090a0b0c0d0e0f1011121314");
    let servers = Servers::new(1).unwrap();
    let r = Acquire::new(
        &Config::DEFAULT,
        &servers,
        b"r",
        dur(1_000),
        None,
        &mut BrokenRng,
        ms(0),
    );
    assert_eq!(r.err(), Some(ArgumentError::Rng));
}

#[test]
fn failures_and_bad_arguments_say_what_went_wrong() {
    for (kind, text) in [
        (FailureKind::Conflict, "held by another client"),
        (FailureKind::Unavailable, "too few servers answered"),
        (
            FailureKind::Expired,
            "a majority answered too late: no validity left",
        ),
        (
            FailureKind::Lost,
            "the lock is no longer ours on a majority",
        ),
    ] {
        assert_eq!(kind.to_string(), text);
    }
    assert!(
        FailureKind::FenceLost
            .to_string()
            .contains("redlock fence-repair RESOURCE --at-least N")
    );
    for (error, text) in [
        (ArgumentError::Ttl, "the ttl must be at least 1 ms"),
        (ArgumentError::Rng, "the random number generator failed"),
        (
            ArgumentError::ExtensionLimit,
            "the lock reached its extension limit",
        ),
        (ArgumentError::Expired, "the lock has expired"),
        (ArgumentError::Token, "the token is longer than 64 bytes"),
    ] {
        assert_eq!(error.to_string(), text);
    }
}

/// A1: an attempt's clock is the latest reading before its first request.
/// An acquisition made at t=0 whose requests could go out only at t=9 s
/// (the platform was busy) with a 10 s ttl is not expired on arrival: its
/// validity counts from t=9 s.
#[test]
fn an_attempts_clock_starts_with_its_first_request() {
    let config = retrying(0, 0);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    // Its deadline passes before anything was sent: not a failure.
    d.op.handle_timeout(ms(9_000));
    assert!(d.outcome().is_none(), "nothing was asked yet");
    let sets = d.sent(ms(9_000));
    assert_eq!(sets.len(), 3);
    for server in 0..3 {
        d.reply(ms(9_010), server, b"+OK\r\n").unwrap();
    }
    let lock = d.outcome().unwrap().unwrap();
    // 10 s - 10 ms elapsed since the first request - drift (102 ms).
    assert_eq!(
        lock.valid_until(),
        ms(9_000).saturating_add(dur(10_000 - 102))
    );
}

/// Once a request is out, later readings do not move the attempt's clock.
#[test]
fn an_attempts_clock_stays_once_a_request_is_out() {
    let config = retrying(0, 0);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    assert_eq!(d.sent(ms(5)).len(), 3);
    d.op.handle_timeout(ms(20));
    for server in 0..3 {
        d.reply(ms(30), server, b"+OK\r\n").unwrap();
    }
    let lock = d.outcome().unwrap().unwrap();
    assert_eq!(lock.valid_until(), ms(5).saturating_add(dur(10_000 - 102)));
}
