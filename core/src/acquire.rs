//! Acquire (R1, A1-A6) and fenced acquire (F1).

use rand_core::TryCryptoRng;
use redlock_resp::{EncodeError, Reply};

use crate::config::Config;
use crate::handshake::SetupError;
use crate::lock::{ArgumentError, FailureKind, Lock, normalize_ttl};
use crate::operation::Operation;
use crate::report::{Report, ServerId, ServerOutcome, Servers};
use crate::round::{
    Disposition, Engine, MISSING, Request, Subject, Tally, Transmit, Unsolicited, outcome_of_flag,
    outcome_of_other,
};
use crate::time::{Duration, Instant, U64, div_rem};
use crate::token::{TOKEN_LEN, Token};

/// Whether fenced acquisitions are built in (the `fencing` feature).
const FENCING: bool = cfg!(feature = "fencing");

/// A fence counter as stored: plain decimal digits within `i64`.
fn parse_counter(text: &[u8]) -> Option<i64> {
    i64::try_from(crate::handshake::parse_u64(text)?).ok()
}

/// Why an acquisition failed, with what each server answered in the last attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct AcquireError {
    /// Conflict, unavailable or expired.
    pub kind: FailureKind,
    /// Attempts made (1 + retries).
    pub attempts: u32,
    /// The per-server outcomes of the last attempt.
    pub report: Report,
}

impl core::fmt::Display for AcquireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "lock not acquired after {} attempt(s): {}",
            self.attempts, self.kind
        )
    }
}

impl core::error::Error for AcquireError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the votes of an attempt.
    Voting,
    /// F1: waiting for a majority to confirm the fence token.
    Fencing(U64),
    /// A5 done (release sent), A6: waiting before the next attempt.
    Backoff(Instant),
    /// The outcome is out; releases may still be going out.
    Done,
}

/// The acquisition of one lock: a sans-IO state machine over all servers.
///
/// Each attempt sends `SET resource token NX PX ttl` (or the fenced acquire
/// script) to every server at once and decides as soon as the outcome is
/// certain: a majority of votes with validity left (A3, A4), or too many
/// failures for a majority to remain. A failed attempt releases on every
/// server (A5), then waits the attempt's duration plus random jitter before
/// the next one (A6), until the retries or the deadline run out.
///
/// Drive it through [`Operation`]. The outcome is a [`Lock`] or an
/// [`AcquireError`]; after it, keep calling `poll_transmit` until it returns
/// `None`, so that the releases of a failed attempt go out.
///
/// `R` is the resource name: any bytes, borrowed (`&[u8]`) or owned (a
/// `heapless::Vec`, a boxed slice), so that an operation can be kept in
/// long-lived state (a static on a microcontroller, a shared transport).
#[derive(Debug, Clone)]
pub struct Acquire<R> {
    config: Config,
    servers: Servers,
    resource: R,
    token: Token,
    ttl: Duration,
    engine: Engine,
    phase: Phase,
    attempts: u32,
    attempt_start: Instant,
    deadline: Option<Instant>,
    jitter: U64,
    outcome: Option<Result<Lock, AcquireError>>,
    outcome_taken: bool,
    /// Servers whose last release (A5) must be answered before the
    /// operation finishes: our key may be there (bit i = server i).
    confirm: u16,
    /// The caller went away ([`Acquire::abandon`]): nothing is won, nothing
    /// is retried.
    abandoned: bool,
    /// The current attempt has handed out a request: its clock runs.
    sent: bool,
}

