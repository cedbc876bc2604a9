//! A counting global allocator for the allocation tests and benches: it
//! forwards every call to [`System`] and, between [`start`] and [`stop`],
//! counts allocations and reallocations on every thread.
//!
//! A binary that counts declares it as its global allocator,
//! `#[global_allocator] static GLOBAL: Counting = Counting;`, and has
//! nothing else running while it counts (the count is process-wide).
//!
//! `Counting<N>` also records the backtraces of the first `N` allocations
//! counted (see [`take_traces`]); plain `Counting` records none.

// The counting allocator forwards to the system allocator.
#![allow(unsafe_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::alloc::System;
use std::backtrace::Backtrace;
use std::sync::Mutex;

/// A global allocator that forwards to [`System`] and counts allocations
/// while counting is on; with `TRACED` > 0 it records where the first
/// `TRACED` counted allocations came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting<const TRACED: usize = 0>;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
/// The first allocations' backtraces, captured but not resolved: resolving
/// symbols reads the binary's debug information, which the first time takes
/// over 100 ms, and that must not happen inside an allocation (the thread
/// that allocates may be a runtime's, with requests in flight whose timeout
/// runs meanwhile). They are resolved in [`take_traces`].
static TRACES: Mutex<Vec<(usize, Option<String>, Backtrace)>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread is recording a backtrace: its own allocations are not
    /// counted (nor traced, which would recurse).
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

/// Counting on: allocations from now on are counted.
pub fn start() {
    COUNTING.store(true, Ordering::SeqCst);
}

/// Counting off.
pub fn stop() {
    COUNTING.store(false, Ordering::SeqCst);
}

/// The allocations counted so far (since the start of the process or the
/// last [`reset`]).
pub fn count() -> usize {
    ALLOCS.load(Ordering::SeqCst)
}

/// The count back to zero.
pub fn reset() {
    ALLOCS.store(0, Ordering::SeqCst);
}

/// The backtraces recorded so far (with `Counting<N>`, N > 0), which are
/// then forgotten.
pub fn take_traces() -> Vec<String> {
    let traces = core::mem::take(
        &mut *TRACES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    traces
        .into_iter()
        .map(|(n, thread, trace)| {
            format!(
                "allocation {n} on thread {:?}:\n{trace}",
                thread.as_deref().unwrap_or("?")
            )
        })
        .collect()
}

/// Counts an allocation if counting is on, and with `TRACED` > 0 records
/// where it came from if it is one of the first.
fn note<const TRACED: usize>() {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    if TRACED == 0 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if TRACING.with(Cell::get) {
        return;
    }
    let n = ALLOCS.fetch_add(1, Ordering::Relaxed);
    if n < TRACED {
        TRACING.with(|t| t.set(true));
        let thread = std::thread::current().name().map(String::from);
        let trace = Backtrace::force_capture();
        TRACES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((n, thread, trace));
        TRACING.with(|t| t.set(false));
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter has no effect on the memory handed
// out. Recording a backtrace allocates from within `alloc`, which is sound
// (`System` is reentrant) and cannot recurse (the thread-local flag).
unsafe impl<const TRACED: usize> GlobalAlloc for Counting<TRACED> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note::<TRACED>();
        // SAFETY: same layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note::<TRACED>();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
