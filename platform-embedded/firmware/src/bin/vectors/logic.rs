//! Vectors of `redlock-core`: quorum and validity arithmetic, the clock
//! types, and scripted acquire / extend / release rounds over 5 servers
//! (replies fed as bytes through the parser, requests checked as sent), and
//! the handshake judge.

use core::convert::Infallible;
use core::fmt::Write as _;

use redlock_core::handshake::{self, Plan, ServerInfo, Step, Verdict};
use redlock_core::{
    Acquire, ArgumentError, Config, Drift, Duration, Extend, FailureKind, Instant, Lock,
    MAX_SERVERS, Operation, Release, Retry, ServerCountError, ServerId, ServerOutcome, Servers,
    SetupError, TOKEN_LEN, Token, Unsolicited, majority,
};
use redlock_resp::script::{EXTEND, FENCE_WRITE, FENCED_ACQUIRE, RELEASE};
use redlock_resp::{ErrorKind, Reply, Status, parse_reply};

use crate::codec::Bytes;
use crate::{Fail, Outcome, Vector};

/// The core's vectors, in the order they run.
pub const VECTORS: &[Vector] = &[
    ("core/majority", majority_1_to_9),
    ("core/quorum", quorum_is_majority),
    ("core/drift", drift),
    ("core/validity", validity),
    (
        "core/validity-none-when-nothing-left",
        validity_none_when_nothing_left,
    ),
    ("core/validity-custom-drift", validity_custom_drift),
    ("core/request-timeout-clamped", request_timeout_clamped),
    ("time/duration-saturating", duration_saturating),
    ("time/duration-mul-ratio-ceil", duration_mul_ratio_ceil),
    ("time/duration-display", duration_display),
    ("time/instant-saturating", instant_saturating),
    ("core/token-hex", token_hex),
    ("core/server-count", server_count),
    ("acquire/sends-set-nx-px", acquire_sends_set_nx_px),
    (
        "acquire/majority-despite-error",
        acquire_majority_despite_error,
    ),
    (
        "acquire/majority-despite-timeout",
        acquire_majority_despite_timeout,
    ),
    (
        "acquire/conflict-releases-everywhere",
        acquire_conflict_releases_everywhere,
    ),
    (
        "acquire/unavailable-after-timeouts",
        acquire_unavailable_after_timeouts,
    ),
    ("acquire/expired-when-late", acquire_expired_when_late),
    (
        "acquire/retry-keeps-the-token",
        acquire_retry_keeps_the_token,
    ),
    ("acquire/bad-arguments", acquire_bad_arguments),
    ("acquire/unsolicited-and-push", acquire_unsolicited_and_push),
    ("acquire/setup-error", acquire_setup_error),
    ("acquire/fenced", acquire_fenced),
    ("lock/renewal", lock_renewal),
    ("extend/majority", extend_majority),
    ("extend/lost", extend_lost),
    ("extend/expired-while-waiting", extend_expired_while_waiting),
    ("extend/refused-arguments", extend_refused_arguments),
    ("release/counts-deletions", release_counts_deletions),
    (
        "release/noscript-falls-back-to-eval",
        release_noscript_falls_back_to_eval,
    ),
    (
        "release/resent-after-connection-error",
        release_resent_after_connection_error,
    ),
    ("release/token-capacity", release_token_capacity),
    (
        "handshake/select-error-refused",
        handshake_select_error_refused,
    ),
    ("handshake/ok-accepted", handshake_ok_accepted),
    ("handshake/other-steps", handshake_other_steps),
    ("handshake/steps-and-twins", handshake_steps_and_twins),
];

/// The token [`CounterRng`] from 0 gives: bytes 1 to 20, in hex.
const TOKEN: &[u8] = b"0102030405060708090a0b0c0d0e0f1011121314";

/// A deterministic stand-in RNG (a counter: never for production).
struct CounterRng(u8);

impl CounterRng {
    fn next_byte(&mut self) -> u8 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

impl rand_core::TryRng for CounterRng {
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
impl rand_core::TryCryptoRng for CounterRng {}

/// An RNG that always fails.
struct BrokenRng;

/// The failure of [`BrokenRng`].
#[derive(Debug)]
struct NoEntropy;

impl core::fmt::Display for NoEntropy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("no entropy")
    }
}
impl core::error::Error for NoEntropy {}

