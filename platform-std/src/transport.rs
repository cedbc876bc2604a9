//! One mio `Poll` over N non-blocking TCP connections, driving core operations.
//!
//! For each operation, every request is written to every server first, then
//! replies are read as they come (SPEC A2), under the deadlines the core hands
//! out. Connections are opened lazily, with a connect timeout, and re-opened
//! with backoff after errors; each (re)connect pipelines `AUTH`, `SELECT`,
//! `SCRIPT LOAD` of every script and `INFO server` (for the restart guard)
//! ahead of the operation's first request. Replies are matched to requests in
//! order per connection; a reply for no request, or bytes that do not parse,
//! close that connection.

use alloc::collections::VecDeque;
use core::net::SocketAddr;
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::time::Instant as StdInstant;

use core::time::Duration as StdDuration;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use redlock_core::redlock_resp::script;
use redlock_core::redlock_resp::{Limits, Parser, Status, encode};
use redlock_core::{Instant, Operation, ServerId};

use crate::url::ServerUrl;

/// Connection tunables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnConfig {
    pub(crate) connect_timeout: StdDuration,
    pub(crate) backoff_min: StdDuration,
    pub(crate) backoff_max: StdDuration,
    pub(crate) limits: Limits,
}

/// What a reply on a connection answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A handshake step; errors in `AUTH`/`SELECT` are kept for the report.
    Auth,
    Select,
    ScriptLoad,
    Info,
    /// A request of the operation with this serial.
    Op(u64),
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Not connected; may connect from `retry_at` on.
    Down { retry_at: StdInstant },
    /// Non-blocking connect in progress since `since`.
    Connecting { since: StdInstant },
    /// Connected.
    Up,
}

#[derive(Debug)]
struct Conn {
    url: ServerUrl,
    addrs: Vec<SocketAddr>,
    stream: Option<TcpStream>,
    state: State,
    failures: u32,
    /// Bytes waiting to be written.
    out: Vec<u8>,
    /// Bytes read and not yet parsed.
    inbuf: Vec<u8>,
    expect: VecDeque<Expect>,
    writable_interest: bool,
    /// `uptime_in_seconds` learnt on the last connect, with when it was read.
    incarnation: Option<(StdInstant, u64)>,
}

/// The N connections and their poll.
#[derive(Debug)]
pub(crate) struct Transport {
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    config: ConnConfig,
    parser: Parser,
    scratch: Vec<u8>,
    serial: u64,
    /// The origin of the core's clock.
    epoch: StdInstant,
    /// Connections the last poll reported ready (bit i = server i).
    ready: u64,
}

const READ_CHUNK: usize = 16 * 1024;

/// The core's clock reads this many microseconds when the transport is made
/// (20 years), so that instants before it, such as when a server that has
/// been up for months started, are representable for the restart guard.
pub(crate) const CLOCK_ORIGIN_MICROS: u64 = 20 * 365 * 24 * 3600 * 1_000_000;

/// Requests one connection may have unanswered; past this the server is
/// considered stuck and the connection is closed (bounded memory when a
/// server stops answering, e.g. SIGSTOP).
const MAX_OUTSTANDING: usize = 256;

