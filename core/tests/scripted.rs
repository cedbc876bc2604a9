//! Scripted tests of the core: replies are fed at given times, and each test
//! asserts what is sent next, the next deadline, and the outcome.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use core::convert::Infallible;

use redlock_core::handshake::Step;
use redlock_core::redlock_resp::script::{
    EXTEND, FENCE_RAISE, FENCE_WRITE, FENCED_ACQUIRE, INSPECT, RELEASE,
};
use redlock_core::redlock_resp::{ErrorKind, Reply, Status, parse_reply};
use redlock_core::{
    Acquire, ArgumentError, Config, Drift, Duration, Extend, FailureKind, FenceRepair, Inspect,
    Instant, Lock, Operation, Release, Retry, ServerId, ServerOutcome, Servers, SetupError,
    Unsolicited,
};

/// A deterministic RNG for tests (not for production: it is a counter).
struct TestRng(u8);

impl rand_core::TryRng for TestRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(u32::from(self.next_byte()) * 0x0101_0101)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(u64::from(self.next_byte()) * 0x0101_0101_0101_0101)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.iter_mut().for_each(|b| *b = self.next_byte());
        Ok(())
    }
}
impl rand_core::TryCryptoRng for TestRng {}
impl TestRng {
    fn next_byte(&mut self) -> u8 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

/// An RNG that always fails, like an OS RNG that cannot be read.
struct BrokenRng;

#[derive(Debug)]
struct RngFailure;
impl core::fmt::Display for RngFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("no entropy")
    }
}
impl core::error::Error for RngFailure {}

impl rand_core::TryRng for BrokenRng {
    type Error = RngFailure;
    fn try_next_u32(&mut self) -> Result<u32, RngFailure> {
        Err(RngFailure)
    }
    fn try_next_u64(&mut self) -> Result<u64, RngFailure> {
        Err(RngFailure)
    }
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), RngFailure> {
        Err(RngFailure)
    }
}
impl rand_core::TryCryptoRng for BrokenRng {}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn dur(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A request as sent: the server and its arguments.
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    server: usize,
    args: Vec<Vec<u8>>,
    /// Marked as a release the platform must try to deliver.
    release: bool,
}

impl Sent {
    fn name(&self) -> &[u8] {
        &self.args[0]
    }
    /// For EVALSHA/EVAL: which script.
    fn script(&self) -> &'static str {
        let body = &self.args[1];
        for (name, s) in [
            ("release", RELEASE),
            ("extend", EXTEND),
            ("fenced", FENCED_ACQUIRE),
            ("fence", FENCE_WRITE),
            ("inspect", INSPECT),
            ("raise", FENCE_RAISE),
        ] {
            if body == s.sha1.as_bytes() || body == s.source.as_bytes() {
                return name;
            }
        }
        panic!("unknown script in {:?}", self);
    }
}

/// Drives an operation in a test.
struct Drive<O: Operation> {
    op: O,
}

impl<O: Operation> Drive<O> {
    fn new(op: O) -> Self {
        Drive { op }
    }

    /// Everything the operation wants to send now.
    fn sent(&mut self, now: Instant) -> Vec<Sent> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Some(t) = self.op.poll_transmit(now, &mut buf).unwrap() {
            let frame = &buf[..t.len];
            let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(frame) else {
                panic!()
            };
            assert_eq!(used, t.len);
            let args = a.iter().map(|r| r.as_bytes().unwrap().to_vec()).collect();
            out.push(Sent {
                server: t.server.index(),
                args,
                release: t.release,
            });
        }
        out
    }

    fn reply(&mut self, now: Instant, server: u8, bytes: &[u8]) -> Result<(), Unsolicited> {
        let Ok(Status::Complete((reply, _))) = parse_reply(bytes) else {
            panic!("bad test reply")
        };
        self.op.handle_reply(now, ServerId(server), reply)
    }

    fn outcome(&mut self) -> Option<O::Output> {
        self.op.poll_outcome()
    }
}

