//! Cancellation, guards, `with_lock` and the driver's watchdog of the async
//! API (`AsyncClient`), against real servers.
//!
//! What is pinned: a lock future dropped at any point leaves no key behind
//! beyond the A5 window (its attempt's release, run in the background) and
//! never goes on to acquire; a dropped `AsyncLockGuard` or `AsyncAutoLock`
//! is released in the background without blocking the dropping thread;
//! `with_lock` releases on every exit path and tells its body of a loss
//! before the validity ends (also when a majority of servers dies); watched
//! locks are kept alive by the driver thread, with no thread per lock; a
//! release (`unlock`, `AsyncLockGuard::release`, `AsyncAutoLock::release`)
//! dropped while it waits for a free slot still releases.
//!
//! The cancellation test is seeded: set `REDLOCK_ASYNC_CANCEL_SEED` to
//! replay a run (the seed is in every failure message), and
//! `REDLOCK_ASYNC_CANCEL_ITERATIONS` to run more or fewer iterations.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

extern crate alloc;

use alloc::sync::Arc;
use core::future::Future;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use futures::FutureExt;
use redlock_std::{AsyncAutoLock, AsyncClient, AsyncLockGuard, Client, Error, Lock, Lost};
use redlock_tests::proxy::{Fault, FaultProxy};
use redlock_tests::{RedisServer, Value};

/// The tests that count the process's threads or run on a short ttl run
/// alone; the others share.
static PROCESS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    PROCESS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    PROCESS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ttl of what the tests drop: far beyond every bounded wait, so that a
/// key that disappears was released, not expired.
const LONG_TTL: Duration = Duration::from_secs(60);

/// How long a background release may take to show on every server (many
/// request timeouts, and the proxies' delays).
const RELEASE_BOUND: Duration = Duration::from_secs(8);

/// A request timeout that a loaded machine never runs into.
const SLACK_TIMEOUT: Duration = Duration::from_millis(250);

/// The request timeout with a ttl of 500 ms (a tenth of it).
const SHORT_TTL_TIMEOUT: Duration = Duration::from_millis(50);

/// The client's request timeout in the cancellation tests.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);

/// Real servers, the first `proxied` of them behind fault proxies.
struct Cluster {
    servers: Vec<RedisServer>,
    proxies: Vec<FaultProxy>,
}

impl Cluster {
    fn start(n: usize, proxied: usize) -> Cluster {
        let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start().unwrap()).collect();
        let proxies = servers[..proxied]
            .iter()
            .map(|s| FaultProxy::start(s.addr()).unwrap())
            .collect();
        Cluster { servers, proxies }
    }

    /// The addresses a client under test uses (through the proxies).
    fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .enumerate()
            .map(|(i, s)| match self.proxies.get(i) {
                Some(p) => p.addr().to_string(),
                None => s.addr().to_string(),
            })
            .collect()
    }

    /// The servers' own addresses (for a contender that is not slowed).
    fn direct_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.addr().to_string()).collect()
    }

    fn set_faults(&self, fault: Fault) {
        for p in &self.proxies {
            p.set(fault);
        }
    }

    /// What each server holds under `key`.
    fn values(&self, key: &str) -> Vec<Value> {
        values(&self.servers, key)
    }
}

fn values(servers: &[RedisServer], key: &str) -> Vec<Value> {
    servers
        .iter()
        .map(|s| {
            s.conn()
                .unwrap()
                .request(&[b"GET", key.as_bytes()])
                .unwrap()
        })
        .collect()
}

/// How many servers hold `token` under `key`.
fn holding(servers: &[RedisServer], key: &str, token: &str) -> usize {
    values(servers, key)
        .iter()
        .filter(|v| **v == Value::Bulk(token.as_bytes().to_vec()))
        .count()
}

/// Opens the client's connections (their handshakes done), so that a
/// request is written at once, not held behind a handshake.
fn warm_up(c: &AsyncClient) {
    futures::executor::block_on(async {
        let lock = c.lock("warm-up", LONG_TTL).await.unwrap();
        c.unlock(&lock).await.unwrap();
    });
}

