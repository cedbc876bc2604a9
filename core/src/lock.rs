//! A held lock, and the errors shared by the operations.

use crate::report::Report;
use crate::time::{Duration, Instant, U64, div_rem};
use crate::token::Token;

/// A lock acquired on a majority of the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lock {
    token: Token,
    ttl: Duration,
    started: Instant,
    valid_until: Instant,
    validity: Duration,
    fence: Option<U64>,
    extensions: u32,
    report: Report,
}

impl Lock {
    pub(crate) fn new(
        token: Token,
        ttl: Duration,
        started: Instant,
        now: Instant,
        validity: Duration,
        fence: Option<u64>,
        report: Report,
    ) -> Lock {
        // The validity is counted from the start of the round (A4), so the
        // lock is good until start + ttl - drift.
        let valid_until = now.saturating_add(validity);
        Lock {
            token,
            ttl,
            started,
            valid_until,
            validity,
            fence: fence.map(U64),
            extensions: 0,
            report,
        }
    }

    /// A lock known only by its token (to release or inspect a lock taken
    /// elsewhere, e.g. by another process).
    pub fn from_token(token: Token, ttl: Duration, now: Instant) -> Lock {
        Lock {
            token,
            ttl,
            started: now,
            valid_until: now,
            validity: Duration::ZERO,
            fence: None,
            extensions: 0,
            report: Report::new(0),
        }
    }

    /// The token the servers hold for this lock.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The ttl the keys were last set with.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the round that gave the current validity started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The instant (on the platform's monotonic clock) after which the lock
    /// must be considered lost: the last round's start + ttl - drift.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// The validity granted when the lock was acquired or last extended.
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// The validity left at `now` (zero once expired).
    pub fn remaining(&self, now: Instant) -> Duration {
        self.valid_until.saturating_duration_since(now)
    }

    /// True while `now` is before [`Lock::valid_until`].
    pub fn is_valid(&self, now: Instant) -> bool {
        now < self.valid_until
    }

    /// F1: the fencing token, when acquired with fencing.
    pub fn fence(&self) -> Option<u64> {
        self.fence.map(|f| f.0)
    }

    /// How many times the lock was extended.
    pub fn extensions(&self) -> u32 {
        self.extensions
    }

    /// What each server answered in the round that gave the current validity.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// F2: a watchdog's schedule for this lock, given the request timeout
    /// of its extensions. Start extending when a third of the validity is
    /// left; if no extension has counted by the validity's end minus a
    /// margin (two request timeouts, or a tenth of the validity, whichever
    /// is larger), the lock is lost: the holder must have stopped by then.
    pub fn renewal(&self, request_timeout: Duration) -> Renewal {
        // No 64-bit division operator: a large library call on MCUs.
        let part =
            |k| Duration::from_micros(div_rem(self.validity.as_micros(), k).map_or(0, |(q, _)| q));
        let (third, tenth) = (part(3), part(10));
        let margin = request_timeout.saturating_add(request_timeout).max(tenth);
        let give_up_at = self.valid_until.saturating_sub(margin);
        // A validity too short for both: still one request's time to try
        // before giving up (or none, when even that does not fit).
        let extend_at = self
            .valid_until
            .saturating_sub(third)
            .min(give_up_at.saturating_sub(request_timeout));
        Renewal {
            extend_at,
            give_up_at,
        }
    }

    pub(crate) fn extended(
        &self,
        ttl: Duration,
        started: Instant,
        now: Instant,
        validity: Duration,
        report: Report,
    ) -> Lock {
        Lock {
            ttl,
            started,
            valid_until: now.saturating_add(validity),
            validity,
            extensions: self.extensions.saturating_add(1),
            report,
            ..*self
        }
    }
}

/// F2: when a watchdog extends a held lock, and when it gives it up (see
/// [`Lock::renewal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Renewal {
    /// Start extending at this instant.
    pub extend_at: Instant,
    /// Without an extension that counted by this instant, the lock is lost.
    pub give_up_at: Instant,
}

