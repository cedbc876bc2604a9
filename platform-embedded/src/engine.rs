//! What the blocking and the async client share: the sessions' buffers,
//! the fail-closed handshake, and the loop that drives one core operation
//! at a time over the platform's sockets, whatever they are.

use rand_core::TryCryptoRng;
use redlock_core::handshake::{self, Step};
use redlock_core::redlock_resp::{EncodeError, Parser, Status, script};
use redlock_core::session::{Close, Event, PROBE_LEN, Policy, Queued, State};
use redlock_core::{
    Acquire, ArgumentError, Config, Duration, Extend, FenceRepair, Inspect, Instant, Release,
    Released, ServerId, Servers, Transmit,
};

mod connect;
pub(crate) mod driven;

pub(crate) use driven::Driven;

use crate::conn::{Buffers, Conn, move_down};
use crate::error::Error;
use crate::io::Io;
use crate::net::Clock;
use redlock_core::session::{Credentials, encode_step};

/// Connection settings of a [`Client`](crate::Client): the core's session policy
/// (connect timeout, backoff), the same table as the std client's.
pub type Options = Policy;

/// A lock this client holds on `resource`: the core's [`Lock`]
/// (token, validity, fence, per-server report), and the resource name.
///
/// [`Lock`]: redlock_core::Lock
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lock<'r> {
    pub(crate) resource: &'r [u8],
    pub(crate) lock: redlock_core::Lock,
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

/// What the driving loop asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// The operation is done (or, with none, the connections are set up).
    Done,
    /// Nothing can progress until a socket has news, or this time (the
    /// client clock).
    Wait(Instant),
}

/// What a client is but its sockets: the core's sessions with their
/// buffers, the settings, the clock and the RNG, and the loop that drives
/// one operation over any [`Io`]. The blocking [`Client`](crate::Client)
/// and the async one are this and their sockets.
pub(crate) struct Engine<'a, C, G, const SERVERS: usize, const IN: usize, const OUT: usize> {
    pub(crate) clock: C,
    pub(crate) rng: G,
    pub(crate) config: Config,
    pub(crate) options: Options,
    creds: [Credentials<'a>; SERVERS],
    conns: &'a mut [Conn<IN, OUT>; SERVERS],
    /// Where the operation encodes its next request.
    request: &'a mut [u8; OUT],
    parser: Parser,
    /// The number of the running operation (the tag of its requests in the
    /// sessions): a reply tagged otherwise answers an operation that ended.
    serial: u16,
}

impl<C, G, const SERVERS: usize, const IN: usize, const OUT: usize> core::fmt::Debug
    for Engine<'_, C, G, SERVERS, IN, OUT>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("servers", &SERVERS)
            .field("config", &self.config)
            .field("options", &self.options)
            .field("credentials", &self.creds)
            .finish_non_exhaustive()
    }
}

