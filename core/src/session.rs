//! The per-server session: one server's connection protocol, sans-IO.
//!
//! A [`Session`] decides everything about one server's connection that is
//! not moving bytes: when to (re)connect and how long to back off, what the
//! handshake sends and what its replies mean (fail closed), which request
//! each reply answers (stale replies of an abandoned operation included),
//! which requests wait behind a new connection's handshake, whether the
//! server is the same process as another entry (the twin check), and when
//! the connection is given up. A platform owns the socket and the buffers;
//! it tells the session what happened and does what the session says, in
//! the manner of quinn-proto's `Connection`:
//!
//! 1. **Connect.** While [`may_connect`](Session::may_connect) says so,
//!    open a socket and call [`connecting`](Session::connecting) (again
//!    for each further address tried). Once the transport is up (TCP, and
//!    TLS if any), call [`connected`](Session::connected).
//! 2. **Handshake.** Write each step [`poll_step`](Session::poll_step)
//!    returns (encode it with [`encode_step`]), calling
//!    [`step_written`](Session::step_written) after each.
//! 3. **Requests.** Give every request to [`push`](Session::push) with the
//!    owner's tag and its deadline: [`Queued::Write`] means write it now,
//!    [`Queued::Held`] means keep it until the session is
//!    [`Ready`](State::Ready) ([`Event::Ready`]), then write every held
//!    request in order. Nothing but the handshake is written before that
//!    (C1: a `SET` must never run in the wrong database or as the wrong
//!    user).
//! 4. **Replies.** Give each parsed reply to
//!    [`handle_reply`](Session::handle_reply): [`Event::Reply`] names the tag
//!    of the request it answers, which the platform routes to its owner (an
//!    owner that is gone makes it a stale reply, dropped).
//! 5. **Time.** Call [`handle_timeout`](Session::handle_timeout) at
//!    [`poll_timeout`](Session::poll_timeout), after reading what arrived
//!    and before the operations' own timeouts at the same `now`.
//! 6. **Close.** Whenever a call returns a [`Close`], or the platform sees
//!    the transport fail ([`Close::Io`]), close the socket and call
//!    [`close`](Session::close): it hands back the tag of every request
//!    that is lost, whose owners the platform tells
//!    (`handle_setup_error` for [`Close::Refused`], else
//!    `handle_connection_error`).
//!
//! # The policy, in one table
//!
//! | decision | rule |
//! |---|---|
//! | connect and handshake | the transport must be up within [`Policy::connect_timeout`] of [`connecting`](Session::connecting), and the handshake passed within another from [`connected`](Session::connected) |
//! | backoff | a failed connect, a refused or timed-out handshake, or a connection that breaks within [`Policy::connect_timeout`] of passing its handshake (flapping) waits `backoff_min * 2^(failures-1)`, at most `backoff_max`; an established connection that breaks reconnects at once |
//! | urgent requests (releases) | may reconnect during the backoff if the server was reachable when it last failed (not refused, and not a connect that never came up) |
//! | what waits behind a handshake | every request pushed before the session is ready, up to the platform's room |
//! | a request unanswered past its deadline | the connection is given up ([`Close::Unanswered`]): a stream that lost a request is out of step, and every later reply would be taken for an older request |
//! | a reply for no request | the connection is given up ([`Close::Unsolicited`]) |
//! | the owed queue is full | the connection is given up ([`Close::Stuck`]): the server stopped answering |
//! | the twin check (C3) | a `run_id` already known for another entry refuses this one ([`SetupError::SameServer`]) |
//! | the restart guard (C2) | the incarnation is known only from this connection's `INFO`; closed, it is unknown |

use core::marker::PhantomData;

use redlock_resp::{EncodeError, Reply, Script, encode};

use crate::handshake::{self, Plan, SetupError, Step, Verdict};
use crate::report::ServerId;
use crate::time::{Duration, Instant};

/// The longest `run_id` kept (Redis and Valkey use 40 hex characters).
pub const RUN_ID_LEN: usize = 40;

