//! Tunables of the algorithm, with the defaults of the common implementations.

use crate::handshake::Commands;
use crate::time::{Duration, Instant};

/// A4: the clock-drift allowance subtracted from every validity:
/// `ttl * ratio_num / ratio_den + constant`. The default, `ttl/100 + 2 ms`,
/// is the common choice (the 2 ms cover Redis' 1 ms expiry precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Drift {
    /// Numerator of the part proportional to the ttl.
    pub ratio_num: u32,
    /// Denominator of the part proportional to the ttl (0 counts as an
    /// infinite drift: every lock is invalid).
    pub ratio_den: u32,
    /// The constant part.
    pub constant: Duration,
}

impl Drift {
    /// `ttl/100 + 2 ms`.
    pub const DEFAULT: Drift = Drift {
        ratio_num: 1,
        ratio_den: 100,
        constant: Duration::from_millis(2),
    };

    /// The allowance for `ttl`.
    pub fn for_ttl(&self, ttl: Duration) -> Duration {
        ttl.mul_ratio_ceil(self.ratio_num, self.ratio_den)
            .saturating_add(self.constant)
    }
}

/// A6: what to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Retry {
    /// Attempts after the first one (default 3).
    pub retries: u32,
    /// The wait before a retry is the time the failed attempt took plus a
    /// random part drawn uniformly from `0..=jitter` (default 200 ms), so
    /// the wait is always longer than an attempt and competing clients fall
    /// out of step.
    pub jitter: Duration,
}

impl Retry {
    /// 3 retries, 0-200 ms of jitter.
    pub const DEFAULT: Retry = Retry {
        retries: 3,
        jitter: Duration::from_millis(200),
    };
    /// A single attempt.
    pub const NONE: Retry = Retry {
        retries: 0,
        jitter: Duration::ZERO,
    };
}

/// Everything the operations need to know besides the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// A4: the drift allowance.
    pub drift: Drift,
    /// A6: the retry policy of [`Acquire`](crate::Acquire).
    pub retry: Retry,
    /// A2: how long one server may take to answer one request. `None`
    /// derives it from the ttl: 1%, clamped to 5-500 ms (see
    /// [`Config::request_timeout_for`]).
    pub request_timeout: Option<Duration>,
    /// A8: how many times one lock may be extended (`None`: no limit).
    pub max_extensions: Option<u32>,
    /// F1: acquire with a fencing token.
    pub fencing: bool,
    /// Restart guard: when set to the largest ttl in use, a vote from a
    /// server whose current incarnation (see
    /// [`Servers::set_incarnation`](crate::Servers::set_incarnation)) began
    /// less than this long ago is not counted: the delayed-restart rule of
    /// the specification, enforced by the client.
    pub restart_guard: Option<Duration>,
    /// Which commands release, extend, fenced acquisitions and inspect
    /// send: the native ones where a server has them (the default), the
    /// scripts, or the native ones only (see [`Commands`]). The platform
    /// puts it in each connection's handshake plan.
    pub commands: Commands,
    /// Test-only broken variants of the algorithm.
    #[cfg(feature = "mutants")]
    pub mutants: Mutants,
}

impl Config {
    /// The defaults: drift `ttl/100 + 2 ms`, 3 retries with 0-200 ms jitter,
    /// derived request timeouts, no extension limit, no fencing, no restart guard.
    pub const DEFAULT: Config = Config {
        drift: Drift::DEFAULT,
        retry: Retry::DEFAULT,
        request_timeout: None,
        max_extensions: None,
        fencing: false,
        restart_guard: None,
        commands: Commands::Auto,
        #[cfg(feature = "mutants")]
        mutants: Mutants::NONE,
    };

    /// A2: the per-request timeout for operations with this ttl.
    ///
    /// The default is 1% of the ttl, at least 5 ms and at most 500 ms. A
    /// timeout only costs time when a server is dead or stalled, and 1% of
    /// the ttl keeps that cost small against the validity (A2). The cap is
    /// high enough for servers a WAN round trip away: a 30 s ttl waits
    /// 300 ms, room for a connect, the handshake and the request 80 ms away;
    /// a 10 s ttl waits 100 ms. (The source's 5-50 ms for a 10 s ttl
    /// assumes servers on one LAN; set a timeout explicitly for that.)
    pub fn request_timeout_for(&self, ttl: Duration) -> Duration {
        match self.request_timeout {
            Some(t) => t,
            None => ttl
                .mul_ratio_ceil(1, 100)
                .max(Self::MIN_REQUEST_TIMEOUT)
                .min(Self::MAX_REQUEST_TIMEOUT),
        }
    }