impl rand_core::TryRng for BrokenRng {
    type Error = NoEntropy;
    fn try_next_u32(&mut self) -> Result<u32, NoEntropy> {
        Err(NoEntropy)
    }
    fn try_next_u64(&mut self) -> Result<u64, NoEntropy> {
        Err(NoEntropy)
    }
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), NoEntropy> {
        Err(NoEntropy)
    }
}
impl rand_core::TryCryptoRng for BrokenRng {}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn dur(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The default config without retries.
const NO_RETRY: Config = Config {
    retry: Retry::NONE,
    ..Config::DEFAULT
};

/// The longest request frame kept by [`transmit`].
const FRAME_CAPACITY: usize = 384;

/// A request as the operation wrote it.
struct Sent {
    server: u8,
    release: bool,
    frame: heapless::Vec<u8, FRAME_CAPACITY>,
}

impl Sent {
    /// The arguments of the command (it must be an array of bulk strings).
    fn args(&self) -> Result<heapless::Vec<&[u8], 8>, Fail> {
        let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(&self.frame) else {
            return Err(Fail::new(
                format_args!("not a command: {:?}", Bytes(&self.frame)),
                line!(),
            ));
        };
        let mut out = heapless::Vec::new();
        for r in a.iter() {
            match r.as_bytes() {
                Some(b) if used == self.frame.len() && out.push(b).is_ok() => {}
                _ => {
                    return Err(Fail::new(
                        format_args!("bad command: {:?}", Bytes(&self.frame)),
                        line!(),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Fails unless the command is exactly `expected`.
    fn expect(&self, expected: &[&[u8]]) -> Outcome {
        let args = self.args()?;
        if args.as_slice() != expected {
            return Err(Fail::new(
                format_args!(
                    "server {} got {:?}, expected {:?}",
                    self.server,
                    Bytes(&self.frame),
                    expected
                        .iter()
                        .map(|a| Bytes(a))
                        .collect::<heapless::Vec<_, 8>>()
                ),
                line!(),
            ));
        }
        Ok(())
    }
}

/// Everything `op` wants to send at `now`.
fn transmit<O: Operation>(op: &mut O, now: Instant) -> Result<heapless::Vec<Sent, 16>, Fail> {
    let mut out = heapless::Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let t = match op.poll_transmit(now, &mut buf) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(out),
            Err(e) => fail!("poll_transmit: {:?}", e),
        };
        let Ok(frame) = heapless::Vec::from_slice(&buf[..t.len]) else {
            fail!("a frame of {} bytes", t.len);
        };
        let sent = Sent {
            server: t.server.0,
            release: t.release,
            frame,
        };
        if out.push(sent).is_err() {
            fail!("more than 16 requests at once");
        }
    }
}

/// Feeds the reply `bytes` from `server`; the operation's answer.
fn feed<O: Operation>(
    op: &mut O,
    now: Instant,
    server: u8,
    bytes: &[u8],
) -> Result<Result<(), Unsolicited>, Fail> {
    match parse_reply(bytes) {
        Ok(Status::Complete((reply, _))) => Ok(op.handle_reply(now, ServerId(server), reply)),
        other => Err(Fail::new(
            format_args!("bad scripted reply {:?}: {:?}", Bytes(bytes), other),
            line!(),
        )),
    }
}

/// Feeds the reply `bytes` from `server`, which must be accepted.
fn answer<O: Operation>(op: &mut O, now: Instant, server: u8, bytes: &[u8]) -> Outcome {
    match feed(op, now, server, bytes)? {
        Ok(()) => Ok(()),
        Err(e) => Err(Fail::new(
            format_args!("server {server}, {:?}: {e}", Bytes(bytes)),
            line!(),
        )),
    }
}

fn servers(n: usize) -> Result<Servers, Fail> {
    Servers::new(n).map_err(|e| Fail::new(format_args!("Servers::new: {e}"), line!()))
}

/// An acquisition of `res` for `ttl_ms` on `n` servers, started at `now`.
fn acquire(
    config: &Config,
    n: usize,
    ttl_ms: u64,
    now: Instant,
) -> Result<Acquire<&'static [u8]>, Fail> {
    Acquire::new(
        config,
        &servers(n)?,
        &b"res"[..],
        dur(ttl_ms),
        None,
        &mut CounterRng(0),
        now,
    )
    .map_err(|e| Fail::new(format_args!("Acquire::new: {e}"), line!()))
}

/// A lock on `res` for 10 s, acquired on all 5 servers at t = 0.
fn held_lock() -> Result<Lock, Fail> {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    for s in 0..5 {
        answer(&mut op, ms(0), s, b"+OK\r\n")?;
    }
    match op.poll_outcome() {
        Some(Ok(lock)) => Ok(lock),
        other => Err(Fail::new(format_args!("acquire: {other:?}"), line!())),
    }
}

fn majority_1_to_9() -> Outcome {
    let expected = [1, 2, 2, 3, 3, 4, 4, 5, 5];
    for (n, want) in (1..=9).zip(expected) {
        ensure!(majority(n) == want, "majority({}) = {}", n, majority(n));
    }
    Ok(())
}

fn quorum_is_majority() -> Outcome {
    for n in 1..=MAX_SERVERS {
        ensure!(Config::DEFAULT.quorum(n) == majority(n), "quorum({})", n);
        ensure!(
            2 * Config::DEFAULT.quorum(n) > n,
            "quorum({}) is no majority",
            n
        );
    }
    ensure_eq!(MAX_SERVERS, 9);
    Ok(())
}

fn drift() -> Outcome {
    let d = Drift::DEFAULT;
    ensure_eq!(d.for_ttl(dur(10_000)), dur(102));
    ensure_eq!(d.for_ttl(dur(30_000)), dur(302));
    ensure_eq!(d.for_ttl(dur(1)), Duration::from_micros(2_010));
    ensure_eq!(d.for_ttl(dur(150)), Duration::from_micros(3_500));
    // Rounded up: 1/3 of 10 us is 4 us.
    let third = Drift {
        ratio_num: 1,
        ratio_den: 3,
        constant: Duration::ZERO,
    };
    ensure_eq!(
        third.for_ttl(Duration::from_micros(10)),
        Duration::from_micros(4)
    );
    let infinite = Drift {
        ratio_den: 0,
        ..Drift::DEFAULT
    };
    ensure_eq!(infinite.for_ttl(dur(10_000)), Duration::MAX);
    Ok(())
}

fn validity() -> Outcome {
    let c = Config::DEFAULT;
    // ttl - elapsed - (ttl/100 + 2 ms) = 10000 - 3 - 102.
    ensure_eq!(c.validity(dur(10_000), ms(100), ms(103)), Some(dur(9_895)));
    ensure_eq!(c.validity(dur(10_000), ms(0), ms(0)), Some(dur(9_898)));
    // A start after now counts as no time elapsed.
    ensure_eq!(c.validity(dur(10_000), ms(50), ms(10)), Some(dur(9_898)));
    ensure_eq!(
        c.validity(dur(1_000), ms(0), Instant::from_micros(1_500)),
        Some(Duration::from_micros(986_500))
    );
    Ok(())
}

fn validity_none_when_nothing_left() -> Outcome {
    let c = Config::DEFAULT;
    ensure_eq!(c.validity(dur(10_000), ms(0), ms(9_897)), Some(dur(1)));
    ensure_eq!(
        c.validity(dur(10_000), ms(0), Instant::from_micros(9_897_999)),
        Some(Duration::from_micros(1))
    );
    ensure_eq!(c.validity(dur(10_000), ms(0), ms(9_898)), None);
    ensure_eq!(c.validity(dur(10_000), ms(0), ms(9_999)), None);
    ensure_eq!(c.validity(dur(10_000), ms(0), ms(20_000)), None);
    // The drift alone (2.02 ms) is more than a 2 ms ttl.
    ensure_eq!(c.validity(dur(2), ms(0), ms(0)), None);
    ensure_eq!(
        c.validity(dur(3), ms(0), ms(0)),
        Some(Duration::from_micros(970))
    );
    Ok(())
}

fn validity_custom_drift() -> Outcome {
    let c = Config {
        drift: Drift {
            ratio_num: 1,
            ratio_den: 10,
            constant: dur(5),
        },
        ..Config::DEFAULT
    };
    ensure_eq!(c.validity(dur(1_000), ms(0), ms(10)), Some(dur(885)));
    let none = Config {
        drift: Drift {
            ratio_num: 0,
            ratio_den: 1,
            constant: Duration::ZERO,
        },
        ..Config::DEFAULT
    };
    ensure_eq!(none.validity(dur(1_000), ms(0), ms(10)), Some(dur(990)));
    ensure_eq!(none.validity(dur(1_000), ms(0), ms(1_000)), None);
    let infinite = Config {
        drift: Drift {
            ratio_den: 0,
            ..Drift::DEFAULT
        },
        ..Config::DEFAULT
    };
    ensure_eq!(infinite.validity(dur(1_000), ms(0), ms(0)), None);
    Ok(())
}

fn request_timeout_clamped() -> Outcome {
    let c = Config::DEFAULT;
    ensure_eq!(Config::MIN_REQUEST_TIMEOUT, dur(5));
    ensure_eq!(Config::MAX_REQUEST_TIMEOUT, dur(500));
    let table = [
        (Duration::from_millis(1), dur(5)),
        (dur(100), dur(5)),
        (dur(499), dur(5)),
        (dur(600), Duration::from_micros(6_000)),
        (dur(1_234), Duration::from_micros(12_340)),
        (dur(10_000), dur(100)),
        (dur(50_000), dur(500)),
        (dur(100_000), dur(500)),
        (Duration::from_secs(3_600), dur(500)),
        (Duration::MAX, dur(500)),
    ];
    for (ttl, want) in table {
        let got = c.request_timeout_for(ttl);
        ensure!(got == want, "ttl {}: {}, expected {}", ttl, got, want);
    }
    // An explicit timeout is used as is, unclamped.
    for t in [dur(7), dur(2_000)] {
        let explicit = Config {
            request_timeout: Some(t),
            ..Config::DEFAULT
        };
        ensure_eq!(explicit.request_timeout_for(dur(10_000)), t);
        ensure_eq!(explicit.request_timeout_for(dur(1)), t);
    }
    Ok(())
}

fn duration_saturating() -> Outcome {
    let one = Duration::from_micros(1);
    ensure_eq!(Duration::from_millis(u64::MAX), Duration::MAX);
    ensure_eq!(Duration::from_secs(u64::MAX), Duration::MAX);
    ensure_eq!(Duration::from_secs(2), dur(2_000));
    ensure_eq!(Duration::MAX.saturating_add(one), Duration::MAX);
    ensure_eq!(Duration::ZERO.saturating_sub(one), Duration::ZERO);
    ensure_eq!(dur(5).saturating_sub(dur(7)), Duration::ZERO);
    ensure_eq!(dur(7).saturating_sub(dur(5)), dur(2));
    ensure_eq!(dur(5).checked_sub(dur(7)), None);
    ensure_eq!(dur(7).checked_sub(dur(5)), Some(dur(2)));
    ensure_eq!(Duration::MAX.checked_add(one), None);
    ensure_eq!(dur(1).checked_add(dur(2)), Some(dur(3)));
    ensure_eq!(Duration::from_micros(1_999).as_millis(), 1);
    ensure_eq!(Duration::MAX.as_millis(), u64::MAX / 1_000);
    ensure_eq!(dur(3).min(dur(4)), dur(3));
    ensure_eq!(dur(3).max(dur(4)), dur(4));
    ensure!(Duration::ZERO.is_zero() && !one.is_zero());
    ensure!(dur(1) < dur(2));
    Ok(())
}

fn duration_mul_ratio_ceil() -> Outcome {
    let us = Duration::from_micros;
    ensure_eq!(us(10).mul_ratio_ceil(1, 3), us(4));
    ensure_eq!(us(9).mul_ratio_ceil(1, 3), us(3));
    ensure_eq!(us(1_000).mul_ratio_ceil(1, 100), us(10));
    ensure_eq!(us(1_001).mul_ratio_ceil(1, 100), us(11));
    ensure_eq!(us(7).mul_ratio_ceil(0, 5), Duration::ZERO);
    ensure_eq!(us(7).mul_ratio_ceil(1, 0), Duration::MAX);
    ensure_eq!(Duration::MAX.mul_ratio_ceil(2, 1), Duration::MAX);
    ensure_eq!(
        Duration::MAX.mul_ratio_ceil(1, 100),
        us(184_467_440_737_095_517)
    );
    ensure_eq!(
        Duration::MAX.mul_ratio_ceil(u32::MAX, u32::MAX),
        Duration::MAX
    );
    // Beyond 32 bits: 64-bit division on a 32-bit core.
    ensure_eq!(
        us(10_000_000_000_000).mul_ratio_ceil(3, 7),
        us(4_285_714_285_715)
    );
    Ok(())
}

fn duration_display() -> Outcome {
    let table = [
        (dur(10), "10ms"),
        (Duration::from_micros(1_500), "1.500ms"),
        (Duration::from_micros(7), "0.007ms"),
        (Duration::ZERO, "0ms"),
        (Duration::MAX, "18446744073709551.615ms"),
    ];
    for (d, want) in table {
        let mut s = heapless::String::<32>::new();
        let _ = write!(s, "{d}");
        ensure!(
            s.as_str() == want,
            "{:?} shows as {:?}, expected {:?}",
            d,
            s.as_str(),
            want
        );
    }
    Ok(())
}

fn instant_saturating() -> Outcome {
    let end = Instant::from_micros(u64::MAX);
    ensure_eq!(ms(5).saturating_duration_since(ms(10)), Duration::ZERO);
    ensure_eq!(ms(10).saturating_duration_since(ms(5)), dur(5));
    ensure_eq!(end.saturating_add(Duration::from_micros(1)), end);
    ensure_eq!(ms(1).saturating_add(dur(2)), ms(3));
    ensure_eq!(Instant::ZERO.saturating_sub(dur(1)), Instant::ZERO);
    ensure_eq!(ms(3).saturating_sub(dur(1)), ms(2));
    ensure_eq!(Instant::from_millis(u64::MAX), end);
    ensure_eq!(ms(7).as_micros(), 7_000);
    ensure!(ms(1) < ms(2) && Instant::ZERO < ms(1));
    ensure_eq!(end.saturating_duration_since(Instant::ZERO), Duration::MAX);
    Ok(())
}

fn token_hex() -> Outcome {
    ensure_eq!(TOKEN_LEN, 40);
    let t = Token::from_random_bytes([0xab; 20]);
    ensure_eq!(t.as_str(), "abababababababababababababababababababab");
    let t = Token::from_random_bytes([
        0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50,
        0x60, 0x70, 0x80, 0x90, 0xa0,
    ]);
    ensure_eq!(
        t.as_bytes(),
        &b"000123456789abcdefff102030405060708090a0"[..]
    );
    let Ok(t) = Token::generate(&mut CounterRng(0));
    ensure_eq!(t.as_bytes(), TOKEN);
    let mut s = heapless::String::<48>::new();
    let _ = write!(s, "{t}");
    ensure_eq!(s.as_bytes(), TOKEN);
    ensure!(Token::generate(&mut BrokenRng).is_err());
    Ok(())
}

fn server_count() -> Outcome {
    ensure_eq!(Servers::new(0).map(|s| s.len()), Err(ServerCountError(0)));
    ensure_eq!(Servers::new(10).map(|s| s.len()), Err(ServerCountError(10)));
    ensure_eq!(Servers::new(1).map(|s| s.len()), Ok(1));
    ensure_eq!(Servers::new(9).map(|s| s.len()), Ok(9));
    Ok(())
}

fn acquire_sends_set_nx_px() -> Outcome {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(100))?;
    ensure_eq!(op.token().as_bytes(), TOKEN);
    ensure_eq!(op.resource(), &b"res"[..]);
    let sent = transmit(&mut op, ms(100))?;
    ensure_eq!(sent.len(), 5);
    for (i, s) in sent.iter().enumerate() {
        ensure!(
            usize::from(s.server) == i,
            "request {} to server {}",
            i,
            s.server
        );
        ensure!(!s.release);
        s.expect(&[b"SET", b"res", TOKEN, b"NX", b"PX", b"10000"])?;
    }
    // A2: the request timeout is 1% of the ttl: 100 ms after sending.
    ensure_eq!(op.poll_timeout(), Some(ms(200)));
    ensure!(transmit(&mut op, ms(100))?.is_empty());
    ensure!(op.poll_outcome().is_none() && !op.is_finished());
    Ok(())
}

fn acquire_majority_despite_error() -> Outcome {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(100))?;
    transmit(&mut op, ms(100))?;
    answer(&mut op, ms(101), 0, b"+OK\r\n")?;
    answer(
        &mut op,
        ms(102),
        1,
        b"-READONLY You can't write against a read only replica.\r\n",
    )?;
    op.handle_connection_error(ms(103), ServerId(2));
    answer(&mut op, ms(104), 3, b"+OK\r\n")?;
    ensure!(op.poll_outcome().is_none(), "two votes of five decided");
    answer(&mut op, ms(105), 4, b"+OK\r\n")?;
    let Some(Ok(lock)) = op.poll_outcome() else {
        fail!("no lock after three votes");
    };
    // A4: 10000 - 5 elapsed - (100 + 2) drift.
    ensure_eq!(lock.validity(), dur(9_893));
    ensure_eq!(lock.valid_until(), ms(105 + 9_893));
    ensure_eq!(lock.started(), ms(100));
    ensure_eq!(lock.ttl(), dur(10_000));
    ensure_eq!(lock.token().as_bytes(), TOKEN);
    ensure_eq!(lock.fence(), None);
    ensure_eq!(lock.extensions(), 0);
    ensure_eq!(
        lock.report().outcomes(),
        &[
            ServerOutcome::Ok,
            ServerOutcome::ServerError(ErrorKind::ReadOnly),
            ServerOutcome::ConnectionError,
            ServerOutcome::Ok,
            ServerOutcome::Ok
        ][..]
    );
    ensure!(lock.is_valid(ms(9_997)) && !lock.is_valid(ms(9_998)));
    ensure_eq!(lock.remaining(ms(5_000)), dur(4_998));
    ensure!(
        transmit(&mut op, ms(105))?.is_empty(),
        "releases after a success"
    );
    ensure!(op.is_finished());
    ensure_eq!(op.poll_timeout(), None);
    ensure!(op.poll_outcome().is_none(), "a second outcome");
    Ok(())
}

fn acquire_majority_despite_timeout() -> Outcome {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(0))?;
    let mut buf = [0u8; 256];
    // Servers 0 and 1 are sent to at t = 0, the others at t = 50 ms: each
    // request's deadline runs from when it is sent.
    for (now, server) in [(0, 0u8), (0, 1), (50, 2), (50, 3), (50, 4)] {
        match op.poll_transmit(ms(now), &mut buf) {
            Ok(Some(t)) if t.server == ServerId(server) => {}
            other => fail!("transmit at {} ms: {:?}", now, other),
        }
    }
    ensure!(matches!(op.poll_transmit(ms(50), &mut buf), Ok(None)));
    ensure_eq!(op.poll_timeout(), Some(ms(100)));
    answer(&mut op, ms(10), 1, b"-ERR something\r\n")?;
    op.handle_timeout(ms(99));
    ensure!(op.poll_outcome().is_none());
    op.handle_timeout(ms(100));
    ensure!(op.poll_outcome().is_none(), "decided after one timeout");
    ensure_eq!(op.poll_timeout(), Some(ms(150)));
    answer(&mut op, ms(120), 2, b"+OK\r\n")?;
    answer(&mut op, ms(125), 3, b"+OK\r\n")?;
    ensure!(op.poll_outcome().is_none());
    answer(&mut op, ms(130), 4, b"+OK\r\n")?;
    let Some(Ok(lock)) = op.poll_outcome() else {
        fail!("no lock after three votes");
    };
    // Measured from the start of the attempt: 10000 - 130 - 102.
    ensure_eq!(lock.validity(), dur(9_768));
    ensure_eq!(
        lock.report().outcomes(),
        &[
            ServerOutcome::TimedOut,
            ServerOutcome::ServerError(ErrorKind::Err),
            ServerOutcome::Ok,
            ServerOutcome::Ok,
            ServerOutcome::Ok
        ][..]
    );
    // Server 0 answers late: a straggler, not an unsolicited reply.
    answer(&mut op, ms(140), 0, b"+OK\r\n")?;
    ensure!(op.is_finished());
    Ok(())
}

fn acquire_conflict_releases_everywhere() -> Outcome {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    answer(&mut op, ms(1), 0, b"+OK\r\n")?;
    answer(&mut op, ms(1), 1, b"$-1\r\n")?;
    answer(&mut op, ms(2), 2, b"_\r\n")?;
    ensure!(op.poll_outcome().is_none());
    answer(&mut op, ms(3), 3, b"$-1\r\n")?;
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("no failure after three nils");
    };
    ensure_eq!(err.kind, FailureKind::Conflict);
    ensure_eq!(err.attempts, 1);
    ensure_eq!(err.report.count(ServerOutcome::Held), 3);
    ensure_eq!(err.report.get(ServerId(0)), Some(ServerOutcome::Ok));
    ensure_eq!(err.report.get(ServerId(4)), Some(ServerOutcome::Pending));
    let mut text = heapless::String::<96>::new();
    let _ = write!(text, "{err}");
    ensure_eq!(
        text.as_str(),
        "lock not acquired after 1 attempt(s): held by another client"
    );
    // A5: the release goes to all five, as EVAL, marked for delivery.
    let sent = transmit(&mut op, ms(3))?;
    ensure_eq!(sent.len(), 5);
    for (i, s) in sent.iter().enumerate() {
        ensure!(usize::from(s.server) == i && s.release, "release {}", i);
        s.expect(&[b"EVAL", RELEASE.source.as_bytes(), b"1", b"res", TOKEN])?;
    }
    // Awaited where our key may be (server 0 voted, server 4 is pending).
    ensure!(!op.is_finished());
    answer(&mut op, ms(4), 4, b"+OK\r\n")?; // the late vote
    answer(&mut op, ms(4), 0, b":1\r\n")?;
    ensure!(!op.is_finished());
    answer(&mut op, ms(4), 4, b":1\r\n")?;
    ensure!(op.is_finished());
    Ok(())
}