/// How many servers hold `key` (whoever holds it).
fn held_on(servers: &[RedisServer], key: &str) -> usize {
    values(servers, key)
        .iter()
        .filter(|v| matches!(v, Value::Bulk(_)))
        .count()
}

/// Polls `done` every 10 ms until it holds or `bound` passes; whether it held.
fn eventually(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + bound;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until no server holds `key`; what they hold if some still do.
fn wait_gone(servers: &[RedisServer], key: &str) -> Result<(), Vec<Value>> {
    if eventually(RELEASE_BOUND, || {
        values(servers, key).iter().all(|v| *v == Value::Nil)
    }) {
        Ok(())
    } else {
        Err(values(servers, key))
    }
}

fn delete_everywhere(servers: &[RedisServer], key: &str) {
    for s in servers {
        s.conn()
            .unwrap()
            .request(&[b"DEL", key.as_bytes()])
            .unwrap();
    }
}

fn client(urls: &[String], fencing: bool) -> AsyncClient {
    Client::builder()
        .servers(urls)
        .request_timeout(REQUEST_TIMEOUT)
        .retry(3, Duration::from_millis(100))
        .fencing(fencing)
        .build_async()
        .unwrap()
}

/// The drift allowance of the default config for `ttl` (`ttl/100 + 2 ms`),
/// plus 1 ms for the core clock's whole microseconds.
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(3)
}

/// splitmix64: a seeded, replayable sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn micros(&mut self, max: Duration) -> Duration {
        Duration::from_micros(self.below(max.as_micros() as u64 + 1))
    }
}

fn seed() -> u64 {
    std::env::var("REDLOCK_ASYNC_CANCEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// The five lock futures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lock,
    TryLock,
    LockUntil,
    Guard,
    Auto,
}

/// What a lock future that completed left the test holding.
#[derive(Debug)]
enum Held {
    Lock(Lock),
    Guard(AsyncLockGuard),
    Auto(AsyncAutoLock),
}

impl Held {
    fn token(&self) -> String {
        match self {
            Held::Lock(l) => l.token().to_string(),
            Held::Guard(g) => g.token().to_string(),
            Held::Auto(a) => a.lock().token().to_string(),
        }
    }

    /// Releases it; the caller checks the servers (a release whose answers
    /// come after the request timeout still deletes the key).
    async fn release(self, client: &AsyncClient) {
        match self {
            Held::Lock(l) => drop(client.unlock(&l).await),
            Held::Guard(g) => drop(g.release().await),
            Held::Auto(a) => drop(a.release().await),
        }
    }
}

type LockFuture<'a> = Pin<Box<dyn Future<Output = Result<Held, Error>> + Send + 'a>>;

fn start<'a>(client: &'a AsyncClient, op: Op, res: &'a str) -> LockFuture<'a> {
    match op {
        Op::Lock => Box::pin(async move { client.lock(res, LONG_TTL).await.map(Held::Lock) }),
        Op::TryLock => {
            Box::pin(async move { client.try_lock(res, LONG_TTL).await.map(Held::Lock) })
        }
        Op::LockUntil => Box::pin(async move {
            let deadline = Instant::now() + LONG_TTL;
            client
                .lock_until(res, LONG_TTL, deadline)
                .await
                .map(Held::Lock)
        }),
        Op::Guard => {
            Box::pin(async move { client.lock_guard(res, LONG_TTL).await.map(Held::Guard) })
        }
        Op::Auto => {
            Box::pin(async move { client.lock_auto_extend(res, LONG_TTL).await.map(Held::Auto) })
        }
    }
}

/// How a lock future is dropped.
#[derive(Debug, Clone, Copy)]
enum DropAt {
    /// Polled by hand `polls` times (0: never), `gap` apart, on the test
    /// thread (no runtime), then dropped.
    Manual { polls: u32, gap: Duration },
    /// Raced with `tokio::time::sleep(after)` in a task, dropped by the
    /// `select!` that loses.
    Select { after: Duration },
}

/// Runs `fut` as `how` says; its output if it completed first.
fn run_and_drop(
    rt: &tokio::runtime::Runtime,
    mut fut: LockFuture<'_>,
    how: DropAt,
) -> Option<Result<Held, Error>> {
    match how {
        DropAt::Manual { polls, gap } => {
            let waker = futures::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            for i in 0..polls {
                if i > 0 {
                    std::thread::sleep(gap);
                }
                if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    return Some(out);
                }
            }
            drop(fut);
            None
        }
        DropAt::Select { after } => rt.block_on(async move {
            tokio::select! {
                biased;
                out = &mut fut => Some(out),
                () = tokio::time::sleep(after) => {
                    drop(fut);
                    None
                }
            }
        }),
    }
}

