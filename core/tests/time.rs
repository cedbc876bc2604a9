//! Tests of the core's integer time: the drift ratio maths.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_core::Duration;

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