/// The connection policy's tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Policy {
    /// How long the transport may take to come up, and then how long the
    /// handshake may take; also the window in which a connection that
    /// breaks counts as flapping.
    pub connect_timeout: Duration,
    /// The wait before reconnecting after one failed attempt.
    pub backoff_min: Duration,
    /// The longest wait between attempts.
    pub backoff_max: Duration,
}

impl Policy {
    /// 1 s to connect (and 1 s for the handshake), backoff from 10 ms to 2 s.
    pub const DEFAULT: Policy = Policy {
        connect_timeout: Duration::from_secs(1),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_secs(2),
    };

    /// The wait after `failures` failed attempts in a row (at least one).
    pub fn backoff(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(16);
        Duration::from_micros(self.backoff_min.as_micros().saturating_mul(1u64 << shift))
            .min(self.backoff_max)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum State {
    /// No connection.
    Down,
    /// The transport (TCP, TLS) is coming up.
    Connecting,
    /// The handshake is being written and judged.
    Handshake,
    /// Every handshake reply was judged good: requests go out.
    Ready,
}

/// Why a connection is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Close {
    /// The platform saw the transport fail: an I/O error, the end of the
    /// stream, a connect that did not take, a TLS error after its handshake.
    Io,
    /// A reply that does not parse, or exceeds the limits.
    BadReply,
    /// A reply for no request: the stream is out of step.
    Unsolicited,
    /// A request went unanswered past its deadline: the stream may have
    /// lost it (out of step), or the server stalls.
    Unanswered,
    /// The transport or the handshake did not finish in time.
    ConnectTimeout,
    /// Too many requests unanswered for the platform's room.
    Stuck,
    /// The handshake was refused, or the server is another entry's twin:
    /// the server is not used until a later handshake passes.
    Refused(SetupError),
}

impl core::fmt::Display for Close {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Close::Io => f.write_str("the connection failed"),
            Close::BadReply => f.write_str("a reply that does not parse"),
            Close::Unsolicited => f.write_str("a reply for no request"),
            Close::Unanswered => f.write_str("a request unanswered past its deadline"),
            Close::ConnectTimeout => f.write_str("no connection and handshake in time"),
            Close::Stuck => f.write_str("too many requests unanswered"),
            Close::Refused(why) => write!(f, "not used: {why}"),
        }
    }
}

/// A request the session waits for a reply to: its owner's tag, and when it
/// is due. Eight bytes with a `u16` tag: a firmware keeps a dozen per
/// server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<T> {
    /// The platform's tag of the request's owner.
    pub tag: T,
    /// Written: its deadline, in microseconds after the session's `base`.
    /// Held behind the handshake: the microseconds it is allowed from when
    /// the handshake passes.
    due: u32,
}

/// The storage of the requests a session waits for, oldest first: a
/// `heapless::Deque` (fixed room) or a platform's growable queue.
pub trait Queue<T> {
    /// Appends `entry`; gives it back when there is no room.
    fn push_back(&mut self, entry: Entry<T>) -> Result<(), Entry<T>>;
    /// Takes the oldest.
    fn pop_front(&mut self) -> Option<Entry<T>>;
    /// How many there are.
    fn len(&self) -> usize;
    /// True when there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` on each, oldest first.
    fn for_each_mut(&mut self, f: impl FnMut(&mut Entry<T>));
    /// Calls `f` on each, oldest first.
    fn for_each(&self, f: impl FnMut(&Entry<T>));
}