/// One iteration's plan.
#[derive(Debug, Clone, Copy)]
struct Plan {
    op: Op,
    fenced: bool,
    /// The proxies' delay (each way, per chunk) on two of the three links.
    delay: Duration,
    /// Another client holds the key when the future starts.
    contended: bool,
    /// ... and releases it this long after the future starts (while it
    /// runs), or only after the drop (`None`).
    holder_leaves_after: Option<Duration>,
    how: DropAt,
}

fn plan(rng: &mut Rng) -> Plan {
    let op = rng.pick(&[Op::Lock, Op::TryLock, Op::LockUntil, Op::Guard, Op::Auto]);
    let fenced = rng.below(4) == 0;
    let delay = Duration::from_millis(rng.pick(&[0, 0, 0, 2, 10, 25, 60, 150]));
    let contended = rng.below(3) == 0;
    // The drop lands in the first round (free key) or anywhere in the
    // retries and their backoff (contended: 100 ms timeout + 0-100 ms jitter).
    let span = if contended {
        Duration::from_millis(500)
    } else {
        delay * 3 + Duration::from_millis(3)
    };
    let holder_leaves_after = (contended && rng.below(2) == 0).then(|| rng.micros(span));
    let how = if rng.below(2) == 0 {
        let polls = rng.below(6) as u32;
        let gap = rng.micros(span / polls.max(1));
        DropAt::Manual { polls, gap }
    } else {
        DropAt::Select {
            after: rng.micros(span),
        }
    };
    Plan {
        op,
        fenced,
        delay,
        contended,
        holder_leaves_after,
        how,
    }
}

