//! Scripted tests of an abandoned acquisition (`Acquire::abandon`): the
//! caller went away mid-flight (an async call dropped), so nothing it wins
//! may be left behind (A5) and no further attempt starts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::{FailureKind, Operation};

#[test]
fn votes_that_arrive_after_an_abandonment_are_released_not_won() {
    let config = retrying(3, 10);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    let sets = d.sent(ms(0));
    assert_eq!(sets.len(), 3);
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    d.op.abandon(ms(2));
    // A majority votes for it, after the caller went away.
    d.reply(ms(3), 1, b"+OK\r\n").unwrap();
    let releases = d.sent(ms(3));
    assert_eq!(releases.len(), 3, "A5 on every server");
    assert!(
        releases.iter().all(|r| r.name() != b"SET"),
        "no new attempt: {releases:?}"
    );
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Abandoned);
    assert_eq!(err.attempts, 1);
    assert!(
        !d.op.is_finished(),
        "the releases are awaited where the key may be"
    );
    // Server 2's vote arrives late (its SET ran): a straggler, then its release.
    d.reply(ms(4), 2, b"+OK\r\n").unwrap();
    assert!(!d.op.is_finished());
    for server in 0..3 {
        d.reply(ms(4), server, b":1\r\n").unwrap();
    }
    assert!(d.op.is_finished());
    assert!(d.sent(ms(500)).is_empty(), "never retried");
}

#[test]
fn an_abandonment_during_the_backoff_ends_after_the_releases() {
    let config = retrying(3, 10);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    for server in 0..3 {
        d.reply(ms(1), server, b"$-1\r\n").unwrap();
    }
    assert_eq!(d.sent(ms(1)).len(), 3, "A5 after the failed attempt");
    assert!(d.outcome().is_none(), "a retry is due");
    d.op.abandon(ms(2));
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Abandoned);
    // Held everywhere by another client: our key is nowhere, nothing to await.
    for server in 0..3 {
        d.reply(ms(3), server, b":0\r\n").unwrap();
    }
    assert!(d.op.is_finished());
    let later = ms(1_000);
    d.op.handle_timeout(later);
    assert!(d.sent(later).is_empty(), "no attempt after the abandonment");
}

#[test]
fn an_abandonment_after_the_outcome_changes_nothing() {
    let config = retrying(0, 0);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    for server in 0..3 {
        d.reply(ms(1), server, b"+OK\r\n").unwrap();
    }
    let lock = d.outcome().unwrap().unwrap();
    d.op.abandon(ms(2));
    assert!(
        d.sent(ms(2)).is_empty(),
        "the lock is the caller's to release"
    );
    assert!(d.op.is_finished());
    assert_eq!(lock.token(), d.op.token());
}

#[test]
fn a_hopeless_attempt_abandoned_is_not_retried() {
    let config = retrying(5, 10);
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    d.op.abandon(ms(1));
    for server in 0..2 {
        d.reply(ms(2), server, b"$-1\r\n").unwrap();
    }
    // Decided (a conflict) with no retry: the caller is gone.
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Conflict);
    assert_eq!(err.attempts, 1);
}