impl<T, const N: usize> Queue<T> for heapless::Deque<Entry<T>, N> {
    fn push_back(&mut self, entry: Entry<T>) -> Result<(), Entry<T>> {
        heapless::Deque::push_back(self, entry)
    }
    fn pop_front(&mut self) -> Option<Entry<T>> {
        heapless::Deque::pop_front(self)
    }
    fn len(&self) -> usize {
        heapless::Deque::len(self)
    }
    fn for_each_mut(&mut self, f: impl FnMut(&mut Entry<T>)) {
        self.iter_mut().for_each(f);
    }
    fn for_each(&self, f: impl FnMut(&Entry<T>)) {
        self.iter().for_each(f);
    }
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Queued {
    /// Write it now (the session is ready).
    Write,
    /// Keep it until [`Event::Ready`], then write it (behind the
    /// handshake, in order).
    Held,
}

/// What a reply meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<T> {
    /// It answers the request tagged so: route it to the tag's owner.
    Reply(T),
    /// A handshake step passed; more are to come.
    Step,
    /// The last handshake step passed: write the held requests, in order.
    /// Their owners learn the server's incarnation
    /// ([`incarnation`](Session::incarnation)) first.
    Ready,
    /// A RESP3 push: nothing to do.
    Push,
}

/// `Option<SetupError>` whose `None` is all zero bits, so that a new
/// [`Session`] is all zero (with a zeroed queue): a static of them goes to
/// `.bss` and needs no flash for its initial value (an `Option` would put
/// `None` in a niche of the error's tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, u8)]
enum Refusal {
    None,
    Some(SetupError),
}

/// One server's connection protocol. `T` is the platform's tag of a
/// request's owner (a slot and serial, an operation number); `Q` stores
/// the requests awaited (see [`Queue`]).
#[derive(Debug, Clone)]
pub struct Session<T, Q> {
    state: State,
    plan: Plan,
    /// Handshake steps in the plan, written, and judged.
    steps: u8,
    written: u8,
    judged: u8,
    /// Connecting: the transport must be up by then; in the handshake: it
    /// must pass by then.
    deadline: Instant,
    /// Down: a connect may start from then on.
    retry_at: Instant,
    /// When the handshake passed.
    ready_at: Instant,
    /// The origin of the entries' deadlines: moved to the present when the
    /// queue is empty, or when a deadline would not fit in `u32`
    /// microseconds (71 minutes) after it.
    base: Instant,
    failures: u32,
    /// The server was not reachable when its connection last failed (a
    /// connect that never came up): an urgent request may not skip the
    /// backoff.
    unreachable: bool,
    refused: Refusal,
    incarnation: Option<Instant>,
    run_id: heapless::Vec<u8, RUN_ID_LEN>,
    owed: Q,
    tag: PhantomData<T>,
}

impl<T, Q: Queue<T>> Session<T, Q> {
    /// A session for a server with handshake `plan`, keeping the requests it
    /// awaits in `owed` (empty).
    pub const fn new(plan: Plan, owed: Q) -> Self {
        Session {
            state: State::Down,
            plan,
            steps: 0,
            written: 0,
            judged: 0,
            deadline: Instant::ZERO,
            retry_at: Instant::ZERO,
            ready_at: Instant::ZERO,
            base: Instant::ZERO,
            failures: 0,
            unreachable: false,
            refused: Refusal::None,
            incarnation: None,
            run_id: heapless::Vec::new(),
            owed,
            tag: PhantomData,
        }
    }

    /// Sets the handshake plan (before the first connect).
    pub fn set_plan(&mut self, plan: Plan) {
        self.plan = plan;
    }

    /// The handshake plan.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Where the session is.
    pub fn state(&self) -> State {
        self.state
    }

    /// True when requests are written at once.
    pub fn is_ready(&self) -> bool {
        self.state == State::Ready
    }

    /// Why the server is not used, since its last connection was refused
    /// (until a handshake passes or a later connection fails otherwise).
    pub fn refused(&self) -> Option<SetupError> {
        match self.refused {
            Refusal::None => None,
            Refusal::Some(e) => Some(e),
        }
    }

    /// When the server's current process began (C2), from this connection's
    /// `INFO`; `None` while not known.
    pub fn incarnation(&self) -> Option<Instant> {
        self.incarnation
    }

    /// The server's `run_id` from its last handshake (empty if not known).
    pub fn run_id(&self) -> &[u8] {
        &self.run_id
    }

