//! Clocks that drift: local time as a function of real time.

/// A clock running at `1 + ppm/1e6` times real time, from an offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    pub(super) offset: u64,
    pub(super) ppm: i64,
}

impl Clock {
    pub(super) fn local(&self, real: u64) -> u64 {
        let scaled = (real as i128) * (1_000_000 + self.ppm as i128) / 1_000_000;
        self.offset + scaled as u64
    }

    /// The earliest real time at which the local clock reads `local`.
    pub(super) fn real(&self, local: u64) -> u64 {
        let l = local.saturating_sub(self.offset) as i128;
        let rate = 1_000_000 + self.ppm as i128;
        let mut r = (l * 1_000_000 + rate - 1) / rate;
        while self.local(r as u64) < local {
            r += 1;
        }
        r as u64
    }
}
