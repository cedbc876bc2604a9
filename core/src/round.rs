//! One round of requests to all servers, shared by every operation.
//!
//! A round sends the same request to every server at once (A2), gives each
//! server a deadline, and collects one outcome per server. Requests are
//! matched to replies in order per server, so a reply to an earlier round
//! (a straggler) is recognised and never counted for the current one. An
//! `EVALSHA` answered with `NOSCRIPT` is re-sent as `EVAL` transparently.

use redlock_resp::script::{self, Script};
use redlock_resp::{EncodeError, ErrorKind, Reply};

use crate::report::{MAX_SERVERS, Report, ServerId, ServerOutcome, Servers};
use crate::time::{Duration, I64, Instant, U64};

/// Requests one server may have in flight for one operation: ordinary
/// requests stop at `IN_FLIGHT / 2`; the rest is kept for the releases of
/// A5, so that every `SET` sent is followed by its release.
const IN_FLIGHT: u8 = 8;

/// Suffix of the fence counter key (`resource` + this).
pub(crate) const FENCE_SUFFIX: &[u8] = b":fence";

/// Bytes for one server, written by `poll_transmit` into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Transmit {
    /// The server to send to.
    pub server: ServerId,
    /// How many bytes of the buffer to send.
    pub len: usize,
    /// A release (A5, A7): deliver it even to a server the platform would
    /// otherwise give up on at once (a connection in its reconnect backoff):
    /// reconnect now and send it behind the handshake, within the request's
    /// timeout. A key left behind blocks every client until its ttl ends.
    pub release: bool,
    /// When the request times out (its timeout from now): the session gives
    /// the connection up if it is still unanswered then.
    pub deadline: Instant,
    /// How many replies the server sends for these bytes: 1, or 4 for a
    /// `MULTI` block (`+OK`, two `+QUEUED`, and `EXEC`'s array, which is the
    /// answer). Give it to
    /// [`Session::push_with_replies`](crate::session::Session::push_with_replies).
    pub replies: u8,
}

/// A reply the operation did not expect at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Unsolicited;

impl core::fmt::Display for Unsolicited {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a reply arrived for no request: the stream is out of step")
    }
}

impl core::error::Error for Unsolicited {}

/// The request of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// R1: `SET resource token NX PX ttl`, with the ttl in milliseconds.
    Set(U64),
    /// F1: the fenced acquire script, with the ttl in milliseconds.
    FencedSet(U64),
    /// F1: raise the counter to this fence token if the key is still ours.
    FenceWrite(U64),
    /// R3 / A7: the release script.
    Release,
    /// R4 / A8: the extend script, with the new ttl in milliseconds.
    Extend(U64),
    /// F3: the inspect script.
    Inspect,
    /// F1 repair: raise the fence counter to at least this value.
    FenceRaise(U64),
    /// F1 repair, native, second step: `INCRBY counter (floor - read)` on
    /// the servers whose counter the first (`GET`) found below the floor.
    FenceTopUp(U64),
}

impl Request {
    // Inlined where a round starts, with the request known there: a
    // script that no operation in the program sends is not linked (an MCU
    // firmware without fence repair has no FENCE_RAISE).
    #[inline(always)]
    fn script(self) -> Option<&'static Script> {
        if !crate::SCRIPTS {
            // Not built in: every request goes in its native form.
            return None;
        }
        match self {
            Request::Set(_) => None,
            Request::FencedSet(_) => Some(&script::FENCED_ACQUIRE),
            Request::FenceWrite(_) => Some(&script::FENCE_WRITE),
            Request::Release => Some(&script::RELEASE),
            Request::Extend(_) => Some(&script::EXTEND),
            Request::Inspect => Some(&script::INSPECT),
            Request::FenceRaise(_) => Some(&script::FENCE_RAISE),
            Request::FenceTopUp(_) => None,
        }
    }
}

/// What a request is about: the names the encoder needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) resource: &'a [u8],
    pub(crate) token: &'a [u8],
    #[cfg(feature = "mutants")]
    pub(crate) bare_del_release: bool,
}

