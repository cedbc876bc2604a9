//! The per-server session, scripted: connect, handshake, replies matched to
//! their requests, held requests, backoff, and when a connection is given
//! up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

extern crate alloc;

use redlock_core::handshake::{Commands, Plan, SetupError, Step};
use redlock_core::redlock_resp::{ErrorKind, Reply, ServerError};
use redlock_core::session::{
    Close, Credentials, Entry, Event, Policy, Queue, Queued, Session, State, encode_probe,
    encode_step,
};
use redlock_core::{Duration, Instant, ServerId};

type Owed = heapless::Deque<Entry<u32>, 4>;

const POLICY: Policy = Policy::DEFAULT;

fn ms(n: u64) -> Instant {
    Instant::from_micros(1_000_000_000 + n * 1000)
}

fn plan(info_required: bool) -> Plan {
    Plan {
        commands: Commands::Scripts,
        auth: true,
        select: false,
        info_required,
    }
}

const INFO: Reply<'static> = Reply::Bulk(b"# Server\r\nrun_id:abcdef\r\nuptime_in_seconds:100\r\n");

fn no_twin(_: &[u8]) -> Option<ServerId> {
    None
}

/// A session through its handshake at `at` (written and judged).
fn ready_at(at: Instant) -> Session<u32, Owed> {
    let mut s = Session::new(plan(true), Owed::new());
    assert!(s.may_connect(at, false));
    s.connecting(at, &POLICY);
    s.connected(at, &POLICY);
    pass_handshake(&mut s, at);
    s
}

/// Writes every handshake step of `s` and passes each at `at`; the last
/// one makes it ready.
fn pass_handshake<Q: Queue<u32>>(s: &mut Session<u32, Q>, at: Instant) {
    while s.poll_step().is_some() {
        s.step_written();
    }
    let mut last = None;
    let mut k = 0;
    while s.state() == State::Handshake {
        let reply = match redlock_core::handshake::step(s.plan(), false, k).unwrap() {
            Step::Auth => Reply::Simple(b"OK"),
            Step::ScriptLoad => Reply::Bulk(b"0123456789012345678901234567890123456789"),
            _ => INFO,
        };
        last = Some(s.handle_reply(at, &reply, no_twin).unwrap());
        k += 1;
    }
    assert_eq!(last, Some(Event::Ready));
}

