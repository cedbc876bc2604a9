//! Scripted tests of what the handshake tells the operations: a refused
//! server, and the restart times the restart guard judges votes by.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::handshake::Step;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::{Config, FailureKind, Operation, ServerId, ServerOutcome, Servers, SetupError};

/// A 30 s restart guard, no retries.
fn guarded() -> Config {
    Config {
        restart_guard: Some(dur(30_000)),
        ..no_retry()
    }
}

/// With a 30 s restart guard, at t=60 s: servers 1 and 0 vote for us (a
/// majority, if 1's vote counted), server 2 refuses. Returns the report of
/// the failure that must follow.
fn server_1_votes_under_a_guard(servers: &Servers) -> redlock_core::Report {
    let mut d = acquire_on(&guarded(), servers, 10_000, None, ms(60_000));
    d.sent(ms(60_000));
    d.reply(ms(60_001), 1, b"+OK\r\n").unwrap();
    d.reply(ms(60_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().is_none(), "server 1's vote does not count");
    d.reply(ms(60_002), 2, b"$-1\r\n").unwrap();
    d.outcome().unwrap().unwrap_err().report
}

#[test]
fn the_restart_guard_refuses_votes_from_a_recently_restarted_server() {
    let config = guarded();
    let mut servers = Servers::new(3).unwrap();
    // Server 1 started 10 s before t=60 s; the others long ago.
    servers.set_incarnation(ServerId(0), ms(0));
    servers.set_incarnation(ServerId(1), ms(50_000));
    assert_eq!(
        server_1_votes_under_a_guard(&servers).outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Restarted,
            ServerOutcome::Held
        ]
    );
    // An incarnation learnt while the acquisition runs (a reconnect) counts too.
    let mut fresh = Servers::new(3).unwrap();
    fresh.set_incarnation(ServerId(0), ms(0));
    let mut d = acquire_on(&config, &fresh, 10_000, None, ms(60_000));
    d.sent(ms(60_000));
    d.op.set_incarnation(ServerId(2), ms(59_000));
    d.reply(ms(60_001), 2, b"+OK\r\n").unwrap();
    d.reply(ms(60_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().is_none(), "server 2's vote does not count");
    d.reply(ms(60_002), 1, b"$-1\r\n").unwrap();
    assert_eq!(
        d.outcome().unwrap().unwrap_err().report.outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Held,
            ServerOutcome::Restarted
        ]
    );
    // An incarnation old enough, learnt on a reconnect: the vote counts
    // (unknown before, it would not have).
    let mut d = acquire_on(&config, &fresh, 10_000, None, ms(60_000));
    d.sent(ms(60_000));
    d.op.set_incarnation(ServerId(2), ms(1_000));
    d.reply(ms(60_001), 2, b"+OK\r\n").unwrap();
    d.reply(ms(60_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().unwrap().is_ok());
    // Once the guard has passed, it counts again.
    let mut d = acquire_on(&config, &servers, 10_000, None, ms(80_000));
    d.sent(ms(80_000));
    d.reply(ms(80_001), 1, b"+OK\r\n").unwrap();
    d.reply(ms(80_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().unwrap().is_ok());
}

#[test]
fn the_restart_guard_refuses_votes_whose_restart_time_is_unknown() {
    // Server 1's restart time is not known (INFO denied, or no uptime).
    let mut servers = Servers::new(3).unwrap();
    servers.set_incarnation(ServerId(0), ms(0));
    servers.set_incarnation(ServerId(2), ms(0));
    assert_eq!(
        server_1_votes_under_a_guard(&servers).outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::RestartUnknown,
            ServerOutcome::Held
        ]
    );
    // Without the guard nothing needs the restart time.
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 1, b"+OK\r\n").unwrap();
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().unwrap().is_ok());
}

#[test]
fn a_refused_handshake_counts_as_unavailable_and_says_why() {
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    d.sent(ms(0));
    let why = SetupError::Refused {
        step: Step::Select,
        kind: ErrorKind::Err,
    };
    d.op.handle_setup_error(ms(1), ServerId(0), why);
    d.op.handle_setup_error(ms(1), ServerId(1), why);
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(err.report.get(ServerId(0)), Some(ServerOutcome::Setup(why)));
    // A5: the release still goes to every server (the platform decides
    // whether it can deliver it).
    assert_eq!(d.sent(ms(1)).len(), 3);
}