mod encode;
use encode::{encode, encode_native};

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Requests sent and not answered yet. A server answers in order, and
    /// the rounds' requests are sent in order: the oldest are of earlier
    /// rounds (their replies are stragglers), the newest of this one.
    in_flight: u8,
    /// How many of the requests in flight (the newest) are of the current
    /// round; never more than `in_flight`.
    current: u8,
    /// The current round's request is still to be sent.
    send: bool,
    /// Send `EVAL` instead of `EVALSHA` (the server said `NOSCRIPT`).
    eval: bool,
    /// This round's request goes in its native form (see
    /// [`Commands`](crate::handshake::Commands)).
    native: bool,
    deadline: Instant,
    outcome: ServerOutcome,
    /// The integer the server answered (the fence counter).
    value: I64,
    /// The integer the server answered in the round before (the counter
    /// of a fenced acquire, for the native fence write).
    base: I64,
    /// This round's request was sent again after a connection error.
    resent: bool,
}

impl Slot {
    const NEW: Slot = Slot {
        in_flight: 0,
        current: 0,
        send: false,
        eval: false,
        native: false,
        deadline: Instant::ZERO,
        outcome: ServerOutcome::Pending,
        value: I64(0),
        base: I64(0),
        resent: false,
    };
}

/// What to make of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// A reply to the current round, for the operation to classify.
    Current,
    /// A straggler, a push, or a `NOSCRIPT` being retried: nothing to do.
    Ignored,
}

/// The per-server state of an operation and its current round.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    n: usize,
    slots: [Slot; MAX_SERVERS],
    request: Request,
    /// The script of `request`.
    script: Option<&'static Script>,
    timeout: Duration,
    /// The current round is sent as `EVAL` and may use the release room.
    force_eval: bool,
    /// Bit i: server i gets the native commands; and bit i: falls back to
    /// the scripts on a plain `ERR` (see [`Servers::set_dialect`](crate::Servers::set_dialect)).
    native: (u16, u16),
}

impl Engine {
    pub(crate) fn new(n: usize, timeout: Duration) -> Engine {
        Engine {
            n: n.min(MAX_SERVERS),
            slots: [Slot::NEW; MAX_SERVERS],
            // Every operation starts its first round at once.
            request: Request::Inspect,
            script: None,
            timeout,
            force_eval: false,
            native: (0, 0),
        }
    }

    /// An engine for `servers`, each sent the commands its dialect says.
    pub(crate) fn for_servers(servers: &Servers, timeout: Duration) -> Engine {
        let mut engine = Engine::new(servers.len(), timeout);
        if crate::NATIVE {
            engine.native = servers.native_masks();
        }
        engine
    }

    /// True when `server` is sent this round's request in its native form.
    pub(crate) fn is_native(&self, server: ServerId) -> bool {
        crate::NATIVE && self.slots().get(server.index()).is_some_and(|s| s.native)
    }

    /// The invariant that lets [`has_unsent`](Engine::has_unsent) and
    /// [`report`](Engine::report) read every slot without a bounds check:
    /// the slots past `n` are never changed (every change goes through
    /// [`slots_mut`](Engine::slots_mut)), so they stay [`Slot::NEW`]: never
    /// to be sent, and `Pending`.
    fn rest_untouched(&self) -> bool {
        self.slots
            .get(self.n..)
            .unwrap_or_default()
            .iter()
            .all(|s| !s.send && s.outcome == ServerOutcome::Pending)
    }

    // `n` is at most MAX_SERVERS (see `new`): the `min` tells the compiler
    // so, and the slices need no check for an `n` out of range.
    fn slots(&self) -> &[Slot] {
        let (used, _) = self.slots.split_at(self.n.min(MAX_SERVERS));
        used
    }

    fn slots_mut(&mut self) -> &mut [Slot] {
        let (used, _) = self.slots.split_at_mut(self.n.min(MAX_SERVERS));
        used
    }

    /// A2: a new round: every server gets `request` (its deadline starts
    /// when it is sent).
    #[inline(always)]
    pub(crate) fn start_round(&mut self, request: Request) {
        self.begin(request, request.script(), false);
    }

