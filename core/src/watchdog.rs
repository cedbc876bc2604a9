//! F2: a watchdog's policy for one held lock, sans-IO: when to extend, what
//! each extension's outcome means, and when the lock is lost. Written once
//! for every front end (a blocking watchdog thread, an async driver, the
//! `redlock lock` command, a firmware's loop).
//!
//! The platform asks [`Watchdog::poll`] what to do at `now`: wait until an
//! instant (or until the lock is released), start one extension (and give
//! its outcome to [`Watchdog::handle_extension`]), or stop: the lock is lost.

use crate::lock::Lock;
use crate::time::{Duration, Instant};

/// Why a watched lock was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Loss {
    /// A majority said the key is no longer ours (expired, deleted, taken).
    NotHeld,
    /// Extensions kept failing (servers unavailable) and the validity was
    /// about to end.
    Unavailable,
    /// The extension limit was reached; the lock was given up before its
    /// validity ended.
    ExtensionLimit,
}

/// What a watchdog does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WatchAction {
    /// Nothing until then (or until the lock is released).
    Wait(Instant),
    /// Extend the lock now, and report the outcome.
    Extend,
    /// The lock is lost: tell its holder, and stop.
    Lost(Loss),
}

/// How one extension ended, as [`Watchdog::handle_extension`] takes it.
#[derive(Debug, Clone, Copy)]
pub enum Extension<'a> {
    /// It counted: the lock as extended.
    Extended(&'a Lock),
    /// A majority said the key is no longer ours.
    NotHeld,
    /// The extension limit is reached: no extension was sent.
    LimitReached,
    /// Anything else: too few servers answered, the round came too late,
    /// an argument the platform could not send. Tried again after a
    /// request timeout, while there is time.
    Failed,
    /// It could not start yet (no room to run it): asked again by the next
    /// [`poll`](Watchdog::poll).
    NotStarted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Until `extend_at`.
    Waiting,
    /// An extension runs.
    Extending,
    /// No more extensions: lost at `give_up_at`.
    Limit,
    Lost(Loss),
}

/// F2: the schedule and the retry and loss policy of a watchdog for one
/// lock. Extends when a third of the validity is left
/// ([`Lock::renewal`]); retries a failed extension after a request
/// timeout; loses the lock when a majority says it is not ours, or when the
/// margin before its validity's end is reached without an extension, or,
/// past the extension limit, at that margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watchdog {
    request_timeout: Duration,
    extend_at: Instant,
    give_up_at: Instant,
    phase: Phase,
}

impl Watchdog {
    /// The watchdog of `lock`, whose extensions have `request_timeout`.
    pub fn new(lock: &Lock, request_timeout: Duration) -> Watchdog {
        let renewal = lock.renewal(request_timeout);
        Watchdog {
            request_timeout,
            extend_at: renewal.extend_at,
            give_up_at: renewal.give_up_at,
            phase: Phase::Waiting,
        }
    }

    /// When the lock is lost without a further extension.
    pub fn give_up_at(&self) -> Instant {
        self.give_up_at
    }

    /// What to do at `now`.
    pub fn poll(&mut self, now: Instant) -> WatchAction {
        match self.phase {
            Phase::Lost(why) => WatchAction::Lost(why),
            // Its outcome comes by `handle_extension`; the platform bounds
            // the wait.
            Phase::Extending => WatchAction::Wait(self.give_up_at),
            Phase::Limit if now >= self.give_up_at => self.lose(Loss::ExtensionLimit),
            Phase::Limit => WatchAction::Wait(self.give_up_at),
            Phase::Waiting if now >= self.give_up_at => self.lose(Loss::Unavailable),
            Phase::Waiting if now >= self.extend_at => {
                self.phase = Phase::Extending;
                WatchAction::Extend
            }
            Phase::Waiting => WatchAction::Wait(self.extend_at.min(self.give_up_at)),
        }
    }

    fn lose(&mut self, why: Loss) -> WatchAction {
        rl_log!(info, "a watched lock is lost");
        self.phase = Phase::Lost(why);
        WatchAction::Lost(why)
    }

    /// The extension [`poll`](Watchdog::poll) asked for ended at `now`.
    pub fn handle_extension(&mut self, now: Instant, outcome: Extension<'_>) {
        self.phase = match outcome {
            Extension::Extended(lock) => {
                let renewal = lock.renewal(self.request_timeout);
                self.extend_at = renewal.extend_at;
                self.give_up_at = renewal.give_up_at;
                Phase::Waiting
            }
            Extension::NotHeld => Phase::Lost(Loss::NotHeld),
            // Handed back before its validity ends.
            Extension::LimitReached => Phase::Limit,
            Extension::Failed => {
                rl_log!(debug, "an extension failed: trying again shortly");
                self.extend_at = now.saturating_add(self.request_timeout);
                Phase::Waiting
            }
            Extension::NotStarted => Phase::Waiting,
        };
    }
}