impl<'a, C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Engine<'a, C, G, SERVERS, IN, OUT>
where
    C: Clock,
    G: TryCryptoRng,
{
    /// See [`Client::new`](crate::Client::new).
    pub(crate) fn new(
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
                .set_plan(creds.plan(config.restart_guard.is_some(), config.commands));
            // The most bytes a handshake step takes: a held release must
            // leave them free.
            conn.reserve = auth.max(SCRIPT_LOAD_LEN);
        }
        Ok(Engine {
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

    /// The longest resource name this client can send.
    pub(crate) fn max_resource_len(&self) -> usize {
        OUT.saturating_sub(REQUEST_OVERHEAD) / 2
    }

    /// How many servers are through their handshake.
    pub(crate) fn ready(&self) -> usize {
        self.conns.iter().filter(|c| c.session.is_ready()).count()
    }

    /// When [`prepare`](Engine::pump) with no operation must end: the
    /// connects started now end by then, and later ones go on in the
    /// background.
    pub(crate) fn prepare_end(&self) -> Instant {
        self.clock
            .now()
            .saturating_add(self.options.connect_timeout)
    }

    /// `Err(ResourceTooLong)` when `resource` cannot be sent.
    pub(crate) fn check_resource(&self, resource: &[u8]) -> Result<(), Error> {
        let max = self.max_resource_len();
        if resource.len() > max {
            return Err(Error::ResourceTooLong { max });
        }
        Ok(())
    }

    /// After the connections were prepared: the servers, with when each
    /// one's current process started, as far as the handshakes told.
    fn servers(&self) -> Servers {
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
            servers.set_dialect(ServerId(i as u8), conn.session.dialect());
        }
        servers
    }

    /// An acquisition of `resource` (checked) with `config`'s retries.
    pub(crate) fn acquire<'r>(
        &mut self,
        resource: &'r [u8],
        ttl: Duration,
        deadline: Option<Instant>,
        config: Config,
    ) -> Result<Acquire<&'r [u8]>, ArgumentError> {
        let servers = self.servers();
        let now = self.clock.now();
        Acquire::new(
            &config,
            &servers,
            resource,
            ttl,
            deadline,
            &mut self.rng,
            now,
        )
    }

    /// An extension of `lock` to `ttl`.
    pub(crate) fn extend<'r>(
        &self,
        lock: &Lock<'r>,
        ttl: Duration,
    ) -> Result<Extend<&'r [u8]>, ArgumentError> {
        let now = self.clock.now();
        Extend::new(
            &self.config,
            &self.servers(),
            lock.resource,
            &lock.lock,
            ttl,
            now,
        )
    }

    /// A release of `lock`.
    pub(crate) fn release<'r>(&self, lock: &Lock<'r>) -> Release<&'r [u8]> {
        Release::for_lock(&self.config, &self.servers(), lock.resource, &lock.lock)
    }

    /// A release of `resource` (checked) if it holds `token`.
    pub(crate) fn release_token<'r>(
        &self,
        resource: &'r [u8],
        token: &[u8],
    ) -> Result<Release<&'r [u8]>, ArgumentError> {
        let timeout = self.config.untimed_request_timeout(None);
        Release::new(&self.config, &self.servers(), resource, token, timeout)
    }

    /// An inspection of `resource` (checked).
    pub(crate) fn inspect<'r>(&self, resource: &'r [u8]) -> Inspect<&'r [u8]> {
        let timeout = self.config.untimed_request_timeout(None);
        Inspect::new(&self.servers(), resource, timeout)
    }

    /// A fence repair of `resource` (checked).
    pub(crate) fn fence_repair<'r>(&self, resource: &'r [u8], floor: u64) -> FenceRepair<&'r [u8]> {
        let timeout = self.config.untimed_request_timeout(None);
        FenceRepair::new(&self.config, &self.servers(), resource, floor, timeout)
    }

    /// Before an operation is driven: a new tag, so that replies still owed
    /// to earlier operations are stale.
    pub(crate) fn begin(&mut self) {
        self.serial = self.serial.wrapping_add(1);
    }

    /// Drives the operation `op` until it is done or fails, or nothing can
    /// progress until a socket has news or some time passes; with no
    /// operation, sets the connections up instead (the caller's `prepare`),
    /// sending nothing but handshakes, until `end`: one loop, so that its
    /// code exists once. The caller waits as [`Flow::Wait`] says, then
    /// calls it again.
    pub(crate) fn pump(
        &mut self,
        net: &mut impl Io,
        mut op: Option<&mut (dyn Driven + '_)>,
        end: Instant,
    ) -> Result<Flow, Error> {
        loop {
            let mut now = self.clock.now();
            // Connections lost during the operation come back in the
            // background, for its later requests. (`fresh` is used only
            // with no operation.)
            let fresh = self.maintain(net, now, op.as_deref_mut());
            if let Some(op) = op.as_deref_mut() {
                // A2: everything that can be sent is written before reading.
                while let Some(t) = op.poll_transmit(now, self.request).map_err(|e| match e {
                    EncodeError::BufferTooSmall { needed } => Error::BufferTooSmall { needed },
                    _ => Error::BufferTooSmall { needed: OUT },
                })? {
                    self.send(net, op, now, t);
                }
                for i in 0..SERVERS {
                    self.flush(net, i, Some(&mut *op), now);
                }
                if op.done() {
                    return Ok(Flow::Done);
                }
            }
            let progressed = self.receive(net, op.as_deref_mut());
            let (deadline, pending) = match op.as_deref_mut() {
                // Only the connects on their first attempt are waited for.
                None => {
                    if fresh.is_none() || now >= end {
                        return Ok(Flow::Done);
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
                    let pending = self.maintain(net, now, Some(&mut *op));
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
                return Ok(Flow::Wait(until));
            }
        }
    }

    /// Queues request `t` (in `self.request`) on its server's connection,
    /// or tells the operation that the server cannot be asked.
    fn send(&mut self, net: &mut impl Io, op: &mut dyn Driven, now: Instant, t: Transmit) {
        let i = t.server.index();
        let Some(conn) = self.conns.get_mut(i) else {
            op.lost(now, t.server, None);
            return;
        };
        // A release is delivered even to a server whose connection broke
        // (in its backoff, if it was reachable): it waits behind the new
        // connection's handshake.
        if t.release && conn.session.may_connect(now, true) {
            self.start_connect(net, i, now, Some(&mut *op));
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
            conn.session
                .push_with_replies(now, serial, t.deadline, t.replies, &self.options)
        } else if conn.session.is_ready() {
            Err((serial, Close::Stuck))
        } else {
            // Not ready, and no room to wait behind the handshake (a server
            // refused at its last handshake says so: it is reconnecting).
            op.lost(now, t.server, refused);
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
                if !self.fail(net, i, now, why, Some(&mut *op)) {
                    op.lost(now, t.server, None);
                }
            }
        }
    }

    /// Writes what connection `i` has pending, as far as its socket takes
    /// it without blocking. Out of line: it is called from two places.
    #[inline(never)]
    fn flush(
        &mut self,
        net: &mut impl Io,
        i: usize,
        op: Option<&mut (dyn Driven + '_)>,
        now: Instant,
    ) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if !conn.is_open() || conn.out_sent >= conn.out_len {
            return;
        }
        let mut broken = false;
        while conn.out_sent < conn.out_len {
            let pending = conn
                .out
                .get(conn.out_sent..conn.out_len)
                .unwrap_or_default();
            match net.write(i, pending) {
                Ok(Some(n)) if n > 0 => conn.out_sent = conn.out_sent.saturating_add(n),
                // The socket takes no more now.
                Ok(None) => break,
                _ => {
                    broken = true;
                    break;
                }
            }
        }
        if broken {
            rl_log!(warn, "redlock: server {} failed on write", i);
            self.fail(net, i, now, Close::Io, op);
        } else {
            conn.compact_out();
        }
    }

    /// Reads every socket that has data and hands out the replies; `true`
    /// if anything was read or a connection failed.
    fn receive(&mut self, net: &mut impl Io, mut op: Option<&mut (dyn Driven + '_)>) -> bool {
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
                let read = if free.is_empty() {
                    // A full buffer with a reply still incomplete: the
                    // reply is larger than this client takes.
                    Err(Close::BadReply)
                } else {
                    match net.read(i, free) {
                        Ok(None) => break,
                        Ok(Some(n)) => Ok(n),
                        Err(()) => Err(Close::Io),
                    }
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
                    self.fail(net, i, now, why, op.as_deref_mut());
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

/// A release's outcome: `Err(NotReleased)` unless a majority confirmed.
pub(crate) fn confirmed(released: Released) -> Result<Released, Error> {
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
        let plan = creds.plan(true, redlock_core::Commands::Scripts);
        for k in 0..handshake::step_count(plan, false) {
            let (step, script) = handshake::step_and_script(plan, false, k).unwrap();
            assert!(
                encode_step(&mut buf, step, script, &creds).is_ok(),
                "{step:?}"
            );
        }
    }
}
