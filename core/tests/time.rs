//! Tests of the core's integer time: conversions, checked and saturating
//! arithmetic, display, and the drift ratio maths.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_core::{Duration, Instant};

#[test]
fn drift_ratio_maths_is_exact_and_saturates() {
    let d = Duration::from_micros(10_999_000);
    assert_eq!(d.mul_ratio_ceil(1, 100), Duration::from_micros(109_990));
    assert_eq!(
        Duration::from_micros(101).mul_ratio_ceil(1, 100),
        Duration::from_micros(2),
        "rounded up"
    );
    assert_eq!(
        Duration::from_micros(100).mul_ratio_ceil(1, 100),
        Duration::from_micros(1)
    );
    assert_eq!(
        Duration::MAX.mul_ratio_ceil(1, 100),
        Duration::from_micros(u64::MAX / 100 + 1)
    );
    assert_eq!(Duration::MAX.mul_ratio_ceil(u32::MAX, 1), Duration::MAX);
    assert_eq!(
        Duration::MAX.mul_ratio_ceil(u32::MAX, u32::MAX),
        Duration::MAX
    );
    assert_eq!(d.mul_ratio_ceil(1, 0), Duration::MAX);
    assert_eq!(d.mul_ratio_ceil(0, 7), Duration::ZERO);
    // Against exact 128-bit arithmetic on a spread of values.
    let mut x = 1u64;
    for _ in 0..2_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let (num, den) = ((x >> 7) as u32 % 1_000, ((x >> 17) as u32 % 100_000).max(1));
        let exact = (u128::from(x) * u128::from(num)).div_ceil(u128::from(den));
        let want = u64::try_from(exact).unwrap_or(u64::MAX);
        assert_eq!(
            Duration::from_micros(x)
                .mul_ratio_ceil(num, den)
                .as_micros(),
            want,
            "{x} * {num} / {den}"
        );
    }
}

#[test]
fn durations_and_instants_convert_add_and_print() {
    let d = Duration::from_millis(3);
    assert_eq!(d.as_micros(), 3_000);
    assert_eq!(
        d.checked_add(Duration::from_micros(5)),
        Some(Duration::from_micros(3_005))
    );
    assert_eq!(Duration::MAX.checked_add(Duration::from_micros(1)), None);
    assert_eq!(d.checked_sub(Duration::from_millis(4)), None);
    let t = Instant::from_millis(7);
    assert_eq!(t.as_micros(), 7_000);
    assert_eq!(Instant::from_micros(12).as_micros(), 12);
    assert_eq!(t.saturating_add(d).as_micros(), 10_000);
    // Milliseconds, with the microseconds only when there are any.
    for (micros, text) in [
        (0, "0ms"),
        (15_000, "15ms"),
        (1_500, "1.500ms"),
        (7, "0.007ms"),
        (123_456_789, "123456.789ms"),
    ] {
        assert_eq!(Duration::from_micros(micros).to_string(), text);
    }
}
