//! The core's own clock types: integer microseconds, no floats, no reading
//! of any clock. The platform passes `now` into every call.

use core::fmt;

/// A span of time in whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration {
    micros: u64,
}

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration { micros: 0 };
    /// The longest representable span.
    pub const MAX: Duration = Duration { micros: u64::MAX };

    /// From microseconds.
    pub const fn from_micros(micros: u64) -> Duration {
        Duration { micros }
    }

    /// From milliseconds (saturating).
    pub const fn from_millis(millis: u64) -> Duration {
        Duration {
            micros: millis.saturating_mul(1_000),
        }
    }

    /// From seconds (saturating).
    pub const fn from_secs(secs: u64) -> Duration {
        Duration {
            micros: secs.saturating_mul(1_000_000),
        }
    }

    /// Whole microseconds.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds, rounded down.
    pub const fn as_millis(self) -> u64 {
        self.micros / 1_000
    }

    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Duration) -> Option<Duration> {
        match self.micros.checked_add(rhs.micros) {
            Some(micros) => Some(Duration { micros }),
            None => None,
        }
    }

    /// `self - rhs`, or `None` if `rhs` is larger.
    pub const fn checked_sub(self, rhs: Duration) -> Option<Duration> {
        match self.micros.checked_sub(rhs.micros) {
            Some(micros) => Some(Duration { micros }),
            None => None,
        }
    }

    /// `self + rhs`, saturating at [`Duration::MAX`].
    pub const fn saturating_add(self, rhs: Duration) -> Duration {
        Duration {
            micros: self.micros.saturating_add(rhs.micros),
        }
    }

    /// `self - rhs`, saturating at zero.
    pub const fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration {
            micros: self.micros.saturating_sub(rhs.micros),
        }
    }

    /// `self * num / den`, rounded up, without overflow (saturating at
    /// [`Duration::MAX`]); a zero `den` gives [`Duration::MAX`]. Only `u64`
    /// arithmetic: 128-bit division is a large library call on MCUs.
    pub const fn mul_ratio_ceil(self, num: u32, den: u32) -> Duration {
        if den == 0 {
            return Duration::MAX;
        }
        let (num, den) = (num as u64, den as u64);
        let (Some(q), Some(r)) = (self.micros.checked_div(den), self.micros.checked_rem(den))
        else {
            return Duration::MAX;
        };
        // q * num + ceil(r * num / den); r < den <= u32::MAX, so r * num fits.
        let whole = match q.checked_mul(num) {
            Some(w) => w,
            None => return Duration::MAX,
        };
        Duration {
            micros: whole.saturating_add(r.saturating_mul(num).div_ceil(den)),
        }
    }

    /// The smaller of two durations.
    pub const fn min(self, other: Duration) -> Duration {
        if self.micros <= other.micros {
            self
        } else {
            other
        }
    }

    /// The larger of two durations.
    pub const fn max(self, other: Duration) -> Duration {
        if self.micros >= other.micros {
            self
        } else {
            other
        }
    }

    /// True for zero.
    pub const fn is_zero(self) -> bool {
        self.micros == 0
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ms, us) = (self.micros / 1_000, self.micros % 1_000);
        if us == 0 {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{ms}.{us:03}ms")
        }
    }
}

/// A point on the platform's monotonic clock, in microseconds from an
/// arbitrary origin. Only differences between instants mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The origin of the clock.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// From microseconds since the clock's origin.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant { micros }
    }

    /// From milliseconds since the clock's origin (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant {
            micros: millis.saturating_mul(1_000),
        }
    }

    /// Microseconds since the clock's origin.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration {
            micros: self.micros.saturating_sub(earlier.micros),
        }
    }

    /// `self + d`, saturating at the end of time.
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(d.as_micros()),
        }
    }

    /// `self - d`, saturating at the origin.
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_sub(d.as_micros()),
        }
    }
}