    /// Failed attempts in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Requests awaited (written or held).
    pub fn owed(&self) -> usize {
        self.owed.len()
    }

    /// Calls `f` with the tag of every request awaited, oldest first.
    pub fn for_each_owed(&self, mut f: impl FnMut(&T)) {
        self.owed.for_each(|e| f(&e.tag));
    }

    /// Forgets everything, history included (a new client).
    pub fn reset(&mut self) {
        self.state = State::Down;
        self.written = 0;
        self.judged = 0;
        self.retry_at = Instant::ZERO;
        self.failures = 0;
        self.unreachable = false;
        self.refused = Refusal::None;
        self.incarnation = None;
        self.run_id.clear();
        while self.owed.pop_front().is_some() {}
    }

    /// Whether a connect may start now: the session is down, and its
    /// backoff has passed, or the request is `urgent` (a release) and the
    /// server was reachable when it last failed.
    pub fn may_connect(&self, now: Instant, urgent: bool) -> bool {
        self.state == State::Down
            && (now >= self.retry_at
                || (urgent && !self.unreachable && self.refused == Refusal::None))
    }

    /// The earliest time a connect may start (for a platform that sleeps).
    pub fn retry_at(&self) -> Option<Instant> {
        (self.state == State::Down).then_some(self.retry_at)
    }

    /// A connect was started (or, while connecting, moved on to the next
    /// address): the transport must be up within the connect timeout.
    pub fn connecting(&mut self, now: Instant, policy: &Policy) {
        if self.state == State::Down {
            self.written = 0;
            self.judged = 0;
            self.steps = handshake::step_count(self.plan).min(u8::MAX.into()) as u8;
            self.incarnation = None;
        }
        self.state = State::Connecting;
        self.deadline = now.saturating_add(policy.connect_timeout);
    }

    /// The transport is up: the handshake starts, and must pass within the
    /// connect timeout.
    pub fn connected(&mut self, now: Instant, policy: &Policy) {
        if self.state == State::Connecting {
            self.state = State::Handshake;
            self.deadline = now.saturating_add(policy.connect_timeout);
        }
    }

    /// The next handshake step to write, with the script of a `SCRIPT
    /// LOAD`, while the handshake runs.
    pub fn poll_step(&self) -> Option<(Step, Option<&'static Script>)> {
        if self.state != State::Handshake || self.written >= self.steps {
            return None;
        }
        handshake::step_and_script(self.plan, self.written.into())
    }

    /// The step [`poll_step`](Session::poll_step) returned was written.
    pub fn step_written(&mut self) {
        if self.poll_step().is_some() {
            self.written = self.written.saturating_add(1);
        }
    }

    /// A request tagged `tag`, due by `deadline`, goes to this server:
    /// written now, or held behind the handshake (then its time runs from
    /// when the handshake passes, as long as `deadline` leaves from `now`).
    /// `Err` gives the tag back: with [`Close::Io`] when the session is
    /// down (nothing to write it on: the request is lost as in a connection
    /// error, or as refused if [`refused`](Session::refused) says so, and
    /// there is nothing to close), with [`Close::Stuck`] when there is no
    /// room (give the connection up).
    pub fn push(&mut self, now: Instant, tag: T, deadline: Instant) -> Result<Queued, (T, Close)> {
        let (due, queued) = match self.state {
            State::Down => return Err((tag, Close::Io)),
            State::Ready => (self.offset(now, deadline), Queued::Write),
            State::Connecting | State::Handshake => {
                let allowed = deadline.saturating_duration_since(now).as_micros();
                (u32::try_from(allowed).unwrap_or(u32::MAX), Queued::Held)
            }
        };
        match self.owed.push_back(Entry { tag, due }) {
            Ok(()) => Ok(queued),
            Err(e) => {
                rl_log!(warn, "a server owes too many replies: giving it up");
                Err((e.tag, Close::Stuck))
            }
        }
    }