    /// A new round sent as `EVAL` (no `NOSCRIPT` round trip), whose requests
    /// may use the in-flight room kept for releases (A5 must not be skipped).
    #[inline(always)]
    pub(crate) fn start_round_eval(&mut self, request: Request) {
        self.begin(request, request.script(), true);
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Each request's deadline starts when it is sent (`poll_transmit`).
    fn begin(&mut self, request: Request, script: Option<&'static Script>, force_eval: bool) {
        self.request = request;
        self.script = script;
        self.force_eval = force_eval;
        let (native, _) = self.native;
        let mut next_bit = 1u16;
        for slot in self.slots_mut() {
            // The requests in flight are now of earlier rounds.
            slot.current = 0;
            slot.send = true;
            let bit = next_bit;
            next_bit = next_bit.wrapping_shl(1);
            slot.native = crate::NATIVE && (!crate::SCRIPTS || native & bit != 0);
            // F1, native: the fence is written only where the fenced
            // acquire's vote counted (the key is ours there); see SPEC F1.
            // The others keep what they answered to the vote (held by
            // another, timed out, not counted, or still awaited: then it
            // times out), so that the report and the failure's kind say
            // why.
            // (A native fence top-up goes only where the repair's first step
            // found the counter below the floor: its other servers keep
            // their outcome and counter.)
            let keep = crate::NATIVE
                && match request {
                    Request::FenceWrite(_) => slot.native && slot.outcome != ServerOutcome::Ok,
                    Request::FenceTopUp(_) => {
                        !slot.native || slot.outcome != ServerOutcome::Pending
                    }
                    _ => false,
                };
            if crate::NATIVE {
                slot.base = slot.value;
            }
            if keep {
                slot.send = false;
                continue;
            }
            slot.outcome = ServerOutcome::Pending;
            slot.value = I64(0);
            slot.resent = false;
        }
    }

    pub(crate) fn request(&self) -> Request {
        self.request
    }

    /// True while some request of the current round is not sent yet.
    pub(crate) fn has_unsent(&self) -> bool {
        // Every slot: those past `n` are never sent to.
        debug_assert!(self.rest_untouched());
        self.slots.iter().any(|s| s.send)
    }

    /// The next request to send. A request's deadline runs from when it is
    /// handed out here, not from when its round began: a caller that gets
    /// to send late (a descheduled thread, a busy lock) still sends it and
    /// gives the server its whole timeout. (The validity of an acquisition
    /// is still measured from the start of the attempt, A1/A4.)
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        subject: &Subject<'_>,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        let (request, script, force, timeout) =
            (self.request, self.script, self.force_eval, self.timeout);
        for (i, slot) in self.slots_mut().iter_mut().enumerate() {
            if !slot.send {
                continue;
            }
            let room = if force { IN_FLIGHT } else { IN_FLIGHT / 2 };
            if slot.in_flight >= room {
                // The server has not answered several requests: give up on it
                // for this round rather than pile more on.
                rl_log!(
                    info,
                    "giving up on server {} for this round: {} requests unanswered",
                    i,
                    slot.in_flight
                );
                slot.send = false;
                if slot.outcome == ServerOutcome::Pending {
                    slot.outcome = ServerOutcome::TimedOut;
                }
                continue;
            }
            let (len, replies) = if crate::NATIVE && slot.native {
                encode_native(request, slot.base.0, subject, buf)?
            } else {
                (
                    encode(request, script, slot.eval || force, subject, buf)?,
                    1,
                )
            };
            slot.send = false;
            slot.deadline = now.saturating_add(timeout);
            // Below IN_FLIGHT: checked for room above.
            slot.in_flight = slot.in_flight.saturating_add(1);
            slot.current = slot.current.saturating_add(1);
            return Ok(Some(Transmit {
                server: ServerId(i as u8),
                len,
                release: request == Request::Release,
                deadline: slot.deadline,
                replies,
            }));
        }
        Ok(None)
    }