fn acquire_unavailable_after_timeouts() -> Outcome {
    let mut op = acquire(&NO_RETRY, 5, 10_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    answer(&mut op, ms(5), 0, b"+OK\r\n")?;
    op.handle_timeout(ms(99));
    ensure!(op.poll_outcome().is_none());
    op.handle_timeout(ms(100));
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("no failure after four timeouts");
    };
    ensure_eq!(err.kind, FailureKind::Unavailable);
    ensure_eq!(err.report.count(ServerOutcome::TimedOut), 4);
    let sent = transmit(&mut op, ms(100))?;
    ensure_eq!(sent.len(), 5);
    ensure!(sent.iter().all(|s| s.release));
    ensure!(!op.is_finished());
    answer(&mut op, ms(150), 0, b":1\r\n")?;
    ensure_eq!(op.poll_timeout(), Some(ms(200)));
    op.handle_timeout(ms(200));
    ensure!(op.is_finished());
    ensure_eq!(op.poll_timeout(), None);
    Ok(())
}

fn acquire_expired_when_late() -> Outcome {
    let config = Config {
        request_timeout: Some(dur(500)),
        ..NO_RETRY
    };
    let mut op = acquire(&config, 3, 100, ms(0))?;
    transmit(&mut op, ms(0))?;
    // No point waiting past ttl - drift = 100 - 3 ms.
    ensure_eq!(op.poll_timeout(), Some(ms(97)));
    answer(&mut op, ms(90), 0, b"+OK\r\n")?;
    answer(&mut op, ms(97), 1, b"+OK\r\n")?;
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("a majority at 97 ms of a 100 ms ttl gave a lock");
    };
    ensure_eq!(err.kind, FailureKind::Expired);
    let sent = transmit(&mut op, ms(97))?;
    ensure_eq!(sent.len(), 3);
    ensure!(sent.iter().all(|s| s.release));
    Ok(())
}

