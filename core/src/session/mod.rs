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
//!    [`Queued::ProbeFirst`] means write [`encode_probe`] and then it,
//!    [`Queued::Held`] means keep it until the session is
//!    [`Ready`](State::Ready) ([`Event::Ready`]), then write every held
//!    request in order. Nothing but the handshake is written before that
//!    (C1: a `SET` must never run in the wrong database or as the wrong
//!    user). A platform that pipelines many callers may keep what it
//!    queued while [`corked`](Session::corked) says so (one batch in
//!    flight), calling [`flushed`](Session::flushed) whenever it writes.
//! 4. **Replies.** Give each parsed reply to
//!    [`handle_reply`](Session::handle_reply): [`Event::Reply`] names the tag
//!    of the request it answers, which the platform routes to its owner (an
//!    owner that is gone makes it a stale reply, dropped).
//! 5. **Time.** Call [`handle_timeout`](Session::handle_timeout) at
//!    [`poll_timeout`](Session::poll_timeout), after reading what arrived
//!    and before the operations' own timeouts at the same `now`; then, if
//!    [`poll_probe`](Session::poll_probe) says so, write [`encode_probe`]
//!    and call [`probe_written`](Session::probe_written).
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
//! | backoff | a failed connect, a refused or timed-out handshake, or a connection that breaks within [`Policy::connect_timeout`] of passing its handshake (flapping) waits `backoff_min * 2^(failures-1)`, at most `backoff_max`, where `failures` counts these in a row (a handshake passed does not end the row: flapping backs off ever longer); an established connection that breaks (up for longer than the connect timeout) reconnects at once and ends the row |
//! | urgent requests (releases) | may reconnect during the backoff if the server was reachable when it last failed (not refused, and not a connect that never came up) |
//! | what waits behind a handshake | every request pushed before the session is ready, up to the platform's room |
//! | a request unanswered for half its time | a probe (`PING redlock-probe`) is written behind it; a request pushed while one is overdue and not probed yet goes behind a probe ([`Queued::ProbeFirst`]) |
//! | the probe's answer in a request's place, or another reply in the probe's | the connection is given up ([`Close::OutOfStep`]): it lost a request or a reply, and every later reply would be taken for an older request |
//! | a probe unanswered within the connect timeout, or the longest time a request it follows was allowed | the connection is given up ([`Close::Unanswered`]): the server stalls; a slow server whose replies come in order is kept |
//! | one batch in flight (feature `batching`, optional for a platform) | requests pushed while a written one is unanswered wait in the platform's buffer until the replies come, a probe is to go out, a write is unfinished, or one of them has waited a sixteenth of its time ([`corked`](Session::corked)) |
//! | a reply for no request | the connection is given up ([`Close::Unsolicited`]) |
//! | the owed queue is full | the connection is given up ([`Close::Stuck`]): the server stopped answering |
//! | the twin check (C3) | a `run_id` already known for another entry refuses this one ([`SetupError::SameServer`]) |
//! | the restart guard (C2) | the incarnation is known only from this connection's `INFO`; closed, it is unknown |

use core::marker::PhantomData;

use redlock_resp::{Reply, Script};

use crate::handshake::{self, Commands, Dialect, Plan, SetupError, Step, Verdict};
use crate::report::ServerId;
use crate::time::{Duration, Instant};

mod cork;
mod encode;
mod queue;

use cork::Cork;