    /// Where `reply` belongs. (The reply stays with the caller: moving it
    /// in and out costs copies.)
    pub(crate) fn handle_reply(
        &mut self,
        server: ServerId,
        reply: &Reply<'_>,
    ) -> Result<Disposition, Unsolicited> {
        if reply.is_push() {
            return Ok(Disposition::Ignored);
        }
        let (script, request) = (self.script, self.request);
        let bit = 1u16.checked_shl(u32::from(server.0)).unwrap_or(0);
        let fallback = self.native.1 & bit != 0;
        let slot = self
            .slots_mut()
            .get_mut(server.index())
            .ok_or(Unsolicited)?;
        let left = slot.in_flight.checked_sub(1).ok_or(Unsolicited)?;
        // The oldest request in flight is answered: it is of the current
        // round when no request of an earlier round is left before it.
        let of_this_round = slot.current > left;
        slot.in_flight = left;
        slot.current = slot.current.min(left);
        if !of_this_round || slot.outcome != ServerOutcome::Pending {
            rl_log!(trace, "server {}: a late reply, ignored", server.0);
            return Ok(Disposition::Ignored);
        }
        if let Reply::Error(e) = reply {
            // `Commands::Auto`, once per server and operation (the form
            // that worked is kept for its later rounds): a native release
            // or extend that a server does not know (replaced by an older
            // one since its dialect was learned) goes as the script; a
            // script refused for want of permission (a user without
            // `@scripting`, on a server whose dialect was not known yet)
            // goes in its native form. The error did nothing on the server.
            let to_script = slot.native
                && e.kind() == ErrorKind::Err
                && matches!(request, Request::Release | Request::Extend(_));
            let to_native = !slot.native
                && e.kind() == ErrorKind::NoPerm
                && matches!(
                    request,
                    Request::Release
                        | Request::Extend(_)
                        | Request::Inspect
                        | Request::FencedSet(_)
                        | Request::FenceRaise(_)
                );
            if crate::NATIVE && crate::SCRIPTS && fallback && (to_script || to_native) {
                let (refused, instead) = if to_script {
                    ("native command", "as the script")
                } else {
                    ("script", "natively")
                };
                rl_log!(
                    info,
                    "server {}: {} refused, sending it {}",
                    server.0,
                    refused,
                    instead
                );
                slot.native = to_native;
                slot.send = true;
                let (native, fallback) = &mut self.native;
                *native = if to_native {
                    *native | bit
                } else {
                    *native & !bit
                };
                *fallback &= !bit;
                return Ok(Disposition::Ignored);
            }
            if e.kind() == ErrorKind::NoScript && script.is_some() && !slot.eval {
                // Scripts: EVALSHA first, EVAL on NOSCRIPT.
                rl_log!(
                    debug,
                    "server {}: NOSCRIPT fallback, sending the script with EVAL",
                    server.0
                );
                slot.eval = true;
                slot.send = true;
                return Ok(Disposition::Ignored);
            }
        }
        Ok(Disposition::Current)
    }

    /// [`handle_reply`](Engine::handle_reply) for a round of a
    /// token-checking script (release, extend): a reply to the current
    /// round is recorded as its [`outcome_of_flag`]. True when one was.
    pub(crate) fn handle_flag_reply(
        &mut self,
        server: ServerId,
        reply: &Reply<'_>,
    ) -> Result<bool, Unsolicited> {
        let current = self.handle_reply(server, reply)? == Disposition::Current;
        if current {
            let outcome = match (self.request, self.is_native(server), reply) {
                // `SET ... IFEQ`: `+OK`, or nil where the key is not ours.
                (Request::Extend(_), true, r) if r.is_ok() => ServerOutcome::Ok,
                (Request::Extend(_), true, Reply::Nil) => ServerOutcome::NotHeld,
                (Request::Extend(_), true, r) => outcome_of_other(r),
                // The scripts and `DELIFEQ`: 1 or 0.
                (_, _, r) => outcome_of_flag(r),
            };
            self.settle(server, outcome, 0);
        }
        Ok(current)
    }

    /// `server` answered and waits, `Pending`, for a second step (no
    /// deadline runs for it meanwhile: its next round gives it one).
    pub(crate) fn park(&mut self, server: ServerId, value: i64) {
        if let Some(slot) = self.slots_mut().get_mut(server.index()) {
            slot.outcome = ServerOutcome::Pending;
            slot.value = I64(value);
            slot.deadline = Instant::MAX;
        }
    }

    /// Records the outcome of the current round for `server`.
    pub(crate) fn settle(&mut self, server: ServerId, outcome: ServerOutcome, value: i64) {
        if let Some(slot) = self.slots_mut().get_mut(server.index()) {
            slot.outcome = outcome;
            slot.value = I64(value);
        }
    }

