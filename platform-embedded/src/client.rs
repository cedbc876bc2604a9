//! The client: connections, the fail-closed handshake, and the loop that
//! drives one core operation at a time over the platform's sockets.

use embedded_io::{Read, ReadReady, Write};
use rand_core::TryCryptoRng;
use redlock_core::handshake::{self, SetupError, Verdict};
use redlock_core::redlock_resp::{EncodeError, Parser, Status, script};
use redlock_core::{
    Acquire, Config, Duration, Extend, FenceRepair, FenceRepaired, Inspect, Inspection, Instant,
    Operation, Release, Released, Retry, ServerId, Servers, Transmit,
};

mod connect;
mod driven;

use driven::Driven;

use crate::conn::{Buffers, Conn, Expect, Fail, RUN_ID_LEN, Refusal, State, move_down, plan};
use crate::error::Error;
use crate::net::{Clock, Credentials, Network};

/// Connection settings of a [`Client`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Options {
    /// How long a connect plus its handshake may take before the server
    /// counts as down for this operation.
    pub connect_timeout: Duration,
    /// The wait before reconnecting after one failed attempt; it doubles
    /// with each failure in a row, up to `backoff_max`.
    pub backoff_min: Duration,
    /// The longest wait between connection attempts.
    pub backoff_max: Duration,
}

impl Options {
    /// 1 s to connect, backoff from 10 ms to 2 s (the std client's).
    pub const DEFAULT: Options = Options {
        connect_timeout: Duration::from_secs(1),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_secs(2),
    };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}

/// A lock this client holds on `resource`: the core's [`Lock`]
/// (token, validity, fence, per-server report), and the resource name.
///
/// [`Lock`]: redlock_core::Lock
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lock<'r> {
    resource: &'r [u8],
    lock: redlock_core::Lock,
}

impl<'r> Lock<'r> {
    /// The resource name.
    pub fn resource(&self) -> &'r [u8] {
        self.resource
    }
}

impl core::ops::Deref for Lock<'_> {
    type Target = redlock_core::Lock;
    fn deref(&self) -> &redlock_core::Lock {
        &self.lock
    }
}

/// The ttl used to size the request timeout of the operations that have no
/// ttl of their own (unlock by token, inspect, fence repair): 100 ms unless
/// [`Config::request_timeout`] is set.
const TIMEOUT_TTL: Duration = Duration::from_secs(10);

/// The bytes of a request that are not the resource name (which appears at
/// most twice), at most: the `EVAL` fallback after `NOSCRIPT` carries a
/// script's source. The largest is the fence write: `*7`, `EVAL`, the
/// source, the key count, the resource and its fence key with their
/// headers, a 40-byte token and a 20-digit number, 125 bytes of framing and
/// arguments besides the source and the names; 80 + 2 suffixes covers it.
const REQUEST_OVERHEAD: usize = max_script_source()
    .saturating_add(2 * redlock_core::FENCE_SUFFIX.len())
    .saturating_add(80);

/// The longest script source the core may send with `EVAL`.
// Evaluated at compile time only: a panic would be a build error.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn max_script_source() -> usize {
    let mut max = script::FENCE_RAISE.source.len();
    let mut k = 0;
    while k < script::ALL.len() {
        if script::ALL[k].source.len() > max {
            max = script::ALL[k].source.len();
        }
        k += 1;
    }
    max
}

/// The encoded size of a command whose arguments have these lengths
/// (`None`: absent).
const fn command_len(args: &[Option<usize>]) -> usize {
    const fn digits(mut n: usize) -> usize {
        let mut d = 1usize;
        while n >= 10 {
            n /= 10;
            d = d.saturating_add(1);
        }
        d
    }
    let mut count = 0usize;
    let mut len = 0usize;
    let mut rest = args;
    while let [first, tail @ ..] = rest {
        if let Some(arg) = *first {
            count = count.saturating_add(1);
            // `$<len>\r\n<bytes>\r\n`
            len = len.saturating_add(digits(arg).saturating_add(5).saturating_add(arg));
        }
        rest = tail;
    }
    // `*<count>\r\n`
    len.saturating_add(digits(count).saturating_add(3))
}

/// The size of a `SCRIPT LOAD` of the longest script, the largest handshake
/// step but `AUTH` (`SELECT` and `INFO` are shorter).
const SCRIPT_LOAD_LEN: usize = command_len(&[Some(6), Some(4), Some(max_script_source())]);