#[test]
fn lock_futures_dropped_at_random_points_leave_no_key_and_never_acquire_later() {
    let _serial = shared();
    let seed = seed();
    eprintln!("async_cancel seed: {seed} (REDLOCK_ASYNC_CANCEL_SEED={seed} replays it)");
    let iterations: usize = std::env::var("REDLOCK_ASYNC_CANCEL_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let mut rng = Rng(seed);
    let cluster = Cluster::start(3, 2);
    let plain = client(&cluster.urls(), false);
    let fenced = client(&cluster.urls(), true);
    // The contender: its own connections, straight to the servers.
    let other = Client::builder()
        .servers(cluster.direct_urls())
        .request_timeout(Duration::from_millis(500))
        .retry(0, Duration::ZERO)
        .build()
        .unwrap();
    warm_up(&plain);
    warm_up(&fenced);
    other
        .unlock(&other.lock("warm-up", LONG_TTL).unwrap())
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let (mut completed, mut unpolled, mut dropped, mut seen_then_released) = (0, 0, 0, 0);
    let mut resources = Vec::new();
    for i in 0..iterations {
        let p = plan(&mut rng);
        let res = format!("cancel-{i}");
        let ctx = format!("seed {seed}, iteration {i}, {p:?}");
        let c = if p.fenced { &fenced } else { &plain };
        cluster.set_faults(if p.delay.is_zero() {
            Fault::Pass
        } else {
            Fault::Delay(p.delay)
        });
        let holder = p.contended.then(|| {
            let lock = other.lock(&res, LONG_TTL).unwrap();
            // On every server before the future starts.
            assert!(
                eventually(RELEASE_BOUND, || holding(
                    &cluster.servers,
                    &res,
                    lock.token()
                ) == 3),
                "{ctx}: the holder's key is not on every server"
            );
            lock
        });
        let leaving = match (&holder, p.holder_leaves_after) {
            (Some(lock), Some(after)) => {
                let (other, lock) = (other.clone(), lock.clone());
                Some(std::thread::spawn(move || {
                    std::thread::sleep(after);
                    other.unlock(&lock).unwrap();
                }))
            }
            _ => None,
        };
        let out = run_and_drop(&rt, start(c, p.op, &res), p.how);
        if let Some(t) = leaving {
            t.join().unwrap();
        }
        // Right after the drop: the key of an attempt that had won votes.
        let held_after_drop = held_on(&cluster.servers, &res);
        cluster.set_faults(Fault::Pass);
        if !p.delay.is_zero() {
            // A chunk that arrived under the delay is still held that long.
            std::thread::sleep(p.delay * 2 + Duration::from_millis(10));
        }
        match out {
            Some(Ok(held)) => {
                completed += 1;
                // Completed before the drop: the test holds it, on a majority.
                let token = held.token();
                assert!(
                    holding(&cluster.servers, &res, &token) >= 2,
                    "{ctx}: a lock that completed is not held: {:?}",
                    cluster.values(&res)
                );
                rt.block_on(held.release(c));
                if let Err(left) = wait_gone(&cluster.servers, &res) {
                    panic!("{ctx}: not released: {left:?}");
                }
            }
            out => {
                if out.is_none() {
                    match p.how {
                        DropAt::Manual { polls: 0, .. } => unpolled += 1,
                        _ => dropped += 1,
                    }
                }
                match (&holder, p.holder_leaves_after) {
                    (Some(lock), None) => {
                        // The holder still holds it: the dropped future never
                        // set it anywhere (NX), and the holder's key is intact.
                        assert!(
                            eventually(RELEASE_BOUND, || holding(
                                &cluster.servers,
                                &res,
                                lock.token()
                            ) == 3),
                            "{ctx}: the holder's key was touched: {:?}",
                            cluster.values(&res)
                        );
                        other.unlock(lock).unwrap();
                    }
                    _ => {
                        if out.is_none() && held_after_drop > 0 {
                            // Its attempt had won votes: the release is on its way.
                            seen_then_released += 1;
                        }
                        // A5: whatever the dropped attempt won is released, in
                        // the background, well before the ttl.
                        if let Err(left) = wait_gone(&cluster.servers, &res) {
                            panic!("{ctx}: a dropped future left its key: {left:?}");
                        }
                    }
                }
            }
        }
        resources.push((res, ctx));
    }
    eprintln!(
        "{completed} completed before their drop, {dropped} dropped mid-flight \
         ({seen_then_released} of them seen holding a key that the background release \
         then removed), {unpolled} dropped unpolled"
    );
    // Longer than any retry backoff (timeout + jitter) and any late round: a
    // dropped future that kept retrying would have acquired by now.
    std::thread::sleep(Duration::from_millis(1500));
    for (res, ctx) in &resources {
        assert_eq!(
            cluster.values(res),
            vec![Value::Nil; 3],
            "{ctx}: a key appeared after the drop"
        );
        let lock = other
            .try_lock(res, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{ctx}: another client cannot take it at once: {e}"));
        other.unlock(&lock).unwrap();
    }
    // Nothing else either (the fence counters of F1 stay, by design).
    for s in &cluster.servers {
        let keys = s.conn().unwrap().request(&[b"KEYS", b"cancel-*"]).unwrap();
        let Value::Aggregate(_, keys) = keys else {
            panic!("KEYS answered {keys:?}");
        };
        let locks: Vec<&Value> = keys
            .iter()
            .filter(|k| !matches!(k, Value::Bulk(k) if k.ends_with(b":fence")))
            .collect();
        assert!(locks.is_empty(), "seed {seed}: keys left: {locks:?}");
    }
}

#[test]
fn a_lock_until_dropped_while_contending_does_not_acquire_after_the_holder_leaves() {
    let _serial = shared();
    let cluster = Cluster::start(3, 0);
    let c = client(&cluster.urls(), false);
    let other = Client::builder()
        .servers(cluster.direct_urls())
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    for wait_ms in [0, 1, 30, 150, 400] {
        let holder = other.lock("contended", LONG_TTL).unwrap();
        let deadline = Instant::now() + LONG_TTL;
        let out = rt.block_on(async {
            let fut = c.lock_until("contended", LONG_TTL, deadline);
            tokio::select! {
                out = fut => Some(out),
                () = tokio::time::sleep(Duration::from_millis(wait_ms)) => None,
            }
        });
        assert!(
            matches!(out, None | Some(Err(Error::Conflict(_)))),
            "{out:?}"
        );
        other.unlock(&holder).unwrap();
        // Several retry backoffs (100 ms timeout + up to 100 ms jitter).
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            cluster.values("contended"),
            vec![Value::Nil; 3],
            "dropped after {wait_ms} ms, it acquired once the holder left"
        );
        let again = other
            .try_lock("contended", Duration::from_secs(5))
            .expect("another client takes it at once");
        other.unlock(&again).unwrap();
    }
}

/// What a test drops: a guard or a watched lock.
enum Releasable {
    Guard(Box<AsyncLockGuard>),
    Auto(AsyncAutoLock),
}

/// Drops what `take` acquires while the proxies hold every request (so its
/// release cannot complete until the test lets them pass, and the request
/// timeout is a minute): the drop must return all the same, and the key
/// then disappear from every server.
fn dropping_releases_in_the_background(
    take: impl FnOnce(&AsyncClient) -> Result<Releasable, Error>,
) {
    let _serial = shared();
    let cluster = Cluster::start(3, 3);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(Duration::from_secs(60))
        .build_async()
        .unwrap();
    warm_up(&c);
    let held = take(&c).unwrap();
    let token = match &held {
        Releasable::Guard(g) => g.token().to_string(),
        Releasable::Auto(a) => a.lock().token().to_string(),
    };
    // Acquired on a majority; the third SET lands a moment later.
    assert!(eventually(RELEASE_BOUND, || holding(
        &cluster.servers,
        "res",
        &token
    ) == 3));
    cluster.set_faults(Fault::Hold);
    // Dropped inside a current-thread runtime, while a counter task runs.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let dropper = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let count = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let counter = {
                let (count, stop) = (count.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        count.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                })
            };
            tokio::task::yield_now().await;
            drop(held);
            // The runtime's only thread goes on: the counter advances.
            let seen = count.load(Ordering::SeqCst);
            while count.load(Ordering::SeqCst) < seen + 100 {
                tokio::task::yield_now().await;
            }
            stop.store(true, Ordering::SeqCst);
            counter.await.unwrap();
            done_tx.send(()).unwrap();
        });
    });
    // Its release cannot have completed: the proxies hold it. A drop that
    // waited for it would not return before the test lets it through.
    done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the drop returned while its release could not complete");
    dropper.join().unwrap();
    assert_eq!(
        holding(&cluster.servers, "res", &token),
        3,
        "the release went through the held proxies?"
    );
    // The driver wrote the release: the proxies hold it.
    assert!(
        eventually(RELEASE_BOUND, || cluster
            .proxies
            .iter()
            .all(|p| p.held_upstream() > 0)),
        "the release was not sent"
    );
    cluster.set_faults(Fault::Pass);
    if let Err(left) = wait_gone(&cluster.servers, "res") {
        panic!("not released in the background: {left:?}");
    }
}