impl<R: AsRef<[u8]>> Acquire<R> {
    /// Starts acquiring `resource` for `ttl` (whole milliseconds are used),
    /// with a token and jitter drawn from `rng`. `deadline`, if any, is the
    /// latest instant at which a retry may start.
    pub fn new<G: TryCryptoRng + ?Sized>(
        config: &Config,
        servers: &Servers,
        resource: R,
        ttl: Duration,
        deadline: Option<Instant>,
        rng: &mut G,
        now: Instant,
    ) -> Result<Acquire<R>, ArgumentError> {
        if config.fencing && !FENCING {
            // Fail closed: never an unfenced lock where a fence was asked for.
            return Err(ArgumentError::Fencing);
        }
        let ttl = normalize_ttl(ttl)?;
        // One draw for the token (R2: 20 bytes) and the retry-jitter seed.
        let mut raw = [0u8; TOKEN_LEN / 2 + 8];
        rng.try_fill_bytes(&mut raw)
            .map_err(|_| ArgumentError::Rng)?;
        let (token_bytes, seed) = raw.split_at(TOKEN_LEN / 2);
        let token =
            Token::from_random_bytes(token_bytes.try_into().map_err(|_| ArgumentError::Rng)?);
        let jitter = U64(u64::from_le_bytes(
            seed.try_into().map_err(|_| ArgumentError::Rng)?,
        ));
        let mut op = Acquire {
            config: *config,
            servers: *servers,
            resource,
            token,
            ttl,
            engine: Engine::for_servers(servers, config.request_timeout_for(ttl)),
            phase: Phase::Voting,
            attempts: 0,
            attempt_start: now,
            deadline,
            jitter,
            outcome: None,
            outcome_taken: false,
            confirm: 0,
            abandoned: false,
            sent: false,
        };
        op.start_attempt(now);
        Ok(op)
    }

    /// Records when `server`'s current incarnation began, learnt by the
    /// platform on a (re)connect made while this acquisition runs (see
    /// [`Servers::set_incarnation`]). The restart guard judges each vote by
    /// what is known when the vote arrives.
    pub fn set_incarnation(&mut self, server: ServerId, started_at: Instant) {
        self.servers.set_incarnation(server, started_at);
    }

    /// The caller no longer wants the lock (an async call dropped
    /// mid-flight): no further attempt starts, and an attempt still voting
    /// ends as a failed one (released on every server, A5, and awaited
    /// where our key may be) even if a majority votes for it. The outcome,
    /// if not out yet, is [`FailureKind::Abandoned`], or the failure the
    /// attempt comes to anyway (a conflict, say). If the outcome is out
    /// already (a lock), this changes nothing: the caller that abandons it
    /// must release that lock itself.
    pub fn abandon(&mut self, now: Instant) {
        self.abandoned = true;
        match self.phase {
            Phase::Voting | Phase::Fencing(_) => self.decide(now),
            Phase::Backoff(_) => {
                // The releases of the failed attempt are out or queued: wait
                // for them where our key may be, then end.
                self.phase = Phase::Done;
                self.outcome = Some(Err(AcquireError {
                    kind: FailureKind::Abandoned,
                    attempts: self.attempts,
                    report: self.engine.report(),
                }));
            }
            Phase::Done => {}
        }
    }

    /// The token this acquisition uses (the same for every attempt).
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The resource being acquired.
    pub fn resource(&self) -> &[u8] {
        self.resource.as_ref()
    }

    /// F1 is on: the `fencing` feature is built in (so that without it the
    /// fenced code and scripts are not linked) and the config asks for it.
    fn fencing(&self) -> bool {
        FENCING && self.config.fencing
    }

    fn start_attempt(&mut self, now: Instant) {
        // A1: the clock is read before the first request of the attempt.
        self.attempts = self.attempts.saturating_add(1);
        self.attempt_start = now;
        self.sent = false;
        self.phase = Phase::Voting;
        let request = if self.fencing() {
            Request::FencedSet(U64(self.ttl.as_millis()))
        } else {
            Request::Set(U64(self.ttl.as_millis()))
        };
        self.engine.start_round(request);
    }

    /// A1: the attempt's clock is the latest reading before its first
    /// request. Until a request is handed out, a later reading replaces
    /// the one the attempt began with, so that an operation that waited
    /// for its turn on a busy platform (a free slot, say) does not spend
    /// its ttl before any server was asked.
    fn clock_unsent(&mut self, now: Instant) {
        if self.phase == Phase::Voting && !self.sent && now > self.attempt_start {
            self.attempt_start = now;
        }
    }