/// Reads of one socket per pass of the loop, so that a server that floods
/// cannot keep the others and the timeouts waiting.
const READS_PER_PASS: usize = 4;

/// A Redlock client over `SERVERS` servers, for a microcontroller: no heap,
/// every buffer fixed by const generics, one operation at a time. Its
/// per-server buffers and connection state are a [`Buffers`] that the
/// caller keeps (in a static, say), so the client itself stays small.
///
/// - `N`: the [`Network`] (one socket per server), `C`: the [`Clock`],
///   `G`: a cryptographically secure RNG for tokens (there is no default).
/// - `IN`: bytes buffered per server for replies; the largest is the
///   handshake's `INFO server` (about 600 bytes on Redis 7). A reply that
///   does not fit fails that server's connection.
/// - `OUT`: bytes buffered per server for requests; it must hold the
///   largest handshake command (a `SCRIPT LOAD`, checked by
///   [`Client::new`]) and the largest request (an `EVAL` with a script's
///   source, after `NOSCRIPT`). Resource names can be up to
///   [`max_resource_len`](Client::max_resource_len) bytes: 154 with the
///   default 640.
///
/// Each operation first (re)connects the servers that are down and whose
/// backoff has passed, waits until each is through its handshake (judged
/// fail-closed by the core: until then nothing else is sent on it) or has
/// failed, then sends every request before reading any reply, and reads
/// replies as sockets become ready. A server that fails during an
/// operation is reconnected in the background (after its backoff) and is
/// used again by the operation's later requests, such as the next attempt
/// of a lock; a release for a server whose connection broke waits behind
/// the new connection's handshake.
pub struct Client<'a, N, C, G, const SERVERS: usize, const IN: usize = 1024, const OUT: usize = 640>
{
    net: N,
    clock: C,
    rng: G,
    config: Config,
    options: Options,
    creds: [Credentials<'a>; SERVERS],
    conns: &'a mut [Conn<IN, OUT>; SERVERS],
    /// Where the operation encodes its next request.
    request: &'a mut [u8; OUT],
    parser: Parser,
}

impl<N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize> core::fmt::Debug
    for Client<'_, N, C, G, SERVERS, IN, OUT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &SERVERS)
            .field("config", &self.config)
            .field("options", &self.options)
            .field("credentials", &self.creds)
            .finish_non_exhaustive()
    }
}

