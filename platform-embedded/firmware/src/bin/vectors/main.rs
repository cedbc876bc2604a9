//! On-target tests of `redlock-resp` and `redlock-core` on the Cortex-M4F
//! (QEMU `mps2-an386`): test vectors of the codec and of the core, run in
//! sequence through the public APIs only.
//!
//! Every vector is a small function that returns `Ok(())` or what went
//! wrong. A failure prints one line, `FAIL <name>: <what>`; the run ends with
//! exactly `N passed, M failed` and exits 0 only if `M == 0`. A panic prints
//! its message and exits 1.
//!
//! ```sh
//! cd platform-embedded/firmware && cargo run --release --bin vectors --features resp3
//! ```

#![no_std]
#![no_main]

use core::cell::RefCell;
use core::fmt::Write as _;

use cortex_m::interrupt::Mutex;

use redlock_firmware::console::{exit, println};

/// Longest failure message kept (a longer one is cut short).
const MESSAGE_CAPACITY: usize = 480;

/// The message of the last failure. Kept here rather than in [`Fail`], so
/// that a vector's `Result` stays small.
static MESSAGE: Mutex<RefCell<heapless::String<MESSAGE_CAPACITY>>> =
    Mutex::new(RefCell::new(heapless::String::new()));

/// A vector failed: the source line of the check; the message is in
/// [`MESSAGE`].
pub struct Fail {
    /// The line of the failed check.
    pub line: u32,
}

impl Fail {
    /// A failure with a formatted message, at `line`.
    pub fn new(args: core::fmt::Arguments<'_>, line: u32) -> Fail {
        cortex_m::interrupt::free(|cs| {
            let mut message = MESSAGE.borrow(cs).borrow_mut();
            message.clear();
            let _ = Cut(&mut message).write_fmt(args);
        });
        Fail { line }
    }
}

/// A writer that keeps what fits and drops the rest instead of failing.
struct Cut<'a, const N: usize>(&'a mut heapless::String<N>);

impl<const N: usize> core::fmt::Write for Cut<'_, N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for c in s.chars() {
            if self.0.push(c).is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// The result of one vector.
pub type Outcome = Result<(), Fail>;

/// A named test vector.
pub type Vector = (&'static str, fn() -> Outcome);

/// Fails the vector with a formatted message.
macro_rules! fail {
    ($($arg:tt)+) => {
        return Err($crate::Fail::new(format_args!($($arg)+), line!()))
    };
}

/// Fails the vector unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            fail!($($arg)+);
        }
    };
    ($cond:expr) => {
        if !$cond {
            fail!("{}", stringify!($cond));
        }
    };
}

/// Fails the vector unless `left == right`, showing both.
macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (l, r) => {
                if *l != *r {
                    fail!("{} = {:?}, expected {:?}", stringify!($left), l, r);
                }
            }
        }
    };
}

mod codec;
mod logic;

#[cortex_m_rt::entry]
fn main() -> ! {
    let groups: [&[Vector]; 2] = [codec::VECTORS, logic::VECTORS];
    let (mut passed, mut failed) = (0u32, 0u32);
    for &(name, vector) in groups.iter().flat_map(|g| g.iter()) {
        match vector() {
            Ok(()) => passed += 1,
            Err(f) => {
                failed += 1;
                cortex_m::interrupt::free(|cs| {
                    let message = MESSAGE.borrow(cs).borrow();
                    println!("FAIL {}: {} (line {})", name, message.as_str(), f.line);
                });
            }
        }
    }
    println!("{} passed, {} failed", passed, failed);
    exit(failed == 0)
}
