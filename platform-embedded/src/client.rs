//! The client: connections, the fail-closed handshake, and the loop that
//! drives one core operation at a time over the platform's sockets.

use embedded_io::{Read, ReadReady, Write};
use rand_core::TryCryptoRng;
use redlock_core::handshake::{self, Step};
use redlock_core::redlock_resp::{EncodeError, Parser, Status, script};
use redlock_core::session::{Close, Event, PROBE_LEN, Policy, Queued, State};
use redlock_core::{
    Acquire, Config, Duration, Extend, FenceRepair, FenceRepaired, Inspect, Inspection, Instant,
    Operation, Release, Released, Retry, ServerId, Servers, Transmit,
};

mod connect;
mod driven;

use driven::Driven;

use crate::conn::{Buffers, Conn, move_down};
use crate::error::Error;
use crate::net::{Clock, Network};
use redlock_core::session::{Credentials, encode_step};

/// Connection settings of a [`Client`]: the core's session policy
/// (connect timeout, backoff), the same table as the std client's.
pub type Options = Policy;

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
    /// The number of the running operation (the tag of its requests in the
    /// sessions): a reply tagged otherwise answers an operation that ended.
    serial: u16,
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
            // caller (the others are under the request overhead), and it is
            // sent only with a password: its size as the session encodes it
            // (into no room, which tells the size).
            let auth = match creds.password {
                None => 0,
                Some(_) => match encode_step(&mut [], Step::Auth, None, creds) {
                    Ok(n) | Err(EncodeError::BufferTooSmall { needed: n }) => n,
                    Err(_) => usize::MAX,
                },
            };
            if auth > OUT {
                return Err(Error::BufferTooSmall { needed: auth });
            }
            conn.clear_buffers();
            conn.session.reset();
            conn.session
                .set_plan(creds.plan(config.restart_guard.is_some()));
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
            serial: 0,
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
        self.conns.iter().filter(|c| c.session.is_ready()).count()
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
        let timeout = self.config.untimed_request_timeout(None);
        let mut op = Release::new(&self.config, &servers, resource, token, timeout)?;
        confirmed(self.run(&mut op)?)
    }

    /// Who holds `resource` on each server, and for how long (F3).
    pub fn inspect(&mut self, resource: &[u8]) -> Result<Inspection, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let timeout = self.config.untimed_request_timeout(None);
        let mut op = Inspect::new(&servers, resource, timeout);
        self.run(&mut op)
    }

    /// F1, an operator's repair: raises `resource`'s fence counter to at
    /// least `floor` on every server (never lowers it).
    pub fn fence_repair(&mut self, resource: &[u8], floor: u64) -> Result<FenceRepaired, Error> {
        self.check_resource(resource)?;
        let servers = self.prepare_servers();
        let timeout = self.config.untimed_request_timeout(None);
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
        // `Servers::new(SERVERS)` was checked when the client was made: the
        // second turn (one server) is never taken. A loop, not a fallback
        // call: one copy of the code.
        let mut n = SERVERS;
        let mut servers = loop {
            match Servers::new(n) {
                Ok(servers) => break servers,
                Err(_) => n = 1,
            }
        };
        for (i, conn) in self.conns.iter().enumerate() {
            if let Some(started) = conn.session.incarnation() {
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
        // A new tag: replies still owed to earlier operations are stale.
        self.serial = self.serial.wrapping_add(1);
        self.pump(Some(op), Instant::ZERO)
    }

    /// The loop of [`drive`](Client::drive), until the operation `op` is
    /// done or fails; with no operation, the loop of
    /// [`prepare`](Client::prepare) instead, which sends nothing but
    /// handshakes and ends by `end`: one loop, so that its code exists once.
    fn pump(&mut self, mut op: Option<&mut (dyn Driven + '_)>, end: Instant) -> Result<(), Error> {
        loop {
            let mut now = self.clock.now();
            // Connections lost during the operation come back in the
            // background, for its later requests. (`fresh` is used only
            // with no operation.)
            let fresh = self.maintain(now, op.as_deref_mut());
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
                    // The sessions first, at the same time: a connection
                    // given up (out of step, a probe unanswered) tells the
                    // operation before the operation times it out, so that
                    // a release on it is sent again. The same
                    // pass as at the top of the loop (one copy of its code):
                    // it also moves the connections on, and returns the
                    // earliest deadline of any session.
                    let pending = self.maintain(now, Some(&mut *op));
                    let deadline = op.poll_timeout();
                    if deadline.is_some_and(|t| now >= t) {
                        op.handle_timeout(now);
                        continue;
                    }
                    (deadline, pending)
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
        let Some(conn) = self.conns.get_mut(i) else {
            op.lost(now, t.server, None);
            return;
        };
        // A release is delivered even to a server whose connection broke
        // (in its backoff, if it was reachable): it waits behind the new
        // connection's handshake.
        if t.release && conn.session.may_connect(now, true) {
            self.start_connect(i, now, Some(&mut *op));
        }
        let serial = self.serial;
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        let bytes = self.request.get(..t.len).unwrap_or_default();
        let refused = conn.session.refused();
        // Room first, so that the session never awaits a request that was
        // not queued. Behind a handshake there is room for one request,
        // kept for a release (a platform decision, see the README): a
        // `SET` held there would leave no room for the release that must
        // follow it.
        let room = match conn.session.state() {
            State::Down => {
                op.lost(now, t.server, refused);
                return;
            }
            // (With room for a probe that may have to go first.)
            State::Ready => {
                conn.compact_out();
                conn.fits(bytes.len().saturating_add(PROBE_LEN))
            }
            State::Connecting | State::Handshake => t.release && conn.hold(bytes),
        };
        let queued = if room {
            conn.session.push(now, serial, t.deadline, &self.options)
        } else if conn.session.is_ready() {
            Err((serial, Close::Stuck))
        } else {
            // Not ready, and no room to wait behind the handshake.
            op.lost(now, t.server, None);
            return;
        };
        match queued {
            Ok(Queued::Held) => {}
            // A request overdue on this connection: the probe goes first
            // (SPEC C10).
            Ok(queued) => conn.queue(bytes, queued == Queued::ProbeFirst),
            Err((_, why)) => {
                // Its output or its queue is full of what it has not
                // answered: it is stuck.
                rl_log!(warn, "redlock: server {} is not reading; dropped", i);
                if !self.fail(i, now, why, Some(&mut *op)) {
                    op.lost(now, t.server, None);
                }
            }
        }
    }

    /// Writes what connection `i` has pending, as far as its socket takes
    /// it without blocking. Out of line: it is called from two places.
    #[inline(never)]
    fn flush(&mut self, i: usize, op: Option<&mut (dyn Driven + '_)>, now: Instant) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if !conn.is_open() || conn.out_sent >= conn.out_len {
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
            self.fail(i, now, Close::Io, op);
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
                if matches!(conn.session.state(), State::Down | State::Connecting) {
                    break;
                }
                let free = conn.inbuf.get_mut(conn.filled..).unwrap_or_default();
                let read = match self.net.socket(i) {
                    None => Err(Close::Io),
                    Some(mut s) => match s.read_ready() {
                        Ok(false) => break,
                        // A full buffer with a reply still incomplete: the
                        // reply is larger than this client takes.
                        Ok(true) if free.is_empty() => Err(Close::BadReply),
                        Ok(true) => s.read(free).map_err(|_| Close::Io),
                        Err(_) => Err(Close::Io),
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
                    // End of stream.
                    Ok(_) => Err(Close::Io),
                    Err(why) => Err(why),
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
    /// session, then to the operation it answers.
    #[inline(never)]
    fn dispatch(
        &mut self,
        i: usize,
        mut op: Option<&mut (dyn Driven + '_)>,
        now: Instant,
    ) -> Result<(), Close> {
        let server = ServerId(i as u8);
        let serial = self.serial;
        let mut used = 0usize;
        let result = loop {
            let (before, rest) = self.conns.split_at_mut(i.min(SERVERS));
            let Some((conn, after)) = rest.split_first_mut() else {
                break Err(Close::Io);
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
                    break Err(Close::BadReply);
                }
            };
            used = used.saturating_add(len);
            // C3: another entry whose last handshake told the same `run_id`.
            // Entry `k` is `before[k]` or `after[k - i - 1]`; entry `i`
            // (this one) has no id. Indices, not a chain of iterators: the
            // chain is twice the code.
            let twin = |id: &[u8]| {
                let ids = (0..SERVERS).map(|k| {
                    before
                        .get(k)
                        .or_else(|| after.get(k.wrapping_sub(i).wrapping_sub(1)))
                        .map_or(&[][..], |c| c.session.run_id())
                });
                handshake::twin_by_id(ids, i, id)
            };
            match conn.session.handle_reply(now, &reply, twin) {
                Ok(Event::Reply(tag)) => {
                    // A reply of an operation that ended is dropped; with
                    // no operation running, it answers none.
                    let Some(op) = op.as_deref_mut().filter(|_| tag == serial) else {
                        continue;
                    };
                    if op.handle_reply(now, server, reply).is_err() {
                        rl_log!(
                            warn,
                            "redlock: server {} answered a request it was not sent",
                            i
                        );
                        break Err(Close::Unsolicited);
                    }
                }
                Ok(Event::Ready) => {
                    // A release held behind the handshake goes out now,
                    // judged by the new process (C2).
                    conn.release_held();
                    if let (Some(op), Some(started)) =
                        (op.as_deref_mut(), conn.session.incarnation())
                    {
                        op.set_incarnation(server, started);
                    }
                    rl_log!(debug, "redlock: server {} ready", i);
                }
                Ok(_) => {}
                Err(why) => break Err(why),
            }
        };
        if let Some(conn) = self.conns.get_mut(i) {
            let rest = conn.filled.saturating_sub(used);
            move_down(&mut conn.inbuf, used, 0, rest);
            conn.filled = rest;
        }
        result
    }
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
    use redlock_core::handshake::Step;
    use redlock_core::session::encode_step;

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
        let plan = creds.plan(true);
        for k in 0..handshake::step_count(plan) {
            let (step, script) = handshake::step_and_script(plan, k).unwrap();
            assert!(
                encode_step(&mut buf, step, script, &creds).is_ok(),
                "{step:?}"
            );
        }
    }
}
