//! A held lock, and the watchdog that keeps it alive: `redlock-std`'s
//! watchdog (SPEC F2) on the core's schedule (`Lock::renewal`), driving the
//! core's `Extend`.
//!
//! The watchdog extends when a third of the validity is left; after a
//! failed round it tries again a request timeout later; it declares the lock
//! lost when a majority says the key is no longer ours, when the extension
//! limit is reached (at the give-up time), or when no extension counted by
//! the give-up time (the validity's end minus a margin). The application
//! stops using the lock as soon as it is lost, and releases it.

use redlock_core::{
    ArgumentError, Duration, Extend, FailureKind, Instant, Lock, Operation, Renewal,
};

use super::client::State;
use super::{RESOURCE, Sim, Violation};

/// A client holding the lock (local times in µs).
pub(super) struct Holding {
    pub(super) lock: Lock,
    pub(super) granted_real: u64,
    /// When the client's work is done.
    pub(super) until_local: u64,
    /// The end of the validity the client counts on: the lock's, unless a
    /// broken client (a negative control) counted a late extension.
    pub(super) valid_until: u64,
    /// When the watchdog extends, and when it gives up.
    pub(super) renewal: Renewal,
    /// When the watchdog acts next, if the client runs one.
    pub(super) watchdog_at: Option<u64>,
    /// The extension round in flight, with the local time it started.
    pub(super) extending: Option<(Extend<&'static [u8]>, u64)>,
}

impl Holding {
    /// The earliest time the client wants to be woken at.
    pub(super) fn wake_at(&self) -> u64 {
        // While a round runs, its timeout; otherwise the watchdog's time.
        let watchdog = match &self.extending {
            Some((op, _)) => op.poll_timeout().map(Instant::as_micros),
            None => self.watchdog_at,
        };
        self.until_local.min(watchdog.unwrap_or(u64::MAX))
    }
}

impl Sim {
    /// The client starts holding `lock`, granted at local time `now`, for
    /// `hold` µs of work.
    pub(super) fn hold(&self, lock: Lock, now: u64, hold: u64) -> Holding {
        let renewal = self.renewal(&lock);
        Holding {
            lock,
            granted_real: self.now,
            until_local: now + hold,
            valid_until: lock.valid_until().as_micros(),
            renewal,
            watchdog_at: self.sc.watchdog.then_some(renewal.extend_at.as_micros()),
            extending: None,
        }
    }

    /// The watchdog's schedule for `lock`: the core's.
    fn renewal(&self, lock: &Lock) -> Renewal {
        let ttl = Duration::from_millis(self.sc.ttl_ms);
        let mut renewal = lock.renewal(self.sc.config.request_timeout_for(ttl));
        if self.sc.late_extensions_count {
            // The broken client keeps trying until the validity ends.
            renewal.give_up_at = lock.valid_until();
        }
        renewal
    }

    /// Advances a holder at local time `now`. Returns its next state, and
    /// whether the client must be stepped again (a new operation to send).
    pub(super) fn step_holding(&mut self, c: usize, mut h: Holding, now: u64) -> (State, bool) {
        let ttl = Duration::from_millis(self.sc.ttl_ms);
        if let Some((op, started)) = &mut h.extending {
            let started = *started;
            if let Some(outcome) = op.poll_outcome() {
                h.extending = None;
                match outcome {
                    Ok(lock) => {
                        self.report.extensions += 1;
                        self.check_extension(c, h.valid_until);
                        h.lock = lock;
                        h.valid_until = lock.valid_until().as_micros();
                        h.renewal = self.renewal(&lock);
                        h.watchdog_at = Some(h.renewal.extend_at.as_micros());
                    }
                    Err(e) if e.kind == FailureKind::Expired && self.sc.late_extensions_count => {
                        // The broken client counts the round anyway, with the
                        // validity it would have had.
                        let start = Instant::from_micros(started);
                        let v = self.sc.config.validity(ttl, start, start);
                        self.report.extensions += 1;
                        self.check_extension(c, h.valid_until);
                        h.valid_until = started + v.map_or(0, Duration::as_micros);
                        let end = Instant::from_micros(h.valid_until);
                        h.renewal = Renewal {
                            extend_at: end,
                            give_up_at: end,
                        };
                        h.watchdog_at = Some(h.valid_until);
                    }
                    Err(e) => {
                        if self.liveness_applies(self.now) {
                            self.report
                                .violations
                                .push(Violation::NotExtended { client: c });
                        }
                        if e.kind == FailureKind::Lost {
                            return (self.lose(c, h), true);
                        }
                        // Unavailable or expired: again a request timeout later.
                        let request_timeout = self.sc.config.request_timeout_for(ttl);
                        h.watchdog_at = Some(now + request_timeout.as_micros());
                    }
                }
            }
        }
        if now >= h.until_local {
            // The work is done: the critical section ends now (in real time).
            return (self.end_use(c, h), true);
        }
        let due = h.watchdog_at.is_some_and(|at| now >= at);
        if h.extending.is_none() && due {
            if now >= h.renewal.give_up_at.as_micros() {
                return (self.lose(c, h), true);
            }
            let servers = self.clients[c].servers;
            let now_i = Instant::from_micros(now);
            let config = self.sc.extend_config.unwrap_or(self.sc.config);
            match Extend::new(&config, &servers, RESOURCE, &h.lock, ttl, now_i) {
                Ok(op) => {
                    self.clients[c].op_serial += 1;
                    h.extending = Some((op, now));
                    return (State::Holding(h), true);
                }
                Err(ArgumentError::ExtensionLimit) => {
                    // No more extensions: hand the lock back at the give-up time.
                    h.watchdog_at = Some(h.renewal.give_up_at.as_micros());
                }
                Err(_) => return (self.lose(c, h), true),
            }
        }
        (State::Holding(h), false)
    }

    /// The watchdog declares the lock lost: the client stops using it at
    /// once, and releases it.
    fn lose(&mut self, c: usize, h: Holding) -> State {
        self.report.lost += 1;
        self.end_use(c, h)
    }

    /// The client stops using the lock now and releases it.
    fn end_use(&mut self, c: usize, h: Holding) -> State {
        let validity_end = self.clients[c].clock.real(h.lock.valid_until().as_micros());
        self.check_use(c, h.granted_real, validity_end);
        self.clients[c].op_serial += 1;
        let servers = self.clients[c].servers;
        let op = redlock_core::Release::for_lock(&self.sc.config, &servers, RESOURCE, &h.lock);
        State::Releasing(op)
    }
}
