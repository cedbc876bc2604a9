//! The core's own clock types: integer microseconds, no floats, no reading
//! of any clock. The platform passes `now` into every call.

use core::fmt;

/// A span of time in whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
// Aligned to 4 bytes, not 8 (see `ALIGNMENT`).
#[repr(C, packed(4))]
pub struct Duration {
    micros: u64,
}

// ALIGNMENT: `Duration` and `Instant` are `repr(C, packed(4))`: a `u64` that
// needs only 4-byte alignment (a 32-bit MCU loads it as two words either
// way). The structures that hold them are then 4-byte aligned too, and are
// copied and cleared by the 4-byte-aligned `memcpy` and `memset`: with 8,
// an MCU firmware links a second copy of each. Every derive copies the
// field (no reference to it is taken); `defmt::Format`, which would take
// one, is written out. The other numbers the operations keep are `U64` and
// `I64` (below) for the same reason, and `lib.rs` checks at compile time
// that the operations and `Lock` need no more than a pointer's alignment.
// With a round's request and answers, the jitter's seed and the fence as
// plain `u64`/`i64`, the embedded lock client linked `__aeabi_memcpy8` and
// was 340 B larger.

#[cfg(feature = "defmt")]
impl defmt::Format for Duration {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Duration {{ micros: {=u64} }}", self.as_micros());
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Instant {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Instant {{ micros: {=u64} }}", self.as_micros());
    }
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

    /// Half of it, rounded down.
    pub const fn half(self) -> Duration {
        Duration::from_micros(self.as_micros() >> 1)
    }

    /// Whole microseconds.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds, rounded down.
    pub const fn as_millis(self) -> u64 {
        long_division(self.micros, 1_000).0
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
            micros: saturating_add(self.micros, rhs.micros),
        }
    }

    /// `self - rhs`, saturating at zero.
    pub const fn saturating_sub(self, rhs: Duration) -> Duration {
        Duration {
            micros: saturating_sub(self.micros, rhs.micros),
        }
    }

    /// `self * num / den`, rounded up, without overflow (saturating at
    /// [`Duration::MAX`]); a zero `den` gives [`Duration::MAX`]. No 128-bit
    /// arithmetic, and no 64-bit division either: both are large library
    /// calls on MCUs.
    pub const fn mul_ratio_ceil(self, num: u32, den: u32) -> Duration {
        let (num, den) = (num as u64, den as u64);
        if den == 0 {
            return Duration::MAX;
        }
        let (q, r) = long_division(self.micros, den);
        // q * num + ceil(r * num / den); r < den <= u32::MAX, so r * num
        // fits, and its quotient by den is below num: + 1 fits too.
        let whole = match q.checked_mul(num) {
            Some(w) => w,
            None => return Duration::MAX,
        };
        let (p, rem) = long_division(r.wrapping_mul(num), den);
        let part = p.wrapping_add((rem != 0) as u64);
        Duration {
            micros: whole.saturating_add(part),
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

/// `a + b`, saturating at `u64::MAX`: one copy of the code for every
/// saturating time addition (inline, it is 20 bytes of 64-bit carries on a
/// 32-bit MCU at each of a dozen places).
#[inline(never)]
const fn saturating_add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

/// `a - b`, saturating at zero (out of line, like [`saturating_add`]).
#[inline(never)]
const fn saturating_sub(a: u64, b: u64) -> u64 {
    a.saturating_sub(b)
}

/// `n / d` and `n % d`, or `None` when `d` is zero.
///
/// A 64-bit division is a library call of almost 1 KiB on 32-bit MCUs
/// (`compiler_builtins`' `u64_div_rem`); this binary long division is a few
/// dozen bytes, and the core divides rarely (per operation, not per byte).
/// Exact: after each step `r < d` and `quotient * d + r` equals the bits of
/// `n` shifted in so far, so the end result is the quotient and the remainder.
/// When `r` has its top bit set, `2r + bit` exceeds `u64` but also `d`: the
/// subtraction is made, modulo 2^64, and its true result `< d` fits.
pub(crate) const fn div_rem(n: u64, d: u64) -> Option<(u64, u64)> {
    if d == 0 {
        return None;
    }
    Some(long_division(n, d))
}

/// [`div_rem`] for a `d` known not to be zero (for zero it returns
/// `(u64::MAX, n)`, and does not panic).
///
/// On a 64-bit target the hardware divides. Elsewhere (an MCU) it is a
/// shift-and-subtract loop: one routine, not `compiler_builtins`' 64-bit
/// division and remainder, which cost more flash.
const fn long_division(n: u64, d: u64) -> (u64, u64) {
    if cfg!(target_pointer_width = "64") {
        match (n.checked_div(d), n.checked_rem(d)) {
            (Some(q), Some(r)) => (q, r),
            _ => (u64::MAX, n),
        }
    } else {
        shift_subtract(n, d)
    }
}

/// [`long_division`] as a shift-and-subtract loop (the MCU's; also tested
/// on the host).
const fn shift_subtract(n: u64, d: u64) -> (u64, u64) {
    // The bits of `n` leave `q` at the top and enter `r`; the bits of the
    // quotient enter `q` at the bottom.
    let (mut q, mut r) = (n, 0u64);
    let mut step = 0;
    while step < u64::BITS {
        step = step.wrapping_add(1);
        let carry = r >> 63;
        r = (r << 1) | (q >> 63);
        q <<= 1;
        if carry != 0 || r >= d {
            r = r.wrapping_sub(d);
            q |= 1;
        }
    }
    (q, r)
}

/// A `u64` aligned to 4 bytes, not 8 (see `ALIGNMENT`): the numbers the
/// operations keep besides times (a ttl in milliseconds, a fence token, the
/// jitter's seed), so that no operation is 8-byte aligned. Shown as the
/// number.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub(crate) struct U64(pub(crate) u64);

/// An `i64` aligned to 4 bytes (see [`U64`]): a value a server answered.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub(crate) struct I64(pub(crate) i64);

impl fmt::Debug for U64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        fmt::Debug::fmt(&n, f)
    }
}