    /// splitmix64 over a seed drawn from the caller's RNG.
    fn next_jitter(&mut self) -> Duration {
        let mut z = self.jitter.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.jitter = U64(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let span = self.config.retry.jitter.as_micros();
        // `span + 1` wraps to 0 for the whole range: then any value will do.
        Duration::from_micros(div_rem(z, span.wrapping_add(1)).map_or(z, |(_, r)| r))
    }

    /// Looks at the counts and moves on if the outcome is certain.
    fn decide(&mut self, now: Instant) {
        match self.phase {
            Phase::Voting | Phase::Fencing(_) => {}
            Phase::Backoff(_) | Phase::Done => return,
        }
        let t = self.engine.tally();
        let n = t.servers;
        let quorum = self.config.quorum(n);
        let mut fence_lost = false;
        let (reached, impossible) = if self.phase == Phase::Voting && self.fencing() {
            // F1 repair. A server without a counter may have lost its data.
            // Its vote counts only once counters were read from a majority
            // of the other servers: their maximum then covers every fence
            // confirmed before (that majority meets the confirming one),
            // and the fence write below repairs the server. "No counter
            // anywhere" (a new resource) is trusted only when every server
            // answered without one.
            let read = t.answered_with_counter;
            let voted = t.ok;
            let others_majority = (n.saturating_sub(1) / 2).wrapping_add(1);
            let new_resource = read == 0 && t.answered() == n;
            #[cfg(feature = "mutants")]
            let new_resource = new_resource || self.config.mutants.naive_fence;
            let counted = if read >= others_majority || new_resource {
                voted
            } else {
                t.ok_with_counter
            };
            let hopeless = t.pending == 0 || voted.wrapping_add(t.pending) < quorum;
            // C6: every server answered and a majority voted, yet too few
            // counters are known: the counters were lost, not the servers,
            // and waiting does not bring them back.
            fence_lost = voted >= quorum && counted < quorum && t.answered() == n;
            (counted >= quorum, counted < quorum && hopeless)
        } else {
            (t.ok >= quorum, t.failed() > n.saturating_sub(quorum))
        };
        if reached && self.abandoned {
            // Won, but nobody wants it: released at once, as a failed attempt.
            return self.fail(now, FailureKind::Abandoned);
        }
        if reached {
            // A3 + A4: a majority, and validity left after the elapsed time
            // and the drift allowance.
            let Some(validity) = self.config.validity(self.ttl, self.attempt_start, now) else {
                return self.fail(now, FailureKind::Expired);
            };
            if let Phase::Voting = self.phase {
                if self.fencing() {
                    // F1: t = max(every counter read) + 1, written to all
                    // servers, conditional on the key still holding our token.
                    let fence = u64::try_from(t.max_value).unwrap_or(0).saturating_add(1);
                    self.phase = Phase::Fencing(U64(fence));
                    self.engine.start_round(Request::FenceWrite(U64(fence)));
                    return;
                }
            }
            let fence = match self.phase {
                Phase::Fencing(t) => Some(t.0),
                _ => None,
            };
            let report = self.engine.report();
            self.phase = Phase::Done;
            self.outcome = Some(Ok(Lock::new(
                self.token,
                self.ttl,
                self.attempt_start,
                now,
                validity,
                fence,
                report,
            )));
            return;
        }
        if impossible {
            // Not enough servers left to reach a majority.
            let kind = if fence_lost {
                FailureKind::FenceLost
            } else {
                classify(&t, quorum)
            };
            self.fail(now, kind);
        }
    }

    fn fail(&mut self, now: Instant, kind: FailureKind) {
        let report = self.engine.report();
        // Servers that may hold our key: all but those that refused it
        // (held by another token) or were never asked (refused handshake).
        let confirm = self.engine.tally().may_hold;
        let elapsed = now.saturating_duration_since(self.attempt_start);
        // A5: release on all servers, including those that seemed to fail.
        // As EVAL: a NOSCRIPT answer could not be retried once the next
        // attempt has started.
        self.engine.start_round_eval(Request::Release);
        // A6: wait longer than an attempt takes (at least one request
        // timeout, even when every connection failed at once), plus jitter.
        let attempt = elapsed.max(self.engine.timeout());
        let retry_at = now
            .saturating_add(attempt)
            .saturating_add(self.next_jitter());
        // A6: the number of retries (or a deadline) is bounded.
        // Lost fence counters (every server answered) do not come back by
        // waiting: only a repair helps.
        // The servers the releases must reach are kept in either case (an
        // abandonment during the backoff waits for them).
        self.confirm = confirm;
        let may_retry = kind != FailureKind::FenceLost
            && !self.abandoned
            && self.attempts <= self.config.retry.retries
            && self.deadline.is_none_or(|d| retry_at <= d);
        if may_retry {
            rl_log!(
                info,
                "attempt {} failed ({}); retry in {} ms",
                self.attempts,
                kind,
                retry_at.saturating_duration_since(now).as_millis()
            );
            self.phase = Phase::Backoff(retry_at);
        } else {
            rl_log!(
                info,
                "lock not acquired after {} attempt(s): {}",
                self.attempts,
                kind
            );
            self.phase = Phase::Done;
            // The last attempt's releases are awaited where our key may be
            // (`confirm`), so that one lost to a broken connection is sent
            // again (the engine does it) before the operation ends.
            self.outcome = Some(Err(AcquireError {
                kind,
                attempts: self.attempts,
                report,
            }));
        }
    }

    fn classify_reply(
        &self,
        server: ServerId,
        reply: &Reply<'_>,
        now: Instant,
    ) -> (ServerOutcome, i64) {
        // The restart guard: a vote counts only from a server known to
        // have been up for longer than the guard.
        let vote = |value| {
            let outcome = self
                .servers
                .vote(server.index(), self.config.restart_guard, now);
            (outcome, value)
        };
        match (self.engine.request(), reply) {
            (Request::Set(_), r) if r.is_ok() => vote(0),
            (Request::Set(_), Reply::Nil) => (ServerOutcome::Held, 0),
            (Request::FencedSet(_), Reply::Aggregate(a)) if FENCING => {
                let native = self.engine.is_native(server);
                let mut items = a.iter();
                let (flag, counter) = (items.next(), items.next());
                let counter = match counter {
                    Some(Reply::Nil) => Some(MISSING),
                    Some(Reply::Bulk(c)) => parse_counter(c),
                    _ => None,
                };
                // The script answers 1 or 0; `EXEC` the `SET NX`'s `+OK` or
                // nil.
                let set = match (native, flag) {
                    (false, Some(Reply::Integer(1))) => Some(true),
                    (false, Some(Reply::Integer(0))) | (true, Some(Reply::Nil)) => Some(false),
                    (true, Some(r)) if r.is_ok() => Some(true),
                    _ => None,
                };
                match (a.len(), set, counter) {
                    (2, Some(true), Some(c)) => vote(c),
                    (2, Some(false), Some(c)) => (ServerOutcome::Held, c),
                    _ => (ServerOutcome::UnexpectedReply, 0),
                }
            }
            (Request::FenceWrite(fence), r) if FENCING && self.engine.is_native(server) => {
                // `INCRBY`: the counter afterwards, at least the fence
                // unless the server lost it meanwhile; counted only from
                // the process that voted (SPEC F1).
                match r {
                    Reply::Integer(c) if u64::try_from(*c).is_ok_and(|c| c >= fence.0) => {
                        if self.servers.same_incarnation(server.index()) {
                            (ServerOutcome::Ok, 0)
                        } else {
                            (ServerOutcome::Restarted, 0)
                        }
                    }
                    Reply::Integer(_) => (ServerOutcome::UnexpectedReply, 0),
                    r => (outcome_of_other(r), 0),
                }
            }
            (Request::FenceWrite(_) | Request::Release, r) => (outcome_of_flag(r), 0),
            (_, r) => (outcome_of_other(r), 0),
        }
    }
}

/// Conflict when another holder's key is what stood in the way: some
/// server answered "held", and the servers that failed (timed out,
/// connection lost, error) were too few to block a majority by
/// themselves. Otherwise unavailable.
fn classify(t: &Tally, quorum: usize) -> FailureKind {
    let held = t.held.wrapping_add(t.not_held);
    if held > 0 && t.not_failed() >= quorum {
        FailureKind::Conflict
    } else {
        FailureKind::Unavailable
    }
}

impl<R: AsRef<[u8]>> Operation for Acquire<R> {
    type Output = Result<Lock, AcquireError>;