impl<'a, N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Client<'a, N, C, G, SERVERS, IN, OUT>
where
    N: Network,
    C: Clock,
    G: TryCryptoRng,
{
    /// A client over the `SERVERS` servers of `net`, logging in to each with
    /// its `creds`, keeping its per-server state in `buffers` (which it
    /// clears). Nothing is connected until the first operation (or
    /// [`connect`](Client::connect)).
    ///
    /// `Err(BufferTooSmall)` when `OUT` cannot hold a handshake command (a
    /// `SCRIPT LOAD`, or `AUTH` with these credentials) or the largest
    /// request.
    pub fn new(
        net: N,
        clock: C,
        rng: G,
        config: Config,
        creds: [Credentials<'a>; SERVERS],
        buffers: &'a mut Buffers<SERVERS, IN, OUT>,
    ) -> Result<Self, Error> {
        Servers::new(SERVERS).map_err(|e| Error::ServerCount(e.0))?;
        // Every handshake command must fit the output buffer on its own.
        if OUT < REQUEST_OVERHEAD.saturating_add(2) {
            return Err(Error::BufferTooSmall {
                needed: REQUEST_OVERHEAD.saturating_add(2),
            });
        }
        for (conn, creds) in buffers.conns.iter_mut().zip(creds.iter()) {
            // AUTH is the only handshake command whose size depends on the
            // caller; the others are under the request overhead.
            let auth = command_len(&[
                Some(4),
                creds.user.map(<[u8]>::len),
                creds.password.map(<[u8]>::len),
            ]);
            if creds.password.is_some() && auth > OUT {
                return Err(Error::BufferTooSmall { needed: auth });
            }
            conn.clear();
            conn.set_plan(plan(creds, config.restart_guard.is_some()));
            // The most bytes a handshake step takes: a held release must
            // leave them free.
            conn.reserve = auth.max(SCRIPT_LOAD_LEN);
        }
        Ok(Client {
            net,
            clock,
            rng,
            config,
            options: Options::DEFAULT,
            creds,
            conns: &mut buffers.conns,
            request: &mut buffers.request,
            parser: Parser::default(),
        })
    }

    /// Changes the connection settings.
    pub fn set_options(&mut self, options: Options) {
        self.options = options;
    }

    /// The algorithm's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The clock's time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The network, to poll it between operations.
    pub fn net_mut(&mut self) -> &mut N {
        &mut self.net
    }

    /// The longest resource name this client can send.
    pub fn max_resource_len(&self) -> usize {
        OUT.saturating_sub(REQUEST_OVERHEAD) / 2
    }

    /// Connects every server that is down (and past its backoff) and runs
    /// its handshake; returns how many servers are ready. Operations do
    /// this themselves; calling it first (at boot) keeps connection time
    /// out of the first operation.
    pub fn connect(&mut self) -> usize {
        self.prepare();
        self.conns
            .iter()
            .filter(|c| c.state == State::Ready)
            .count()
    }

    /// Acquires `resource` for `ttl`, retrying as [`Config::retry`] says.
    pub fn lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        self.acquire(resource, ttl, None, self.config)
    }

    /// Acquires `resource` for `ttl`, retrying until the retries run out or
    /// no retry could start before `deadline` (client clock).
    pub fn lock_until<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<'r>, Error> {
        let mut config = self.config;
        config.retry.retries = u32::MAX;
        self.acquire(resource, ttl, Some(deadline), config)
    }

    /// One attempt at `resource`, no retries.
    pub fn try_lock<'r>(&mut self, resource: &'r [u8], ttl: Duration) -> Result<Lock<'r>, Error> {
        let mut config = self.config;
        config.retry = Retry::NONE;
        self.acquire(resource, ttl, None, config)
    }

    fn acquire<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Option<Instant>,
        config: Config,
    ) -> Result<Lock<'r>, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let now = self.clock.now();
        let mut op = Acquire::new(
            &config,
            &servers,
            resource,
            ttl,
            deadline,
            &mut self.rng,
            now,
        )?;
        let lock = self.run(&mut op)?;
        lock.map(|lock| Lock { resource, lock })
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    /// Extends `lock` to a fresh `ttl` (counted from now), if a majority
    /// still holds it within its validity. On success `lock` has the new
    /// validity; on failure it is left as it was.
    pub fn extend(&mut self, lock: &mut Lock<'_>, ttl: Duration) -> Result<(), Error> {
        let servers = self.prepare_servers();
        let now = self.clock.now();
        let mut op = Extend::new(&self.config, &servers, lock.resource, &lock.lock, ttl, now)?;
        match self.run(&mut op)? {
            Ok(extended) => {
                lock.lock = extended;
                Ok(())
            }
            Err(e) => Err(Error::from_failure(e.kind, e.report)),
        }
    }

    /// Releases `lock` on every server. `Err(NotReleased)` when fewer than a
    /// majority confirmed (the key may stay until its ttl ends).
    pub fn unlock(&mut self, lock: &Lock<'_>) -> Result<Released, Error> {
        let servers = self.prepare_servers();
        let mut op = Release::for_lock(&self.config, &servers, lock.resource, &lock.lock);
        confirmed(self.run(&mut op)?)
    }

    /// Releases `resource` if it holds `token` (a lock taken by another
    /// process, or before a reboot, whose token was kept).
    pub fn unlock_token(&mut self, resource: &[u8], token: &[u8]) -> Result<Released, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let timeout = self.config.request_timeout_for(TIMEOUT_TTL);
        let mut op = Release::new(&self.config, &servers, resource, token, timeout)?;
        confirmed(self.run(&mut op)?)
    }

    /// Who holds `resource` on each server, and for how long (F3).
    pub fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let timeout = self.config.request_timeout_for(TIMEOUT_TTL);
        let mut op = Inspect::new(&servers, resource, timeout);
        self.run(&mut op)
    }

    /// F1, an operator's repair: raises `resource`'s fence counter to at
    /// least `floor` on every server (never lowers it).
    pub fn fence_repair(&mut self, resource: &[u8], floor: u64) -> Result<FenceRepaired, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let timeout = self.config.request_timeout_for(TIMEOUT_TTL);
        let mut op = FenceRepair::new(&self.config, &servers, resource, floor, timeout);
        self.run(&mut op)?
            .map_err(|e| Error::from_failure(e.kind, e.report))
    }

    fn check_resource(&self, resource: &[u8]) -> Result<(), Error> {
        let max = self.max_resource_len();
        if resource.len() > max {
            return Err(Error::ResourceTooLong { max });
        }
        Ok(())
    }

    /// Before an operation: [`prepare`](Client::prepare)s the connections,
    /// then returns the servers, with when each one's current process
    /// started, as far as the handshakes told.
    fn prepare_servers(&mut self) -> Servers {
        self.prepare();
        let mut servers = Servers::new(SERVERS).unwrap_or_else(|_| unreachable_servers());
        for (i, conn) in self.conns.iter().enumerate() {
            if let Some(started) = conn.incarnation {
                servers.set_incarnation(ServerId(i as u8), started);
            }
        }
        servers
    }

    /// Drives `op` to its end: sends everything it has, then reads replies
    /// as they come and times out what is late.
    fn run<O: Operation>(&mut self, op: &mut O) -> Result<O::Output, Error> {
        self.drive(op)?;
        // Taken only now, once: the outcome is not copied around the loop.
        op.poll_outcome().ok_or(Error::NoOutcome)
    }

    /// The loop of [`run`](Client::run), not generic, so that its code
    /// exists once.
    fn drive(&mut self, op: &mut dyn Driven) -> Result<(), Error> {
        let result = self.pump(Some(op), Instant::ZERO);
        // Replies still owed to the operation that ended are dropped when
        // they come.
        for conn in self.conns.iter_mut() {
            conn.end_op();
        }
        result
    }

    /// The loop of [`drive`](Client::drive), until the operation `op` is
    /// done or fails; with no operation, the loop of
    /// [`prepare`](Client::prepare) instead, which sends nothing but
    /// handshakes and ends by `end`: one loop, so that its code exists once.
    fn pump(&mut self, mut op: Option<&mut (dyn Driven + '_)>, end: Instant) -> Result<(), Error> {
        loop {
            let mut now = self.clock.now();
            // Connections lost during the operation come back in the
            // background, for its later requests.
            let (connecting, fresh) = self.maintain(now, op.as_deref_mut());
            if let Some(op) = op.as_deref_mut() {
                // A2: everything that can be sent is written before reading.
                while let Some(t) = op.poll_transmit(now, self.request).map_err(|e| match e {
                    EncodeError::BufferTooSmall { needed } => Error::BufferTooSmall { needed },
                    _ => Error::BufferTooSmall { needed: OUT },
                })? {
                    self.send(op, now, t);
                }
                for i in 0..SERVERS {
                    self.flush(i, Some(&mut *op), now);
                }
                if op.done() {
                    return Ok(());
                }
            }
            let progressed = self.receive(op.as_deref_mut());
            let (deadline, pending) = match op.as_deref_mut() {
                // Only the connects on their first attempt are waited for.
                None => {
                    if fresh.is_none() || now >= end {
                        return Ok(());
                    }
                    (None, fresh)
                }
                Some(op) => {
                    now = self.clock.now();
                    let deadline = op.poll_timeout();
                    if deadline.is_some_and(|t| now >= t) {
                        op.handle_timeout(now);
                        continue;
                    }
                    (deadline, connecting)
                }
            };
            if !progressed {
                // Nothing awaited means nothing will change it: only time.
                let until = match (deadline, pending) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(t), None) | (None, Some(t)) => t,
                    (None, None) => now.saturating_add(Duration::from_millis(1)),
                };
                self.net.wait(until);
            }
        }
    }

    /// Queues request `t` (in `self.request`) on its server's connection,
    /// or tells the operation that the server cannot be asked.
    fn send(&mut self, op: &mut dyn Driven, now: Instant, t: Transmit) {
        let i = t.server.index();
        let bytes = self.request.get(..t.len).unwrap_or_default();
        let Some(conn) = self.conns.get_mut(i) else {
            op.lost(now, t.server, None);
            return;
        };
        if conn.state != State::Ready {
            // A release is delivered even to a server whose connection
            // broke: it waits behind the new connection's handshake.
            if t.release && conn.refused.get().is_none() && conn.hold(bytes) {
                if conn.state == State::Down {
                    self.start_connect(i, now, Some(op));
                }
                return;
            }
            op.lost(now, t.server, conn.refused.get());
            return;
        }
        conn.compact_out();
        if !conn.queue(bytes) {
            // Its output is full of what it has not read: it is stuck.
            rl_log!(warn, "redlock: server {} is not reading; dropped", i);
            let told = conn.owes_op();
            self.fail(i, now, Fail::Broken, Some(&mut *op));
            if !told {
                op.lost(now, t.server, None);
            }
        }
    }

    /// Writes what connection `i` has pending, as far as its socket takes
    /// it without blocking.
    #[inline(always)]
    fn flush(&mut self, i: usize, op: Option<&mut (dyn Driven + '_)>, now: Instant) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if conn.state == State::Down || conn.out_sent >= conn.out_len {
            return;
        }
        let mut broken = false;
        while conn.out_sent < conn.out_len && self.net.write_ready(i) {
            let pending = conn
                .out
                .get(conn.out_sent..conn.out_len)
                .unwrap_or_default();
            let written = match self.net.socket(i) {
                Some(mut s) => s.write(pending),
                None => {
                    broken = true;
                    break;
                }
            };
            match written {
                Ok(n) if n > 0 => conn.out_sent = conn.out_sent.saturating_add(n),
                _ => {
                    broken = true;
                    break;
                }
            }
        }
        if broken {
            rl_log!(warn, "redlock: server {} failed on write", i);
            self.fail(i, now, Fail::Broken, op);
        } else {
            conn.compact_out();
        }
    }

    /// Reads every socket that has data and hands out the replies; `true`
    /// if anything was read or a connection failed.
    fn receive(&mut self, mut op: Option<&mut (dyn Driven + '_)>) -> bool {
        let mut progressed = false;
        for i in 0..SERVERS {
            for _ in 0..READS_PER_PASS {
                let Some(conn) = self.conns.get_mut(i) else {
                    break;
                };
                if matches!(conn.state, State::Down | State::Connecting) {
                    break;
                }
                let free = conn.inbuf.get_mut(conn.filled..).unwrap_or_default();
                let read = match self.net.socket(i) {
                    None => Err(()),
                    Some(mut s) => match s.read_ready() {
                        Ok(false) => break,
                        // A full buffer with a reply still incomplete: the
                        // reply is larger than this client takes.
                        Ok(true) if free.is_empty() => Err(()),
                        Ok(true) => s.read(free).map_err(|_| ()),
                        Err(_) => Err(()),
                    },
                };
                progressed = true;
                // Replies are judged at the time they are read.
                let now = self.clock.now();
                let result = match read {
                    Ok(n) if n > 0 => {
                        conn.filled = conn.filled.saturating_add(n).min(IN);
                        self.dispatch(i, op.as_deref_mut(), now)
                    }
                    // End of stream, an error, or a reply too large.
                    _ => Err(Fail::Broken),
                };
                if let Err(why) = result {
                    self.fail(i, now, why, op.as_deref_mut());
                    break;
                }
            }
        }
        progressed
    }

    /// Parses every complete reply of connection `i` and hands each to the
    /// operation, or to the core's judge of the handshake.
    #[inline(never)]
    fn dispatch(
        &mut self,
        i: usize,
        mut op: Option<&mut (dyn Driven + '_)>,
        now: Instant,
    ) -> Result<(), Fail> {
        let server = ServerId(i as u8);
        let mut used = 0usize;
        let result = loop {
            let Some(conn) = self.conns.get_mut(i) else {
                break Err(Fail::Broken);
            };
            let input = conn.inbuf.get(used..conn.filled).unwrap_or_default();
            let (reply, len) = match self.parser.parse(input) {
                Ok(Status::Complete(x)) => x,
                Ok(Status::Incomplete) => break Ok(()),
                Err(_) => {
                    rl_log!(
                        warn,
                        "redlock: server {} sent a reply that does not parse",
                        i
                    );
                    break Err(Fail::Broken);
                }
            };
            used = used.saturating_add(len);
            if reply.is_push() {
                continue;
            }
            let plan = conn.plan;
            let Some(next) = conn.owed.next(plan, conn.next_step) else {
                rl_log!(warn, "redlock: server {} sent a reply for no request", i);
                break Err(Fail::Broken);
            };
            let step = match next {
                Expect::Stale => continue,
                Expect::Op => {
                    // With no operation running, it answers none.
                    let taken = op
                        .as_deref_mut()
                        .is_some_and(|op| op.handle_reply(now, server, reply).is_ok());
                    if !taken {
                        rl_log!(
                            warn,
                            "redlock: server {} answered a request it was not sent",
                            i
                        );
                        break Err(Fail::Broken);
                    }
                    continue;
                }
                Expect::Step(step) => step,
            };
            // Fail closed: any error to the handshake, and the server is not
            // used until a later handshake passes.
            match handshake::judge(step, &reply, plan) {
                Ok(Verdict::Ok) => {}
                Ok(Verdict::Info(info)) => {
                    if let Some(started) = info.started(now) {
                        conn.incarnation = Some(started);
                        // A reconnect during an operation: the restart guard
                        // judges the votes on this connection by it (C2).
                        if let Some(op) = op.as_deref_mut() {
                            op.set_incarnation(server, started);
                        }
                    }
                    conn.run_id.clear();
                    if let Some(id) = info.run_id {
                        // Redis's are 40 characters: keep at most that many.
                        let id = id.get(..RUN_ID_LEN).unwrap_or(id);
                        let _ = conn.run_id.extend_from_slice(id);
                    }
                    // One process behind two entries must not vote twice.
                    let twin = self.conns.get(i).and_then(|c| self.twin(i, &c.run_id));
                    if let Some(twin) = twin {
                        if let Some(conn) = self.conns.get_mut(i) {
                            conn.run_id.clear();
                        }
                        break Err(Fail::Refused(SetupError::SameServer(twin)));
                    }
                }
                Err(why) => break Err(Fail::Refused(why)),
            }
            let Some(conn) = self.conns.get_mut(i) else {
                break Err(Fail::Broken);
            };
            if conn.owed.judged >= conn.steps {
                // Every step passed: the server may be used.
                conn.state = State::Ready;
                conn.ready_at = now;
                conn.failures = 0;
                conn.refused = Refusal::None;
                // A release held behind the handshake goes out now.
                conn.release_held();
                rl_log!(debug, "redlock: server {} ready", i);
            }
        };
        if let Some(conn) = self.conns.get_mut(i) {
            let rest = conn.filled.saturating_sub(used);
            move_down(&mut conn.inbuf, used, 0, rest);
            conn.filled = rest;
        }
        result
    }

    fn creds_of(&self, i: usize) -> Credentials<'a> {
        self.creds.get(i).copied().unwrap_or_default()
    }

    /// C3: another entry whose last handshake told the same `run_id`.
    fn twin(&self, i: usize, id: &[u8]) -> Option<ServerId> {
        handshake::twin_by_id(self.conns.iter().map(|c| c.run_id.as_slice()), i, id)
    }
}