impl Transport {
    pub(crate) fn new(urls: &[ServerUrl], config: ConnConfig) -> io::Result<Transport> {
        let now = StdInstant::now();
        let conns = urls
            .iter()
            .map(|url| Conn {
                url: url.clone(),
                addrs: Vec::new(),
                stream: None,
                state: State::Down { retry_at: now },
                failures: 0,
                out: Vec::with_capacity(1024),
                inbuf: Vec::with_capacity(READ_CHUNK),
                expect: VecDeque::with_capacity(16),
                writable_interest: false,
                incarnation: None,
            })
            .collect();
        Ok(Transport {
            poll: Poll::new()?,
            events: Events::with_capacity(64),
            conns,
            parser: Parser::new(config.limits),
            config,
            scratch: vec![0u8; 4096],
            serial: 0,
            epoch: now,
            ready: 0,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.conns.len()
    }

    /// The std instant at which the core's clock reads [`CLOCK_ORIGIN_MICROS`].
    pub(crate) fn epoch(&self) -> StdInstant {
        self.epoch
    }

    /// The core's clock: microseconds since the transport was made.
    pub(crate) fn now(&self) -> Instant {
        self.core_instant(StdInstant::now())
    }

    fn core_instant(&self, t: StdInstant) -> Instant {
        let since = t.saturating_duration_since(self.epoch).as_micros() as u64;
        Instant::from_micros(CLOCK_ORIGIN_MICROS.saturating_add(since))
    }

    fn std_instant(&self, t: Instant) -> StdInstant {
        self.epoch + StdDuration::from_micros(t.as_micros().saturating_sub(CLOCK_ORIGIN_MICROS))
    }

    /// The URL of `server`.
    pub(crate) fn url(&self, server: usize) -> Option<&ServerUrl> {
        self.conns.get(server).map(|c| &c.url)
    }

    /// Runs `op` to its outcome, then sends what it still has to send
    /// (releases of a failed attempt) before returning.
    pub(crate) fn run<O: Operation>(
        &mut self,
        op: &mut O,
        mut on_incarnation: impl FnMut(&mut O, ServerId, Instant),
    ) -> O::Output {
        self.serial += 1;
        let serial = self.serial;
        let mut outcome = None;
        loop {
            let now = self.now();
            // 1. Everything the operation wants to send goes out first.
            self.transmit(op, serial, now);
            if outcome.is_none() {
                outcome = op.poll_outcome();
            }
            if let Some(out) = outcome.take() {
                if op.is_finished() {
                    self.flush_all();
                    return out;
                }
                outcome = Some(out);
            }
            // 2. Wait for replies, connects, or the next deadline.
            let deadline = self.next_deadline(op);
            self.wait(deadline);
            // 3. Feed what happened.
            let now = self.now();
            self.progress_connects(op, now);
            self.read_all(op, serial, now, &mut on_incarnation);
            if let Some(d) = op.poll_timeout() {
                if now >= d {
                    op.handle_timeout(now);
                }
            }
        }
    }

    fn transmit<O: Operation>(&mut self, op: &mut O, serial: u64, now: Instant) {
        loop {
            let t = match op.poll_transmit(now, &mut self.scratch) {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(redlock_core::redlock_resp::EncodeError::BufferTooSmall { needed }) => {
                    self.scratch.resize(needed, 0);
                    continue;
                }
                Err(_) => break,
            };
            let i = t.server.index();
            if self.conns[i].expect.len() >= MAX_OUTSTANDING {
                self.fail_op(op, i, serial, now);
            }
            let ready = self.ensure_connecting(i);
            let conn = &mut self.conns[i];
            if !ready {
                op.handle_connection_error(now, t.server);
                continue;
            }
            conn.out.extend_from_slice(&self.scratch[..t.len]);
            conn.expect.push_back(Expect::Op(serial));
        }
        self.flush_all();
    }

    /// Makes sure server `i` is connected or connecting (starting a connect,
    /// with its handshake queued, if allowed). False if it is down and may
    /// not be retried yet, or the connect failed at once.
    fn ensure_connecting(&mut self, i: usize) -> bool {
        let now = StdInstant::now();
        match self.conns[i].state {
            State::Up | State::Connecting { .. } => return true,
            State::Down { retry_at } if now < retry_at => return false,
            State::Down { .. } => {}
        }
        match self.connect(i) {
            Ok(()) => {
                log::debug!("redlock: connecting to {}", self.conns[i].url);
                true
            }
            Err(e) => {
                log::warn!("redlock: cannot connect to {}: {e}", self.conns[i].url);
                self.fail(i);
                false
            }
        }
    }

    fn connect(&mut self, i: usize) -> io::Result<()> {
        let conn = &mut self.conns[i];
        if conn.addrs.is_empty() {
            conn.addrs = (conn.url.host.as_str(), conn.url.port)
                .to_socket_addrs()?
                .collect();
        }
        let addr = *conn
            .addrs
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let mut stream = TcpStream::connect(addr)?;
        self.poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        conn.stream = Some(stream);
        conn.writable_interest = true;
        conn.state = State::Connecting {
            since: StdInstant::now(),
        };
        conn.out.clear();
        conn.inbuf.clear();
        conn.expect.clear();
        // The handshake goes first on the new connection.
        let mut buf = [0u8; 512];
        let url = conn.url.clone();
        if let Some(pw) = &url.password {
            let n = match &url.user {
                Some(user) => encode_growing(&mut conn.out, |b| {
                    encode::auth_user(b, user.as_bytes(), pw.expose().as_bytes())
                }),
                None => encode_growing(&mut conn.out, |b| encode::auth(b, pw.expose().as_bytes())),
            };
            let _ = n;
            conn.expect.push_back(Expect::Auth);
        }
        if url.db != 0 {
            if let Ok(n) = encode::select(&mut buf, u64::from(url.db)) {
                conn.out.extend_from_slice(&buf[..n]);
                conn.expect.push_back(Expect::Select);
            }
        }
        for s in [
            script::RELEASE,
            script::EXTEND,
            script::FENCED_ACQUIRE,
            script::FENCE_WRITE,
            script::INSPECT,
        ] {
            encode_growing(&mut conn.out, |b| {
                encode::script_load(b, s.source.as_bytes())
            });
            conn.expect.push_back(Expect::ScriptLoad);
        }
        if let Ok(n) = encode::info(&mut buf, Some(b"server")) {
            conn.out.extend_from_slice(&buf[..n]);
            conn.expect.push_back(Expect::Info);
        }
        Ok(())
    }

    /// Closes server `i`'s connection after an error; it may reconnect after
    /// an exponential backoff.
    fn fail(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if conn.stream.is_some() {
            log::warn!(
                "redlock: closing the connection to {} after an error",
                conn.url
            );
        }
        if let Some(mut s) = conn.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        conn.failures = conn.failures.saturating_add(1);
        let shift = conn.failures.min(16) - 1;
        let backoff = self
            .config
            .backoff_min
            .saturating_mul(1 << shift)
            .min(self.config.backoff_max);
        conn.state = State::Down {
            retry_at: StdInstant::now() + backoff,
        };
        conn.out.clear();
        conn.inbuf.clear();
        conn.expect.clear();
        conn.writable_interest = false;
    }

    /// Closes server `i` and tells the operation its requests there are lost.
    fn fail_op<O: Operation>(&mut self, op: &mut O, i: usize, serial: u64, now: Instant) {
        let had = self.conns[i]
            .expect
            .iter()
            .any(|e| *e == Expect::Op(serial));
        self.fail(i);
        if had {
            op.handle_connection_error(now, ServerId(i as u8));
        }
    }

    fn flush_all(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].state == State::Up && self.flush(i).is_err() {
                self.fail(i);
            }
        }
    }