#[test]
fn the_handshake_goes_first_and_holds_requests_until_it_passed() {
    let mut s: Session<u32, Owed> = Session::new(plan(true), Owed::new());
    s.connecting(ms(0), &POLICY);
    // Nothing to write before the transport is up; requests are held.
    assert_eq!(s.poll_step(), None);
    assert_eq!(s.push(ms(0), 7, ms(50), &POLICY), Ok(Queued::Held));
    s.connected(ms(5), &POLICY);
    assert_eq!(s.poll_step().map(|(step, _)| step), Some(Step::Auth));
    s.step_written();
    // A reply to a step not written yet, or to a held request: out of step.
    let mut early = s.clone();
    let _ = early.handle_reply(ms(6), &Reply::Simple(b"OK"), no_twin);
    assert_eq!(
        early.handle_reply(ms(6), &Reply::Simple(b"OK"), no_twin),
        Err(Close::Unsolicited)
    );
    while s.poll_step().is_some() {
        s.step_written();
    }
    assert_eq!(
        s.handle_reply(ms(6), &Reply::Simple(b"OK"), no_twin),
        Ok(Event::Step)
    );
    // Held for 200 ms, well past its 50 ms: not given up (it was not sent).
    assert_eq!(s.handle_timeout(ms(200)), None);
    let mut event = Event::Step;
    let mut k = 1;
    while event == Event::Step {
        let reply = match redlock_core::handshake::step(s.plan(), false, k).unwrap() {
            Step::Info => INFO,
            _ => Reply::Bulk(b"sha"),
        };
        event = s.handle_reply(ms(200), &reply, no_twin).unwrap();
        k += 1;
    }
    assert_eq!(event, Event::Ready);
    assert!(s.is_ready());
    assert_eq!(s.run_id(), b"abcdef");
    // uptime 100 s read at 200 ms: up since (at most) 99 s before.
    assert_eq!(
        s.incarnation(),
        Some(ms(200).saturating_sub(Duration::from_secs(99)))
    );
    // The held request's 50 ms run from the handshake's end: probed if
    // still unanswered halfway.
    assert_eq!(s.poll_timeout(), Some(ms(225)));
    assert_eq!(
        s.handle_reply(ms(210), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(7))
    );
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn replies_go_to_their_requests_in_order_and_pushes_to_none() {
    let mut s = ready_at(ms(0));
    for tag in [1, 2, 3] {
        assert_eq!(s.push(ms(1), tag, ms(100), &POLICY), Ok(Queued::Write));
    }
    let push = Reply::Aggregate(
        redlock_core::redlock_resp::Parser::default()
            .parse(b">1\r\n+x\r\n")
            .ok()
            .and_then(|s| match s {
                redlock_core::redlock_resp::Status::Complete((Reply::Aggregate(a), _)) => Some(a),
                _ => None,
            })
            .unwrap_or_else(|| panic!("a push")),
    );
    let got: Vec<Event<u32>> = [Reply::Integer(1), push, Reply::Nil, Reply::Integer(0)]
        .iter()
        .map(|r| s.handle_reply(ms(2), r, no_twin).unwrap())
        .collect();
    // (Without RESP3 the push parses as nothing: the test then sees 3 replies.)
    let replies: Vec<u32> = got
        .iter()
        .filter_map(|e| match e {
            Event::Reply(t) => Some(*t),
            _ => None,
        })
        .collect();
    assert_eq!(replies, [1, 2, 3]);
    assert_eq!(
        s.handle_reply(ms(3), &Reply::Integer(1), no_twin),
        Err(Close::Unsolicited),
        "a reply for no request"
    );
}

/// A session with requests 1 (sent at 10 ms, due at 60) and 2 (sent at
/// 20 ms, due at 40), probed at 30 ms (half of request 2's time).
fn probed() -> Session<u32, Owed> {
    let mut s = ready_at(ms(0));
    s.push(ms(10), 1, ms(60), &POLICY).unwrap();
    s.push(ms(20), 2, ms(40), &POLICY).unwrap();
    // Halfway through the time of any request awaited, not only the oldest.
    assert_eq!(s.poll_timeout(), Some(ms(30)));
    assert_eq!(s.handle_timeout(ms(29)), None);
    assert!(!s.poll_probe());
    assert_eq!(s.handle_timeout(ms(30)), None, "not given up: probed");
    assert!(s.poll_probe());
    assert_eq!(s.poll_timeout(), None, "written at the next write");
    let mut buf = [0u8; 64];
    let n = encode_probe(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"*2\r\n$4\r\nPING\r\n$13\r\nredlock-probe\r\n");
    s.probe_written(ms(30), &POLICY);
    assert!(!s.poll_probe());
    assert_eq!(s.poll_timeout(), Some(ms(1_030)), "the connect timeout");
    s
}

const PROBE: Reply<'static> = Reply::Bulk(b"redlock-probe");

#[test]
fn a_connection_that_lost_a_request_is_found_out_of_step_and_given_up() {
    // The out-of-step defect: request 1 was swallowed on a live connection.
    // Request 2's reply is taken for request 1's (the window before the
    // probe), and the probe's answer then comes in request 2's place.
    let mut s = probed();
    assert_eq!(
        s.handle_reply(ms(31), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(1))
    );
    assert_eq!(
        s.handle_reply(ms(31), &PROBE, no_twin),
        Err(Close::OutOfStep)
    );
    let mut lost = Vec::new();
    // Long after the handshake: an established connection, no backoff.
    s.close(ms(5_000), Close::OutOfStep, &POLICY, |t| lost.push(t));
    assert_eq!(lost, [2], "every request still awaited is lost");
    assert_eq!(s.state(), State::Down);
    assert_eq!(s.failures(), 0);
    assert!(s.may_connect(ms(5_000), false), "reconnects at once");
    assert_eq!(s.incarnation(), None, "unknown until the next INFO");
    assert_eq!(s.refused(), None);
    // A reply lost, or one too many, in the probe's place: out of step too.
    let mut s = probed();
    for tag in [1, 2] {
        assert_eq!(
            s.handle_reply(ms(31), &Reply::Integer(1), no_twin),
            Ok(Event::Reply(tag))
        );
    }
    assert_eq!(
        s.handle_reply(ms(31), &Reply::Integer(1), no_twin),
        Err(Close::OutOfStep)
    );
}

#[test]
fn a_slow_connection_stays_in_step_and_is_kept() {
    // The replies come late, in order, then the probe's: the connection is
    // kept (a request still on its way must not be overtaken by one sent
    // on a new connection).
    let mut s = probed();
    for tag in [1, 2] {
        assert_eq!(
            s.handle_reply(ms(90), &Reply::Integer(1), no_twin),
            Ok(Event::Reply(tag))
        );
    }
    assert_eq!(s.handle_reply(ms(91), &PROBE, no_twin), Ok(Event::Probe));
    assert_eq!(s.poll_timeout(), None);
    assert!(s.is_ready());
    // The next probe.
    s.push(ms(100), 3, ms(120), &POLICY).unwrap();
    assert_eq!(s.handle_timeout(ms(110)), None);
    assert!(s.poll_probe());
    // A request sent behind the probe is answered after it.
    s.probe_written(ms(110), &POLICY);
    s.push(ms(111), 4, ms(200), &POLICY).unwrap();
    assert_eq!(
        s.handle_reply(ms(112), &Reply::Nil, no_twin),
        Ok(Event::Reply(3))
    );
    assert_eq!(s.handle_reply(ms(112), &PROBE, no_twin), Ok(Event::Probe));
    assert_eq!(
        s.handle_reply(ms(113), &Reply::Nil, no_twin),
        Ok(Event::Reply(4))
    );
}

#[test]
fn a_server_that_does_not_answer_the_probe_is_given_up() {
    let mut s = probed();
    assert_eq!(s.handle_timeout(ms(1_029)), None);
    assert_eq!(s.handle_timeout(ms(1_030)), Some(Close::Unanswered));
    let mut lost = Vec::new();
    s.close(ms(1_030), Close::Unanswered, &POLICY, |t| lost.push(t));
    assert_eq!(lost, [1, 2]);
}

#[test]
fn failed_attempts_back_off_and_double_up_to_the_cap() {
    let mut s: Session<u32, Owed> = Session::new(plan(false), Owed::new());
    let mut now = ms(0);
    let mut waits = Vec::new();
    for _ in 0..12 {
        assert!(s.may_connect(now, false));
        s.connecting(now, &POLICY);
        assert_eq!(
            s.handle_timeout(now.saturating_add(Duration::from_millis(999))),
            None
        );
        assert_eq!(
            s.handle_timeout(now.saturating_add(POLICY.connect_timeout)),
            Some(Close::ConnectTimeout)
        );
        s.close(now, Close::Io, &POLICY, |_| unreachable!());
        let retry = s.retry_at().unwrap();
        waits.push(retry.saturating_duration_since(now).as_millis());
        assert!(!s.may_connect(now, false));
        // A connect that never came up: a release does not skip it either.
        assert!(!s.may_connect(now, true));
        now = retry;
    }
    assert_eq!(
        waits,
        [10, 20, 40, 80, 160, 320, 640, 1280, 2000, 2000, 2000, 2000]
    );
}

#[test]
fn a_connection_that_breaks_right_after_its_handshake_is_flapping() {
    let mut s = ready_at(ms(0));
    s.close(ms(100), Close::Io, &POLICY, |_| {});
    assert_eq!(s.failures(), 1);
    assert_eq!(s.retry_at(), Some(ms(110)));
    assert!(!s.may_connect(ms(100), false));
    // The server was reachable: a release may reconnect in the backoff.
    assert!(s.may_connect(ms(100), true));
}

#[test]
fn a_refused_handshake_refuses_the_server_until_one_passes() {
    let mut s: Session<u32, Owed> = Session::new(plan(false), Owed::new());
    s.connecting(ms(0), &POLICY);
    s.connected(ms(1), &POLICY);
    s.step_written();
    let wrongpass = Reply::Error(ServerError::new(
        b"WRONGPASS invalid username-password pair",
    ));
    let why = SetupError::Refused {
        step: Step::Auth,
        kind: ErrorKind::WrongPass,
    };
    assert_eq!(
        s.handle_reply(ms(2), &wrongpass, no_twin),
        Err(Close::Refused(why))
    );
    s.close(ms(2), Close::Refused(why), &POLICY, |_| {});
    assert_eq!(s.refused(), Some(why));
    // No AUTH storm: even a release waits for the backoff.
    assert!(!s.may_connect(ms(2), true));
    assert!(s.may_connect(ms(12), false));
    assert_eq!(
        s.push(ms(12), 1, ms(20), &POLICY),
        Err((1, Close::Io)),
        "down"
    );
    let s = ready_at(ms(20));
    assert_eq!(s.refused(), None);
}

#[test]
fn the_same_process_behind_two_entries_is_refused() {
    let mut s: Session<u32, Owed> = Session::new(
        Plan {
            commands: Commands::Scripts,
            auth: false,
            select: false,
            info_required: false,
        },
        Owed::new(),
    );
    s.connecting(ms(0), &POLICY);
    s.connected(ms(0), &POLICY);
    while s.poll_step().is_some() {
        s.step_written();
    }
    // `INFO` is the first step here (no `AUTH`, no `SELECT`).
    let twin = |id: &[u8]| (id == b"abcdef").then_some(ServerId(3));
    assert_eq!(
        s.handle_reply(ms(1), &INFO, twin),
        Err(Close::Refused(SetupError::SameServer(ServerId(3))))
    );
    assert_eq!(s.run_id(), b"", "a twin's run_id is not taken");
}

#[test]
fn a_full_queue_gives_the_connection_up() {
    let mut s = ready_at(ms(0));
    for tag in 0..4 {
        assert_eq!(s.push(ms(1), tag, ms(100), &POLICY), Ok(Queued::Write));
    }
    assert_eq!(s.push(ms(1), 9, ms(100), &POLICY), Err((9, Close::Stuck)));
}

#[test]
fn a_handshake_that_does_not_pass_in_time_fails_the_attempt() {
    let mut s: Session<u32, Owed> = Session::new(plan(true), Owed::new());
    s.connecting(ms(0), &POLICY);
    // Moving on to the next address restarts the connect's time.
    s.connecting(ms(900), &POLICY);
    assert_eq!(s.handle_timeout(ms(1_000)), None);
    s.connected(ms(1_000), &POLICY);
    assert_eq!(s.poll_timeout(), Some(ms(2_000)));
    s.push(ms(1_000), 1, ms(1_050), &POLICY).unwrap();
    assert_eq!(s.handle_timeout(ms(2_000)), Some(Close::ConnectTimeout));
    let mut lost = Vec::new();
    s.close(ms(2_000), Close::ConnectTimeout, &POLICY, |t| lost.push(t));
    assert_eq!(lost, [1], "a held request is lost with its connection");
    assert_eq!(s.failures(), 1);
}

#[test]
fn handshake_steps_are_encoded_as_redis_expects() {
    let mut buf = [0u8; 256];
    let creds = Credentials {
        user: Some(b"app"),
        password: Some(b"pw"),
        db: 3,
    };
    let n = encode_step(&mut buf, Step::Auth, None, &creds).unwrap();
    assert_eq!(&buf[..n], b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$2\r\npw\r\n");
    let n = encode_step(&mut buf, Step::Select, None, &creds).unwrap();
    assert_eq!(&buf[..n], b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n");
    let n = encode_step(&mut buf, Step::Info, None, &creds).unwrap();
    assert_eq!(&buf[..n], b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n");
    assert_eq!(
        creds.plan(true, Commands::Auto),
        Plan {
            commands: Commands::Auto,
            auth: true,
            select: true,
            info_required: true
        }
    );
    let shown = format!("{creds:?}");
    assert!(!shown.contains("\"pw\""), "{shown}");
    assert!(
        shown.contains("\"app\"") && shown.contains("***") && shown.contains('3'),
        "{shown}"
    );
}

#[test]
fn a_connection_busy_for_hours_keeps_exact_deadlines() {
    // Deadlines are kept as microseconds after a base that moves only when
    // the queue is empty: a queue never empty for hours must not misjudge
    // one.
    let mut s = ready_at(ms(0));
    let mut now = ms(1);
    s.push(
        now,
        0,
        now.saturating_add(Duration::from_millis(1_200)),
        &POLICY,
    )
    .unwrap();
    for k in 1..20_000u32 {
        // One new request before the oldest is answered, every 0.5 s:
        // 2.8 hours without the queue ever empty.
        now = now.saturating_add(Duration::from_millis(500));
        let deadline = now.saturating_add(Duration::from_millis(1_200));
        s.push(now, k, deadline, &POLICY).unwrap();
        // The oldest (sent 0.5 s ago) is probed first, at half its time.
        let oldest = now.saturating_add(Duration::from_millis(100));
        assert_eq!(s.poll_timeout(), Some(oldest), "request {k}");
        assert_eq!(s.handle_timeout(now), None, "request {k}");
        assert_eq!(
            s.handle_reply(now, &Reply::Integer(1), no_twin),
            Ok(Event::Reply(k - 1))
        );
        let half = now.saturating_add(Duration::from_millis(600));
        assert_eq!(s.poll_timeout(), Some(half), "request {k}");
    }
    let half = now.saturating_add(Duration::from_millis(600));
    assert_eq!(
        s.handle_timeout(half.saturating_sub(Duration::from_micros(1))),
        None
    );
    assert!(!s.poll_probe());
    assert_eq!(s.handle_timeout(half), None);
    assert!(s.poll_probe());
}

#[test]
fn a_deadline_hours_away_is_kept_exactly_behind_an_older_request() {
    // A deadline far after the base (the queue was last empty long ago,
    // at the first push) is neither cut short nor moved.
    let mut s = ready_at(ms(0));
    s.push(ms(1), 1, ms(10_001), &POLICY).unwrap();
    let far = Duration::from_secs(100 * 3_600);
    s.push(ms(2), 2, ms(2).saturating_add(far), &POLICY)
        .unwrap();
    assert_eq!(s.poll_timeout(), Some(ms(5_001)));
    assert_eq!(
        s.handle_reply(ms(3), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(1))
    );
    let half = ms(2).saturating_add(far.half());
    assert_eq!(s.poll_timeout(), Some(half));
    assert_eq!(
        s.handle_timeout(half.saturating_sub(Duration::from_micros(1))),
        None
    );
    assert_eq!(s.handle_timeout(half), None);
    assert!(s.poll_probe());
}

#[test]
fn a_request_held_for_hours_keeps_its_whole_time() {
    let mut s: Session<u32, Owed> = Session::new(plan(true), Owed::new());
    s.connecting(ms(0), &POLICY);
    let three_hours = Duration::from_secs(3 * 3_600);
    assert_eq!(
        s.push(ms(0), 7, ms(0).saturating_add(three_hours), &POLICY),
        Ok(Queued::Held)
    );
    s.connected(ms(1), &POLICY);
    pass_handshake(&mut s, ms(5));
    // Its time runs from the handshake's end, all of it: probed halfway.
    assert_eq!(
        s.poll_timeout(),
        Some(ms(5).saturating_add(three_hours.half()))
    );
}

#[test]
fn every_step_and_the_probe_are_the_encoders_bytes() {
    use redlock_core::redlock_resp::{EncodeError, encode};
    let script = &redlock_core::handshake::SCRIPTS[0];
    let source = script.source.as_bytes();
    for creds in [
        Credentials::NONE,
        Credentials {
            user: None,
            password: Some(b"secret"),
            db: 12_345,
        },
        Credentials {
            user: Some(b"app"),
            password: Some(b"pw"),
            db: u32::MAX,
        },
    ] {
        let password = creds.password.unwrap_or_default();
        let mut auth = vec![&b"AUTH"[..]];
        auth.extend(creds.user);
        auth.push(password);
        for (step, script, want) in [
            (Step::Auth, None, auth.clone()),
            (
                Step::ScriptLoad,
                Some(script),
                vec![&b"SCRIPT"[..], b"LOAD", source],
            ),
            (Step::Info, None, vec![&b"INFO"[..], b"server"]),
        ] {
            let (mut got, mut expected) = ([0u8; 1024], [0u8; 1024]);
            let n = encode_step(&mut got, step, script, &creds).unwrap();
            let m = encode::command(&mut expected, &want).unwrap();
            assert_eq!(got[..n], expected[..m], "{step:?}");
            // Into no room: the size, and nothing written.
            assert_eq!(
                encode_step(&mut [], step, script, &creds),
                Err(EncodeError::BufferTooSmall { needed: n })
            );
        }
        let (mut got, mut expected) = ([0u8; 64], [0u8; 64]);
        let n = encode_step(&mut got, Step::Select, None, &creds).unwrap();
        let m = encode::select(&mut expected, u64::from(creds.db)).unwrap();
        assert_eq!(got[..n], expected[..m]);
    }
    let (mut got, mut expected) = ([0u8; 64], [0u8; 64]);
    let n = encode_probe(&mut got).unwrap();
    let m = encode::command(&mut expected, &[b"PING", b"redlock-probe"]).unwrap();
    assert_eq!(got[..n], expected[..m]);
    assert_eq!(
        encode_probe(&mut got[..n - 1]),
        Err(EncodeError::BufferTooSmall { needed: n })
    );
}

#[test]
fn a_reset_session_forgets_its_probe() {
    let mut s = probed();
    s.reset();
    assert_eq!(s.poll_timeout(), None);
    let mut s2 = ready_at(ms(2_000));
    // As new: the probe sent on the connection before the reset is not
    // awaited on the next one.
    s.connecting(ms(2_000), &POLICY);
    s.connected(ms(2_000), &POLICY);
    pass_handshake(&mut s, ms(2_000));
    for s in [&mut s, &mut s2] {
        assert_eq!(s.poll_timeout(), None, "nothing awaited");
        assert_eq!(s.handle_timeout(ms(9_000)), None);
        s.push(ms(9_000), 1, ms(9_100), &POLICY).unwrap();
        assert_eq!(
            s.handle_reply(ms(9_001), &Reply::Nil, no_twin),
            Ok(Event::Reply(1))
        );
    }
}

/// A growable queue, as a platform with a heap keeps one (the trait's own
/// `is_empty`).
#[derive(Debug, Default)]
struct Growable(alloc::collections::VecDeque<Entry<u32>>);

impl Queue<u32> for Growable {
    fn push_back(&mut self, entry: Entry<u32>) -> Result<(), Entry<u32>> {
        self.0.push_back(entry);
        Ok(())
    }
    fn pop_front(&mut self) -> Option<Entry<u32>> {
        self.0.pop_front()
    }
    fn front(&self) -> Option<&Entry<u32>> {
        self.0.front()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn for_each(&self, f: impl FnMut(&Entry<u32>)) {
        self.0.iter().for_each(f);
    }
}

#[test]
fn a_growable_queue_keeps_each_request_s_own_time() {
    // Two requests sent 0.5 s apart, the first still awaited: each keeps
    // its own probe time (the base moves only while nothing is awaited).
    let mut s: Session<u32, Growable> = Session::new(plan(false), Growable::default());
    s.connecting(ms(0), &POLICY);
    s.connected(ms(0), &POLICY);
    pass_handshake(&mut s, ms(1));
    assert!(s.is_ready());
    s.push(ms(10), 1, ms(1_210), &POLICY).unwrap();
    s.push(ms(510), 2, ms(1_710), &POLICY).unwrap();
    assert_eq!(s.owed(), 2);
    assert_eq!(s.poll_timeout(), Some(ms(610)));
    let mut tags = Vec::new();
    s.for_each_owed(|t| tags.push(*t));
    assert_eq!(tags, [1, 2]);
    assert_eq!(
        s.handle_reply(ms(520), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(1))
    );
    assert_eq!(s.owed(), 1);
    assert_eq!(s.poll_timeout(), Some(ms(1_110)));
}

#[test]
fn a_deadline_past_the_range_is_kept_at_its_end() {
    // 2^40 µs (12.7 days) after the base at most: a longer one is cut
    // there, never wrapped round to a near time.
    let mut s = ready_at(ms(0));
    let thirty_years = Duration::from_secs(30 * 365 * 24 * 3_600);
    s.push(ms(0), 1, ms(0).saturating_add(thirty_years), &POLICY)
        .unwrap();
    let most = Duration::from_micros((1u64 << 40) - 1);
    assert_eq!(s.poll_timeout(), Some(ms(0).saturating_add(most)));
}

#[test]
fn the_plan_can_change_before_the_first_connect_and_steps_wait_for_the_transport() {
    let mut s: Session<u32, Owed> = Session::new(plan(false), Owed::new());
    assert!(!s.is_ready());
    s.set_plan(Plan {
        commands: Commands::Scripts,
        auth: false,
        select: true,
        info_required: false,
    });
    s.connecting(ms(0), &POLICY);
    // Nothing is written before the transport is up.
    s.step_written();
    assert!(!s.is_ready());
    s.connected(ms(1), &POLICY);
    assert!(!s.is_ready());
    assert_eq!(s.poll_step().map(|(step, _)| step), Some(Step::Select));
}

#[test]
fn a_server_that_keeps_flapping_is_retried_ever_more_slowly() {
    let mut s = ready_at(ms(0));
    let mut now = ms(0);
    let mut waits = Vec::new();
    for _ in 0..5 {
        // Up, then dropped 100 ms after its handshake: flapping.
        now = now.saturating_add(Duration::from_millis(100));
        s.close(now, Close::Io, &POLICY, |_| {});
        let retry = s.retry_at().unwrap();
        waits.push(retry.saturating_duration_since(now).as_millis());
        assert!(
            !s.may_connect(now, false),
            "no reconnect before the backoff"
        );
        now = retry;
        assert!(s.may_connect(now, false));
        s.connecting(now, &POLICY);
        s.connected(now, &POLICY);
        pass_handshake(&mut s, now);
        assert!(s.is_ready());
    }
    assert_eq!(waits, [10, 20, 40, 80, 160], "the backoff grows");
    // Then it stays up past the connect timeout: stable; a break ends the
    // row and reconnects at once.
    now = now.saturating_add(Duration::from_secs(1));
    s.close(now, Close::Io, &POLICY, |_| {});
    assert_eq!(s.failures(), 0);
    assert!(s.may_connect(now, false));
}

#[test]
fn a_break_at_the_end_of_the_flapping_window_is_not_flapping() {
    // Ready at 0; the connect timeout is 1 s.
    let mut flapped = ready_at(ms(0));
    flapped.close(ms(999), Close::Io, &POLICY, |_| {});
    assert_eq!(flapped.failures(), 1);
    let mut s = ready_at(ms(0));
    s.close(ms(1_000), Close::Io, &POLICY, |_| {});
    assert_eq!(s.failures(), 0, "an established connection broke");
    assert!(s.may_connect(ms(1_000), false));
}

#[test]
fn every_close_says_what_happened() {
    let all = [
        Close::Io,
        Close::BadReply,
        Close::Unsolicited,
        Close::Unanswered,
        Close::OutOfStep,
        Close::ConnectTimeout,
        Close::Stuck,
        Close::Refused(SetupError::NoUptime),
    ];
    let texts: Vec<String> = all.iter().map(ToString::to_string).collect();
    for (why, text) in all.iter().zip(&texts) {
        assert!(text.len() > 10, "{why:?}: {text:?}");
    }
    let mut unique = texts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), texts.len(), "{texts:?}");
    assert!(texts[7].contains("INFO has no uptime_in_seconds"));
}

#[test]
fn a_request_behind_an_overdue_one_goes_behind_a_probe() {
    // Request 1 is overdue (its half time passed) and nobody asked the
    // session since: the next request goes behind a probe, so that the
    // reply of request 1 (if it was lost) is never taken for its own.
    let mut s = ready_at(ms(0));
    s.push(ms(10), 1, ms(60), &POLICY).unwrap();
    assert_eq!(s.push(ms(40), 2, ms(90), &POLICY), Ok(Queued::ProbeFirst));
    assert!(!s.poll_probe(), "counted as written");
    assert_eq!(s.push(ms(41), 3, ms(91), &POLICY), Ok(Queued::Write));
    let mut lost_case = s.clone();
    // In step: request 1's reply, the probe's, then the others'.
    assert_eq!(
        s.handle_reply(ms(50), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(1))
    );
    assert_eq!(s.handle_reply(ms(50), &PROBE, no_twin), Ok(Event::Probe));
    assert_eq!(
        s.handle_reply(ms(51), &Reply::Nil, no_twin),
        Ok(Event::Reply(2))
    );
    // Request 1 lost: the probe's answer comes first, in its place.
    assert_eq!(
        lost_case.handle_reply(ms(50), &PROBE, no_twin),
        Err(Close::OutOfStep)
    );
    let mut lost = Vec::new();
    lost_case.close(ms(50), Close::OutOfStep, &POLICY, |t| lost.push(t));
    assert_eq!(lost, [1, 2, 3], "no reply was taken for request 2 or 3");
}

#[test]
fn a_probe_waits_as_long_as_the_requests_it_follows_were_allowed() {
    // A request allowed 5 s, over a connect timeout of 1 s: a slow server
    // answering at 4 s is not given up.
    let mut s = ready_at(ms(0));
    s.push(ms(10), 1, ms(5_010), &POLICY).unwrap();
    assert_eq!(s.handle_timeout(ms(2_510)), None);
    assert!(s.poll_probe());
    s.probe_written(ms(2_510), &POLICY);
    assert_eq!(s.poll_timeout(), Some(ms(7_510)));
    assert_eq!(s.handle_timeout(ms(4_010)), None);
    assert_eq!(
        s.handle_reply(ms(4_010), &Reply::Integer(1), no_twin),
        Ok(Event::Reply(1))
    );
    assert_eq!(s.handle_reply(ms(4_011), &PROBE, no_twin), Ok(Event::Probe));
    assert!(s.is_ready());
}

/// A `MULTI` block is one request of four replies: the three before
/// `EXEC`'s are `Event::Partial`, `EXEC`'s answers the request; the probe
/// counts replies, so a block answered in full stays in step and a reply
/// lost inside one is found.
#[test]
#[cfg(feature = "native")]
fn a_request_of_several_replies_is_answered_by_its_last() {
    let queued = Reply::Simple(b"QUEUED");
    let exec = Reply::Integer(7);
    let mut s = ready_at(ms(0));
    s.push_with_replies(ms(1), 1, ms(101), 4, &POLICY).unwrap();
    s.push(ms(1), 2, ms(101), &POLICY).unwrap();
    for reply in [Reply::Simple(b"OK"), queued, queued] {
        assert_eq!(s.handle_reply(ms(2), &reply, no_twin), Ok(Event::Partial));
    }
    assert_eq!(s.handle_reply(ms(2), &exec, no_twin), Ok(Event::Reply(1)));
    assert_eq!(s.handle_reply(ms(2), &exec, no_twin), Ok(Event::Reply(2)));
    assert_eq!(
        s.handle_reply(ms(2), &exec, no_twin),
        Err(Close::Unsolicited)
    );

    // Overdue after one reply of a block: the probe follows the block's
    // three other replies and the next request's.
    let mut s = ready_at(ms(0));
    s.push_with_replies(ms(1), 1, ms(41), 4, &POLICY).unwrap();
    s.push(ms(1), 2, ms(41), &POLICY).unwrap();
    assert_eq!(
        s.handle_reply(ms(2), &Reply::Simple(b"OK"), no_twin),
        Ok(Event::Partial)
    );
    assert_eq!(s.handle_timeout(ms(30)), None);
    assert!(s.poll_probe());
    s.probe_written(ms(30), &POLICY);
    let mut in_step = s.clone();
    for _ in 0..2 {
        assert_eq!(
            in_step.handle_reply(ms(31), &queued, no_twin),
            Ok(Event::Partial)
        );
    }
    assert_eq!(
        in_step.handle_reply(ms(31), &exec, no_twin),
        Ok(Event::Reply(1))
    );
    assert_eq!(
        in_step.handle_reply(ms(31), &exec, no_twin),
        Ok(Event::Reply(2))
    );
    assert_eq!(
        in_step.handle_reply(ms(31), &PROBE, no_twin),
        Ok(Event::Probe)
    );
    // One reply of the block lost: the probe's answer comes in the last
    // request's place.
    assert_eq!(s.handle_reply(ms(31), &queued, no_twin), Ok(Event::Partial));
    assert_eq!(s.handle_reply(ms(31), &exec, no_twin), Ok(Event::Partial));
    assert_eq!(s.handle_reply(ms(31), &exec, no_twin), Ok(Event::Reply(1)));
    assert_eq!(
        s.handle_reply(ms(31), &PROBE, no_twin),
        Err(Close::OutOfStep)
    );
    // Closed: the next connection starts afresh.
    let mut lost = Vec::new();
    s.close(ms(5_000), Close::OutOfStep, &POLICY, |t| lost.push(t));
    assert_eq!(lost, [2]);
    s.connecting(ms(5_000), &POLICY);
    s.connected(ms(5_000), &POLICY);
    pass_handshake(&mut s, ms(5_000));
    s.push(ms(5_001), 3, ms(5_100), &POLICY).unwrap();
    assert_eq!(
        s.handle_reply(ms(5_002), &exec, no_twin),
        Ok(Event::Reply(3))
    );
}

#[cfg(feature = "batching")]
#[path = "session/cork.rs"]
mod cork;