    /// The ttl that sizes the request timeout of an operation without a ttl
    /// of its own (unlock by token, inspect, fence repair) on a client that
    /// has no default ttl: 10 s, so 100 ms.
    pub const UNTIMED_TTL: Duration = Duration::from_secs(10);

    /// The request timeout of an operation without a ttl of its own: sized
    /// by the client's default ttl when it has one, else by
    /// [`UNTIMED_TTL`](Config::UNTIMED_TTL) (unless
    /// [`request_timeout`](Config::request_timeout) is set). One rule for
    /// every platform.
    pub fn untimed_request_timeout(&self, default_ttl: Option<Duration>) -> Duration {
        self.request_timeout_for(default_ttl.unwrap_or(Self::UNTIMED_TTL))
    }

    /// The smallest default request timeout.
    pub const MIN_REQUEST_TIMEOUT: Duration = Duration::from_millis(5);
    /// The largest default request timeout.
    pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

    /// A4: the validity left of a lock with `ttl` whose round started at
    /// `start` and reached its quorum at `now`: `ttl - elapsed - drift`, or
    /// `None` when that is not positive.
    pub fn validity(&self, ttl: Duration, start: Instant, now: Instant) -> Option<Duration> {
        let drift = self.drift_for(ttl);
        let elapsed = now.saturating_duration_since(start);
        // `ttl - elapsed - drift` when positive. (At saturation the sum is
        // larger than any ttl, as the exact sum would be.)
        let used = elapsed.saturating_add(drift);
        if ttl > used {
            ttl.checked_sub(used)
        } else {
            None
        }
    }

    fn drift_for(&self, ttl: Duration) -> Duration {
        #[cfg(feature = "mutants")]
        if self.mutants.no_drift {
            return Duration::ZERO;
        }
        self.drift.for_ttl(ttl)
    }

    /// A3: the number of votes that make a majority of `n` servers.
    pub fn quorum(&self, n: usize) -> usize {
        #[cfg(feature = "mutants")]
        if self.mutants.half_quorum {
            return (n / 2).max(1);
        }
        majority(n)
    }
}

/// A3: a majority of `n` servers, `n/2 + 1`: the one place it is computed
/// (operations use [`Config::quorum`], which test-only mutants may change).
pub fn majority(n: usize) -> usize {
    (n / 2).saturating_add(1)
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

/// Deliberately broken variants, for showing that the simulation's checkers
/// catch them. Only with the `mutants` feature; all off by default.
#[cfg(feature = "mutants")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Mutants {
    /// Quorum of `N/2` instead of `N/2 + 1`.
    pub half_quorum: bool,
    /// No drift term in the validity.
    pub no_drift: bool,
    /// Release with a bare `DEL` instead of the token-checking script.
    pub bare_del_release: bool,
    /// F1 without the repair rule: a missing fence counter counts as 0.
    pub naive_fence: bool,
}

#[cfg(feature = "mutants")]
impl Mutants {
    /// No mutation.
    pub const NONE: Mutants = Mutants {
        half_quorum: false,
        no_drift: false,
        bare_del_release: false,
        naive_fence: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_is_ttl_less_elapsed_less_drift_when_positive() {
        let micros = [
            0u64,
            1,
            999,
            1_000,
            2_000,
            10_000_000,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        let drifts = [
            Drift::DEFAULT,
            Drift {
                ratio_num: 0,
                ratio_den: 1,
                constant: Duration::ZERO,
            },
            Drift {
                ratio_num: 1,
                ratio_den: 0,
                constant: Duration::ZERO,
            },
            Drift {
                ratio_num: 3,
                ratio_den: 2,
                constant: Duration::MAX,
            },
        ];
        for drift in drifts {
            let config = Config {
                drift,
                ..Config::DEFAULT
            };
            for &ttl in &micros {
                for &start in &micros {
                    for &now in &micros {
                        let ttl = Duration::from_micros(ttl);
                        let (start, now) = (Instant::from_micros(start), Instant::from_micros(now));
                        let elapsed = now.saturating_duration_since(start);
                        let want = ttl
                            .checked_sub(elapsed)
                            .and_then(|v| v.checked_sub(drift.for_ttl(ttl)))
                            .filter(|v| !v.is_zero());
                        assert_eq!(config.validity(ttl, start, now), want);
                    }
                }
            }
        }
    }
}
