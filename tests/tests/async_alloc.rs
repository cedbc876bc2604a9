//! Zero heap allocations per lock + unlock cycle of the async API once
//! connected, as for the blocking one (`std_alloc.rs`): on a tokio
//! current-thread runtime, on `futures::executor::block_on`, and with four
//! tasks sharing the client on one thread. Counted by a global allocator,
//! on every thread (the client's driver included); this test binary has
//! only this test, so nothing else allocates meanwhile.
//!
//! Run with `--nocapture` to see the figures; should an allocation appear,
//! the first ones counted are printed with their backtraces.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver
// The counting allocator forwards to the system allocator.
#![allow(unsafe_code)]

extern crate alloc;

use alloc::sync::Arc;
use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::future::Future;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::alloc::System;
use std::sync::Mutex;

use redlock_std::{AsyncClient, Client};
use redlock_tests::RedisServer;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
/// How many of the first counted allocations get a backtrace.
const TRACED: usize = 4;
static TRACES: Mutex<Vec<String>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread is recording a backtrace: its own allocations are not
    /// counted (nor traced, which would recurse).
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

/// Counts an allocation, and records where it came from if it is one of
/// the first.
fn count() {
    if !COUNTING.load(Ordering::Relaxed) || TRACING.with(Cell::get) {
        return;
    }
    let n = ALLOCS.fetch_add(1, Ordering::Relaxed);
    if n < TRACED {
        TRACING.with(|t| t.set(true));
        let thread = std::thread::current();
        let trace = format!(
            "allocation {n} on thread {:?}:\n{}",
            thread.name().unwrap_or("?"),
            std::backtrace::Backtrace::force_capture()
        );
        TRACES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(trace);
        TRACING.with(|t| t.set(false));
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter has no effect on the memory handed
// out. Recording a backtrace allocates from within `alloc`, which is sound
// (`System` is reentrant) and cannot recurse (the thread-local flag).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CYCLES: usize = 1_000;
const TTL: Duration = Duration::from_secs(10);

async fn cycles(c: &AsyncClient, n: usize) {
    for _ in 0..n {
        let lock = c.lock(b"resource:orders:42", TTL).await.unwrap();
        c.unlock(&lock).await.unwrap();
    }
}

/// The allocations made (on every thread) while `run` runs, and the
/// backtraces of the first ones. Counting starts inside the executor, so
/// that what the executor allocates once per `block_on` is not counted.
async fn allocations_of(run: impl Future<Output = ()>) -> (usize, Vec<String>) {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    run.await;
    COUNTING.store(false, Ordering::SeqCst);
    let traces = core::mem::take(
        &mut *TRACES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    (ALLOCS.load(Ordering::SeqCst), traces)
}

/// Prints the figure (shown with `--nocapture`) and where the first
/// allocations came from, then asserts there were none.
fn assert_none(executor: &str, (allocs, traces): (usize, Vec<String>)) {
    eprintln!("{executor}: {allocs} allocations in {CYCLES} async lock+unlock cycles");
    for t in &traces {
        eprintln!("{t}");
    }
    assert_eq!(
        allocs, 0,
        "{executor}: allocations in {CYCLES} async lock+unlock cycles (backtraces above)"
    );
}

#[test]
fn async_lock_and_unlock_allocate_nothing_once_connected() {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start().unwrap()).collect();
    let c = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .build_async()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Warm up: connections, handshakes, buffers at their working size.
    let counted = rt.block_on(async {
        cycles(&c, 50).await;
        allocations_of(cycles(&c, CYCLES)).await
    });
    assert_none("tokio current-thread", counted);

    let counted = futures::executor::block_on(async {
        cycles(&c, 50).await;
        allocations_of(cycles(&c, CYCLES)).await
    });
    assert_none("futures::executor::block_on", counted);

    // Four tasks sharing the client on one thread, their requests
    // pipelined: still nothing per cycle. (Spawned and warmed up before
    // counting starts; they wait for the go by yielding.)
    let counted = rt.block_on(async {
        let ready = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..4u8)
            .map(|t| {
                let (c, ready, go) = (c.clone(), ready.clone(), go.clone());
                tokio::spawn(async move {
                    let name = [b'r', b'0' + t];
                    for _ in 0..50 {
                        c.unlock(&c.lock(name, TTL).await.unwrap()).await.unwrap();
                    }
                    ready.fetch_add(1, Ordering::SeqCst);
                    while !go.load(Ordering::SeqCst) {
                        tokio::task::yield_now().await;
                    }
                    for _ in 0..CYCLES / 4 {
                        c.unlock(&c.lock(name, TTL).await.unwrap()).await.unwrap();
                    }
                })
            })
            .collect();
        while ready.load(Ordering::SeqCst) < 4 {
            tokio::task::yield_now().await;
        }
        allocations_of(async {
            go.store(true, Ordering::SeqCst);
            for t in tasks {
                t.await.unwrap();
            }
        })
        .await
    });
    assert_none("4 tokio tasks on one thread", counted);
}