#[test]
fn dropping_an_async_lock_guard_releases_in_the_background_without_blocking() {
    dropping_releases_in_the_background(|c| {
        futures::executor::block_on(c.lock_guard("res", LONG_TTL))
            .map(|g| Releasable::Guard(Box::new(g)))
    });
}

#[test]
fn dropping_an_async_auto_lock_releases_in_the_background_without_blocking() {
    dropping_releases_in_the_background(|c| {
        futures::executor::block_on(c.lock_auto_extend("res", LONG_TTL)).map(Releasable::Auto)
    });
}

/// Three servers, a client with `request_timeout`, and a runtime.
fn with_lock_cluster(request_timeout: Duration) -> (Cluster, AsyncClient, tokio::runtime::Runtime) {
    let cluster = Cluster::start(3, 0);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(request_timeout)
        .build_async()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    (cluster, c, rt)
}

#[test]
fn with_lock_returns_the_body_output_and_releases() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let out = rt
        .block_on(c.with_lock("res", LONG_TTL, |lost| async move {
            drop(lost);
            // Held by a majority while the body runs.
            (held_on(servers, "res"), 42)
        }))
        .unwrap();
    assert!(out.0 >= 2, "held on {} servers", out.0);
    assert_eq!(out.1, 42);
    // The release is awaited before with_lock returns.
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn with_lock_releases_when_the_body_returns_an_error() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let out: Result<u32, &str> = rt
        .block_on(c.with_lock("res", LONG_TTL, |_lost| async { Err("the work failed") }))
        .unwrap();
    assert_eq!(out, Err("the work failed"));
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn with_lock_releases_in_the_background_when_the_body_panics() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let held = AtomicUsize::new(0);
    let caught = rt.block_on(
        AssertUnwindSafe(c.with_lock("res", LONG_TTL, |_lost| async {
            held.store(held_on(servers, "res"), Ordering::SeqCst);
            if servers.len() == 3 {
                panic!("the body panics");
            }
        }))
        .catch_unwind(),
    );
    let payload = caught.expect_err("the panic goes through with_lock");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the body panics"));
    assert!(held.load(Ordering::SeqCst) >= 2, "held while the body ran");
    if let Err(left) = wait_gone(servers, "res") {
        panic!("not released after the panic: {left:?}");
    }
}