    fn set_incarnation(&mut self, server: ServerId, started_at: Instant) {
        self.servers.set_incarnation(server, started_at);
    }

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        self.clock_unsent(now);
        let subject = Subject {
            resource: self.resource.as_ref(),
            token: self.token.as_bytes(),
            #[cfg(feature = "mutants")]
            bare_del_release: self.config.mutants.bare_del_release,
        };
        let transmit = self.engine.poll_transmit(now, &subject, buf)?;
        self.sent |= transmit.is_some();
        Ok(transmit)
    }

    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        if self.engine.handle_reply(server, &reply)? == Disposition::Current {
            let (outcome, value) = self.classify_reply(server, &reply, now);
            if FENCING
                && outcome == ServerOutcome::Ok
                && matches!(self.engine.request(), Request::FencedSet(_))
            {
                // The native fence write counts only on the process that
                // voted (SPEC F1): from its vote on, a change of this
                // server's incarnation is noticed.
                self.servers.mark_incarnation(server.index());
            }
            match outcome {
                ServerOutcome::Restarted => rl_log!(
                    info,
                    "server {}: vote not counted (restarted less than the restart guard ago)",
                    server.0
                ),
                ServerOutcome::RestartUnknown => rl_log!(
                    info,
                    "server {}: vote not counted (restart time unknown)",
                    server.0
                ),
                _ => {}
            }
            self.engine.settle(server, outcome, value);
            self.decide(now);
        }
        Ok(())
    }

    fn handle_connection_error(&mut self, now: Instant, server: ServerId) {
        self.engine.handle_connection_error(now, server);
        self.decide(now);
    }

    fn handle_setup_error(&mut self, now: Instant, server: ServerId, error: SetupError) {
        self.engine
            .server_unusable(server, ServerOutcome::Setup(error));
        self.decide(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.clock_unsent(now);
        self.engine.handle_timeout(now);
        if matches!(self.phase, Phase::Voting | Phase::Fencing(_))
            && self
                .config
                .validity(self.ttl, self.attempt_start, now)
                .is_none()
        {
            // A4: the validity is gone whatever the stragglers say.
            return self.fail(now, FailureKind::Expired);
        }
        self.decide(now);
        if let Phase::Backoff(at) = self.phase {
            // The next attempt starts once the releases have gone out.
            if now >= at && !self.engine.has_unsent() {
                self.start_attempt(now);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            // A4: no point waiting past the validity the attempt could give.
            Phase::Voting | Phase::Fencing(_) => {
                let usable = self.ttl.saturating_sub(self.config.drift.for_ttl(self.ttl));
                let end = self.attempt_start.saturating_add(usable);
                self.engine.poll_timeout_until(end)
            }
            Phase::Backoff(at) => Some(at),
            Phase::Done if self.is_finished() => None,
            Phase::Done => self.engine.poll_timeout(),
        }
    }

    fn poll_outcome(&mut self) -> Option<Self::Output> {
        if self.outcome_taken {
            return None;
        }
        let out = self.outcome?;
        self.outcome_taken = true;
        Some(out)
    }

    fn is_finished(&self) -> bool {
        self.phase == Phase::Done
            && !self.engine.has_unsent()
            && !self.engine.any_pending(self.confirm)
    }
}
