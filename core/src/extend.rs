//! Extend (R4, A8).

use redlock_resp::{EncodeError, Reply};

use crate::config::Config;
use crate::handshake::SetupError;
use crate::lock::{ArgumentError, FailureKind, Lock, normalize_ttl};
use crate::operation::Operation;
use crate::report::{Report, ServerId, ServerOutcome, Servers};
use crate::round::{Engine, Request, Subject, Transmit, Unsolicited};
use crate::time::{Duration, Instant, U64};

/// Why an extension did not count. The lock keeps its old validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ExtendError {
    /// Lost (a majority no longer holds our token), unavailable, or expired
    /// (the majority came after the current validity ended).
    pub kind: FailureKind,
    /// What each server answered.
    pub report: Report,
}

impl core::fmt::Display for ExtendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "lock not extended: {}", self.kind)
    }
}

impl core::error::Error for ExtendError {}

/// The extension of a held lock: the token-checking extend script on every
/// server. It never re-creates a missing key; it counts only with a majority
/// within the lock's current validity, and the new validity is computed from
/// the start of the extend round (A8).
///
/// `R` is the resource name: any bytes, borrowed (`&[u8]`) or owned (a
/// `heapless::Vec`, a boxed slice), so that an operation can be kept in
/// long-lived state (a static on a microcontroller, a shared transport).
#[derive(Debug, Clone)]
pub struct Extend<R> {
    config: Config,
    resource: R,
    lock: Lock,
    ttl: Duration,
    start: Instant,
    engine: Engine,
    outcome: Option<Result<Lock, ExtendError>>,
    outcome_taken: bool,
}

impl<R: AsRef<[u8]>> Extend<R> {
    /// Starts extending `lock` on `resource` to a fresh `ttl`.
    pub fn new(
        config: &Config,
        servers: &Servers,
        resource: R,
        lock: &Lock,
        ttl: Duration,
        now: Instant,
    ) -> Result<Extend<R>, ArgumentError> {
        let ttl = normalize_ttl(ttl)?;
        // A8: the number of extensions is limitable.
        if config
            .max_extensions
            .is_some_and(|max| lock.extensions() >= max)
        {
            return Err(ArgumentError::ExtensionLimit);
        }
        if !lock.is_valid(now) {
            return Err(ArgumentError::Expired);
        }
        let mut engine = Engine::for_servers(servers, config.request_timeout_for(ttl));
        engine.start_round(Request::Extend(U64(ttl.as_millis())));
        Ok(Extend {
            config: *config,
            resource,
            lock: *lock,
            ttl,
            start: now,
            engine,
            outcome: None,
            outcome_taken: false,
        })
    }

    fn decide(&mut self, now: Instant) {
        if self.outcome.is_some() {
            return;
        }
        let t = self.engine.tally();
        let quorum = self.config.quorum(t.servers);
        let fail = |kind, engine: &Engine| {
            Some(Err(ExtendError {
                kind,
                report: engine.report(),
            }))
        };
        if t.ok >= quorum {
            // A8: only within the current validity, and the new validity
            // counts from the start of this round.
            self.outcome = match (
                self.lock.is_valid(now),
                self.config.validity(self.ttl, self.start, now),
            ) {
                (true, Some(v)) => Some(Ok(self.lock.extended(
                    self.ttl,
                    self.start,
                    now,
                    v,
                    self.engine.report(),
                ))),
                _ => fail(FailureKind::Expired, &self.engine),
            };
        } else if t.failed() > t.servers.saturating_sub(quorum) {
            let kind = if t.not_held > t.servers.saturating_sub(quorum) {
                FailureKind::Lost
            } else {
                FailureKind::Unavailable
            };
            self.outcome = fail(kind, &self.engine);
        }
    }
}

impl<R: AsRef<[u8]>> Operation for Extend<R> {
    type Output = Result<Lock, ExtendError>;

    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        if self.outcome.is_some() {
            return Ok(None);
        }
        let subject = Subject {
            resource: self.resource.as_ref(),
            token: self.lock.token().as_bytes(),
            #[cfg(feature = "mutants")]
            bare_del_release: false,
        };
        self.engine.poll_transmit(now, &subject, buf)
    }

    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        if self.engine.handle_flag_reply(server, &reply)? {
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
        self.engine.handle_timeout(now);
        if self.outcome.is_none() && !self.lock.is_valid(now) {
            self.outcome = Some(Err(ExtendError {
                kind: FailureKind::Expired,
                report: self.engine.report(),
            }));
            return;
        }
        self.decide(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // A8: an extension counts only within the current validity: stop
        // waiting when it ends, and report the lock as expired then.
        if self.outcome.is_some() {
            None
        } else {
            self.engine.poll_timeout_until(self.lock.valid_until())
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
        self.outcome.is_some()
    }
}