fn acquire_retry_keeps_the_token() -> Outcome {
    let config = Config {
        retry: Retry {
            retries: 1,
            jitter: Duration::ZERO,
        },
        ..Config::DEFAULT
    };
    // ttl 1 s: requests time out after 10 ms.
    let mut op = acquire(&config, 3, 1_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    answer(&mut op, ms(2), 0, b"$-1\r\n")?;
    answer(&mut op, ms(2), 1, b"$-1\r\n")?;
    ensure!(op.poll_outcome().is_none(), "gave up with a retry left");
    let releases = transmit(&mut op, ms(2))?;
    ensure_eq!(releases.len(), 3);
    // A6: wait at least a request timeout (10 ms) plus jitter (none).
    ensure_eq!(op.poll_timeout(), Some(ms(12)));
    answer(&mut op, ms(3), 0, b":0\r\n")?;
    answer(&mut op, ms(3), 1, b":0\r\n")?;
    answer(&mut op, ms(3), 2, b"+OK\r\n")?; // the first SET, late
    answer(&mut op, ms(3), 2, b":1\r\n")?;
    op.handle_timeout(ms(11));
    ensure!(transmit(&mut op, ms(11))?.is_empty(), "retried early");
    op.handle_timeout(ms(12));
    let sent = transmit(&mut op, ms(12))?;
    ensure_eq!(sent.len(), 3);
    for s in &sent {
        s.expect(&[b"SET", b"res", TOKEN, b"NX", b"PX", b"1000"])?;
    }
    answer(&mut op, ms(13), 0, b"+OK\r\n")?;
    answer(&mut op, ms(13), 2, b"+OK\r\n")?;
    let Some(Ok(lock)) = op.poll_outcome() else {
        fail!("no lock on the second attempt");
    };
    // From the second attempt's start: 1000 - 1 - (10 + 2).
    ensure_eq!(lock.validity(), dur(987));
    ensure_eq!(lock.started(), ms(12));
    ensure_eq!(lock.token().as_bytes(), TOKEN);
    Ok(())
}

fn acquire_bad_arguments() -> Outcome {
    let five = servers(5)?;
    let short = Acquire::new(
        &NO_RETRY,
        &five,
        &b"res"[..],
        Duration::from_micros(999),
        None,
        &mut CounterRng(0),
        ms(0),
    );
    ensure!(
        matches!(short, Err(ArgumentError::Ttl)),
        "ttl under 1 ms: {:?}",
        short.err()
    );
    let broken = Acquire::new(
        &NO_RETRY,
        &five,
        &b"res"[..],
        dur(1_000),
        None,
        &mut BrokenRng,
        ms(0),
    );
    ensure!(
        matches!(broken, Err(ArgumentError::Rng)),
        "a broken RNG: {:?}",
        broken.err()
    );
    // Whole milliseconds are sent.
    let Ok(mut op) = Acquire::new(
        &NO_RETRY,
        &five,
        &b"res"[..],
        Duration::from_micros(1_999),
        None,
        &mut CounterRng(0),
        ms(0),
    ) else {
        fail!("a 1.999 ms ttl refused");
    };
    let sent = transmit(&mut op, ms(0))?;
    sent[0].expect(&[b"SET", b"res", TOKEN, b"NX", b"PX", b"1"])?;
    Ok(())
}

fn acquire_unsolicited_and_push() -> Outcome {
    let mut op = acquire(&NO_RETRY, 3, 10_000, ms(0))?;
    // Nothing sent yet: any reply is unsolicited.
    ensure_eq!(feed(&mut op, ms(0), 0, b"+OK\r\n")?, Err(Unsolicited));
    transmit(&mut op, ms(0))?;
    // A RESP3 push answers no request.
    answer(
        &mut op,
        ms(1),
        0,
        b">2\r\n$10\r\ninvalidate\r\n$3\r\nres\r\n",
    )?;
    answer(&mut op, ms(1), 0, b"+OK\r\n")?;
    answer(&mut op, ms(1), 1, b"+OK\r\n")?;
    ensure!(matches!(op.poll_outcome(), Some(Ok(_))));
    ensure_eq!(feed(&mut op, ms(2), 0, b"+OK\r\n")?, Err(Unsolicited));
    ensure_eq!(feed(&mut op, ms(2), 7, b"+OK\r\n")?, Err(Unsolicited));
    Ok(())
}

fn acquire_setup_error() -> Outcome {
    let refused = SetupError::Refused {
        step: Step::Select,
        kind: ErrorKind::Err,
    };
    let mut op = acquire(&NO_RETRY, 3, 10_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    op.handle_setup_error(ms(1), ServerId(0), refused);
    answer(&mut op, ms(2), 1, b"+OK\r\n")?;
    answer(&mut op, ms(2), 2, b"+OK\r\n")?;
    let Some(Ok(lock)) = op.poll_outcome() else {
        fail!("no lock from two of three");
    };
    ensure_eq!(
        lock.report().outcomes(),
        &[
            ServerOutcome::Setup(refused),
            ServerOutcome::Ok,
            ServerOutcome::Ok
        ][..]
    );
    // Two servers refused: no majority is possible.
    let mut op = acquire(&NO_RETRY, 3, 10_000, ms(0))?;
    transmit(&mut op, ms(0))?;
    op.handle_setup_error(ms(1), ServerId(0), refused);
    ensure!(op.poll_outcome().is_none());
    op.handle_setup_error(ms(1), ServerId(2), SetupError::NoUptime);
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("still hoping with two of three refused");
    };
    ensure_eq!(err.kind, FailureKind::Unavailable);
    ensure_eq!(
        err.report.get(ServerId(2)),
        Some(ServerOutcome::Setup(SetupError::NoUptime))
    );
    Ok(())
}

fn acquire_fenced() -> Outcome {
    let config = Config {
        fencing: true,
        ..NO_RETRY
    };
    let mut op = acquire(&config, 3, 10_000, ms(0))?;
    let sent = transmit(&mut op, ms(0))?;
    ensure_eq!(sent.len(), 3);
    for s in &sent {
        s.expect(&[
            b"EVALSHA",
            FENCED_ACQUIRE.sha1.as_bytes(),
            b"2",
            b"res",
            b"res:fence",
            TOKEN,
            b"10000",
        ])?;
    }
    answer(&mut op, ms(1), 0, b"*2\r\n:1\r\n$1\r\n7\r\n")?;
    answer(&mut op, ms(2), 1, b"*2\r\n:1\r\n$1\r\n5\r\n")?;
    ensure!(op.poll_outcome().is_none(), "a lock before the fence write");
    // F1: max(7, 5) + 1, written where the key is still ours.
    let sent = transmit(&mut op, ms(2))?;
    ensure_eq!(sent.len(), 3);
    for s in &sent {
        s.expect(&[
            b"EVALSHA",
            FENCE_WRITE.sha1.as_bytes(),
            b"2",
            b"res",
            b"res:fence",
            TOKEN,
            b"8",
        ])?;
    }
    answer(&mut op, ms(3), 0, b":1\r\n")?;
    answer(&mut op, ms(4), 1, b":1\r\n")?;
    let Some(Ok(lock)) = op.poll_outcome() else {
        fail!("no fenced lock");
    };
    ensure_eq!(lock.fence(), Some(8));
    ensure_eq!(lock.validity(), dur(10_000 - 4 - 102));
    Ok(())
}

fn lock_renewal() -> Outcome {
    let lock = held_lock()?;
    ensure_eq!(lock.validity(), dur(9_898));
    let r = lock.renewal(dur(100));
    // A third of the validity left: 9898 ms - 3299.333 ms.
    ensure_eq!(r.extend_at, Instant::from_micros(9_898_000 - 3_299_333));
    // The margin is a tenth of the validity (989.8 ms > 2 x 100 ms).
    ensure_eq!(r.give_up_at, Instant::from_micros(9_898_000 - 989_800));
    let slow = lock.renewal(dur(2_000));
    ensure_eq!(slow.give_up_at, ms(9_898 - 4_000));
    ensure_eq!(slow.extend_at, ms(9_898 - 6_000));
    Ok(())
}

/// `lock` extended to 10 s at t = 1 s, confirmed at 1005 ms.
fn extended(lock: &Lock, five: &Servers) -> Result<Lock, Fail> {
    let Ok(mut op) = Extend::new(
        &Config::DEFAULT,
        five,
        &b"res"[..],
        lock,
        dur(10_000),
        ms(1_000),
    ) else {
        fail!("Extend::new refused");
    };
    let sent = transmit(&mut op, ms(1_000))?;
    ensure_eq!(sent.len(), 5);
    for s in &sent {
        ensure!(!s.release);
        s.expect(&[
            b"EVALSHA",
            EXTEND.sha1.as_bytes(),
            b"1",
            b"res",
            TOKEN,
            b"10000",
        ])?;
    }
    answer(&mut op, ms(1_003), 0, b":1\r\n")?;
    answer(&mut op, ms(1_003), 1, b":0\r\n")?;
    answer(&mut op, ms(1_004), 2, b":1\r\n")?;
    ensure!(op.poll_outcome().is_none());
    answer(&mut op, ms(1_005), 3, b":1\r\n")?;
    ensure!(op.is_finished());
    match op.poll_outcome() {
        Some(Ok(l)) => Ok(l),
        other => Err(Fail::new(format_args!("extend: {other:?}"), line!())),
    }
}

fn extend_majority() -> Outcome {
    let five = servers(5)?;
    let lock = held_lock()?;
    let l = extended(&lock, &five)?;
    // A8: from the start of the extend round: 10000 - 5 - 102.
    ensure_eq!(l.validity(), dur(9_893));
    ensure_eq!(l.valid_until(), ms(1_005 + 9_893));
    ensure_eq!(l.started(), ms(1_000));
    ensure_eq!(l.extensions(), 1);
    ensure_eq!(l.token(), lock.token());
    ensure_eq!(l.report().count(ServerOutcome::NotHeld), 1);
    Ok(())
}

fn extend_lost() -> Outcome {
    let five = servers(5)?;
    let lock = held_lock()?;
    let Ok(mut op) = Extend::new(
        &Config::DEFAULT,
        &five,
        &b"res"[..],
        &lock,
        dur(10_000),
        ms(500),
    ) else {
        fail!("Extend::new refused");
    };
    transmit(&mut op, ms(500))?;
    answer(&mut op, ms(501), 0, b":1\r\n")?;
    answer(&mut op, ms(501), 1, b":0\r\n")?;
    answer(&mut op, ms(502), 2, b":0\r\n")?;
    ensure!(op.poll_outcome().is_none());
    answer(&mut op, ms(503), 3, b":0\r\n")?;
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("no failure after three zeros");
    };
    ensure_eq!(err.kind, FailureKind::Lost);
    ensure_eq!(err.report.count(ServerOutcome::NotHeld), 3);
    // Errors instead: unavailable, not lost.
    let Ok(mut op) = Extend::new(
        &Config::DEFAULT,
        &five,
        &b"res"[..],
        &lock,
        dur(10_000),
        ms(500),
    ) else {
        fail!("Extend::new refused");
    };
    transmit(&mut op, ms(500))?;
    for s in 0..3 {
        answer(&mut op, ms(501), s, b"-OOM command not allowed\r\n")?;
    }
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("no failure after three errors");
    };
    ensure_eq!(err.kind, FailureKind::Unavailable);
    Ok(())
}