/// `Servers::new(SERVERS)` was checked when the client was made.
#[cold]
fn unreachable_servers() -> Servers {
    Servers::new(1).unwrap_or_else(|_| unreachable_servers())
}

fn confirmed(released: Released) -> Result<Released, Error> {
    if released.is_confirmed() {
        Ok(released)
    } else {
        Err(Error::NotReleased(released))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]
    use super::*;
    use crate::conn::encode_step;
    use redlock_core::handshake::Step;

    #[test]
    fn command_len_is_the_encoded_size() {
        let mut buf = [0u8; 2048];
        for (user, password) in [
            (None, &b"p"[..]),
            (Some(&b"default"[..]), &b"hunter2"[..]),
            (None, &[b'x'; 9][..]),
            (None, &[b'x'; 10][..]),
            (Some(&[b'u'; 100][..]), &[b'x'; 999][..]),
            (None, &[b'x'; 1000][..]),
        ] {
            let creds = Credentials {
                user,
                password: Some(password),
                db: 0,
            };
            let n = encode_step(&mut buf, Step::Auth, None, &creds).unwrap();
            let len = command_len(&[Some(4), user.map(<[u8]>::len), Some(password.len())]);
            assert_eq!(len, n, "{user:?} {}", password.len());
        }
    }

    #[test]
    fn every_other_handshake_command_fits_the_smallest_out() {
        let mut buf = [0u8; REQUEST_OVERHEAD + 2];
        let creds = Credentials {
            user: None,
            password: None,
            db: u32::MAX,
        };
        let plan = plan(&creds, true);
        for k in 0..handshake::step_count(plan) {
            let (step, script) = handshake::step_and_script(plan, k).unwrap();
            assert!(
                encode_step(&mut buf, step, script, &creds).is_ok(),
                "{step:?}"
            );
        }
    }
}