use encode::is_probe_reply;
pub use encode::{Credentials, PROBE_LEN, encode_probe, encode_step};
pub use queue::{Entry, Queue};

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
        // Doubled once per failure after the first, by additions (a 64-bit
        // multiplication is a long sequence on a 32-bit MCU).
        let mut wait = self.backoff_min;
        for _ in 1..failures.min(17) {
            wait = wait.saturating_add(wait);
        }
        wait.min(self.backoff_max)
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
    /// A probe of the stream's step went unanswered within the connect
    /// timeout: the server stalls.
    Unanswered,
    /// The probe's answer came in the place of a request's, or another
    /// reply in the probe's: the stream lost a request or a reply (bytes
    /// swallowed on a live connection), and every later reply would be
    /// taken for an older request.
    OutOfStep,
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
            Close::Unanswered => f.write_str("a probe unanswered in time (a stalled server)"),
            Close::OutOfStep => f.write_str("a request or a reply was lost (out of step)"),
            Close::ConnectTimeout => f.write_str("no connection and handshake in time"),
            Close::Stuck => f.write_str("too many requests unanswered"),
            Close::Refused(why) => write!(f, "not used: {why}"),
        }
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
    /// Write the probe ([`encode_probe`]) and then the request.
    ProbeFirst,
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
    /// A reply that a request of several replies
    /// ([`push_with_replies`](Session::push_with_replies)) has before its
    /// last: nothing to do (the last one is the request's answer).
    Partial,
    /// A RESP3 push: nothing to do.
    Push,
    /// The answer to the session's own probe: the stream is in step.
    Probe,
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
// LAYOUT: the fields in the order written, the small and busy ones first
// (the queue's indices lead it): a 32-bit MCU reaches a byte within 32
// bytes of a structure's start, a `u16` within 64 and a `u32` within 128
// with a 2-byte instruction, anything further with a 4-byte one.
#[repr(C)]
pub struct Session<T, Q> {
    state: State,
    /// Handshake steps in the plan, written, and judged.
    steps: u8,
    written: u8,
    judged: u8,
    /// The server was not reachable when its connection last failed (a
    /// connect that never came up): an urgent request may not skip the
    /// backoff.
    unreachable: bool,
    /// The length of the `run_id`.
    run_id_len: u8,
    /// Replies of the oldest request awaited taken so far (a request of
    /// several replies: see `Entry::more`).
    partial: u8,
    /// What the last `INFO` said: the server has the native commands.
    /// Kept when the connection closes (the best guess for requests made
    /// before the next handshake), learned again by every handshake.
    native: Learned,
    plan: Plan,
    refused: Refusal,
    /// The probe of the stream's step (see [`poll_probe`](Session::poll_probe)).
    probe: Probe,
    /// What the platform's buffer holds (see [`corked`](Session::corked)).
    cork: Cork,
    failures: u32,
    /// The longest time any request awaited was allowed (µs), since the
    /// queue was last empty: a probe is awaited at least that long, so that
    /// a slow server answering within its requests' time is kept.
    allowance: u32,
    owed: Q,
    /// The session's one timer, by state (each state needs one at most):
    /// down, a connect may start from then on (the backoff's end);
    /// connecting, the transport must be up by then; in the handshake, it
    /// must pass by then; ready with a probe sent, the probe must be
    /// answered by then.
    deadline: Instant,
    /// When the handshake passed.
    ready_at: Instant,
    /// The origin of the entries' deadlines: moved to the present when the
    /// queue is empty (and when the handshake passes).
    base: Instant,
    incarnation: Option<Instant>,
    /// The server's `run_id`, in its first `run_id_len` bytes.
    run_id: [u8; RUN_ID_LEN],
    /// Test only: a broken session that never probes (it keeps a
    /// connection that lost a request), for the simulation's negative
    /// control.
    #[cfg(feature = "mutants")]
    keeps_out_of_step: bool,
    tag: PhantomData<T>,
}

/// What the last `INFO` said of the native commands. (Not an
/// `Option<bool>`: a session's initial bytes are all zero, so that a static
/// client on an MCU is in `.bss`, not in flash.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Learned {
    Unknown,
    Scripts,
    Native,
}