#[test]
fn with_lock_dropped_mid_body_releases_in_the_background() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    rt.block_on(async {
        let mut fut = Box::pin(c.with_lock("res", LONG_TTL, |_lost| async move {
            started_tx.send(()).unwrap();
            futures::future::pending::<()>().await;
        }));
        tokio::select! {
            out = &mut fut => panic!("the body never ends: {out:?}"),
            started = started_rx => started.unwrap(),
        }
        assert!(held_on(&cluster.servers, "res") >= 2);
        drop(fut);
    });
    if let Err(left) = wait_gone(&cluster.servers, "res") {
        panic!("not released after the drop: {left:?}");
    }
}

#[test]
fn with_lock_tells_its_body_of_a_loss_before_the_validity_ends() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let servers = &cluster.servers;
    let ttl = Duration::from_secs(2);
    // The lock's validity ends no sooner than this (its attempt starts
    // later, and extensions only push it further).
    let before = Instant::now();
    let valid_at_least_until = before + ttl - drift(ttl);
    let (why, fired_at) = rt
        .block_on(c.with_lock("res", ttl, |lost| async move {
            // Deleted behind its back.
            delete_everywhere(servers, "res");
            let why = tokio::time::timeout(Duration::from_secs(10), lost)
                .await
                .expect("the loss is told to the body");
            (why, Instant::now())
        }))
        .unwrap();
    assert_eq!(why, Lost::NotHeld);
    assert!(
        fired_at < valid_at_least_until,
        "told {:?} after the validity ended",
        fired_at - valid_at_least_until
    );
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

#[test]
fn when_lost_fires_with_not_held_before_the_validity_ends() {
    let _serial = shared();
    let (cluster, c, rt) = with_lock_cluster(SLACK_TIMEOUT);
    let ttl = Duration::from_millis(1500);
    rt.block_on(async {
        let auto = c.lock_auto_extend("res", ttl).await.unwrap();
        let valid_until = auto.lock().valid_until();
        delete_everywhere(&cluster.servers, "res");
        let why = tokio::time::timeout(Duration::from_secs(10), auto.when_lost())
            .await
            .expect("the loss is reported");
        let fired_at = Instant::now();
        assert_eq!(why, Lost::NotHeld);
        assert!(auto.is_lost());
        assert_eq!(auto.lost(), Some(Lost::NotHeld));
        assert!(
            fired_at < valid_until,
            "reported {:?} after the validity ended",
            fired_at - valid_until
        );
        // A when_lost made after the loss is ready at once.
        assert_eq!(auto.when_lost().now_or_never(), Some(Lost::NotHeld));
    });
}

