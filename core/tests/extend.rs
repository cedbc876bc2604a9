//! Scripted tests of extension (R4, A8): only within the current validity,
//! never re-creating a key, capped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::handshake::Step;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::{
    ArgumentError, Config, Extend, FailureKind, Operation, ServerId, ServerOutcome, SetupError,
};

#[test]
fn extend_recomputes_validity_from_the_start_of_its_round() {
    let (lock, servers) = held_lock(3, 1_000);
    assert_eq!(lock.valid_until(), ms(988));
    assert_eq!(lock.remaining(ms(900)), dur(88));
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 2_000, ms(500));
    let sent = d.sent(ms(500));
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|s| s.script() == "extend"
        && s.args[4] == lock.token().as_bytes()
        && s.args[5] == b"2000"));
    d.reply(ms(503), 0, b":1\r\n").unwrap();
    assert!(!d.op.is_finished());
    d.reply(ms(510), 2, b":1\r\n").unwrap();
    assert!(d.op.is_finished());
    let extended = d.outcome().unwrap().unwrap();
    // 2000 - 10 elapsed - (20 + 2) drift, from the round's start.
    assert_eq!(extended.validity(), dur(2_000 - 10 - 22));
    assert_eq!(extended.valid_until(), ms(510 + 1_968));
    assert_eq!(extended.extensions(), 1);
    assert_eq!(extended.token(), lock.token());
    // The lock now says what this round gave: the new ttl, the round's
    // start, and what each server answered in it.
    assert_eq!(extended.ttl(), dur(2_000));
    assert_eq!(extended.started(), ms(500));
    assert_eq!(extended.remaining(ms(2_000)), dur(478));
    assert_eq!(
        extended.report().outcomes(),
        &[ServerOutcome::Ok, ServerOutcome::Pending, ServerOutcome::Ok]
    );
    assert!(d.sent(ms(510)).is_empty(), "nothing more to send");
}

#[test]
fn extend_fails_when_the_majority_comes_after_the_current_validity() {
    let (lock, servers) = held_lock(3, 1_000);
    let config = Config {
        request_timeout: Some(dur(1_000)),
        ..Config::DEFAULT
    };
    let mut d = extend(&config, &servers, &lock, 10_000, ms(980));
    d.sent(ms(980));
    d.reply(ms(985), 0, b":1\r\n").unwrap();
    d.reply(ms(988), 1, b":1\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Expired);
}

#[test]
fn extend_reports_a_lost_lock_and_never_recreates_keys() {
    let (lock, servers) = held_lock(3, 1_000);
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 1_000, ms(100));
    d.sent(ms(100));
    d.reply(ms(101), 0, b":0\r\n").unwrap();
    d.reply(ms(101), 1, b":0\r\n").unwrap();
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Lost);
    // Only the token-checking script is ever sent: no SET.
    assert!(d.sent(ms(101)).is_empty());
}

#[test]
fn extensions_are_capped_and_an_expired_lock_cannot_be_extended() {
    let (lock, servers) = held_lock(1, 10_000);
    let config = Config {
        max_extensions: Some(2),
        ..Config::DEFAULT
    };
    let mut lock = lock;
    for i in 0..2 {
        let mut d = extend(&config, &servers, &lock, 10_000, ms(i));
        d.sent(ms(i));
        d.reply(ms(i), 0, b":1\r\n").unwrap();
        lock = d.outcome().unwrap().unwrap();
    }
    assert_eq!(lock.extensions(), 2);
    assert_eq!(
        Extend::new(&config, &servers, b"res", &lock, dur(10_000), ms(5)).err(),
        Some(ArgumentError::ExtensionLimit)
    );
    assert_eq!(
        Extend::new(
            &Config::DEFAULT,
            &servers,
            b"res",
            &lock,
            dur(10_000),
            lock.valid_until()
        )
        .err(),
        Some(ArgumentError::Expired)
    );
}

#[test]
fn an_extension_that_outlasts_the_current_validity_is_expired_at_its_end() {
    let (lock, servers) = held_lock(3, 1_000);
    let config = Config {
        request_timeout: Some(dur(60_000)),
        ..Config::DEFAULT
    };
    let mut d = extend(&config, &servers, &lock, 1_000, ms(900));
    d.sent(ms(900));
    d.reply(ms(901), 0, b":1\r\n").unwrap();
    assert_eq!(d.op.poll_timeout(), Some(lock.valid_until()));
    d.op.handle_timeout(lock.valid_until());
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Expired);
}

#[test]
fn extend_is_lost_only_when_too_many_say_not_held_otherwise_unavailable() {
    // One "not ours" of three and one server down: a majority is out of
    // reach, but the key may still be ours where the server is down.
    let (lock, servers) = held_lock(3, 10_000);
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 10_000, ms(10));
    d.sent(ms(10));
    d.reply(ms(11), 0, b":0\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.op.handle_connection_error(ms(12), ServerId(1));
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(
        err.report.outcomes(),
        &[
            ServerOutcome::NotHeld,
            ServerOutcome::ConnectionError,
            ServerOutcome::Pending
        ]
    );
    assert_eq!(
        err.to_string(),
        "lock not extended: too few servers answered"
    );
    assert!(d.op.is_finished());

    // Two servers refused by their handshake: unavailable, and why.
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 10_000, ms(10));
    d.sent(ms(10));
    let why = SetupError::Refused {
        step: Step::Auth,
        kind: ErrorKind::WrongPass,
    };
    d.op.handle_setup_error(ms(11), ServerId(0), why);
    assert!(d.outcome().is_none());
    d.op.handle_setup_error(ms(11), ServerId(2), why);
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(err.report.get(ServerId(2)), Some(ServerOutcome::Setup(why)));
}

#[test]
fn an_extend_whose_servers_time_out_within_the_validity_is_unavailable() {
    // The request timeout (100 ms) ends long before the lock's validity:
    // servers that did not answer failed, and the lock is not expired.
    let (lock, servers) = held_lock(3, 10_000);
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 10_000, ms(10));
    d.sent(ms(10));
    d.reply(ms(11), 0, b":1\r\n").unwrap();
    assert_eq!(d.op.poll_timeout(), Some(ms(110)));
    d.op.handle_timeout(ms(50));
    assert!(d.outcome().is_none(), "nothing is due before the deadline");
    d.op.handle_timeout(ms(110));
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
}