impl fmt::Debug for I64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        fmt::Debug::fmt(&n, f)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for U64 {
    fn format(&self, f: defmt::Formatter<'_>) {
        let n = self.0;
        defmt::write!(f, "{=u64}", n);
    }
}

/// A point on the platform's monotonic clock, in microseconds from an
/// arbitrary origin. Only differences between instants mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
// Aligned to 4 bytes, not 8 (see `ALIGNMENT`).
#[repr(C, packed(4))]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The origin of the clock.
    pub const ZERO: Instant = Instant { micros: 0 };
    /// The latest instant.
    pub(crate) const MAX: Instant = Instant { micros: u64::MAX };

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
            micros: saturating_sub(self.micros, earlier.micros),
        }
    }

    /// `self + d`, saturating at the end of time.
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant {
            micros: saturating_add(self.micros, d.as_micros()),
        }
    }

    /// `self - d`, saturating at the origin.
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant {
            micros: saturating_sub(self.micros, d.as_micros()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::arithmetic_side_effects, clippy::unwrap_used)]
    use super::*;

    #[test]
    fn div_rem_is_the_division_operator() {
        let edges = [
            0u64,
            1,
            2,
            3,
            9,
            10,
            999,
            1_000,
            1_001,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut values = heapless::Vec::<u64, 2_100>::new();
        values.extend_from_slice(&edges).unwrap();
        let mut x = 7u64;
        for i in 0..2_000u32 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // Every magnitude, not only huge values.
            values.push(x >> (i % 64)).unwrap();
        }
        for &n in &values {
            for &d in values.iter().step_by(37).chain(&edges) {
                let want = (d != 0).then(|| (n / d, n % d));
                assert_eq!(div_rem(n, d), want, "{n} / {d}");
                // The MCU's loop, whatever this target uses.
                if let Some(want) = want {
                    assert_eq!(shift_subtract(n, d), want, "{n} / {d}, shifting");
                }
            }
        }
    }

    #[test]
    fn mul_ratio_ceil_is_the_exact_ratio_rounded_up() {
        let values = [
            0u64,
            1,
            7,
            999,
            1_000,
            10_000_000,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            1 << 40,
            (1 << 63) + 5,
            u64::MAX - 1,
            u64::MAX,
        ];
        let ratios = [0u32, 1, 2, 3, 7, 99, 100, 1_000, u32::MAX - 1, u32::MAX];
        for &micros in &values {
            for &num in &ratios {
                for &den in &ratios {
                    let got = Duration::from_micros(micros).mul_ratio_ceil(num, den);
                    let want = if den == 0 {
                        u64::MAX
                    } else {
                        let exact = u128::from(micros) * u128::from(num);
                        let ceil = exact.div_ceil(u128::from(den));
                        u64::try_from(ceil).unwrap_or(u64::MAX)
                    };
                    assert_eq!(got.as_micros(), want, "{micros} * {num} / {den}");
                }
            }
        }
    }

    #[test]
    fn whole_milliseconds_round_down() {
        for (micros, ms) in [
            (0, 0),
            (999, 0),
            (1_000, 1),
            (u64::from(u32::MAX), 4_294_967),
            (u64::MAX, u64::MAX / 1_000),
        ] {
            assert_eq!(Duration::from_micros(micros).as_millis(), ms);
        }
    }
}
