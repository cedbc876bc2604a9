//! The driver shared by the scripted tests: a deterministic RNG, `Drive`
//! (feeds replies at given times, collects what is sent), and the set-ups
//! the tests repeat.

#![allow(dead_code)] // each test file uses a part of it
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use core::convert::Infallible;

use redlock_core::redlock_resp::script::{
    EXTEND, FENCE_RAISE, FENCE_WRITE, FENCED_ACQUIRE, INSPECT, RELEASE,
};
use redlock_core::redlock_resp::{Reply, Status, parse_reply};
use redlock_core::{
    Acquire, Config, Duration, Extend, Instant, Lock, Operation, Release, Retry, ServerId, Servers,
    Unsolicited,
};

/// A deterministic RNG for tests (not for production: it is a counter).
pub(crate) struct TestRng(pub(crate) u8);

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
pub(crate) struct BrokenRng;

#[derive(Debug)]
pub(crate) struct RngFailure;
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

pub(crate) fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

pub(crate) fn dur(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A request as sent: the server and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sent {
    pub(crate) server: usize,
    pub(crate) args: Vec<Vec<u8>>,
    /// Marked as a release the platform must try to deliver.
    pub(crate) release: bool,
}

impl Sent {
    pub(crate) fn name(&self) -> &[u8] {
        &self.args[0]
    }
    /// For EVALSHA/EVAL: which script.
    pub(crate) fn script(&self) -> &'static str {
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
pub(crate) struct Drive<O: Operation> {
    pub(crate) op: O,
}

impl<O: Operation> Drive<O> {
    pub(crate) fn new(op: O) -> Self {
        Drive { op }
    }

    /// Everything the operation wants to send now.
    pub(crate) fn sent(&mut self, now: Instant) -> Vec<Sent> {
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

    pub(crate) fn reply(
        &mut self,
        now: Instant,
        server: u8,
        bytes: &[u8],
    ) -> Result<(), Unsolicited> {
        let Ok(Status::Complete((reply, _))) = parse_reply(bytes) else {
            panic!("bad test reply")
        };
        self.op.handle_reply(now, ServerId(server), reply)
    }

    pub(crate) fn outcome(&mut self) -> Option<O::Output> {
        self.op.poll_outcome()
    }
}

/// The default config, without retries.
pub(crate) fn no_retry() -> Config {
    Config {
        retry: Retry::NONE,
        ..Config::DEFAULT
    }
}

/// An acquisition of `res` on `n` servers, started at `now`.
pub(crate) fn acquire(
    config: &Config,
    n: usize,
    ttl: u64,
    now: Instant,
) -> Drive<Acquire<&'static [u8]>> {
    acquire_on(config, &Servers::new(n).unwrap(), ttl, None, now)
}

/// A lock on `res` acquired on all `n` servers at t=0 (default config).
pub(crate) fn held_lock(n: usize, ttl: u64) -> (Lock, Servers) {
    let servers = Servers::new(n).unwrap();
    let mut d = acquire(&Config::DEFAULT, n, ttl, ms(0));
    d.sent(ms(0));
    for s in 0..n as u8 {
        d.reply(ms(0), s, b"+OK\r\n").unwrap();
    }
    (d.outcome().unwrap().unwrap(), servers)
}

/// A config that retries `retries` times with up to `jitter_ms` of jitter.
pub(crate) fn retrying(retries: u32, jitter_ms: u64) -> Config {
    Config {
        retry: Retry {
            retries,
            jitter: dur(jitter_ms),
        },
        ..Config::DEFAULT
    }
}

/// A fenced config without retries (F1).
/// `n` servers with the native commands, their incarnations known.
pub(crate) fn native_servers(n: usize) -> Servers {
    let mut s = Servers::new(n).unwrap();
    for i in 0..n {
        s.set_dialect(ServerId(i as u8), redlock_core::Dialect::Native);
        s.set_incarnation(ServerId(i as u8), ms(0));
    }
    s
}

pub(crate) fn fenced() -> Config {
    Config {
        fencing: true,
        ..no_retry()
    }
}

/// A config without retries whose requests time out after `timeout_ms`.
pub(crate) fn request_timeout(timeout_ms: u64) -> Config {
    Config {
        request_timeout: Some(dur(timeout_ms)),
        ..no_retry()
    }
}

/// An acquisition of `res` on `servers` (with what they know of their
/// incarnations), started at `now`, retrying until `deadline` if any.
pub(crate) fn acquire_on(
    config: &Config,
    servers: &Servers,
    ttl: u64,
    deadline: Option<Instant>,
    now: Instant,
) -> Drive<Acquire<&'static [u8]>> {
    Drive::new(
        Acquire::new(
            config,
            servers,
            &b"res"[..],
            dur(ttl),
            deadline,
            &mut TestRng(0),
            now,
        )
        .unwrap(),
    )
}

/// The release of `res` held with the token `tok`.
pub(crate) fn release(servers: &Servers, timeout_ms: u64) -> Drive<Release<&'static [u8]>> {
    Drive::new(
        Release::new(
            &Config::DEFAULT,
            servers,
            &b"res"[..],
            b"tok",
            dur(timeout_ms),
        )
        .unwrap(),
    )
}

/// The extension of `lock` on `res` to `ttl`, started at `now`.
pub(crate) fn extend(
    config: &Config,
    servers: &Servers,
    lock: &Lock,
    ttl: u64,
    now: Instant,
) -> Drive<Extend<&'static [u8]>> {
    Drive::new(Extend::new(config, servers, &b"res"[..], lock, dur(ttl), now).unwrap())
}

/// A fenced acquire script's reply: voted (`1`) or refused (`0`), with the
/// fence counter read (`None`: no counter).
pub(crate) fn fenced_reply(voted: bool, counter: Option<u64>) -> Vec<u8> {
    let flag = u8::from(voted);
    match counter {
        None => format!("*2\r\n:{flag}\r\n$-1\r\n").into_bytes(),
        Some(c) => {
            let c = c.to_string();
            format!("*2\r\n:{flag}\r\n${}\r\n{c}\r\n", c.len()).into_bytes()
        }
    }
}

/// Sends everything due at `now`, and answers every request with `reply`.
pub(crate) fn answer_all<O: Operation>(d: &mut Drive<O>, now: Instant, reply: &[u8]) -> Vec<Sent> {
    let sent = d.sent(now);
    for s in &sent {
        d.reply(now, s.server as u8, reply).unwrap();
    }
    sent
}