#[test]
fn when_lost_fires_with_unavailable_before_the_validity_ends_when_a_majority_dies() {
    let _serial = shared();
    // Extensions retried every 50 ms for the last third of a 3 s validity.
    let (mut cluster, c, rt) = with_lock_cluster(SHORT_TTL_TIMEOUT);
    let ttl = Duration::from_secs(3);
    let auto = rt.block_on(c.lock_auto_extend("res", ttl)).unwrap();
    let lost = auto.when_lost();
    cluster.servers[0].kill().unwrap();
    cluster.servers[1].kill().unwrap();
    let (why, fired_at) = rt.block_on(async {
        let why = tokio::time::timeout(Duration::from_secs(10), lost).await;
        (why, Instant::now())
    });
    let why = why.unwrap_or_else(|_| {
        panic!(
            "no loss reported 10 s after a majority died (is_lost: {}; the validity \
             ended {:?} ago)",
            auto.is_lost(),
            fired_at.saturating_duration_since(auto.lock().valid_until())
        )
    });
    assert_eq!(why, Lost::Unavailable);
    // The validity as last extended (no extension can succeed any more).
    let valid_until = auto.lock().valid_until();
    assert!(
        fired_at < valid_until,
        "reported {:?} after the validity ended",
        fired_at - valid_until
    );
    assert!(auto.is_lost());
}

#[test]
fn an_async_auto_lock_is_held_for_several_ttls() {
    // Alone: a 500 ms ttl leaves about one request timeout (50 ms) for
    // each extension, which the other tests' load must not eat.
    let _alone = exclusive();
    let (cluster, c, rt) = with_lock_cluster(SHORT_TTL_TIMEOUT);
    let ttl = Duration::from_millis(500);
    let auto = rt.block_on(c.lock_auto_extend("res", ttl)).unwrap();
    let token = auto.lock().token().to_string();
    std::thread::sleep(ttl * 3 + ttl / 2);
    let now = Instant::now();
    let lock = auto.lock();
    let on = holding(&cluster.servers, "res", &token);
    let context = format!(
        "lost: {:?}, {} extensions, valid for {:?} more, held on {on} servers: {:?}",
        auto.lost(),
        lock.extensions(),
        lock.valid_until().checked_duration_since(now),
        cluster.values("res")
    );
    assert!(!auto.is_lost(), "{context}");
    assert!(on >= 2, "{context}");
    assert!(lock.extensions() > 0, "{context}");
    assert!(matches!(
        rt.block_on(c.try_lock("res", ttl)),
        Err(Error::Conflict(_))
    ));
    let released = rt.block_on(auto.release()).unwrap();
    assert_eq!(released.deleted(), 3);
    assert_eq!(cluster.values("res"), vec![Value::Nil; 3]);
}

/// The process's thread count (`/proc/self/status`).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

#[test]
fn fifty_auto_extended_locks_cost_no_thread_each() {
    // Alone: no other test starts threads meanwhile.
    let _alone = exclusive();
    let cluster = Cluster::start(3, 0);
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(SHORT_TTL_TIMEOUT)
        .build_async()
        .unwrap();
    // Room for several extension attempts (50 ms each) before a loss, for
    // 51 locks extended in the same batches on a loaded machine.
    let ttl = Duration::from_millis(1500);
    // The driver runs and the connections are open.
    let first = futures::executor::block_on(c.lock_auto_extend("warm", ttl)).unwrap();
    let before = threads();
    let autos: Vec<AsyncAutoLock> = futures::executor::block_on(futures::future::join_all(
        (0..50).map(|i| c.lock_auto_extend(format!("many-{i}"), ttl)),
    ))
    .into_iter()
    .collect::<Result<_, _>>()
    .unwrap();
    std::thread::sleep(ttl * 2);
    let after = threads();
    assert!(
        after < before + 10,
        "{before} threads before 50 watched locks, {after} with them"
    );
    for (i, auto) in autos.iter().enumerate() {
        assert!(!auto.is_lost(), "many-{i}: {:?}", auto.lost());
        assert!(auto.lock().extensions() > 0, "many-{i}: not extended");
        let token = auto.lock().token().to_string();
        assert!(
            holding(&cluster.servers, &format!("many-{i}"), &token) >= 2,
            "many-{i}"
        );
    }
    futures::executor::block_on(async {
        // (Whatever a loaded machine makes of them: the keys expire.)
        for auto in autos {
            drop(auto.release().await);
        }
        drop(first.release().await);
    });
}