fn extend_expired_while_waiting() -> Outcome {
    let five = servers(5)?;
    let lock = held_lock()?;
    let Ok(mut op) = Extend::new(
        &Config::DEFAULT,
        &five,
        &b"res"[..],
        &lock,
        dur(10_000),
        ms(9_850),
    ) else {
        fail!("Extend::new refused");
    };
    transmit(&mut op, ms(9_850))?;
    // The request deadline (9950 ms) is past the validity: stop there.
    ensure_eq!(op.poll_timeout(), Some(ms(9_898)));
    answer(&mut op, ms(9_860), 0, b":1\r\n")?;
    op.handle_timeout(ms(9_898));
    let Some(Err(err)) = op.poll_outcome() else {
        fail!("extended past the validity");
    };
    ensure_eq!(err.kind, FailureKind::Expired);
    ensure!(op.is_finished());
    Ok(())
}

fn extend_refused_arguments() -> Outcome {
    let five = servers(5)?;
    let lock = held_lock()?;
    let late = Extend::new(
        &Config::DEFAULT,
        &five,
        &b"res"[..],
        &lock,
        dur(10_000),
        ms(9_898),
    );
    ensure!(
        matches!(late, Err(ArgumentError::Expired)),
        "{:?}",
        late.err()
    );
    let zero = Extend::new(
        &Config::DEFAULT,
        &five,
        &b"res"[..],
        &lock,
        Duration::ZERO,
        ms(0),
    );
    ensure!(matches!(zero, Err(ArgumentError::Ttl)), "{:?}", zero.err());
    let once = Config {
        max_extensions: Some(1),
        ..Config::DEFAULT
    };
    ensure!(Extend::new(&once, &five, &b"res"[..], &lock, dur(10_000), ms(0)).is_ok());
    let l = extended(&lock, &five)?;
    let again = Extend::new(&once, &five, &b"res"[..], &l, dur(10_000), ms(2_000));
    ensure!(
        matches!(again, Err(ArgumentError::ExtensionLimit)),
        "{:?}",
        again.err()
    );
    Ok(())
}