/// Where the probe of a connection's step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Idle,
    /// A request is overdue: a probe is to be written.
    Wanted,
    /// Written, behind requests of which `after` are still to be
    /// answered; its answer is due by the session's `deadline`.
    Sent {
        after: u16,
    },
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
            ready_at: Instant::ZERO,
            base: Instant::ZERO,
            failures: 0,
            allowance: 0,
            unreachable: false,
            refused: Refusal::None,
            incarnation: None,
            run_id: [0; RUN_ID_LEN],
            run_id_len: 0,
            partial: 0,
            native: Learned::Unknown,
            owed,
            probe: Probe::Idle,
            cork: Cork::NEW,
            #[cfg(feature = "mutants")]
            keeps_out_of_step: false,
            tag: PhantomData,
        }
    }

    /// Test only: this session never probes its step, and so keeps a
    /// connection that lost a request (out of step) for ever.
    #[cfg(feature = "mutants")]
    pub fn keep_out_of_step(&mut self) {
        self.keeps_out_of_step = true;
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

    /// What this server's requests are to be: the scripts or the native
    /// commands ([`Commands`]), from the plan's choice and what the last
    /// handshake learned of the server. The platform tells each operation
    /// (`Servers::set_dialect`) as it tells the incarnation.
    pub fn dialect(&self) -> Dialect {
        self.plan.commands.dialect(match self.native {
            Learned::Unknown => None,
            Learned::Scripts => Some(false),
            Learned::Native => Some(true),
        })
    }

    /// When the server's current process began (C2), from this connection's
    /// `INFO`; `None` while not known.
    pub fn incarnation(&self) -> Option<Instant> {
        self.incarnation
    }

    /// The server's `run_id` from its last handshake (empty if not known).
    pub fn run_id(&self) -> &[u8] {
        self.run_id
            .get(..usize::from(self.run_id_len))
            .unwrap_or_default()
    }

    /// Failed attempts in a row: failed connects, failed handshakes, and
    /// connections that broke within the connect timeout of their
    /// handshake (flapping). A connection that stays up longer than that
    /// ends the row when it breaks.
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
        self.deadline = Instant::ZERO;
        self.failures = 0;
        self.unreachable = false;
        self.refused = Refusal::None;
        self.incarnation = None;
        self.probe = Probe::Idle;
        self.cork.clear();
        self.run_id_len = 0;
        self.partial = 0;
        self.native = Learned::Unknown;
        while self.owed.pop_front().is_some() {}
    }

    /// Whether a connect may start now: the session is down, and its
    /// backoff has passed, or the request is `urgent` (a release) and the
    /// server was reachable when it last failed.
    pub fn may_connect(&self, now: Instant, urgent: bool) -> bool {
        self.state == State::Down
            && (now >= self.deadline
                || (urgent && !self.unreachable && self.refused == Refusal::None))
    }

    /// The earliest time a connect may start (for a platform that sleeps).
    pub fn retry_at(&self) -> Option<Instant> {
        (self.state == State::Down).then_some(self.deadline)
    }

    /// A connect was started (or, while connecting, moved on to the next
    /// address): the transport must be up within the connect timeout.
    pub fn connecting(&mut self, now: Instant, policy: &Policy) {
        // Down, nothing of the last connection is left: `close` (or `new`,
        // `reset`) cleared it.
        debug_assert!(
            self.state != State::Down
                || (self.written == 0 && self.judged == 0 && self.incarnation.is_none())
        );
        // With `Commands::Auto`, the scripts to load are known once `INFO`
        // was judged (`judge` adds them then).
        let steps = match self.plan.commands {
            Commands::Auto if crate::NATIVE => handshake::steps_before_info(self.plan),
            _ => handshake::step_count(self.plan, false),
        };
        self.steps = steps.min(u8::MAX.into()) as u8;
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
        handshake::step_and_script(
            self.plan,
            self.native == Learned::Native,
            self.written.into(),
        )
    }

    /// The step [`poll_step`](Session::poll_step) returned was written.
    pub fn step_written(&mut self) {
        // As `poll_step().is_some()`: every step below `steps` exists.
        if self.state == State::Handshake && self.written < self.steps {
            self.written = self.written.saturating_add(1);
        }
    }

    /// A request tagged `tag`, due by `deadline`, goes to this server:
    /// written now, or held behind the handshake (then its time runs from
    /// when the handshake passes, as long as `deadline` leaves from `now`).
    /// [`Queued::ProbeFirst`]: a request on this connection is overdue and
    /// not probed yet; write [`encode_probe`] first, then this request, so
    /// that a reply owed to an older request that was lost is never taken
    /// for this one's.
    /// Unanswered for half that time, the session probes the connection's
    /// step (see [`poll_probe`](Session::poll_probe)).
    /// `Err` gives the tag back: with [`Close::Io`] when the session is
    /// down (nothing to write it on: the request is lost as in a connection
    /// error, or as refused if [`refused`](Session::refused) says so, and
    /// there is nothing to close), with [`Close::Stuck`] when there is no
    /// room (give the connection up).
    pub fn push(
        &mut self,
        now: Instant,
        tag: T,
        deadline: Instant,
        policy: &Policy,
    ) -> Result<Queued, (T, Close)> {
        self.push_with_replies(now, tag, deadline, 1, policy)
    }

    /// [`push`](Session::push) for a request that the server answers with
    /// `replies` replies (a `MULTI` ... `EXEC` block: see
    /// [`Transmit::replies`](crate::Transmit::replies)); only the last one
    /// is the request's [`Event::Reply`], those before it are
    /// [`Event::Partial`].
    pub fn push_with_replies(
        &mut self,
        now: Instant,
        tag: T,
        deadline: Instant,
        replies: u8,
        policy: &Policy,
    ) -> Result<Queued, (T, Close)> {
        let allowed = deadline.saturating_duration_since(now);
        let (from, queued) = match self.state {
            State::Down => return Err((tag, Close::Io)),
            State::Ready => {
                if self.owed.is_empty() {
                    self.base = now;
                    self.allowance = 0;
                }
                let queued = if self.probe_first(now, policy) {
                    Queued::ProbeFirst
                } else {
                    Queued::Write
                };
                (self.base, queued)
            }
            State::Connecting | State::Handshake => (now, Queued::Held),
        };
        let micros = u32::try_from(allowed.as_micros()).unwrap_or(u32::MAX);
        self.allowance = self.allowance.max(micros);
        // Half the time allowed, from now: the probe, answered in a round
        // trip, still finds out within the request's time.
        let half = allowed.half();
        let due = now.saturating_add(half).saturating_duration_since(from);
        let more = replies.saturating_sub(1);
        match self.owed.push_back(Entry::new(tag, due).with_more(more)) {
            Ok(()) => {
                if queued != Queued::Held {
                    self.cork.pushed(now, allowed);
                }
                Ok(queued)
            }
            Err(e) => {
                rl_log!(warn, "a server owes too many replies: giving it up");
                Err((e.tag, Close::Stuck))
            }
        }
    }

    /// On a ready connection, before a request is written: `true` when an
    /// older request is overdue, or a probe is wanted, and so the probe
    /// goes first (written by the platform before this request); it is
    /// then on its way. Out of line: rarely true, and `push` stays small.
    #[inline(never)]
    fn probe_first(&mut self, now: Instant, policy: &Policy) -> bool {
        let first = match self.probe {
            Probe::Wanted => true,
            // (Its own timer: a corked request at the end of its share
            // wants its buffer written, not a probe.)
            Probe::Idle => self.own_timeout().is_some_and(|t| now >= t),
            Probe::Sent { .. } => false,
        };
        if first {
            self.send_probe(now, policy);
        }
        first
    }

    /// A reply arrived (in the order the server sent them). `twin` tells
    /// whether another entry already has this `run_id` (C3). `Err`: give
    /// the connection up.
    #[inline(never)]
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
            State::Ready => self.answer(reply),
            State::Handshake if self.judged < self.written => {
                let mut twin = Some(twin);
                self.judge(now, reply, &mut |id| twin.take().and_then(|f| f(id)))
            }
            _ => Err(Close::Unsolicited),
        }
    }

    /// A reply on a ready connection: to the probe, or to the oldest
    /// request awaited.
    fn answer(&mut self, reply: &Reply<'_>) -> Result<Event<T>, Close> {
        if let Probe::Sent { after } = self.probe {
            let probe = is_probe_reply(reply);
            if after == 0 || probe {
                // The probe's place: everything before it was answered, in
                // step if this is the probe's own text (else a reply was
                // lost, or came twice). Or the probe's answer in a
                // request's place: a request (or its reply) was lost on the
                // way (the request stays awaited: lost with the connection).
                if after == 0 {
                    self.probe = Probe::Idle;
                    if probe {
                        return Ok(Event::Probe);
                    }
                }
                rl_log!(
                    warn,
                    "a connection lost a request or a reply (out of step): reconnecting"
                );
                return Err(Close::OutOfStep);
            }
            // One request ahead of the probe fewer. (`after` never exceeds
            // the requests awaited, so the one below is there.)
            self.probe = Probe::Sent {
                after: after.saturating_sub(1),
            };
        }
        let more = if crate::NATIVE {
            self.owed.front().ok_or(Close::Unsolicited)?.more
        } else {
            0
        };
        if crate::NATIVE {
            if self.partial < more {
                // A reply of a `MULTI` block before its `EXEC`: `+OK`,
                // `+QUEUED`, or an error (then `EXEC` answers an error too,
                // and the request's answer is that error: fail closed
                // either way).
                self.partial = self.partial.saturating_add(1);
                return Ok(Event::Partial);
            }
            self.partial = 0;
        }
        let entry = self.owed.pop_front().ok_or(Close::Unsolicited)?;
        // (A platform that never calls `flushed` keeps every request
        // unsent by this count: it is kept within the requests awaited.)
        self.cork.owed(self.owed.len(), false);
        Ok(Event::Reply(entry.tag))
    }

    /// True when a probe is to be written now: a request went unanswered
    /// for half its time. Write [`encode_probe`] (behind the requests
    /// written so far), then call [`probe_written`](Session::probe_written).
    /// One probe at a time. Its reply comes after
    /// every earlier request's: if the connection lost a request or a
    /// reply, the probe's text comes back in the place of an older
    /// request's reply (the stream is out of step: the connection is given
    /// up, [`Close::OutOfStep`]); if the server only is slow, the replies
    /// come late and in order, and the connection is kept (so that a
    /// request still on the way cannot be overtaken by one sent on a new
    /// connection: a release must land after its `SET`). A probe not
    /// answered within the connect timeout gives the connection up
    /// ([`Close::Unanswered`]: the server stalls).
    pub fn poll_probe(&self) -> bool {
        self.probe == Probe::Wanted
    }

    /// The probe of [`poll_probe`](Session::poll_probe) was written.
    pub fn probe_written(&mut self, now: Instant, policy: &Policy) {
        if self.probe == Probe::Wanted {
            self.send_probe(now, policy);
        }
    }

    /// The probe is on its way: awaited for the connect timeout, or the
    /// longest time a request it follows was allowed (a slow server is
    /// kept). Out of line: `push` and `probe_written` share it.
    #[inline(never)]
    fn send_probe(&mut self, now: Instant, policy: &Policy) {
        // The replies the probe's follows: one per request, more for the
        // requests of several, less those of the oldest taken already.
        let replies = if crate::NATIVE {
            let mut replies = 0usize;
            self.owed.for_each(|e| {
                replies = replies
                    .saturating_add(usize::from(e.more))
                    .saturating_add(1);
            });
            replies.saturating_sub(usize::from(self.partial))
        } else {
            self.owed.len()
        };
        self.probe = Probe::Sent {
            after: u16::try_from(replies).unwrap_or(u16::MAX),
        };
        self.cork.urgent();
        let allowance = Duration::from_micros(u64::from(self.allowance));
        self.deadline = now.saturating_add(policy.connect_timeout.max(allowance));
    }

    /// C1, fail closed: the reply to the next handshake step.
    fn judge(
        &mut self,
        now: Instant,
        reply: &Reply<'_>,
        twin: &mut dyn FnMut(&[u8]) -> Option<ServerId>,
    ) -> Result<Event<T>, Close> {
        let native = self.native == Learned::Native;
        let step =
            handshake::step(self.plan, native, self.judged.into()).ok_or(Close::Unsolicited)?;
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
                    // At most `RUN_ID_LEN` bytes: its length fits a `u8`.
                    if let Some(dst) = self.run_id.get_mut(..id.len()) {
                        dst.copy_from_slice(id);
                        self.run_id_len = id.len() as u8;
                    }
                }
                self.incarnation = info.started(now);
                // Learned again on every connection: a server may have
                // been replaced by an older one. The scripts it needs are
                // loaded after this step.
                if crate::NATIVE {
                    self.native = if info.native {
                        Learned::Native
                    } else {
                        Learned::Scripts
                    };
                    if self.plan.commands == Commands::Auto {
                        let steps = handshake::step_count(self.plan, info.native);
                        self.steps = steps.min(u8::MAX.into()) as u8;
                    }
                }
            }
            Err(why) => return Err(Close::Refused(why)),
        }
        if self.judged < self.steps {
            return Ok(Event::Step);
        }
        // Every step passed: the server may be used. (The failures in a row
        // are counted on until it proves stable: see `close`.)
        self.state = State::Ready;
        self.ready_at = now;
        self.refused = Refusal::None;
        self.unreachable = false;
        // The held requests' time runs from now, and they are written next.
        self.base = now;
        self.cork.owed(self.owed.len(), true);
        rl_log!(debug, "a server passed its handshake");
        Ok(Event::Ready)
    }

    fn deadline_of(&self, due: u64) -> Instant {
        self.base.saturating_add(Duration::from_micros(due))
    }

    /// When [`handle_timeout`](Session::handle_timeout) is due next.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let own = self.own_timeout();
        #[cfg(feature = "batching")]
        if let Some(cork) = self.cork_deadline() {
            return Some(own.map_or(cork, |own| own.min(cork)));
        }
        own
    }

    /// The session's own timer: a connect, a handshake, a probe.
    #[inline(never)]
    fn own_timeout(&self) -> Option<Instant> {
        match (self.state, self.probe) {
            (State::Down, _) => None,
            // A connect, a handshake, or the probe sent.
            (State::Connecting | State::Handshake, _) | (State::Ready, Probe::Sent { .. }) => {
                Some(self.deadline)
            }
            // Written at the platform's next write.
            (State::Ready, Probe::Wanted) => None,
            // Broken on purpose: never looks, never gives up.
            #[cfg(feature = "mutants")]
            (State::Ready, Probe::Idle) if self.keeps_out_of_step => None,
            (State::Ready, Probe::Idle) => {
                let (mut next, mut any) = (u64::MAX, false);
                self.owed.for_each(|e| {
                    next = next.min(e.due());
                    any = true;
                });
                any.then(|| self.deadline_of(next))
            }
        }
    }

    /// Time has passed: `Some` when the connection must be given up (a
    /// connect or handshake past its deadline, a probe unanswered past its
    /// own). A request unanswered for half its time wants a probe
    /// ([`poll_probe`](Session::poll_probe)).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Close> {
        if self.state == State::Ready {
            self.cork.expire(now, self.owed.len());
        }
        let due = self.own_timeout()?;
        if now < due {
            return None;
        }
        match (self.state, self.probe) {
            (State::Ready, Probe::Sent { .. }) => {
                rl_log!(info, "a server did not answer a probe: reconnecting");
                Some(Close::Unanswered)
            }
            (State::Ready, _) => {
                self.probe = Probe::Wanted;
                None
            }
            _ => Some(Close::ConnectTimeout),
        }
    }

    /// The connection is closed (the platform closed its socket) because of
    /// `why`: every request awaited is lost, and `lost` is called with each
    /// tag, oldest first (an operation that had a release among them sends
    /// it again on the next connection: see `Operation`). Decides when the
    /// next connect may start.
    pub fn close(&mut self, now: Instant, why: Close, policy: &Policy, mut lost: impl FnMut(T)) {
        let (refused, mut attempt) = match why {
            Close::Refused(e) => {
                rl_log!(warn, "a server is not used: {}", e);
                (Refusal::Some(e), true)
            }
            _ => (Refusal::None, false),
        };
        self.refused = refused;
        attempt |= match self.state {
            State::Down => false,
            State::Connecting => {
                // It never came up: a release does not skip the backoff for it.
                self.unreachable = true;
                true
            }
            State::Handshake => true,
            // Flapping: broken within the connect timeout of its handshake,
            // one more failure in a row (so that a server that keeps
            // accepting and dropping its connections is retried ever more
            // slowly, not every `backoff_min`). Broken later, it was
            // stable: the count starts again.
            State::Ready => {
                let flapping = now < self.ready_at.saturating_add(policy.connect_timeout);
                if !flapping {
                    self.failures = 0;
                }
                flapping
            }
        };
        let mut wait = Duration::ZERO;
        if attempt {
            self.failures = self.failures.saturating_add(1);
            wait = policy.backoff(self.failures);
        }
        // An established connection that broke reconnects at once.
        self.deadline = now.saturating_add(wait);
        self.state = State::Down;
        self.written = 0;
        self.judged = 0;
        self.incarnation = None;
        self.allowance = 0;
        self.partial = 0;
        self.probe = Probe::Idle;
        self.cork.clear();
        while let Some(e) = self.owed.pop_front() {
            lost(e.tag);
        }
    }
}