fn no_retry() -> Config {
    Config {
        retry: Retry::NONE,
        ..Config::DEFAULT
    }
}

fn acquire(config: &Config, n: usize, ttl: u64, now: Instant) -> Drive<Acquire<&'static [u8]>> {
    let servers = Servers::new(n).unwrap();
    Drive::new(
        Acquire::new(
            config,
            &servers,
            &b"res"[..],
            dur(ttl),
            None,
            &mut TestRng(0),
            now,
        )
        .unwrap(),
    )
}

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
fn a_release_whose_connection_broke_is_sent_once_more() {
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    d.reply(ms(1), 1, b"$-1\r\n").unwrap();
    d.reply(ms(1), 2, b"$-1\r\n").unwrap();
    assert!(d.outcome().unwrap().is_err());
    assert_eq!(d.sent(ms(1)).len(), 3);
    // Server 0 (which has our key) loses its connection before answering
    // the release: it is sent again, once.
    d.op.handle_connection_error(ms(2), ServerId(0));
    assert!(!d.op.is_finished());
    let again = d.sent(ms(2));
    assert_eq!(again.len(), 1);
    assert!(again[0].server == 0 && again[0].script() == "release" && again[0].release);
    d.op.handle_connection_error(ms(3), ServerId(0));
    assert!(d.sent(ms(3)).is_empty(), "only once");
    assert!(d.op.is_finished());

    // A7 the same: an unlock whose connection broke asks again.
    let lock = Lock::from_token(*d.op.token(), dur(10_000), ms(0));
    let servers = Servers::new(3).unwrap();
    let mut d = Drive::new(Release::for_lock(&no_retry(), &servers, b"res", &lock));
    assert_eq!(d.sent(ms(0)).len(), 3);
    d.op.handle_connection_error(ms(1), ServerId(1));
    assert_eq!(d.sent(ms(1)).len(), 1);
    for s in 0..3 {
        d.reply(ms(2), s, b":1\r\n").unwrap();
    }
    assert_eq!(d.outcome().unwrap().deleted(), 3);
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
    let config = Config {
        request_timeout: Some(dur(7)),
        ..no_retry()
    };
    let mut d = acquire(&config, 1, 60_000, ms(0));
    d.sent(ms(0));
    assert_eq!(d.op.poll_timeout(), Some(ms(7)));
}

