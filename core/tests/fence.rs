//! Scripted tests of fencing (F1): the fenced acquire, the repair rule for
//! lost counters, and the operator's fence repair.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::redlock_resp::ErrorKind;
#[cfg(feature = "fencing")]
use redlock_core::{Config, Duration, Retry, ServerId};
use redlock_core::{FailureKind, FenceRepair, Operation, ServerOutcome, Servers};

#[cfg(feature = "fencing")]
#[test]
fn fenced_acquire_takes_the_max_counter_plus_one_and_needs_a_majority_to_confirm() {
    let config = fenced();
    let mut d = acquire(&config, 5, 10_000, ms(0));
    let sent = d.sent(ms(0));
    assert!(sent.iter().all(|s| s.script() == "fenced"));
    // KEYS: the resource and its counter key; ARGV: token and ttl.
    assert_eq!(
        sent[0].args[2..6],
        [
            b"2".to_vec(),
            b"res".to_vec(),
            b"res:fence".to_vec(),
            d.op.token().as_bytes().to_vec()
        ]
    );
    d.reply(ms(1), 0, b"*2\r\n:1\r\n$1\r\n3\r\n").unwrap();
    // Server 1 refuses (held) but its counter is read too.
    d.reply(ms(1), 1, b"*2\r\n:0\r\n$1\r\n9\r\n").unwrap();
    d.reply(ms(2), 2, b"*2\r\n:1\r\n$1\r\n7\r\n").unwrap();
    assert!(d.sent(ms(2)).is_empty(), "two votes of five");
    d.reply(ms(2), 4, b"*2\r\n:1\r\n$1\r\n5\r\n").unwrap();
    assert!(d.outcome().is_none(), "the fence is not confirmed yet");
    let writes = d.sent(ms(2));
    assert_eq!(writes.len(), 5, "the fence goes to every server");
    // t = max(3, 9, 7, 5) + 1, every counter read counting.
    assert!(
        writes
            .iter()
            .all(|s| s.script() == "fence" && s.args[6] == b"10")
    );
    // Server 3's late acquire reply is a straggler of the previous round.
    d.reply(ms(3), 3, b"*2\r\n:0\r\n$-1\r\n").unwrap();
    d.reply(ms(4), 0, b":1\r\n").unwrap();
    d.reply(ms(4), 1, b":0\r\n").unwrap();
    d.reply(ms(5), 2, b":1\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.reply(ms(6), 4, b":1\r\n").unwrap();
    let lock = d.outcome().unwrap().unwrap();
    assert_eq!(lock.fence(), Some(10));
    // Validity counts from the start of the acquisition, fence round included.
    assert_eq!(lock.validity(), dur(10_000 - 6 - 102));
}

#[cfg(feature = "fencing")]
#[test]
fn a_fence_not_confirmed_by_a_majority_fails_and_releases() {
    let config = fenced();
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    for s in 0..3 {
        d.reply(ms(1), s, b"*2\r\n:1\r\n$-1\r\n").unwrap();
    }
    assert_eq!(d.sent(ms(1)).len(), 3);
    d.reply(ms(2), 0, b":0\r\n").unwrap();
    d.reply(ms(2), 1, b":0\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Conflict);
    let releases = d.sent(ms(2));
    assert_eq!(releases.len(), 3);
    assert!(releases.iter().all(|s| s.script() == "release"));
}

#[cfg(feature = "fencing")]
#[test]
fn a_vote_without_a_counter_counts_once_a_majority_of_the_others_had_one() {
    let config = fenced();
    let set = |c: &str| match c {
        "" => b"*2\r\n:1\r\n$-1\r\n".to_vec(),
        c => format!("*2\r\n:1\r\n${}\r\n{c}\r\n", c.len()).into_bytes(),
    };
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    // Server 0 restarted without persistence: its counter is gone.
    d.reply(ms(1), 0, &set("")).unwrap();
    d.reply(ms(1), 1, &set("41")).unwrap();
    assert!(
        d.sent(ms(1)).is_empty(),
        "one counter read: server 0's vote does not count yet"
    );
    d.reply(ms(2), 2, &set("40")).unwrap();
    // Counters read from both other servers: server 0 counts, and the fence
    // write to all three repairs it.
    let writes = d.sent(ms(2));
    assert_eq!(writes.len(), 3);
    assert!(
        writes
            .iter()
            .all(|w| w.script() == "fence" && w.args[6] == b"42")
    );
    for s in 0..3 {
        d.reply(ms(3), s, b":1\r\n").unwrap();
    }
    assert_eq!(d.outcome().unwrap().unwrap().fence(), Some(42));

    // A counter on one server only: the two without may have lost theirs.
    // Refused (safe), rather than risk a fence below one already issued;
    // every server voted, so it is the counter that is lost, and waiting
    // does not bring it back: no retry.
    let retrying = Config {
        retry: Retry {
            retries: 3,
            jitter: Duration::ZERO,
        },
        ..config
    };
    let mut d = acquire(&retrying, 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, &set("")).unwrap();
    d.reply(ms(1), 1, &set("")).unwrap();
    d.reply(ms(1), 2, &set("9")).unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!((err.kind, err.attempts), (FailureKind::FenceLost, 1));
    // A5 all the same.
    assert_eq!(d.sent(ms(1)).len(), 3);

    // The same with a server that did not answer: it may hold a counter,
    // so the attempt is retried.
    let mut d = acquire(&retrying, 5, 10_000, ms(0));
    d.sent(ms(0));
    for s in 0..3 {
        d.reply(ms(1), s, &set("")).unwrap();
    }
    d.reply(ms(1), 3, &set("9")).unwrap();
    d.op.handle_connection_error(ms(1), ServerId(4));
    assert!(d.outcome().is_none(), "retried");

    // No counter anywhere, every server answering: a new resource, fence 1.
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, &set("")).unwrap();
    d.reply(ms(1), 1, &set("")).unwrap();
    assert!(
        d.sent(ms(1)).is_empty(),
        "server 2 may hold the only counter"
    );
    d.reply(ms(1), 2, &set("")).unwrap();
    assert!(d.sent(ms(1)).iter().all(|w| w.args[6] == b"1"));

    // ... but not when a server is silent: it may hold the only counter left
    // (the reviewer's case: a timed-out server with the maximum).
    let mut d = acquire(&config, 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, &set("")).unwrap();
    d.reply(ms(1), 1, &set("")).unwrap();
    d.op.handle_timeout(ms(100));
    assert_eq!(
        d.outcome().unwrap().unwrap_err().kind,
        FailureKind::Unavailable
    );

    // A garbage counter or reply shape is an unexpected reply.
    for bad in [
        &b"*2\r\n:1\r\n$3\r\nabc\r\n"[..],
        b"$-1\r\n",
        b"*1\r\n:1\r\n",
        b"*2\r\n:7\r\n$-1\r\n",
    ] {
        let mut d = acquire(&config, 1, 10_000, ms(0));
        d.sent(ms(0));
        d.reply(ms(1), 0, bad).unwrap();
        assert_eq!(
            d.outcome().unwrap().unwrap_err().report.outcomes(),
            &[ServerOutcome::UnexpectedReply]
        );
    }
}

/// Without the `fencing` feature, a fenced acquisition is refused before
/// anything is sent: never an unfenced lock where a fence was asked for.
#[cfg(not(feature = "fencing"))]
#[test]
fn without_the_feature_a_fenced_acquire_is_refused() {
    let refused = redlock_core::Acquire::new(
        &fenced(),
        &Servers::new(3).unwrap(),
        &b"res"[..],
        dur(10_000),
        None,
        &mut TestRng(0),
        ms(0),
    );
    assert_eq!(refused.err(), Some(redlock_core::ArgumentError::Fencing));
}

#[test]
fn fence_repair_raises_the_counter_everywhere_and_counts_a_majority() {
    let servers = Servers::new(3).unwrap();
    let mut d = Drive::new(FenceRepair::new(&no_retry(), &servers, b"res", 41, dur(50)));
    let sent = d.sent(ms(0));
    assert_eq!(sent.len(), 3);
    for s in &sent {
        // EVAL (the handshake does not load it), one key: the counter.
        assert_eq!(s.name(), b"EVAL");
        assert_eq!(s.script(), "raise");
        assert_eq!(&s.args[2..], &[&b"1"[..], b"res:fence", b"41"]);
    }
    d.reply(ms(1), 0, b"$2\r\n41\r\n").unwrap();
    d.reply(ms(1), 1, b"$2\r\n77\r\n").unwrap();
    assert!(d.outcome().is_none(), "waits for every server");
    d.op.handle_timeout(ms(50));
    let repaired = d.outcome().unwrap().unwrap();
    assert_eq!(repaired.counter, 77);
    assert!(!repaired.complete());
    assert_eq!(
        repaired.report.outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Ok,
            ServerOutcome::TimedOut
        ]
    );

    // A counter below the floor (a broken server) or an error does not count.
    let mut d = Drive::new(FenceRepair::new(&no_retry(), &servers, b"res", 41, dur(50)));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"$1\r\n5\r\n").unwrap();
    d.reply(ms(1), 1, b"-ERR the fence counter is not a number\r\n")
        .unwrap();
    d.reply(ms(1), 2, b"$2\r\n41\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Unavailable);
    assert_eq!(
        err.report.outcomes(),
        &[
            ServerOutcome::UnexpectedReply,
            ServerOutcome::ServerError(ErrorKind::Err),
            ServerOutcome::Ok
        ]
    );
}