fn release_counts_deletions() -> Outcome {
    let five = servers(5)?;
    let lock = held_lock()?;
    let mut op = Release::for_lock(&Config::DEFAULT, &five, &b"res"[..], &lock);
    let sent = transmit(&mut op, ms(2_000))?;
    ensure_eq!(sent.len(), 5);
    for s in &sent {
        ensure!(s.release);
        s.expect(&[b"EVALSHA", RELEASE.sha1.as_bytes(), b"1", b"res", TOKEN])?;
    }
    for (s, reply) in [
        (0, &b":1\r\n"[..]),
        (1, b":1\r\n"),
        (2, b":1\r\n"),
        (3, b":0\r\n"),
    ] {
        answer(&mut op, ms(2_001), s, reply)?;
    }
    ensure!(op.poll_outcome().is_none() && !op.is_finished());
    // The request timeout of a 10 s lock: 100 ms.
    ensure_eq!(op.poll_timeout(), Some(ms(2_100)));
    op.handle_timeout(ms(2_100));
    let Some(r) = op.poll_outcome() else {
        fail!("no outcome after the timeout");
    };
    ensure_eq!(r.deleted(), 3);
    ensure_eq!(r.confirmed(), 4);
    ensure_eq!(r.quorum, 3);
    ensure!(r.is_confirmed() && !r.complete());
    ensure_eq!(r.report.get(ServerId(4)), Some(ServerOutcome::TimedOut));
    ensure!(op.is_finished() && op.poll_outcome().is_none());
    Ok(())
}