    /// Writes until `WouldBlock`; writable interest only while bytes wait.
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return Ok(());
        };
        let mut written = 0;
        while written < conn.out.len() {
            match stream.write(&conn.out[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        conn.out.drain(..written);
        let want = !conn.out.is_empty();
        if want != conn.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            self.poll
                .registry()
                .reregister(stream, Token(i), interest)?;
            conn.writable_interest = want;
        }
        Ok(())
    }

    fn next_deadline<O: Operation>(&self, op: &O) -> Option<StdInstant> {
        let mut d = op.poll_timeout().map(|t| self.std_instant(t));
        for c in &self.conns {
            if let State::Connecting { since } = c.state {
                let t = since + self.config.connect_timeout;
                d = Some(d.map_or(t, |d| d.min(t)));
            }
        }
        d
    }

    fn wait(&mut self, deadline: Option<StdInstant>) {
        let timeout = deadline.map(|d| d.saturating_duration_since(StdInstant::now()));
        // Spurious wake-ups and EINTR are harmless: the caller re-checks everything.
        let _ = self.poll.poll(&mut self.events, timeout);
        for event in self.events.iter() {
            self.ready |= 1u64.checked_shl(event.token().0 as u32).unwrap_or(0);
        }
    }

    /// Finishes non-blocking connects (`take_error`, `peer_addr`), and
    /// fails those past the connect timeout.
    fn progress_connects<O: Operation>(&mut self, op: &mut O, now: Instant) {
        for i in 0..self.conns.len() {
            let State::Connecting { since } = self.conns[i].state else {
                continue;
            };
            let stream = self.conns[i].stream.as_ref();
            let done = match stream.map(|s| (s.take_error(), s.peer_addr())) {
                Some((Ok(None), Ok(_))) => Some(true),
                Some((Ok(Some(_)) | Err(_), _)) => Some(false),
                Some((Ok(None), Err(e))) if e.kind() == io::ErrorKind::NotConnected => None,
                _ => Some(false),
            };
            match done {
                Some(true) => {
                    let conn = &mut self.conns[i];
                    log::debug!("redlock: connected to {}", conn.url);
                    conn.state = State::Up;
                    if let Some(s) = conn.stream.as_ref() {
                        let _ = s.set_nodelay(true);
                    }
                    if self.flush(i).is_err() {
                        self.fail_op(op, i, self.serial, now);
                    }
                }
                Some(false) => self.fail_op(op, i, self.serial, now),
                None if StdInstant::now() >= since + self.config.connect_timeout => {
                    self.fail_op(op, i, self.serial, now)
                }
                None => {}
            }
        }
    }

    fn read_all<O: Operation>(
        &mut self,
        op: &mut O,
        serial: u64,
        now: Instant,
        on_incarnation: &mut impl FnMut(&mut O, ServerId, Instant),
    ) {
        for i in 0..self.conns.len() {
            if self.conns[i].state != State::Up {
                continue;
            }
            if self.flush(i).is_err() {
                self.fail_op(op, i, serial, now);
                continue;
            }
            // Only sockets the poll reported: each is read until WouldBlock
            // (mio is edge-triggered), the others would read nothing.
            if self.ready & (1u64 << i) == 0 {
                continue;
            }
            match self.read(i) {
                Ok(()) => {}
                Err(_) => {
                    // Parse what arrived before the error, then close.
                    let _ = self.dispatch(op, i, serial, now, on_incarnation);
                    self.fail_op(op, i, serial, now);
                    continue;
                }
            }
            if self.dispatch(op, i, serial, now, on_incarnation).is_err() {
                self.fail_op(op, i, serial, now);
            }
        }
        self.ready = 0;
    }

    /// Reads until `WouldBlock`, bounded by the frame limit.
    fn read(&mut self, i: usize) -> io::Result<()> {
        let limit = self
            .config
            .limits
            .max_frame_len
            .saturating_add(self.config.limits.max_line_len)
            + READ_CHUNK;
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return Ok(());
        };
        loop {
            let start = conn.inbuf.len();
            if start >= limit {
                // More than a whole frame buffered: the parser will refuse it.
                return Ok(());
            }
            conn.inbuf.resize(start + READ_CHUNK, 0);
            match stream.read(&mut conn.inbuf[start..]) {
                Ok(0) => {
                    conn.inbuf.truncate(start);
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(n) => conn.inbuf.truncate(start + n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    conn.inbuf.truncate(start);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => conn.inbuf.truncate(start),
                Err(e) => {
                    conn.inbuf.truncate(start);
                    return Err(e);
                }
            }
        }
    }

    /// Parses every complete reply on connection `i` and routes it.
    fn dispatch<O: Operation>(
        &mut self,
        op: &mut O,
        i: usize,
        serial: u64,
        now: Instant,
        on_incarnation: &mut impl FnMut(&mut O, ServerId, Instant),
    ) -> Result<(), ()> {
        let mut used_total = 0;
        let result = loop {
            let conn = &mut self.conns[i];
            let input = &conn.inbuf[used_total..];
            let (reply, used) = match self.parser.parse(input) {
                Ok(Status::Complete(x)) => x,
                Ok(Status::Incomplete) => break Ok(()),
                Err(e) => {
                    log::warn!("redlock: bad reply from {}: {e}", conn.url);
                    break Err(());
                }
            };
            used_total += used;
            if reply.is_push() {
                continue;
            }
            let Some(expect) = conn.expect.pop_front() else {
                // A reply for no request: the stream is out of step.
                log::warn!("redlock: {} sent a reply for no request", conn.url);
                break Err(());
            };
            match expect {
                Expect::Op(s) if s == serial => {
                    if op.handle_reply(now, ServerId(i as u8), reply).is_err() {
                        break Err(());
                    }
                }
                // A reply to an operation that already returned: dropped.
                Expect::Op(_) => {}
                // A failed AUTH or SELECT shows in the operation's own
                // replies (NOAUTH, or keys in the wrong database).
                Expect::Auth | Expect::Select | Expect::ScriptLoad => {}
                Expect::Info => {
                    if let Some(uptime) = reply.as_bytes().and_then(uptime_seconds) {
                        conn.incarnation = Some((StdInstant::now(), uptime));
                        let started = now.saturating_sub(redlock_core::Duration::from_secs(uptime));
                        on_incarnation(op, ServerId(i as u8), started);
                    }
                }
            }
        };
        let conn = &mut self.conns[i];
        conn.inbuf.drain(..used_total.min(conn.inbuf.len()));
        if result.is_ok() {
            conn.failures = 0;
        }
        result
    }

    /// When each server's current incarnation began, on the core's clock.
    pub(crate) fn incarnations(&self) -> impl Iterator<Item = (ServerId, Instant)> + '_ {
        self.conns.iter().enumerate().filter_map(|(i, c)| {
            let (read_at, uptime) = c.incarnation?;
            let started = self
                .core_instant(read_at)
                .saturating_sub(redlock_core::Duration::from_secs(uptime));
            Some((ServerId(i as u8), started))
        })
    }
}

/// `uptime_in_seconds:N` from the text of `INFO server`.
fn uptime_seconds(info: &[u8]) -> Option<u64> {
    let text = core::str::from_utf8(info).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("uptime_in_seconds:"))?
        .trim()
        .parse()
        .ok()
}

/// Encodes into the end of `out`, growing it to the size the encoder asks for.
fn encode_growing(
    out: &mut Vec<u8>,
    f: impl Fn(&mut [u8]) -> Result<usize, redlock_core::redlock_resp::EncodeError>,
) -> usize {
    let start = out.len();
    out.resize(start + 256, 0);
    let n = match f(&mut out[start..]) {
        Ok(n) => n,
        Err(redlock_core::redlock_resp::EncodeError::BufferTooSmall { needed }) => {
            out.resize(start + needed, 0);
            f(&mut out[start..]).unwrap_or(0)
        }
        Err(_) => 0,
    };
    out.truncate(start + n);
    n
}
