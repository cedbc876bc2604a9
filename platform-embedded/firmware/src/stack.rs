//! Stack high-water mark: paint the unused stack at boot, and find later
//! how deep it was ever used (for the RAM budget).

/// The pattern painted into unused stack.
const PAINT: u32 = 0x5AC5_5AC5;

/// How far below the top of the stack is painted and measured: far more
/// than the firmware's budget, so a reading of `WINDOW` means "at least".
pub const WINDOW: usize = 64 * 1024;

/// Bytes left unpainted under the caller's stack pointer (this function's
/// own frame lives there).
const MARGIN: usize = 256;

unsafe extern "C" {
    /// The initial stack pointer (top of RAM), from cortex-m-rt's `link.x`.
    static _stack_start: u32;
}

/// The top of the stack (it grows down from there).
fn top() -> usize {
    // Only the symbol's address is taken (safe), never its value.
    (&raw const _stack_start) as usize
}

/// The lowest address measured.
fn bottom() -> usize {
    top().saturating_sub(WINDOW)
}

/// Writes `value` to the stack word at `addr`.
///
/// # Safety
/// `addr` is 4-byte aligned, inside the stack region, and below every live
/// stack frame (below the current stack pointer minus [`MARGIN`]).
unsafe fn store(addr: usize, value: u32) {
    // SAFETY: the caller's contract: unused stack, owned by no Rust object.
    unsafe { core::ptr::write_volatile(addr as *mut u32, value) }
}

/// Reads the stack word at `addr` (aligned, inside the stack region).
fn load(addr: usize) -> u32 {
    // SAFETY: `addr` is an aligned address in RAM (the stack region
    // between `bottom()` and `top()`); a volatile read of it is defined
    // whatever it holds, and no Rust reference is created to it.
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

/// Paints the stack below the current stack pointer. Call it first thing
/// in `main`.
#[inline(never)]
pub fn paint() {
    let sp = cortex_m::register::msp::read() as usize;
    let end = sp.saturating_sub(MARGIN) & !3;
    let mut addr = bottom();
    while addr < end {
        // SAFETY: aligned (bottom() is 8-aligned, steps of 4), within the
        // stack region and below this function's frame by MARGIN.
        unsafe { store(addr, PAINT) };
        addr += 4;
    }
}

/// The most stack ever used since [`paint`], in bytes (the distance from
/// the top to the lowest word that is no longer paint).
pub fn high_water() -> usize {
    let mut addr = bottom();
    while addr < top() && load(addr) == PAINT {
        addr += 4;
    }
    top() - addr
}
