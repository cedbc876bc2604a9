//! Scripted tests of the round every operation shares: encoding into the
//! caller's buffer, the NOSCRIPT fallback, push replies, deadlines that run
//! from the sending, bounds.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::redlock_resp::ErrorKind;
use redlock_core::redlock_resp::script::RELEASE;
use redlock_core::{Config, FailureKind, Operation, Release, ServerId, ServerOutcome, Servers};

#[test]
fn noscript_falls_back_to_eval_transparently() {
    let servers = Servers::new(2).unwrap();
    let mut d = release(&servers, 50);
    let sent = d.sent(ms(0));
    assert!(sent.iter().all(|s| s.name() == b"EVALSHA"));
    assert_eq!(sent[0].args[1], RELEASE.sha1.as_bytes());
    d.reply(
        ms(1),
        0,
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    )
    .unwrap();
    let again = d.sent(ms(1));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].server, 0);
    assert_eq!(
        again[0].args,
        vec![
            b"EVAL".to_vec(),
            RELEASE.source.as_bytes().to_vec(),
            b"1".to_vec(),
            b"res".to_vec(),
            b"tok".to_vec()
        ]
    );
    // The EVAL gets a fresh deadline.
    assert_eq!(d.op.poll_timeout(), Some(ms(50)));
    d.reply(ms(2), 1, b":1\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.reply(ms(2), 0, b":1\r\n").unwrap();
    let released = d.outcome().unwrap();
    assert_eq!(released.deleted(), 2);
    assert!(released.complete());
    // A second NOSCRIPT (after EVAL) is an error, not a loop.
    let mut d = release(&servers, 50);
    d.sent(ms(0));
    d.reply(ms(1), 0, b"-NOSCRIPT x\r\n").unwrap();
    d.sent(ms(1));
    d.reply(ms(1), 0, b"-NOSCRIPT x\r\n").unwrap();
    d.reply(ms(1), 1, b":0\r\n").unwrap();
    let released = d.outcome().unwrap();
    assert_eq!(
        released.report.outcomes(),
        &[
            ServerOutcome::ServerError(ErrorKind::NoScript),
            ServerOutcome::NotHeld
        ]
    );
}

#[test]
fn a_too_small_buffer_consumes_nothing() {
    let mut d = acquire(&no_retry(), 2, 1_000, ms(0));
    let mut small = [0u8; 8];
    let err = d.op.poll_transmit(ms(0), &mut small).unwrap_err();
    let redlock_core::redlock_resp::EncodeError::BufferTooSmall { needed } = err else {
        panic!()
    };
    let mut buf = vec![0u8; needed];
    let t = d.op.poll_transmit(ms(0), &mut buf).unwrap().unwrap();
    assert_eq!((t.server, t.len), (ServerId(0), needed));
    assert_eq!(d.sent(ms(0)).len(), 1);
}

#[test]
fn push_replies_are_skipped() {
    let mut d = acquire(&no_retry(), 1, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b">2\r\n+invalidate\r\n*0\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().unwrap().is_ok());
    // A reply with no request left is out of step, and says so.
    let err = d.reply(ms(2), 0, b"+OK\r\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "a reply arrived for no request: the stream is out of step"
    );
}

#[test]
fn a_request_sent_late_is_still_sent_and_timed_from_its_sending() {
    // A release made at t=0 whose platform gets to send only at t=500 ms
    // (a descheduled thread, a busy lock): a check of the deadlines first
    // must not drop it unsent, or the key would stay until it expires.
    let servers = Servers::new(3).unwrap();
    let mut d = release(&servers, 20);
    assert_eq!(d.op.poll_timeout(), None, "no clock runs before sending");
    d.op.handle_timeout(ms(500));
    assert!(d.outcome().is_none());
    let sent = d.sent(ms(500));
    assert_eq!(sent.len(), 3, "every release still goes out");
    // Each server gets its whole timeout from the sending.
    assert_eq!(d.op.poll_timeout(), Some(ms(520)));
    d.op.handle_timeout(ms(519));
    assert!(d.outcome().is_none());
    for s in 0..3 {
        d.reply(ms(519), s, b":1\r\n").unwrap();
    }
    assert_eq!(d.outcome().unwrap().deleted(), 3);

    // The same for an acquisition: nothing is dropped unsent, and the
    // validity is measured from the latest reading of the clock before the
    // attempt's first request (A1, A4): the 300 ms spent before it was
    // sent are not lost, and the 1 ms after it count.
    let mut d = acquire(&no_retry(), 3, 1_000, ms(0));
    d.op.handle_timeout(ms(300));
    assert!(d.outcome().is_none());
    assert_eq!(d.sent(ms(300)).len(), 3);
    for s in 0..3 {
        d.reply(ms(301), s, b"+OK\r\n").unwrap();
    }
    let lock = d.outcome().unwrap().unwrap();
    // 1000 - (301 - 300) - (10 + 2) ms.
    assert_eq!(lock.validity(), dur(987));
}

#[test]
fn an_operation_can_own_its_resource_name() {
    // Owned names let an operation outlive the caller's buffer (kept in a
    // static, or handed to another thread); the bytes sent are the same.
    let servers = Servers::new(2).unwrap();
    let owned: heapless::Vec<u8, 8> = heapless::Vec::from_slice(b"res").unwrap();
    let mut d =
        Drive::new(Release::new(&Config::DEFAULT, &servers, owned, b"tok", dur(20)).unwrap());
    let sent = d.sent(ms(0));
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter()
            .all(|s| s.args[3] == b"res" && s.args[4] == b"tok")
    );
}

#[test]
fn server_counts_are_bounded() {
    assert!(Servers::new(0).is_err());
    assert!(Servers::new(redlock_core::MAX_SERVERS).is_ok());
    assert!(Servers::new(redlock_core::MAX_SERVERS + 1).is_err());
    const { assert!(redlock_core::MAX_SERVERS >= 9) };
}

#[test]
fn a_server_with_requests_piled_up_is_given_up_on_at_once() {
    // Server 2 never answers. Each failed attempt leaves a SET and a release
    // in flight there; by the third attempt it has four unanswered requests,
    // so its SET is not sent: it counts as timed out at once, and the
    // attempt is decided on the replies of 0 and 1 without waiting.
    let config = Config {
        request_timeout: Some(dur(10)),
        ..retrying(2, 0)
    };
    let mut d = acquire(&config, 3, 10_000, ms(0));
    let mut now = ms(0);
    for attempt in 1..=3 {
        let sent = d.sent(now);
        let to_2 = sent.iter().any(|s| s.server == 2);
        assert_eq!(to_2, attempt < 3, "attempt {attempt}: {sent:?}");
        d.reply(now, 0, b"+OK\r\n").unwrap();
        d.reply(now, 1, b"$-1\r\n").unwrap();
        if attempt == 3 {
            break;
        }
        assert!(d.outcome().is_none(), "server 2 may still vote");
        now = now.saturating_add(dur(10));
        d.op.handle_timeout(now);
        assert_eq!(d.sent(now).len(), 3, "A5 after attempt {attempt}");
        d.reply(now, 0, b":1\r\n").unwrap();
        d.reply(now, 1, b":0\r\n").unwrap();
        now = d.op.poll_timeout().unwrap();
        d.op.handle_timeout(now);
    }
    let err = d.outcome().expect("decided without waiting").unwrap_err();
    assert_eq!((err.kind, err.attempts), (FailureKind::Conflict, 3));
    assert_eq!(
        err.report.outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::Held,
            ServerOutcome::TimedOut
        ]
    );
}