/// Five servers, fenced: server 0 votes without a counter (it lost its
/// data), servers 1 and 2 vote with counters, server 3 refuses (held) with
/// the counter `server_3`, server 4 has not answered. Returns the fence
/// writes sent then (none while server 0's vote does not count).
#[cfg(feature = "fencing")]
fn server_0_votes_without_a_counter(server_3: Option<u64>) -> Vec<Sent> {
    let mut d = acquire(&fenced(), 5, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, &fenced_reply(true, None)).unwrap();
    d.reply(ms(1), 1, &fenced_reply(true, Some(7))).unwrap();
    d.reply(ms(1), 2, &fenced_reply(true, Some(8))).unwrap();
    d.reply(ms(2), 3, &fenced_reply(false, server_3)).unwrap();
    assert!(d.outcome().is_none());
    d.sent(ms(2))
}

#[cfg(feature = "fencing")]
#[test]
fn a_vote_without_a_counter_counts_with_exactly_a_majority_of_the_others_read() {
    // F1 repair, liveness: counters read from 3 of the 4 others (a bare
    // majority of them, one of them from a server that refused): server 0's
    // vote counts, the third vote of five, and the fence is written.
    let writes = server_0_votes_without_a_counter(Some(9));
    assert_eq!(writes.len(), 5, "server 0's vote counts");
    assert!(
        writes
            .iter()
            .all(|w| w.script() == "fence" && w.args[6] == b"10")
    );
    // Safety: with one counter fewer (2 of the 4 others), it does not count:
    // the two with counters might both be behind the counter server 4 holds.
    let writes = server_0_votes_without_a_counter(None);
    assert!(
        writes.is_empty(),
        "server 0's vote does not count: {writes:?}"
    );
}

