//! Time on MPS2: a monotonic microsecond clock from the CMSDK APB timer 0
//! (a 32-bit down-counter at the 25 MHz peripheral clock, extended to 64
//! bits in software), and SysTick as the wake-up tick for `WFI`.
//!
//! The counter wraps every 2^32 / 25 MHz = 171.8 s. The clock never goes
//! backwards across a wrap as long as it is read at least once per wrap:
//! the SysTick handler calls [`tick`] every millisecond for that.

use core::cell::Cell;

use cortex_m::interrupt::{self, Mutex};
use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use redlock_core::Instant;

/// The core and peripheral clock of the MPS2 FPGA images.
pub const CLOCK_HZ: u32 = 25_000_000;

/// Counter ticks per microsecond.
const TICKS_PER_US: u64 = (CLOCK_HZ / 1_000_000) as u64;

/// SysTick interrupts per second: how often a `WFI` wakes up at the latest.
pub const TICK_HZ: u32 = 1_000;

/// Where CMSDK APB timer 0 sits on MPS2.
const TIMER0: usize = 0x4000_0000;

/// Timer 0's registers (offsets from [`TIMER0`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum Reg {
    /// Bit 0: enable.
    Ctrl = 0x00,
    /// The current count (counts down).
    Value = 0x04,
    /// Loaded into `Value` when it reaches 0.
    Reload = 0x08,
}

/// Reads timer 0's register `reg`.
fn read(reg: Reg) -> u32 {
    // SAFETY: `TIMER0 + reg` is an aligned register of the CMSDK timer's
    // MMIO block, present on every MPS2 board; reading it has no side
    // effects and touches no memory Rust owns.
    unsafe { core::ptr::read_volatile((TIMER0 + reg as usize) as *const u32) }
}

/// Writes `value` to timer 0's register `reg`.
fn write(reg: Reg, value: u32) {
    // SAFETY: as for `read`; only `start` writes, once, at boot.
    unsafe { core::ptr::write_volatile((TIMER0 + reg as usize) as *mut u32, value) }
}

/// The counter as last seen, and the ticks counted up to then.
struct Extended {
    last: u32,
    ticks: u64,
}

static STATE: Mutex<Cell<Extended>> = Mutex::new(Cell::new(Extended { last: 0, ticks: 0 }));

/// Counts the ticks since the last reading into the 64-bit total and
/// returns it. The down-counter's distance, modulo 2^32, is exact as long
/// as less than one wrap passed.
fn advance() -> u64 {
    interrupt::free(|cs| {
        let cell = STATE.borrow(cs);
        let now = read(Reg::Value);
        let Extended { last, ticks } = cell.replace(Extended { last: 0, ticks: 0 });
        let ticks = ticks.wrapping_add(u64::from(last.wrapping_sub(now)));
        cell.set(Extended { last: now, ticks });
        ticks
    })
}

/// Whole microseconds counted since [`Clock::start`] (rounded down; 0
/// before it): the embassy-time driver's `now`, which must be monotonic and
/// work before the clock is started.
#[cfg(feature = "embassy")]
pub(crate) fn elapsed_micros() -> u64 {
    advance() / TICKS_PER_US
}

/// Called from the SysTick handler: keeps the clock's extension current
/// (at least once per counter wrap is required; every tick is plenty).
pub fn tick() {
    advance();
}

/// The board's clock: microseconds since [`Clock::start`].
///
/// A handle to the one timer: copies read the same clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    _started: (),
}

impl Clock {
    /// Starts timer 0 free-running from `u32::MAX`, and SysTick at
    /// [`TICK_HZ`] with its interrupt on (the binary's `SysTick` handler
    /// must call [`tick`]).
    pub fn start(syst: &mut SYST) -> Clock {
        write(Reg::Ctrl, 0);
        write(Reg::Reload, u32::MAX);
        write(Reg::Value, u32::MAX);
        interrupt::free(|cs| {
            STATE.borrow(cs).set(Extended {
                last: u32::MAX,
                ticks: 0,
            })
        });
        write(Reg::Ctrl, 1);
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(CLOCK_HZ / TICK_HZ - 1);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        Clock { _started: () }
    }

    /// Microseconds since start, from 40 ns counter ticks rounded up (the
    /// latest microsecond, as `redlock_embedded::Clock` asks).
    pub fn micros(&self) -> u64 {
        advance().div_ceil(TICKS_PER_US)
    }
}

impl redlock_embedded::Clock for Clock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.micros())
    }
}