#[test]
fn a_majority_too_late_is_expired_and_released() {
    // ttl 1000, drift 12 ms: validity is gone once 988 ms have elapsed.
    let config = Config {
        request_timeout: Some(dur(5_000)),
        ..no_retry()
    };
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
fn retries_wait_longer_than_an_attempt_and_are_bounded() {
    let config = Config {
        retry: Retry {
            retries: 2,
            jitter: dur(200),
        },
        ..Config::DEFAULT
    };
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
    let config = Config {
        retry: Retry {
            retries: 1_000,
            jitter: dur(10),
        },
        ..Config::DEFAULT
    };
    let servers = Servers::new(1).unwrap();
    let op = Acquire::new(
        &config,
        &servers,
        b"r",
        dur(1_000),
        Some(ms(100)),
        &mut TestRng(0),
        ms(0),
    )
    .unwrap();
    let mut d = Drive::new(op);
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
fn noscript_falls_back_to_eval_transparently() {
    let servers = Servers::new(2).unwrap();
    let mut d =
        Drive::new(Release::new(&Config::DEFAULT, &servers, b"res", b"tok", dur(50)).unwrap());
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
    let mut d =
        Drive::new(Release::new(&Config::DEFAULT, &servers, b"res", b"tok", dur(50)).unwrap());
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
fn release_is_idempotent_and_waits_for_every_server_or_its_timeout() {
    let servers = Servers::new(3).unwrap();
    let mut d =
        Drive::new(Release::new(&Config::DEFAULT, &servers, b"res", b"tok", dur(20)).unwrap());
    assert_eq!(d.sent(ms(0)).len(), 3);
    d.reply(ms(1), 0, b":0\r\n").unwrap();
    d.reply(ms(1), 1, b":0\r\n").unwrap();
    assert!(d.outcome().is_none());
    d.op.handle_timeout(ms(20));
    let released = d.outcome().unwrap();
    assert_eq!(released.deleted(), 0);
    assert!(!released.complete());
    assert_eq!(
        released.report.outcomes(),
        &[
            ServerOutcome::NotHeld,
            ServerOutcome::NotHeld,
            ServerOutcome::TimedOut
        ]
    );
    assert!(d.op.is_finished());
}

fn held_lock(n: usize, ttl: u64) -> (Lock, Servers) {
    let servers = Servers::new(n).unwrap();
    let mut d = acquire(&Config::DEFAULT, n, ttl, ms(0));
    d.sent(ms(0));
    for s in 0..n as u8 {
        d.reply(ms(0), s, b"+OK\r\n").unwrap();
    }
    (d.outcome().unwrap().unwrap(), servers)
}

#[test]
fn extend_recomputes_validity_from_the_start_of_its_round() {
    let (lock, servers) = held_lock(3, 1_000);
    assert_eq!(lock.valid_until(), ms(988));
    let mut d = Drive::new(
        Extend::new(
            &Config::DEFAULT,
            &servers,
            b"res",
            &lock,
            dur(2_000),
            ms(500),
        )
        .unwrap(),
    );
    let sent = d.sent(ms(500));
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|s| s.script() == "extend"
        && s.args[4] == lock.token().as_bytes()
        && s.args[5] == b"2000"));
    d.reply(ms(503), 0, b":1\r\n").unwrap();
    d.reply(ms(510), 2, b":1\r\n").unwrap();
    let extended = d.outcome().unwrap().unwrap();
    // 2000 - 10 elapsed - (20 + 2) drift, from the round's start.
    assert_eq!(extended.validity(), dur(2_000 - 10 - 22));
    assert_eq!(extended.valid_until(), ms(510 + 1_968));
    assert_eq!(extended.extensions(), 1);
    assert_eq!(extended.token(), lock.token());
}

#[test]
fn extend_fails_when_the_majority_comes_after_the_current_validity() {
    let (lock, servers) = held_lock(3, 1_000);
    let config = Config {
        request_timeout: Some(dur(1_000)),
        ..Config::DEFAULT
    };
    let mut d =
        Drive::new(Extend::new(&config, &servers, b"res", &lock, dur(10_000), ms(980)).unwrap());
    d.sent(ms(980));
    d.reply(ms(985), 0, b":1\r\n").unwrap();
    d.reply(ms(988), 1, b":1\r\n").unwrap();
    let err = d.outcome().unwrap().unwrap_err();
    assert_eq!(err.kind, FailureKind::Expired);
}

#[test]
fn extend_reports_a_lost_lock_and_never_recreates_keys() {
    let (lock, servers) = held_lock(3, 1_000);
    let mut d = Drive::new(
        Extend::new(
            &Config::DEFAULT,
            &servers,
            b"res",
            &lock,
            dur(1_000),
            ms(100),
        )
        .unwrap(),
    );
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
        let mut d =
            Drive::new(Extend::new(&config, &servers, b"res", &lock, dur(10_000), ms(i)).unwrap());
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
fn fenced_acquire_takes_the_max_counter_plus_one_and_needs_a_majority_to_confirm() {
    let config = Config {
        fencing: true,
        ..no_retry()
    };
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

#[test]
fn a_fence_not_confirmed_by_a_majority_fails_and_releases() {
    let config = Config {
        fencing: true,
        ..no_retry()
    };
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

/// With a 30 s restart guard, at t=60 s: servers 1 and 0 vote for us (a
/// majority, if 1's vote counted), server 2 refuses. Returns the report of
/// the failure that must follow.
fn server_1_votes_under_a_guard(servers: &Servers) -> redlock_core::Report {
    let config = Config {
        restart_guard: Some(dur(30_000)),
        ..no_retry()
    };
    let op = Acquire::new(
        &config,
        servers,
        b"res",
        dur(10_000),
        None,
        &mut TestRng(0),
        ms(60_000),
    )
    .unwrap();
    let mut d = Drive::new(op);
    d.sent(ms(60_000));
    d.reply(ms(60_001), 1, b"+OK\r\n").unwrap();
    d.reply(ms(60_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().is_none(), "server 1's vote does not count");
    d.reply(ms(60_002), 2, b"$-1\r\n").unwrap();
    d.outcome().unwrap().unwrap_err().report
}

#[test]
fn the_restart_guard_refuses_votes_from_a_recently_restarted_server() {
    let config = Config {
        restart_guard: Some(dur(30_000)),
        ..no_retry()
    };
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
    let op = Acquire::new(
        &config,
        &fresh,
        b"res",
        dur(10_000),
        None,
        &mut TestRng(0),
        ms(60_000),
    )
    .unwrap();
    let mut d = Drive::new(op);
    d.sent(ms(60_000));
    d.op.set_incarnation(ServerId(2), ms(59_000));
    d.reply(ms(60_001), 2, b"+OK\r\n").unwrap();
    d.reply(ms(60_001), 0, b"+OK\r\n").unwrap();
    assert!(d.outcome().is_none(), "server 2's vote does not count");
    // Once the guard has passed, it counts again.
    let op = Acquire::new(
        &config,
        &servers,
        b"res",
        dur(10_000),
        None,
        &mut TestRng(0),
        ms(80_000),
    )
    .unwrap();
    let mut d = Drive::new(op);
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
    let mut d = Drive::new(
        Acquire::new(
            &no_retry(),
            &Servers::new(3).unwrap(),
            b"res",
            dur(10_000),
            None,
            &mut TestRng(0),
            ms(0),
        )
        .unwrap(),
    );
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

#[test]
fn inspect_reads_holder_and_pttl_per_server() {
    let servers = Servers::new(4).unwrap();
    let mut d = Drive::new(Inspect::new(&servers, b"res", dur(20)));
    let sent = d.sent(ms(0));
    assert!(
        sent.iter()
            .all(|s| s.script() == "inspect" && s.args[3] == b"res")
    );
    d.reply(ms(1), 0, b"*2\r\n$3\r\nabc\r\n:1500\r\n").unwrap();
    d.reply(ms(1), 1, b"*2\r\n$-1\r\n:-2\r\n").unwrap();
    d.reply(ms(1), 2, b"-WRONGTYPE x\r\n").unwrap();
    d.op.handle_timeout(ms(20));
    let inspection = d.outcome().unwrap();
    let e = inspection.entries();
    assert_eq!(e.len(), 4);
    assert_eq!(
        (
            e[0].outcome,
            e[0].holder.as_deref(),
            e[0].pttl_ms,
            e[0].ttl()
        ),
        (ServerOutcome::Ok, Some(&b"abc"[..]), 1500, Some(dur(1500)))
    );
    assert_eq!(
        (e[1].outcome, e[1].holder.as_deref(), e[1].ttl()),
        (ServerOutcome::Ok, None, None)
    );
    assert_eq!(
        e[2].outcome,
        ServerOutcome::ServerError(ErrorKind::WrongType)
    );
    assert_eq!(e[3].outcome, ServerOutcome::TimedOut);
    assert_eq!(inspection.majority_holder(), None);
    // A long foreign value is cut, with its full length kept.
    let mut d = Drive::new(Inspect::new(&Servers::new(1).unwrap(), b"res", dur(20)));
    d.sent(ms(0));
    let mut reply = b"*2\r\n$100\r\n".to_vec();
    reply.extend_from_slice(&[b'x'; 100]);
    reply.extend_from_slice(b"\r\n:-1\r\n");
    d.reply(ms(1), 0, &reply).unwrap();
    let i = d.outcome().unwrap();
    assert_eq!(
        (
            i.entries()[0].holder.as_ref().unwrap().len(),
            i.entries()[0].holder_len
        ),
        (64, 100)
    );
    assert_eq!(i.majority_holder(), Some(&[b'x'; 64][..]));
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
fn server_counts_are_bounded() {
    assert!(Servers::new(0).is_err());
    assert!(Servers::new(redlock_core::MAX_SERVERS).is_ok());
    assert!(Servers::new(redlock_core::MAX_SERVERS + 1).is_err());
    const { assert!(redlock_core::MAX_SERVERS >= 9) };
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
}

#[test]
fn a_vote_without_a_counter_counts_once_a_majority_of_the_others_had_one() {
    let config = Config {
        fencing: true,
        ..no_retry()
    };
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

#[test]
fn release_takes_any_token_up_to_64_bytes() {
    let servers = Servers::new(1).unwrap();
    let long = [b'x'; 64];
    let mut d = Drive::new(Release::new(&Config::DEFAULT, &servers, b"r", &long, dur(20)).unwrap());
    assert_eq!(d.sent(ms(0))[0].args[4], long);
    assert_eq!(
        Release::new(&Config::DEFAULT, &servers, b"r", &[b'x'; 65], dur(20),).err(),
        Some(ArgumentError::Token)
    );
    let (lock, servers) = held_lock(2, 1_000);
    let mut d = Drive::new(Release::for_lock(&Config::DEFAULT, &servers, b"res", &lock));
    let sent = d.sent(ms(1));
    assert!(
        sent.iter()
            .all(|s| s.script() == "release" && s.args[4] == lock.token().as_bytes())
    );
    assert_eq!(d.op.poll_timeout(), Some(ms(11)));
}

#[test]
fn drift_ratio_maths_is_exact_and_saturates() {
    let d = Duration::from_micros(10_999_000);
    assert_eq!(d.mul_ratio_ceil(1, 100), Duration::from_micros(109_990));
    assert_eq!(
        Duration::from_micros(101).mul_ratio_ceil(1, 100),
        Duration::from_micros(2),
        "rounded up"
    );
    assert_eq!(
        Duration::from_micros(100).mul_ratio_ceil(1, 100),
        Duration::from_micros(1)
    );
    assert_eq!(
        Duration::MAX.mul_ratio_ceil(1, 100),
        Duration::from_micros(u64::MAX / 100 + 1)
    );
    assert_eq!(Duration::MAX.mul_ratio_ceil(u32::MAX, 1), Duration::MAX);
    assert_eq!(
        Duration::MAX.mul_ratio_ceil(u32::MAX, u32::MAX),
        Duration::MAX
    );
    assert_eq!(d.mul_ratio_ceil(1, 0), Duration::MAX);
    assert_eq!(d.mul_ratio_ceil(0, 7), Duration::ZERO);
    // Against exact 128-bit arithmetic on a spread of values.
    let mut x = 1u64;
    for _ in 0..2_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let (num, den) = ((x >> 7) as u32 % 1_000, ((x >> 17) as u32 % 100_000).max(1));
        let exact = (u128::from(x) * u128::from(num)).div_ceil(u128::from(den));
        let want = u64::try_from(exact).unwrap_or(u64::MAX);
        assert_eq!(
            Duration::from_micros(x)
                .mul_ratio_ceil(num, den)
                .as_micros(),
            want,
            "{x} * {num} / {den}"
        );
    }
}

#[test]
fn a_retry_waits_at_least_a_request_timeout_even_after_instant_failures() {
    let config = Config {
        retry: Retry {
            retries: 1,
            jitter: Duration::ZERO,
        },
        ..Config::DEFAULT
    };
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
fn waiting_stops_when_no_validity_can_be_left() {
    // A request timeout longer than the ttl: the attempt still ends when its
    // validity would be gone (ttl - drift), as expired.
    let config = Config {
        request_timeout: Some(dur(60_000)),
        ..no_retry()
    };
    let mut d = acquire(&config, 3, 1_000, ms(0));
    d.sent(ms(0));
    d.reply(ms(1), 0, b"+OK\r\n").unwrap();
    assert_eq!(d.op.poll_timeout(), Some(ms(988)));
    d.op.handle_timeout(ms(988));
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Expired);
    assert_eq!(d.sent(ms(988)).len(), 3, "released everywhere");
}

#[test]
fn releases_go_out_to_a_server_that_stopped_answering() {
    // Server 2 never answers; attempts pile up requests on it. Every SET sent
    // to it must be followed by a release (A5), even past the usual cap, with
    // fencing too (fenced SET, fence write, release per attempt).
    for fencing in [false, true] {
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
fn an_extension_that_outlasts_the_current_validity_is_expired_at_its_end() {
    let (lock, servers) = held_lock(3, 1_000);
    let config = Config {
        request_timeout: Some(dur(60_000)),
        ..Config::DEFAULT
    };
    let mut d =
        Drive::new(Extend::new(&config, &servers, b"res", &lock, dur(1_000), ms(900)).unwrap());
    d.sent(ms(900));
    d.reply(ms(901), 0, b":1\r\n").unwrap();
    assert_eq!(d.op.poll_timeout(), Some(lock.valid_until()));
    d.op.handle_timeout(lock.valid_until());
    assert_eq!(d.outcome().unwrap().unwrap_err().kind, FailureKind::Expired);
}

#[test]
fn a_request_sent_late_is_still_sent_and_timed_from_its_sending() {
    // A release made at t=0 whose platform gets to send only at t=500 ms
    // (a descheduled thread, a busy lock): a check of the deadlines first
    // must not drop it unsent, or the key would stay until it expires.
    let servers = Servers::new(3).unwrap();
    let mut d =
        Drive::new(Release::new(&Config::DEFAULT, &servers, b"res", b"tok", dur(20)).unwrap());
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

    // The same for an acquisition: late votes count, but the validity is
    // still measured from the start of the attempt (A1, A4).
    let mut d = acquire(&no_retry(), 3, 1_000, ms(0));
    d.op.handle_timeout(ms(300));
    assert!(d.outcome().is_none());
    assert_eq!(d.sent(ms(300)).len(), 3);
    for s in 0..3 {
        d.reply(ms(301), s, b"+OK\r\n").unwrap();
    }
    let lock = d.outcome().unwrap().unwrap();
    // 1000 - 301 - (10 + 2) ms.
    assert_eq!(lock.validity(), dur(687));
}

#[test]
fn the_releases_of_a_failed_attempt_go_out_however_late_the_platform_sends() {
    let config = Config {
        retry: Retry {
            retries: 1,
            jitter: dur(0),
        },
        ..Config::DEFAULT
    };
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
fn releases_are_marked_for_delivery_and_nothing_else_is() {
    let mut d = acquire(&no_retry(), 3, 10_000, ms(0));
    let sets = d.sent(ms(0));
    assert!(sets.iter().all(|s| !s.release));
    for s in 0..2 {
        d.reply(ms(1), s, b"$-1\r\n").unwrap();
    }
    let releases = d.sent(ms(1));
    assert_eq!(releases.len(), 3);
    assert!(
        releases
            .iter()
            .all(|s| s.script() == "release" && s.release)
    );
    let lock = Lock::from_token(*d.op.token(), dur(10_000), ms(0));
    let servers = Servers::new(3).unwrap();
    let mut d = Drive::new(Release::for_lock(&no_retry(), &servers, b"res", &lock));
    assert!(d.sent(ms(2)).iter().all(|s| s.release));
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