/// Why an operation failed to get a majority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FailureKind {
    /// Enough servers answered, but another holder has the votes.
    Conflict,
    /// Too few servers answered usefully (down, timed out, errors).
    Unavailable,
    /// A majority answered, but too late: no validity was left (A3/A4).
    Expired,
    /// Extend: a majority answered that the key is no longer ours.
    Lost,
    /// F1: a majority voted for us, but the resource's fence counter is
    /// missing on too many servers to know the last fence handed out (they
    /// restarted without persistence): no safe token can be made. Fenced
    /// acquisitions refuse until an operator repairs the counter (raises it
    /// to at least the highest fence the protected resource has accepted,
    /// with the fence-repair operation). Retrying does not help.
    FenceLost,
    /// Acquire: the caller went away before the outcome (an async call
    /// dropped mid-flight; see `Acquire::abandon`). What the attempt had
    /// won was released (A5) and no retry followed. Nobody waits for this
    /// outcome; it ends the operation.
    Abandoned,
}

impl core::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FailureKind::Conflict => "held by another client",
            FailureKind::Unavailable => "too few servers answered",
            FailureKind::Expired => "a majority answered too late: no validity left",
            FailureKind::Lost => "the lock is no longer ours on a majority",
            FailureKind::FenceLost => {
                "the fence counter is missing on too many servers (restarted without \
                 persistence?), so no safe fencing token can be made; repair it with the \
                 highest fence the protected resource has accepted (`redlock fence-repair \
                 RESOURCE --at-least N`)"
            }
            FailureKind::Abandoned => "given up: its caller went away before it ended",
        })
    }
}

/// A bad argument to an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ArgumentError {
    /// The ttl is under one millisecond.
    Ttl,
    /// The random number generator failed (no token can be made).
    Rng,
    /// The lock was already extended [`Config::max_extensions`](crate::Config::max_extensions) times.
    ExtensionLimit,
    /// The lock's validity is over: it can no longer be extended.
    Expired,
    /// A token longer than [`TOKEN_CAPACITY`](crate::TOKEN_CAPACITY) bytes.
    Token,
    /// [`Config::fencing`](crate::Config::fencing) is set, but this build
    /// has no fenced acquisitions (the `fencing` feature of `redlock-core`).
    Fencing,
}

impl core::fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ArgumentError::Ttl => "the ttl must be at least 1 ms",
            ArgumentError::Rng => "the random number generator failed",
            ArgumentError::ExtensionLimit => "the lock reached its extension limit",
            ArgumentError::Expired => "the lock has expired",
            ArgumentError::Token => "the token is longer than 64 bytes",
            ArgumentError::Fencing => "fencing needs the `fencing` feature of redlock-core",
        })
    }
}

impl core::error::Error for ArgumentError {}

/// Whole milliseconds of `ttl` (what `PX` gets), at least 1 ms.
pub(crate) fn normalize_ttl(ttl: Duration) -> Result<Duration, ArgumentError> {
    match ttl.as_millis() {
        0 => Err(ArgumentError::Ttl),
        ms => Ok(Duration::from_millis(ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;
    use crate::token::Token;

    #[test]
    fn the_watchdog_extends_at_a_third_left_and_gives_up_before_the_end() {
        let token = Token::from_random_bytes([7; 20]);
        let start = Instant::from_millis(1_000);
        // A 9 s validity from t = 1 s: valid until 10 s.
        let lock = Lock::new(
            token,
            Duration::from_millis(10_000),
            start,
            start,
            Duration::from_millis(9_000),
            None,
            Report::new(3),
        );
        let r = lock.renewal(Duration::from_millis(100));
        assert_eq!(r.extend_at, Instant::from_millis(7_000));
        // The margin is a tenth of the validity (900 ms > 2 x 100 ms).
        assert_eq!(r.give_up_at, Instant::from_millis(9_100));
        // With slow requests, two request timeouts.
        let r = lock.renewal(Duration::from_millis(800));
        assert_eq!(r.give_up_at, Instant::from_millis(8_400));
        assert!(r.extend_at < r.give_up_at);
        // A validity under six request timeouts: the extension still starts
        // a request's time before giving up.
        let r = lock.renewal(Duration::from_millis(2_000));
        assert_eq!(r.give_up_at, Instant::from_millis(6_000));
        assert_eq!(r.extend_at, Instant::from_millis(4_000));
    }
}
