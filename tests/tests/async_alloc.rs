//! Zero heap allocations per lock + unlock cycle of the async API once
//! connected, as for the blocking one (`std_alloc.rs`): on a tokio
//! current-thread runtime (the connections driven on tokio's reactor), on
//! `futures::executor::block_on` with the client's driver thread (the
//! runtime-free path), and with four tasks sharing the client on one
//! thread. Counted by a global allocator, on every thread (the client's
//! driver included); this test binary has only this test, so nothing else
//! allocates meanwhile.
//!
//! On `futures::executor::block_on` with the `async-io` feature, the
//! connections are driven on async-io's reactor, whose own thread
//! allocates when it wakes tasks (a `Vec` of wakers per turn): that figure
//! is printed, and every allocation traced must be async-io's.
//!
//! Run with `--nocapture` to see the figures; should an allocation appear,
//! the first ones counted are printed with their backtraces.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

extern crate alloc;

use alloc::sync::Arc;
use core::future::Future;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;

use redlock_std::{AsyncClient, Client};
use redlock_tests::RedisServer;
use redlock_tests::alloc_count::{self, Counting};

/// How many of the first counted allocations get a backtrace.
const TRACED: usize = 4;

#[global_allocator]
static GLOBAL: Counting<TRACED> = Counting;

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
    alloc_count::reset();
    alloc_count::start();
    run.await;
    alloc_count::stop();
    let traces = alloc_count::take_traces();
    (alloc_count::count(), traces)
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
    if cfg!(feature = "reactor") {
        let (allocs, traces) = counted;
        eprintln!(
            "futures::executor::block_on, on async-io's reactor: {allocs} allocations in {CYCLES} async lock+unlock cycles"
        );
        for t in &traces {
            eprintln!("{t}");
            assert!(
                t.contains("async_io::reactor"),
                "an allocation that is not async-io's reactor's (backtrace above)"
            );
        }
    } else {
        // Built without the client's `async-io` feature: the driver thread.
        assert_none("futures::executor::block_on", counted);
    }

    // The runtime-free path: the client's driver thread drives the
    // connections (as without the `tokio` and `async-io` features).
    let by_thread = Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .drive_on_runtime(false)
        .build_async()
        .unwrap();
    let counted = futures::executor::block_on(async {
        cycles(&by_thread, 50).await;
        allocations_of(cycles(&by_thread, CYCLES)).await
    });
    assert_none("futures::executor::block_on, driver thread", counted);

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

    // 1,000 tasks on one thread, one lock + unlock each of its own
    // resource (at most 64 run at once: the others wait for a slot):
    // counted and reported, per cycle. (Spawned before counting starts;
    // each waits for the go.)
    let crowd = |spawn: &dyn Fn(AsyncClient, String, Arc<AtomicBool>)| {
        let go = Arc::new(AtomicBool::new(false));
        for t in 0..CROWD {
            spawn(c.clone(), format!("crowd-{t}"), go.clone());
        }
        go
    };
    let counted = {
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let handles = core::cell::RefCell::new(Vec::new());
            let go = crowd(&|c, name, go| {
                handles
                    .borrow_mut()
                    .push(tokio::task::spawn_local(async move {
                        while !go.load(Ordering::SeqCst) {
                            tokio::task::yield_now().await;
                        }
                        c.unlock(&c.lock(name, TTL).await.unwrap()).await.unwrap();
                    }));
            });
            allocations_of(async {
                go.store(true, Ordering::SeqCst);
                for h in handles.take() {
                    h.await.unwrap();
                }
            })
            .await
        })
    };
    report_crowd("tokio current-thread", counted);
    let ex = smol::LocalExecutor::new();
    let counted = smol::block_on(ex.run(async {
        let handles = core::cell::RefCell::new(Vec::new());
        let go = crowd(&|c, name, go| {
            handles.borrow_mut().push(ex.spawn(async move {
                while !go.load(Ordering::SeqCst) {
                    smol::future::yield_now().await;
                }
                c.unlock(&c.lock(name, TTL).await.unwrap()).await.unwrap();
            }));
        });
        allocations_of(async {
            go.store(true, Ordering::SeqCst);
            for h in handles.take() {
                h.await;
            }
        })
        .await
    }));
    report_crowd("smol LocalExecutor", counted);
}

/// Tasks in the crowd of the last measurement.
const CROWD: usize = 1_000;

/// Prints what a crowd of `CROWD` tasks allocated, per cycle.
fn report_crowd(executor: &str, (allocs, traces): (usize, Vec<String>)) {
    eprintln!(
        "{CROWD} tasks on one thread ({executor}): {allocs} allocations in {CROWD} lock+unlock \
         cycles, {:.2} per cycle",
        allocs as f64 / CROWD as f64
    );
    for t in &traces {
        eprintln!("{t}");
    }
}
