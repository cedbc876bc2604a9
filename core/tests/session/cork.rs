//! One batch in flight per connection (feature `batching`): `corked`,
//! `flushed` and the bound on a corked request's wait, scripted.

use super::*;

/// Room for more requests than `Owed` (the cork tests queue several).
type Big = heapless::Deque<Entry<u32>, 16>;

/// A session with room for 16 requests, through its handshake at 0 ms.
fn ready_big() -> Session<u32, Big> {
    let mut s: Session<u32, Big> = Session::new(plan(true), Big::new());
    s.connecting(ms(0), &POLICY);
    s.connected(ms(0), &POLICY);
    pass_handshake(&mut s, ms(0));
    s
}

#[test]
fn requests_behind_an_unanswered_batch_are_corked_until_its_replies_come() {
    let mut s: Session<u32, Big> = Session::new(plan(true), Big::new());
    s.connecting(ms(0), &POLICY);
    s.connected(ms(0), &POLICY);
    // Held behind the handshake: written when it passes, never corked.
    assert_eq!(s.push(ms(0), 1, ms(1000), &POLICY), Ok(Queued::Held));
    pass_handshake(&mut s, ms(1));
    assert!(
        !s.corked(),
        "the held requests go out at the handshake's end"
    );
    // A request pushed before they were written is not held behind them.
    assert_eq!(s.push(ms(1), 2, ms(1000), &POLICY), Ok(Queued::Write));
    assert!(!s.corked());
    s.flushed();
    // Written and unanswered: what comes next waits for their replies.
    assert_eq!(s.push(ms(2), 3, ms(1000), &POLICY), Ok(Queued::Write));
    assert_eq!(s.push(ms(2), 4, ms(1000), &POLICY), Ok(Queued::Write));
    assert!(s.corked());
    let ok = Reply::Simple(b"OK");
    assert_eq!(s.handle_reply(ms(3), &ok, no_twin), Ok(Event::Reply(1)));
    assert!(s.corked(), "one of the batch is still on its way");
    assert_eq!(s.handle_reply(ms(3), &ok, no_twin), Ok(Event::Reply(2)));
    assert!(!s.corked(), "the batch is answered: the next one goes");
    s.flushed();
    assert!(!s.corked(), "nothing unsent");
    // The rest answered in order.
    assert_eq!(s.handle_reply(ms(4), &ok, no_twin), Ok(Event::Reply(3)));
    assert_eq!(s.handle_reply(ms(4), &ok, no_twin), Ok(Event::Reply(4)));
    assert_eq!(s.owed(), 0);
    assert!(!s.corked());
}

#[test]
fn a_probe_is_never_corked() {
    let mut s = ready_big();
    // Request 1 (40 ms) written and unanswered; 2 corked behind it.
    assert_eq!(s.push(ms(0), 1, ms(40), &POLICY), Ok(Queued::Write));
    s.flushed();
    assert_eq!(s.push(ms(1), 2, ms(1000), &POLICY), Ok(Queued::Write));
    assert!(s.corked());
    // Request 1 overdue: the probe is to go out, and uncorks the buffer
    // (written behind request 2, in order).
    assert_eq!(s.handle_timeout(ms(20)), None);
    assert!(s.poll_probe());
    s.probe_written(ms(20), &POLICY);
    assert!(!s.corked(), "the probe goes out now, with what is queued");
    s.flushed();
    // A request pushed while one is overdue goes behind a probe: uncorked.
    let mut t = ready_big();
    assert_eq!(t.push(ms(0), 1, ms(40), &POLICY), Ok(Queued::Write));
    t.flushed();
    assert_eq!(t.push(ms(30), 2, ms(1000), &POLICY), Ok(Queued::ProbeFirst));
    assert!(!t.corked());
    // A platform that never says it wrote is never corked (it writes at
    // once, as before): the count stays within the requests awaited.
    let mut u = ready_big();
    for k in 0..8 {
        assert_eq!(u.push(ms(0), k, ms(1000), &POLICY), Ok(Queued::Write));
        assert!(!u.corked());
        if k % 3 == 2 {
            let ok = Reply::Simple(b"OK");
            assert!(matches!(
                u.handle_reply(ms(0), &ok, no_twin),
                Ok(Event::Reply(_))
            ));
            assert!(!u.corked());
        }
    }
    // Closed: nothing is left corked.
    s.close(ms(50), Close::Io, &POLICY, |_| {});
    assert!(!s.corked());
}