    /// A reply arrived (in the order the server sent them). `twin` tells
    /// whether another entry already has this `run_id` (C3). `Err`: give
    /// the connection up.
    pub fn handle_reply(
        &mut self,
        now: Instant,
        reply: &Reply<'_>,
        twin: impl FnOnce(&[u8]) -> Option<ServerId>,
    ) -> Result<Event<T>, Close> {
        if reply.is_push() {
            return Ok(Event::Push);
        }
        match self.state {
            State::Ready => match self.owed.pop_front() {
                Some(entry) => Ok(Event::Reply(entry.tag)),
                None => Err(Close::Unsolicited),
            },
            State::Handshake if self.judged < self.written => self.judge(now, reply, twin),
            _ => Err(Close::Unsolicited),
        }
    }

    /// C1, fail closed: the reply to the next handshake step.
    fn judge(
        &mut self,
        now: Instant,
        reply: &Reply<'_>,
        twin: impl FnOnce(&[u8]) -> Option<ServerId>,
    ) -> Result<Event<T>, Close> {
        let step = handshake::step(self.plan, self.judged.into()).ok_or(Close::Unsolicited)?;
        self.judged = self.judged.saturating_add(1);
        match handshake::judge(step, reply, self.plan) {
            Ok(Verdict::Ok) => {}
            Ok(Verdict::Info(info)) => {
                if let Some(id) = info.run_id {
                    // C3: one process behind two entries must not vote twice.
                    let id = id.get(..RUN_ID_LEN).unwrap_or(id);
                    if let Some(other) = twin(id) {
                        return Err(Close::Refused(SetupError::SameServer(other)));
                    }
                    self.run_id.clear();
                    let _ = self.run_id.extend_from_slice(id);
                }
                self.incarnation = info.started(now);
            }
            Err(why) => return Err(Close::Refused(why)),
        }
        if self.judged < self.steps {
            return Ok(Event::Step);
        }
        // Every step passed: the server may be used.
        self.state = State::Ready;
        self.ready_at = now;
        self.failures = 0;
        self.refused = Refusal::None;
        self.unreachable = false;
        // The held requests' time runs from now.
        self.base = now;
        rl_log!(debug, "a server passed its handshake");
        Ok(Event::Ready)
    }

    /// `deadline` as microseconds after `base`, moving `base` to `now`
    /// first when nothing is awaited, or when `deadline` is too far after
    /// it (then the entries' deadlines move with it; one already past stays
    /// past).
    fn offset(&mut self, now: Instant, deadline: Instant) -> u32 {
        let fits = |base: Instant| {
            u32::try_from(deadline.saturating_duration_since(base).as_micros()).ok()
        };
        if self.owed.is_empty() {
            self.base = now;
        } else if fits(self.base).is_none() {
            let shift = now.saturating_duration_since(self.base).as_micros();
            let shift = u32::try_from(shift).unwrap_or(u32::MAX);
            self.owed
                .for_each_mut(|e| e.due = e.due.saturating_sub(shift));
            self.base = now;
        }
        fits(self.base).unwrap_or(u32::MAX)
    }

    fn deadline_of(&self, due: u32) -> Instant {
        self.base
            .saturating_add(Duration::from_micros(u64::from(due)))
    }

