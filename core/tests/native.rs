//! The native fenced acquisition (SPEC F1 without Lua) against scripted
//! replies: which fence writes count, and what a failed one reports.
//! (Found by a review: each failed before its fix.)

#![cfg(all(feature = "native", feature = "fencing"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use redlock_core::redlock_resp::{Reply, Status, parse_reply};
use redlock_core::{FailureKind, Operation, ServerId, ServerOutcome};

/// Every command of every request the operation sends now: (server, the
/// commands of the request, each as its arguments).
fn sent_all<O: Operation>(
    op: &mut O,
    now: redlock_core::Instant,
) -> Vec<(usize, Vec<Vec<Vec<u8>>>)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(t) = op.poll_transmit(now, &mut buf).unwrap() {
        let mut frame = &buf[..t.len];
        let mut cmds = Vec::new();
        while !frame.is_empty() {
            let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(frame) else {
                panic!()
            };
            cmds.push(a.iter().map(|r| r.as_bytes().unwrap().to_vec()).collect());
            frame = &frame[used..];
        }
        assert_eq!(cmds.len(), usize::from(t.replies));
        out.push((t.server.index(), cmds));
    }
    out
}

fn reply<O: Operation>(op: &mut O, now: redlock_core::Instant, server: u8, bytes: &[u8]) {
    let Ok(Status::Complete((r, _))) = parse_reply(bytes) else {
        panic!("bad test reply")
    };
    op.handle_reply(now, ServerId(server), r).unwrap();
}

/// SPEC F1 (native): "The first step of a server that voted but whose
/// incarnation then changed does not count in the second." The platform
/// may tell the operation of a new incarnation between the server's vote
/// and the quorum (the embedded engine does so at every `Event::Ready`
/// while an operation runs): the new process's `INCRBY` ack must not count.
#[test]
fn an_incarnation_change_between_the_vote_and_the_quorum_is_not_counted() {
    let config = fenced();
    let servers = native_servers(3);
    let mut d = acquire_on(&config, &servers, 10_000, None, ms(0));
    let op = &mut d.op;
    let sent = sent_all(op, ms(0));
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].1[0], vec![b"MULTI".to_vec()]);
    // Server 0 votes; its counter is 5 (persisted: `appendfsync everysec`).
    reply(op, ms(1), 0, b"*2\r\n+OK\r\n$1\r\n5\r\n");
    // Server 0's process restarts (the key, set less than a second ago,
    // is lost; the counter 5 is back from the AOF). The platform
    // reconnects and tells the operation the new incarnation.
    op.set_incarnation(ServerId(0), ms(50));
    // Server 1 votes: the quorum. The fence is 6.
    reply(op, ms(60), 1, b"*2\r\n+OK\r\n$1\r\n5\r\n");
    let writes = sent_all(op, ms(60));
    assert_eq!(writes.len(), 2, "{writes:?}");
    // The new process answers `INCRBY res:fence 1` with 6: counted.
    reply(op, ms(61), 0, b":6\r\n");
    reply(op, ms(61), 1, b":6\r\n");
    let got = d.outcome().unwrap();
    // Server 0 is `Restarted` and the fence unconfirmed.
    let err = match got {
        Ok(l) => panic!(
            "the restarted process's ack counted: {:?}",
            (l.fence(), *l.report())
        ),
        Err(e) => e,
    };
    assert_eq!(err.report.get(ServerId(0)), Some(ServerOutcome::Restarted));
}

/// A change after the quorum is caught too.
#[test]
fn an_incarnation_change_after_the_quorum_is_caught() {
    let config = fenced();
    let servers = native_servers(3);
    let mut d = acquire_on(&config, &servers, 10_000, None, ms(0));
    let op = &mut d.op;
    sent_all(op, ms(0));
    reply(op, ms(1), 0, b"*2\r\n+OK\r\n$1\r\n5\r\n");
    reply(op, ms(60), 1, b"*2\r\n+OK\r\n$1\r\n5\r\n");
    sent_all(op, ms(60));
    op.set_incarnation(ServerId(0), ms(50));
    reply(op, ms(61), 0, b":6\r\n");
    reply(op, ms(61), 1, b":6\r\n");
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.report.get(ServerId(0)), Some(ServerOutcome::Restarted));
}

/// Native fence write: the servers whose vote had not arrived when the
/// quorum was reached are not asked, and keep what they had (still
/// awaited), not "not held": a voter that then fails makes the attempt
/// fail as unavailable, not as a conflict no server reported.
#[test]
fn a_failed_native_fence_write_is_reported_as_unavailable() {
    let config = fenced();
    let servers = native_servers(5);
    let mut d = acquire_on(&config, &servers, 10_000, None, ms(0));
    let op = &mut d.op;
    sent_all(op, ms(0));
    for s in 0..3 {
        reply(op, ms(1), s, b"*2\r\n+OK\r\n$1\r\n5\r\n");
    }
    // Servers 3 and 4 are slow: the quorum is reached without them.
    let writes = sent_all(op, ms(1));
    assert_eq!(writes.len(), 3);
    reply(op, ms(2), 0, b":6\r\n");
    reply(op, ms(2), 1, b":6\r\n");
    // Server 2 fails (an error, a timeout, a lost connection alike).
    reply(op, ms(2), 2, b"-ERR something broke\r\n");
    let err = d.outcome().unwrap().unwrap_err();
    assert_ne!(err.report.get(ServerId(3)), Some(ServerOutcome::NotHeld));
    assert_eq!(
        err.kind,
        FailureKind::Unavailable,
        "no server said the key is held by someone else"
    );
}