#[test]
fn a_corked_request_waits_a_sixteenth_of_its_time_at_most() {
    let mut s = ready_big();
    // A long round trip: request 1 (300 ms) unanswered for 200 ms.
    assert_eq!(s.push(ms(0), 1, ms(300), &POLICY), Ok(Queued::Write));
    s.flushed();
    // Request 2 (320 ms) corked at 1 ms: out by 21 ms, not at request 1's
    // half time (150 ms) nor its reply (200 ms).
    assert_eq!(s.push(ms(1), 2, ms(321), &POLICY), Ok(Queued::Write));
    assert!(s.corked());
    assert_eq!(s.poll_timeout(), Some(ms(21)));
    assert_eq!(s.handle_timeout(ms(20)), None);
    assert!(s.corked());
    assert_eq!(s.handle_timeout(ms(21)), None, "not given up: uncorked");
    assert!(!s.corked());
    assert!(!s.poll_probe(), "no probe: nothing is overdue");
    s.flushed();
    // The next one corked takes the earliest share of all: 16 ms of a
    // 256 ms request at 30 ms, though a 1 s one was corked first.
    assert_eq!(s.push(ms(22), 3, ms(1022), &POLICY), Ok(Queued::Write));
    assert_eq!(s.push(ms(30), 4, ms(286), &POLICY), Ok(Queued::Write));
    assert_eq!(s.poll_timeout(), Some(ms(46)));
    // Behind a probe already sent (a slow server): still its own share,
    // not the probe's deadline.
    assert_eq!(s.handle_timeout(ms(46)), None);
    s.flushed();
    assert_eq!(s.handle_timeout(ms(150)), None);
    assert!(s.poll_probe());
    s.probe_written(ms(150), &POLICY);
    s.flushed();
    assert_eq!(s.push(ms(160), 5, ms(320), &POLICY), Ok(Queued::Write));
    assert!(s.corked());
    assert_eq!(s.poll_timeout(), Some(ms(170)));
    assert_eq!(s.handle_timeout(ms(170)), None, "the probe is not due yet");
    assert!(!s.corked());
}

#[test]
fn a_multi_block_uncorks_only_with_its_last_reply() {
    let mut s = ready_big();
    s.push_with_replies(ms(1), 1, ms(1001), 4, &POLICY).unwrap();
    s.flushed();
    s.push(ms(2), 2, ms(1002), &POLICY).unwrap();
    assert!(s.corked());
    for _ in 0..3 {
        assert_eq!(
            s.handle_reply(ms(3), &Reply::Simple(b"QUEUED"), no_twin),
            Ok(Event::Partial)
        );
        assert!(s.corked());
    }
    assert_eq!(
        s.handle_reply(ms(3), &Reply::Nil, no_twin),
        Ok(Event::Reply(1))
    );
    assert!(!s.corked());
}

#[test]
fn a_cork_at_the_end_of_its_share_sends_no_probe() {
    let mut s = ready_big();
    // Request 1 (300 ms) written; request 2 corked at 1 ms, its share out
    // at 21 ms; request 3 pushed at 25 ms, before anyone asked the timer.
    assert_eq!(s.push(ms(0), 1, ms(300), &POLICY), Ok(Queued::Write));
    s.flushed();
    assert_eq!(s.push(ms(1), 2, ms(321), &POLICY), Ok(Queued::Write));
    assert_eq!(s.poll_timeout(), Some(ms(21)));
    // Nothing is overdue (request 1 at 150 ms): no probe goes first (one
    // would close a healthy connection for a user without `+ping`).
    assert_eq!(s.push(ms(25), 3, ms(325), &POLICY), Ok(Queued::Write));
    assert!(!s.poll_probe());
    // The buffer goes out once the timer is asked.
    assert_eq!(s.handle_timeout(ms(25)), None);
    assert!(!s.corked());
    assert!(!s.poll_probe());
}

#[test]
fn unsent_requests_say_when_they_have_waited_their_share_corked_or_not() {
    let mut h: Session<u32, Big> = Session::new(plan(true), Big::new());
    h.connecting(ms(0), &POLICY);
    h.connected(ms(0), &POLICY);
    assert_eq!(h.push(ms(0), 1, ms(1600), &POLICY), Ok(Queued::Held));
    assert_eq!(h.unsent_until(), None, "held by the session itself");
    pass_handshake(&mut h, ms(5));
    assert!(
        h.unsent_until().is_some_and(|t| t <= ms(5)),
        "held behind the handshake, due at once when it passes: {:?}",
        h.unsent_until()
    );
    h.flushed();
    assert_eq!(h.unsent_until(), None);
    let mut s = ready_big();
    assert_eq!(s.unsent_until(), None);
    // Nothing in flight: not corked, but unsent until the platform writes.
    assert_eq!(s.push(ms(0), 1, ms(1600), &POLICY), Ok(Queued::Write));
    assert!(!s.corked());
    assert_eq!(s.unsent_until(), Some(ms(100)));
    // A later request with less time: the earliest share counts.
    assert_eq!(s.push(ms(10), 2, ms(330), &POLICY), Ok(Queued::Write));
    assert_eq!(s.unsent_until(), Some(ms(30)));
    s.flushed();
    assert_eq!(s.unsent_until(), None);
}