    /// C5: the connection to `server` failed. A release (A5, A7) whose
    /// connection failed is sent once more (the platform reconnects for
    /// it): the key may have been set just before the connection broke,
    /// and would otherwise stay until its ttl. Releasing twice is harmless.
    /// A request past its deadline when its connection closed (the session
    /// gave the connection up because it went unanswered) timed out.
    pub(crate) fn handle_connection_error(&mut self, now: Instant, server: ServerId) {
        let release = self.request == Request::Release;
        let mut why = ServerOutcome::ConnectionError;
        if let Some(slot) = self.slots_mut().get_mut(server.index()) {
            if release && !slot.resent && slot.outcome == ServerOutcome::Pending {
                slot.resent = true;
                slot.in_flight = 0;
                slot.current = 0;
                slot.send = true;
                return;
            }
            if slot.outcome == ServerOutcome::Pending && !slot.send && now >= slot.deadline {
                why = ServerOutcome::TimedOut;
            }
        }
        self.server_unusable(server, why);
    }

    /// The server cannot be used (`why`): its requests in flight are lost,
    /// and its pending outcome becomes `why`.
    pub(crate) fn server_unusable(&mut self, server: ServerId, why: ServerOutcome) {
        if let ServerOutcome::Setup(e) = why {
            rl_log!(info, "server {} not used: {}", server.0, e);
        }
        if let Some(slot) = self.slots_mut().get_mut(server.index()) {
            slot.in_flight = 0;
            slot.current = 0;
            slot.send = false;
            if slot.outcome == ServerOutcome::Pending {
                slot.outcome = why;
            }
        }
    }

    /// Requests past their deadline time out. A request not sent yet has
    /// no deadline running: it is never dropped unsent (a release skipped
    /// that way would leave the key until it expires).
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let timeout = self.timeout;
        for (i, slot) in self.slots_mut().iter_mut().enumerate() {
            if slot.outcome == ServerOutcome::Pending && !slot.send && now >= slot.deadline {
                rl_log!(
                    info,
                    "giving up on server {}: no answer within {} ms",
                    i,
                    timeout.as_millis()
                );
                slot.outcome = ServerOutcome::TimedOut;
                slot.send = false;
            }
        }
    }

    /// The earliest deadline of a request sent and still awaited.
    #[inline(always)]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.poll_timeout_until(Instant::MAX)
    }

    /// The earliest deadline of a request sent and still awaited, or `cap`
    /// if it is earlier; `None` when nothing is awaited. (One copy of the
    /// code for the operations that stop waiting at an end of their own.)
    pub(crate) fn poll_timeout_until(&self, cap: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for s in self.slots() {
            if s.outcome == ServerOutcome::Pending && !s.send {
                next = Some(next.unwrap_or(cap).min(s.deadline));
            }
        }
        next
    }

    /// The outcomes of the current round, counted in one pass.
    pub(crate) fn tally(&self) -> Tally {
        let mut t = Tally {
            servers: self.n,
            ok: 0,
            pending: 0,
            held: 0,
            not_held: 0,
            faulty: 0,
            answered_with_counter: 0,
            ok_with_counter: 0,
            max_value: 0,
            may_hold: 0,
        };
        // Bit i, for server i (at most MAX_SERVERS < 16 of them).
        let mut bit = 1u16;
        for s in self.slots() {
            if !matches!(s.outcome, ServerOutcome::Held | ServerOutcome::Setup(_)) {
                t.may_hold |= bit;
            }
            bit = bit.wrapping_shl(1);
            if answered(s.outcome) {
                t.max_value = t.max_value.max(s.value.0);
                if s.value.0 != MISSING {
                    t.answered_with_counter = t.answered_with_counter.wrapping_add(1);
                    if s.outcome == ServerOutcome::Ok {
                        t.ok_with_counter = t.ok_with_counter.wrapping_add(1);
                    }
                }
            }
            let count = match s.outcome {
                ServerOutcome::Ok => &mut t.ok,
                // Not asked this round, and never to be (a native fence
                // write skips a server whose vote did not count), or
                // parked for a second step (a native fence repair's
                // top-up): it cannot change this round's count.
                ServerOutcome::Pending if crate::NATIVE && !s.send && s.current == 0 => continue,
                ServerOutcome::Pending => &mut t.pending,
                ServerOutcome::Held => &mut t.held,
                ServerOutcome::NotHeld => &mut t.not_held,
                ServerOutcome::TimedOut
                | ServerOutcome::ServerError(_)
                | ServerOutcome::ConnectionError
                | ServerOutcome::UnexpectedReply
                | ServerOutcome::Setup(_) => &mut t.faulty,
                // A vote not counted (the restart guard).
                ServerOutcome::Restarted | ServerOutcome::RestartUnknown => continue,
            };
            *count = count.wrapping_add(1);
        }
        t
    }

    /// True when a server of `mask` (bit i = server i) has not answered the
    /// current round yet.
    pub(crate) fn any_pending(&self, mask: u16) -> bool {
        self.slots().iter().enumerate().any(|(i, s)| {
            s.outcome == ServerOutcome::Pending
                && mask & 1u16.checked_shl(i as u32).unwrap_or(0) != 0
        })
    }

    pub(crate) fn pending(&self) -> usize {
        self.slots()
            .iter()
            .filter(|s| s.outcome == ServerOutcome::Pending)
            .count()
    }

    pub(crate) fn report(&self) -> Report {
        // Every slot: those past `n` are never touched and stay `Pending`,
        // which is what a report holds past its length.
        debug_assert!(self.rest_untouched());
        Report::with_outcomes(self.n, self.slots.map(|s| s.outcome))
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }
}

