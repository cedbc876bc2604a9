//! The embassy-time driver of the board: time from the board clock
//! ([`crate::clock`], CMSDK APB timer 0 extended to 64 bits), alarms checked
//! on every SysTick (1 kHz).
//!
//! - `now()` is the clock's microseconds (embassy-time's tick is 1 µs,
//!   feature `tick-hz-1_000_000` of `embassy-time-driver`).
//! - Timers sit in one timer queue (embassy-time-queue-utils' integrated
//!   queue: each executor task carries its own queue item, so there is no
//!   fixed capacity). The earliest expiry is kept as the alarm; the SysTick
//!   handler calls [`tick`], which wakes every expired timer once the alarm
//!   is due. So a timer fires at the first SysTick at or after its expiry:
//!   up to 1 ms late, never early. SysTick runs anyway (it keeps the
//!   clock's 64-bit extension current and wakes `WFE`), so no second timer
//!   or interrupt is needed; a one-shot CMSDK timer 1 alarm would give
//!   sub-millisecond timers if they are ever needed.
//! - [`wake_at_next_tick`] is for drivers that poll their hardware (the
//!   LAN9118 driver of [`crate::net_driver`]): their waker is woken at the
//!   next SysTick, so a polled device is looked at again within 1 ms
//!   without a timer of its own.
//!
//! The binary's `SysTick` exception handler must call [`crate::clock::tick`]
//! and then [`tick`]; [`crate::clock::Clock::start`] starts both timers,
//! and must run before anything asks embassy-time for the time: the clock
//! starts from zero, so a `now()` read before it would not be monotonic.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use critical_section::{CriticalSection, Mutex};
use embassy_time_queue_utils::Queue;

/// The driver's state, shared by thread mode and the SysTick handler
/// (every access in a critical section).
struct BoardTime {
    /// The timers waiting, by expiry.
    queue: Mutex<RefCell<Queue>>,
    /// The earliest expiry in `queue` (`u64::MAX` when it is empty).
    alarm: Mutex<Cell<u64>>,
    /// A polling driver's waker, woken (and forgotten) at the next tick.
    poll: Mutex<RefCell<Option<Waker>>>,
}

impl BoardTime {
    /// Wakes the expired timers and sets the alarm to the next expiry.
    fn expire(&self, cs: CriticalSection<'_>, now: u64) {
        let next = self.queue.borrow_ref_mut(cs).next_expiration(now);
        self.alarm.borrow(cs).set(next);
    }
}

impl embassy_time_driver::Driver for BoardTime {
    fn now(&self) -> u64 {
        crate::clock::elapsed_micros()
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            // `true` if the queue changed: the alarm may have to move
            // earlier. A timer already due is woken right here.
            if self.queue.borrow_ref_mut(cs).schedule_wake(at, waker) {
                self.expire(cs, self.now());
            }
        });
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: BoardTime = BoardTime {
    queue: Mutex::new(RefCell::new(Queue::new())),
    alarm: Mutex::new(Cell::new(u64::MAX)),
    poll: Mutex::new(RefCell::new(None)),
});

/// Called from the SysTick handler (after [`crate::clock::tick`]): wakes
/// the polling driver, and the timers whose time has come.
pub fn tick() {
    critical_section::with(|cs| {
        let polling = DRIVER.poll.borrow_ref_mut(cs).take();
        if let Some(waker) = polling {
            waker.wake();
        }
        let now = embassy_time_driver::Driver::now(&DRIVER);
        if now >= DRIVER.alarm.borrow(cs).get() {
            DRIVER.expire(cs, now);
        }
    });
}

/// Wakes `waker` at the next SysTick (within 1 ms): for a driver that
/// found its hardware idle and must look again. One waker is kept (the
/// network stack's runner task is the only caller); registering another
/// wakes the one it replaces, so that no task is left asleep.
pub fn wake_at_next_tick(waker: &Waker) {
    critical_section::with(|cs| {
        let replaced = {
            let mut slot = DRIVER.poll.borrow_ref_mut(cs);
            match slot.as_ref() {
                Some(held) if held.will_wake(waker) => None,
                _ => slot.replace(waker.clone()),
            }
        };
        if let Some(old) = replaced {
            old.wake();
        }
    });
}