#[cfg(feature = "fencing")]
#[test]
fn a_fenced_acquire_waits_while_the_pending_servers_can_still_make_a_majority() {
    // Server 0 votes without a counter, 1 and 2 refuse: one vote, two servers
    // pending, three needed. A majority is still possible: wait.
    let mut d = acquire(&fenced(), 5, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, &fenced_reply(true, None)).unwrap();
    d.reply(ms(1), 1, &fenced_reply(false, Some(5))).unwrap();
    d.reply(ms(1), 2, &fenced_reply(false, Some(5))).unwrap();
    assert!(d.outcome().is_none(), "servers 3 and 4 may still vote");
    assert!(d.sent(ms(1)).is_empty(), "no release while it can succeed");
    d.reply(ms(2), 3, &fenced_reply(true, Some(6))).unwrap();
    assert!(d.outcome().is_none());
    d.reply(ms(2), 4, &fenced_reply(true, Some(6))).unwrap();
    // Counters read from all four others: server 0's vote counts.
    let writes = d.sent(ms(2));
    assert_eq!(writes.len(), 5);
    assert!(writes.iter().all(|w| w.args[6] == b"7"));
    for s in 0..5 {
        d.reply(ms(3), s, b":1\r\n").unwrap();
    }
    assert_eq!(d.outcome().unwrap().unwrap().fence(), Some(7));
}