    /// When [`handle_timeout`](Session::handle_timeout) is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Down => None,
            State::Connecting | State::Handshake => Some(self.deadline),
            State::Ready => {
                let mut next: Option<u32> = None;
                self.owed.for_each(|e| {
                    next = Some(next.map_or(e.due, |t| t.min(e.due)));
                });
                next.map(|due| self.deadline_of(due))
            }
        }
    }

    /// Time has passed: `Some` when the connection must be given up (a
    /// connect or handshake past its deadline, a request unanswered past
    /// its own).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Close> {
        let due = self.poll_timeout()?;
        if now < due {
            return None;
        }
        Some(match self.state {
            State::Ready => {
                rl_log!(
                    info,
                    "a request went unanswered past its deadline: reconnecting"
                );
                Close::Unanswered
            }
            _ => Close::ConnectTimeout,
        })
    }

    /// The connection is closed (the platform closed its socket) because of
    /// `why`: every request awaited is lost, and `lost` is called with each
    /// tag, oldest first (an operation that had a release among them sends
    /// it again on the next connection: see `Operation`). Decides when the
    /// next connect may start.
    pub fn close(&mut self, now: Instant, why: Close, policy: &Policy, mut lost: impl FnMut(T)) {
        let flapping = self.state == State::Ready
            && now < self.ready_at.saturating_add(policy.connect_timeout);
        let refused = match why {
            Close::Refused(e) => Some(e),
            _ => None,
        };
        let attempt = matches!(self.state, State::Connecting | State::Handshake)
            || flapping
            || refused.is_some();
        if self.state == State::Connecting {
            // It never came up: a release does not skip the backoff for it.
            self.unreachable = true;
        }
        if attempt {
            self.failures = self.failures.saturating_add(1);
            self.retry_at = now.saturating_add(policy.backoff(self.failures));
        } else {
            // An established connection broke: reconnect at once.
            self.retry_at = now;
        }
        if let Some(e) = refused {
            rl_log!(warn, "a server is not used: {}", e);
        }
        self.refused = match refused {
            Some(e) => Refusal::Some(e),
            None => Refusal::None,
        };
        self.state = State::Down;
        self.written = 0;
        self.judged = 0;
        self.incarnation = None;
        while let Some(e) = self.owed.pop_front() {
            lost(e.tag);
        }
    }
}

/// How to log in to one server: `AUTH [user] password` and `SELECT db`, sent
/// on every new connection before anything else and judged fail-closed.
///
/// `Debug` never shows the password.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Credentials<'a> {
    /// The ACL user (`AUTH user password`); `None` sends `AUTH password`.
    pub user: Option<&'a [u8]>,
    /// The password; `None` sends no `AUTH`.
    pub password: Option<&'a [u8]>,
    /// The database (`SELECT db` when not 0).
    pub db: u32,
}

impl core::fmt::Debug for Credentials<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Credentials")
            .field(
                "user",
                &self.user.map(|u| core::str::from_utf8(u).unwrap_or("?")),
            )
            .field("password", &self.password.map(|_| "***"))
            .field("db", &self.db)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Credentials<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Credentials {{ user: {}, password: {}, db: {} }}",
            self.user,
            if self.password.is_some() {
                "***"
            } else {
                "none"
            },
            self.db
        )
    }
}

impl Credentials<'_> {
    /// No `AUTH`, database 0.
    pub const NONE: Credentials<'static> = Credentials {
        user: None,
        password: None,
        db: 0,
    };

    /// The handshake plan of a server with these credentials.
    pub fn plan(&self, info_required: bool) -> Plan {
        Plan {
            auth: self.password.is_some(),
            select: self.db != 0,
            info_required,
        }
    }
}

/// Encodes handshake step `step` (loading `script`, for a `SCRIPT LOAD`) of
/// a server with `creds` into `buf`.
pub fn encode_step(
    buf: &mut [u8],
    step: Step,
    script: Option<&Script>,
    creds: &Credentials<'_>,
) -> Result<usize, EncodeError> {
    let password = creds.password.unwrap_or_default();
    let source = script.map_or("", |s| s.source).as_bytes();
    // One `command` call for the steps that are all bytes.
    let (args, argc): ([&[u8]; 3], usize) = match step {
        Step::Auth => match creds.user {
            Some(user) => ([b"AUTH", user, password], 3),
            None => ([b"AUTH", password, b""], 2),
        },
        Step::Select => return encode::select(buf, u64::from(creds.db)),
        Step::ScriptLoad => ([b"SCRIPT", b"LOAD", source], 3),
        _ => ([b"INFO", b"server", b""], 2),
    };
    encode::command(buf, args.get(..argc).unwrap_or_default())
}