/// The release a test starts and drops while every slot of the transport
/// is taken.
#[derive(Debug, Clone, Copy)]
enum Release {
    Unlock,
    Guard,
    Auto,
}

#[test]
fn a_release_dropped_while_waiting_for_a_free_slot_still_releases() {
    let _serial = shared();
    let cluster = Cluster::start(3, 3);
    // Requests held by the proxies stay in flight (no timeout meanwhile).
    let c = Client::builder()
        .servers(cluster.urls())
        .request_timeout(Duration::from_secs(60))
        .build_async()
        .unwrap();
    warm_up(&c);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut left = Vec::new();
    // 63: the release gets the last slot and is dropped mid-flight (the
    // control); 64: it waits for a slot when dropped.
    for (fillers, kind) in [63, 64]
        .into_iter()
        .flat_map(|n| [Release::Unlock, Release::Guard, Release::Auto].map(|k| (n, k)))
    {
        let res = format!("queued-{fillers}-{kind:?}");
        cluster.set_faults(Fault::Pass);
        let (lock, guard, auto) = futures::executor::block_on(async {
            match kind {
                Release::Unlock => (Some(c.lock(&res, LONG_TTL).await.unwrap()), None, None),
                Release::Guard => (
                    None,
                    Some(c.lock_guard(&res, LONG_TTL).await.unwrap()),
                    None,
                ),
                Release::Auto => (
                    None,
                    None,
                    Some(c.lock_auto_extend(&res, LONG_TTL).await.unwrap()),
                ),
            }
        });
        assert!(eventually(RELEASE_BOUND, || cluster
            .values(&res)
            .iter()
            .all(|v| *v != Value::Nil)));
        // Slots (64 in all, those kept for releases included) taken by
        // releases whose answers the proxies hold.
        cluster.set_faults(Fault::Hold);
        let mut waiting: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = (0..fillers)
            .map(|i| -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
                let c = &c;
                Box::pin(async move { drop(c.unlock_token(format!("filler-{i}"), "nobody").await) })
            })
            .collect();
        for f in &mut waiting {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        // The release waits for a slot; its caller goes away meanwhile.
        let mut release: Pin<Box<dyn Future<Output = ()> + Send + '_>> = match kind {
            Release::Unlock => {
                let lock = lock.clone().unwrap();
                let c = &c;
                Box::pin(async move { drop(c.unlock(&lock).await) })
            }
            Release::Guard => {
                let guard = guard.unwrap();
                Box::pin(async move { drop(guard.release().await) })
            }
            Release::Auto => {
                let auto = auto.unwrap();
                Box::pin(async move { drop(auto.release().await) })
            }
        };
        assert!(release.as_mut().poll(&mut cx).is_pending());
        drop(release);
        // The other releases run on in the background; the proxies let
        // everything through.
        drop(waiting);
        cluster.set_faults(Fault::Pass);
        if let Err(held) = wait_gone(&cluster.servers, &res) {
            let on = held.iter().filter(|v| **v != Value::Nil).count();
            left.push(format!(
                "{kind:?} with {fillers} slots taken: held on {on} servers"
            ));
        }
        if let Some(lock) = lock {
            // The caller still has it: released for the next round.
            drop(futures::executor::block_on(c.unlock(&lock)));
        }
        delete_everywhere(&cluster.servers, &res);
    }
    assert!(
        left.is_empty(),
        "releases dropped before they ran (the keys stay until their ttl): {left:?}"
    );
}
