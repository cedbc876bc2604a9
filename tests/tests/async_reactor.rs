//! The async API leading on the runtime's own reactor (redlock-std's
//! `tokio` and `async-io` features): a task that leads and is then no
//! longer polled (its future kept, not awaited) must not hold up anyone
//! else's call, and a reactor registered on one tokio runtime must not
//! serve tasks of another. Each test holds the runtime-free build to the
//! same bar (there the driver thread leads).
//!
//! Every wait is bounded: a test that would hang fails instead.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

extern crate alloc;

use core::time::Duration;
use std::time::Instant;

use redlock_std::{Builder, Client, Error};
use redlock_tests::RedisServer;
use redlock_tests::proxy::{Fault, FaultProxy};

const TTL: Duration = Duration::from_secs(30);

/// How long any one call below may take before the test fails: many times
/// what it needs on a loaded machine, far less than its request timeout
/// plus the time a stalled leader would cost.
const BOUND: Duration = Duration::from_secs(3);

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

fn builder(servers: &[RedisServer]) -> Builder {
    Client::builder()
        .servers(servers.iter().map(|s| s.addr().to_string()))
        .request_timeout(Duration::from_millis(250))
        .retry(3, Duration::from_millis(20))
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn warm_up(client: &Client) {
    let l = client.lock("warm-up", TTL).unwrap();
    client.unlock(&l).unwrap();
}

/// On a thread of its own, task U starts a `lock_until` of `resource`
/// (held by someone else, so it keeps retrying for `until`), polls it once
/// (it then leads, on the reactor), and keeps the future without polling
/// it again until told to stop.
fn park_a_leader(
    client: &Client,
    resource: &'static str,
    until: Duration,
) -> (
    std::thread::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let ac = client.to_async().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (led_tx, led_rx) = std::sync::mpsc::channel();
    let u = std::thread::spawn(move || {
        current_thread().block_on(async move {
            let mut f = Box::pin(ac.lock_until(resource, TTL, Instant::now() + until));
            assert!(futures::poll!(&mut f).is_pending());
            led_tx.send(()).unwrap();
            // Woken (its call's replies, the driver), it polls only `rx`.
            let _ = rx.await;
            drop(f);
        });
    });
    led_rx.recv_timeout(BOUND).unwrap();
    (u, tx)
}

/// A task leads and is not polled; a blocking call relieves it, and when
/// that call ends the role is handed back to a task that is not polled.
/// Another task's `lock_until`, in line meanwhile, still gets the lock once
/// it is free (the driver leads in place of the task that does not turn).
#[test]
fn a_lead_handed_to_a_task_that_is_not_polled_does_not_stall_the_others() {
    let servers = servers(3);
    let client = builder(&servers).build().unwrap();
    warm_up(&client);
    let held = client.lock("res", TTL).unwrap();
    // U waits for a resource of its own, held throughout (so that it never
    // takes `res` from the others).
    let _u_held = client.lock("u-res", TTL).unwrap();
    let (u, stop_u) = park_a_leader(&client, "u-res", Duration::from_secs(20));
    let ac = client.to_async().unwrap();
    let rt = current_thread();
    let v = rt.block_on(async {
        let mut v = Box::pin(ac.lock_until("res", TTL, Instant::now() + Duration::from_secs(2)));
        // Queued while U leads.
        assert!(futures::poll!(&mut v).is_pending());
        // A blocking caller relieves U and hands the role on when done.
        let b = std::thread::spawn({
            let client = client.clone();
            move || client.lock_until("res", TTL, Instant::now() + Duration::from_millis(300))
        });
        assert!(matches!(b.join().unwrap(), Err(Error::Conflict(_))));
        client.unlock(&held).unwrap();
        tokio::time::timeout(BOUND, v).await
    });
    let _ = stop_u.send(());
    u.join().unwrap();
    let lock = v.expect("the waiting lock_until never ended").unwrap();
    client.unlock(&lock).unwrap();
}

/// A task leads and is not polled: a `try_lock` of a free resource by
/// another task (its requests queued for the leader's turn) still succeeds
/// within its 100 ms request timeout.
#[test]
fn a_leader_that_is_not_polled_does_not_fail_a_free_try_lock() {
    let servers = servers(3);
    let client = builder(&servers)
        .request_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    warm_up(&client);
    let _held = client.lock("u-res", TTL).unwrap();
    let (u, stop_u) = park_a_leader(&client, "u-res", Duration::from_secs(20));
    let ac = client.to_async().unwrap();
    let v = current_thread()
        .block_on(async { tokio::time::timeout(BOUND, ac.try_lock("free", TTL)).await });
    let _ = stop_u.send(());
    u.join().unwrap();
    let lock = v.expect("try_lock hung").unwrap();
    client.unlock(&lock).unwrap();
}

/// A client used on a current-thread runtime that then stops being driven
/// (its `block_on` returned; the runtime is kept), and then on another:
/// the second runtime's calls are served by its own reactor, not left
/// waiting for the first one's (each would wait out its 5 s request
/// timeout, past the bound).
#[test]
fn a_reactor_registered_on_an_idle_runtime_does_not_serve_another() {
    let servers = servers(3);
    let proxies: Vec<FaultProxy> = servers
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    let client = Client::builder()
        .servers(proxies.iter().map(|p| p.addr().to_string()))
        .request_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ac = client.to_async().unwrap();
    let r1 = current_thread();
    r1.block_on(async {
        let l = ac.try_lock("r1", TTL).await.unwrap();
        ac.unlock(&l).await.unwrap();
    });
    // Replies a little late: each comes after the call registered.
    for p in &proxies {
        p.set(Fault::Delay(Duration::from_millis(5)));
    }
    let r2 = current_thread();
    r2.block_on(async {
        for i in 0..4 {
            let l = tokio::time::timeout(BOUND, ac.try_lock(format!("r2-{i}"), TTL))
                .await
                .expect("a call on the second runtime waited for the first one's reactor")
                .unwrap();
            tokio::time::timeout(BOUND, ac.unlock(&l))
                .await
                .expect("an unlock on the second runtime waited for the first one's reactor")
                .unwrap();
        }
    });
    drop(r1);
}

/// A task leads and is then kept without being polled, right after its
/// turn wrote another task's requests: that task's replies, waiting in the
/// poll, are read all the same (the driver leads in its place), long
/// before its 4 s request timeout.
#[test]
fn replies_for_others_are_not_left_unread_by_a_leader_that_is_not_polled() {
    let servers = servers(3);
    let proxies: Vec<FaultProxy> = servers
        .iter()
        .map(|s| FaultProxy::start(s.addr()).unwrap())
        .collect();
    let client = Client::builder()
        .servers(proxies.iter().map(|p| p.addr().to_string()))
        .request_timeout(Duration::from_secs(4))
        .build()
        .unwrap();
    warm_up(&client);
    let _held = client.lock("u-res", TTL).unwrap();
    // Replies come after the leader's second turn below.
    for p in &proxies {
        p.set(Fault::Delay(Duration::from_millis(20)));
    }
    let ac = client.to_async().unwrap();
    let r = current_thread().block_on(async {
        let mut f = Box::pin(ac.lock_until("u-res", TTL, Instant::now() + Duration::from_secs(20)));
        // `f` leads.
        assert!(futures::poll!(&mut f).is_pending());
        let mut v = Box::pin(ac.try_lock("free", TTL));
        // Queued for `f`'s turn.
        assert!(futures::poll!(&mut v).is_pending());
        // `f`'s turn writes `v`'s requests; then `f` is kept, not polled.
        assert!(futures::poll!(&mut f).is_pending());
        let r = tokio::time::timeout(Duration::from_secs(1), v).await;
        drop(f);
        r
    });
    let lock = r.expect("the replies were left unread").unwrap();
    client.unlock(&lock).unwrap();
}

/// Calls whose operations are done but whose futures are kept, neither
/// polled nor dropped (their outcomes are never taken), as a
/// `buffer_unordered` whose consumer is busy keeps them: the leader lets
/// the owners of done operations run before its next turn, but it holds
/// once for such a call, and not past a sixteenth of the time of the
/// requests queued meanwhile. Five rounds, each keeping a call of its own
/// and then making four try_lock + unlock cycles: every call succeeds and
/// none hangs. (The calls behind a hold would not fail even if it lasted
/// until the driver's watch: a request's time counts from when it is
/// written. How long they wait is measured, not asserted, in the note of
/// the change.)
#[test]
fn done_calls_kept_unpolled_do_not_hold_up_the_others() {
    let servers = servers(3);
    let client = builder(&servers).build().unwrap();
    let ttl = TTL;
    warm_up(&client);
    let ac = client.to_async().unwrap();
    let local = tokio::task::LocalSet::new();
    let failed = local.block_on(&current_thread(), async {
        let mut failed = Vec::new();
        let mut kept = Vec::new();
        for round in 0..5 {
            // X's call ends (the driver reads its replies: X, woken, polls
            // only `stop`).
            let (stop_tx, stop) = tokio::sync::oneshot::channel::<()>();
            let x = tokio::task::spawn_local({
                let ac = ac.clone();
                async move {
                    // (A first poll may find the call done already, the
                    // thread having been preempted: again then.)
                    for k in 0..100 {
                        let mut f = Box::pin(ac.try_lock(format!("x-{round}-{k}"), TTL));
                        if futures::poll!(&mut f).is_pending() {
                            let _ = stop.await;
                            drop(f);
                            return;
                        }
                    }
                    panic!("every call was done at its first poll");
                }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            for i in 0..4 {
                let call = tokio::time::timeout(BOUND, ac.try_lock(format!("z-{round}-{i}"), ttl));
                match call.await.expect("a call hung") {
                    Ok(lock) => {
                        let _ = tokio::time::timeout(BOUND, ac.unlock(&lock))
                            .await
                            .expect("an unlock hung");
                    }
                    Err(e) => failed.push(format!("round {round}, call {i}: {e}")),
                }
            }
            kept.push((stop_tx, x));
        }
        for (stop_tx, x) in kept {
            let _ = stop_tx.send(());
            x.await.unwrap();
        }
        failed
    });
    assert!(
        failed.len() <= 2,
        "{} of 20 calls failed: {failed:?}",
        failed.len()
    );
}

/// A tokio runtime without IO enabled (`enable_time()` only), current-thread
/// and multi-thread: the tasks on it cannot lead on its reactor, and the
/// driver thread serves them (tokio panics when asked to register; the
/// client asks once, and the call goes on).
#[test]
fn a_tokio_runtime_without_io_is_served_by_the_driver_thread() {
    let servers = servers(3);
    let client = builder(&servers).build().unwrap();
    let ac = client.to_async().unwrap();
    for multi in [false, true] {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
                .unwrap()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let ac = ac.clone();
        let done = rt.block_on(async move {
            tokio::spawn(async move {
                for i in 0..3 {
                    let lock = ac.try_lock(format!("no-io-{multi}-{i}"), TTL).await?;
                    ac.unlock(&lock).await?;
                }
                Ok::<(), Error>(())
            })
            .await
        });
        match done {
            Ok(calls) => calls.unwrap(),
            Err(e) => panic!("multi-thread {multi}: the task failed: {e}"),
        }
    }
    // The client serves blocking callers as before.
    let lock = client.try_lock("after", TTL).unwrap();
    client.unlock(&lock).unwrap();
}

/// A runtime whose reactor does not turn: its one thread never runs out of
/// tasks (one wakes itself at every poll) and never reaches its event
/// interval, so tokio never reports a reply. Only the deadlines, kept by
/// the driver thread, wake the task that leads. The replies arrived long
/// before their 5 ms deadline, and the leader reads them when a deadline
/// wakes it, before it acts on the deadline: calls succeed. (Acting on the
/// deadline first, a call fails on it, its replies unread, unless the
/// driver's watch, which takes over a leader that does not read for 10 ms,
/// comes first: no call of 10 succeeded so in each of 9 runs. Reading
/// first, 8 to 10 of 10 did in each of 12 runs beside three busy loops.
/// So most calls must succeed, not just one.)
#[test]
fn replies_that_arrived_in_time_are_read_before_a_deadline_is_acted_on() {
    use alloc::sync::Arc;
    use core::sync::atomic::{AtomicBool, Ordering};

    let servers = servers(3);
    let client = builder(&servers)
        .request_timeout(Duration::from_millis(5))
        .build()
        .unwrap();
    // Connected and greeted (a loaded machine may miss 5 ms: again then).
    let warm = (0..100).find_map(|_| client.try_lock("warm-up", TTL).ok());
    client.unlock(&warm.expect("no call succeeded")).unwrap();
    let ac = client.to_async().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(u32::MAX)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let gave_up = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let succeeded = rt.block_on(async {
        // Never out of work (bounded: after BOUND it ends, and the runtime
        // turns its reactor again).
        let spinner = tokio::spawn({
            let (stop, gave_up) = (stop.clone(), gave_up.clone());
            core::future::poll_fn(move |cx| {
                if stop.load(Ordering::Relaxed) {
                    return core::task::Poll::Ready(());
                }
                if started.elapsed() > BOUND {
                    gave_up.store(true, Ordering::Relaxed);
                    return core::task::Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                core::task::Poll::Pending
            })
        });
        // (It stops the spinner itself: this future, in `block_on`, is
        // polled again only once the thread runs out of tasks.)
        let calls = tokio::spawn(async move {
            let mut succeeded = 0;
            for i in 0..10 {
                if let Ok(lock) = ac.try_lock(format!("deadline-{i}"), TTL).await {
                    succeeded += 1;
                    let _ = ac.unlock(&lock).await;
                }
            }
            stop.store(true, Ordering::Relaxed);
            succeeded
        });
        spinner.await.unwrap();
        calls.await.unwrap()
    });
    assert!(
        !gave_up.load(Ordering::Relaxed),
        "the runtime turned its reactor before the calls ended"
    );
    assert!(
        succeeded > 5,
        "{} of 10 calls failed on their deadlines",
        10 - succeeded
    );
}