fn release_noscript_falls_back_to_eval() -> Outcome {
    let one = servers(1)?;
    let Ok(mut op) = Release::new(&Config::DEFAULT, &one, &b"res"[..], b"tok", dur(50)) else {
        fail!("Release::new refused");
    };
    let sent = transmit(&mut op, ms(0))?;
    ensure_eq!(sent.len(), 1);
    sent[0].expect(&[b"EVALSHA", RELEASE.sha1.as_bytes(), b"1", b"res", b"tok"])?;
    answer(&mut op, ms(1), 0, b"-NOSCRIPT No matching script.\r\n")?;
    ensure!(op.poll_outcome().is_none());
    let sent = transmit(&mut op, ms(1))?;
    ensure_eq!(sent.len(), 1);
    sent[0].expect(&[b"EVAL", RELEASE.source.as_bytes(), b"1", b"res", b"tok"])?;
    answer(&mut op, ms(2), 0, b":1\r\n")?;
    let Some(r) = op.poll_outcome() else {
        fail!("no outcome");
    };
    ensure!(r.deleted() == 1 && r.complete() && r.is_confirmed());
    Ok(())
}

fn release_resent_after_connection_error() -> Outcome {
    let three = servers(3)?;
    let Ok(mut op) = Release::new(&Config::DEFAULT, &three, &b"res"[..], b"tok", dur(50)) else {
        fail!("Release::new refused");
    };
    ensure_eq!(transmit(&mut op, ms(0))?.len(), 3);
    op.handle_connection_error(ms(1), ServerId(1));
    let again = transmit(&mut op, ms(1))?;
    ensure!(
        again.len() == 1 && again[0].server == 1 && again[0].release,
        "resent {} requests",
        again.len()
    );
    op.handle_connection_error(ms(2), ServerId(1));
    ensure!(transmit(&mut op, ms(2))?.is_empty(), "resent twice");
    answer(&mut op, ms(3), 0, b":1\r\n")?;
    answer(&mut op, ms(3), 2, b":0\r\n")?;
    let Some(r) = op.poll_outcome() else {
        fail!("no outcome");
    };
    ensure_eq!(
        r.report.get(ServerId(1)),
        Some(ServerOutcome::ConnectionError)
    );
    ensure!(r.confirmed() == 2 && r.is_confirmed() && !r.complete());
    Ok(())
}

