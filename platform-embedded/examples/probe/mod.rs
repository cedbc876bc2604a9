//! What the size probes share: a stand-in RNG and clock, and the panic
//! handler of a bare-metal binary.

use core::hint::black_box;

use redlock_embedded::{Clock, Instant};

/// A stand-in RNG: the probe measures size, not randomness.
pub(crate) struct ProbeRng(pub(crate) u64);

impl rand_core::TryRng for ProbeRng {
    type Error = core::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = black_box(
            self.0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1),
        );
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for b in dst {
            *b = self.try_next_u64()? as u8;
        }
        Ok(())
    }
}
impl rand_core::TryCryptoRng for ProbeRng {}

/// A clock that a linker cannot fold away.
pub(crate) struct ProbeClock;

impl Clock for ProbeClock {
    fn now(&self) -> Instant {
        Instant::from_micros(black_box(1_000))
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