/// The outcomes of a round, counted once for the decisions that read them.
///
/// Each count is of distinct servers among `servers` (at most
/// [`MAX_SERVERS`]): sums and differences of counts cannot overflow, and
/// are computed with wrapping arithmetic (no saturation code).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    /// Servers in the round.
    pub(crate) servers: usize,
    /// Did what was asked (voted for us, released, extended).
    pub(crate) ok: usize,
    /// Not answered yet.
    pub(crate) pending: usize,
    /// The key is held by another token.
    pub(crate) held: usize,
    /// The key does not hold our token.
    pub(crate) not_held: usize,
    /// Failed by itself: timed out, connection lost, an error or an
    /// unexpected reply, or not used.
    pub(crate) faulty: usize,
    /// Answered, with a fence counter (a value other than [`MISSING`]).
    pub(crate) answered_with_counter: usize,
    /// Voted, with a fence counter.
    pub(crate) ok_with_counter: usize,
    /// The largest value any server answered with (voting or not), or 0
    /// when it is smaller (or nobody answered).
    pub(crate) max_value: i64,
    /// Bit i: server i may hold our key: all but those that refused it
    /// (held by another token) or were never asked (refused handshake).
    pub(crate) may_hold: u16,
}

impl Tally {
    /// Answered with something other than `Ok`, or did not answer in time.
    pub(crate) fn failed(&self) -> usize {
        // `ok` and `pending` count distinct servers: no more than `servers`.
        self.servers
            .wrapping_sub(self.ok)
            .wrapping_sub(self.pending)
    }

    /// Answered the request: voted or refused because the key is held.
    pub(crate) fn answered(&self) -> usize {
        self.ok.wrapping_add(self.held)
    }

    /// Did not fail by itself: `Ok`, `Held`, `NotHeld`, a vote not
    /// counted, or pending.
    pub(crate) fn not_failed(&self) -> usize {
        self.servers.wrapping_sub(self.faulty)
    }
}

/// The fence counter value of a server that has no counter.
pub(crate) const MISSING: i64 = -1;

/// Voted, or refused because the key is held: the server answered the request.
fn answered(outcome: ServerOutcome) -> bool {
    matches!(outcome, ServerOutcome::Ok | ServerOutcome::Held)
}

/// The outcome of a token-checking script (release, extend, fence write):
/// 1 if it acted on our key, 0 if the key is not ours.
pub(crate) fn outcome_of_flag(reply: &Reply<'_>) -> ServerOutcome {
    match reply {
        Reply::Integer(1) => ServerOutcome::Ok,
        Reply::Integer(0) => ServerOutcome::NotHeld,
        r => outcome_of_other(r),
    }
}

/// The outcome of an error reply or a reply of an unexpected shape.
pub(crate) fn outcome_of_other(reply: &Reply<'_>) -> ServerOutcome {
    match reply {
        Reply::Error(e) => ServerOutcome::ServerError(e.kind()),
        _ => ServerOutcome::UnexpectedReply,
    }
}

#[cfg(test)]
mod tests;