fn release_token_capacity() -> Outcome {
    let one = servers(1)?;
    let long = [b'x'; 65];
    ensure!(Release::new(&Config::DEFAULT, &one, &b"res"[..], &long[..64], dur(5)).is_ok());
    let r = Release::new(&Config::DEFAULT, &one, &b"res"[..], &long, dur(5));
    ensure!(matches!(r, Err(ArgumentError::Token)), "{:?}", r.err());
    Ok(())
}

/// The reply in `bytes`, which must be whole.
fn reply(bytes: &[u8]) -> Result<Reply<'_>, Fail> {
    match parse_reply(bytes) {
        Ok(Status::Complete((r, used))) if used == bytes.len() => Ok(r),
        other => Err(Fail::new(
            format_args!("{:?}: {:?}", Bytes(bytes), other),
            line!(),
        )),
    }
}

const NO_GUARD: Plan = Plan {
    commands: redlock_core::Commands::Scripts,
    auth: true,
    select: true,
    info_required: false,
};

const GUARD: Plan = Plan {
    info_required: true,
    ..NO_GUARD
};

fn handshake_select_error_refused() -> Outcome {
    let err = reply(b"-ERR DB index is out of range\r\n")?;
    for plan in [NO_GUARD, GUARD] {
        ensure_eq!(
            handshake::judge(Step::Select, &err, plan),
            Err(SetupError::Refused {
                step: Step::Select,
                kind: ErrorKind::Err
            })
        );
    }
    let bulk_err = reply(b"!28\r\nERR DB index is out of range\r\n")?;
    ensure!(handshake::judge(Step::Select, &bulk_err, NO_GUARD).is_err());
    Ok(())
}

fn handshake_ok_accepted() -> Outcome {
    let ok = reply(b"+OK\r\n")?;
    ensure_eq!(handshake::judge(Step::Select, &ok, GUARD), Ok(Verdict::Ok));
    ensure_eq!(handshake::judge(Step::Auth, &ok, NO_GUARD), Ok(Verdict::Ok));
    Ok(())
}

fn handshake_other_steps() -> Outcome {
    let wrongpass = reply(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")?;
    ensure_eq!(
        handshake::judge(Step::Auth, &wrongpass, NO_GUARD),
        Err(SetupError::Refused {
            step: Step::Auth,
            kind: ErrorKind::WrongPass
        })
    );
    let sha = reply(b"$40\r\nb70c2384248f88e6b75b9f89241a180f856ad852\r\n")?;
    ensure_eq!(
        handshake::judge(Step::ScriptLoad, &sha, NO_GUARD),
        Ok(Verdict::Ok)
    );
    let queued = reply(b"+QUEUED\r\n")?;
    ensure_eq!(
        handshake::judge(Step::Select, &queued, NO_GUARD),
        Err(SetupError::Unexpected { step: Step::Select })
    );
    ensure_eq!(
        handshake::judge(Step::ScriptLoad, &reply(b"+OK\r\n")?, NO_GUARD),
        Err(SetupError::Unexpected {
            step: Step::ScriptLoad
        })
    );
    let info = reply(b"$42\r\n# Server\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n")?;
    ensure_eq!(
        handshake::judge(Step::Info, &info, GUARD),
        Ok(Verdict::Info(ServerInfo {
            uptime_secs: Some(42),
            run_id: Some(b"abc"),
            native: false,
        }))
    );
    let no_uptime = reply(b"$29\r\n# Server\r\nredis_version:7.2.4\r\n")?;
    ensure_eq!(
        handshake::judge(Step::Info, &no_uptime, GUARD),
        Err(SetupError::NoUptime)
    );
    ensure!(handshake::judge(Step::Info, &no_uptime, NO_GUARD).is_ok());
    let denied = reply(b"-NOPERM this user has no permissions\r\n")?;
    ensure_eq!(
        handshake::judge(Step::Info, &denied, GUARD),
        Err(SetupError::Refused {
            step: Step::Info,
            kind: ErrorKind::NoPerm
        })
    );
    ensure_eq!(
        handshake::judge(Step::Info, &denied, NO_GUARD),
        Ok(Verdict::Info(ServerInfo::default()))
    );
    Ok(())
}

fn handshake_steps_and_twins() -> Outcome {
    let mut steps = heapless::Vec::<Step, 12>::new();
    for s in handshake::steps(NO_GUARD) {
        if steps.push(s).is_err() {
            fail!("too many steps");
        }
    }
    ensure_eq!(
        steps.as_slice(),
        &[
            Step::Auth,
            Step::Select,
            Step::Info,
            Step::ScriptLoad,
            Step::ScriptLoad,
            Step::ScriptLoad,
            Step::ScriptLoad,
            Step::ScriptLoad
        ][..]
    );
    let bare = Plan {
        commands: redlock_core::Commands::Scripts,
        auth: false,
        select: false,
        info_required: false,
    };
    ensure_eq!(handshake::steps(bare).count(), 6);
    let a: &[u32] = &[1, 2];
    let b: &[u32] = &[3];
    let c: &[u32] = &[4, 2];
    ensure_eq!(handshake::same_server(&[a, b]), None);
    ensure_eq!(
        handshake::same_server(&[a, b, c]),
        Some((ServerId(0), ServerId(2)))
    );
    ensure_eq!(handshake::twin_of(&[a, b, c], 2), Some(ServerId(0)));
    ensure_eq!(handshake::twin_of(&[a, b, c], 1), None);
    Ok(())
}
