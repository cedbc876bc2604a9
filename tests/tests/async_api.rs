//! The async API (`AsyncClient`) against real `redis-server` processes:
//! - its futures never block the executor, not while servers hang, not
//!   while the lock is contended, not when a guard or a watched lock is
//!   dropped: another task on the same single thread keeps running;
//! - the same operations behave alike on tokio (current-thread and
//!   multi-thread), `futures::executor::block_on` and a `LocalPool` of
//!   several tasks;
//! - 1,000 tasks on one thread contending for a few resources never lose an
//!   update of the registers the locks protect, and are all served before
//!   their deadline, each holder releasing before its ttl runs out (however
//!   many tasks wait, more than the client runs at once included);
//! - the same holds for 400 tasks on a 2-worker multi-thread runtime,
//!   while 16 more lock and unlock resources of their own;
//! - a call that had to wait for its turn behind the client's other
//!   operations still has its whole ttl, and its deadline, ahead of it.
//!
//! Progress is counted (turns of another task, attempts seen by a server),
//! never timed: a blocked executor shows up as a count that cannot be
//! reached, or as a lock that cannot be obtained.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

extern crate alloc;

use alloc::rc::Rc;
use alloc::sync::Arc;
use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

use futures::task::LocalSpawnExt as _;
use redlock_std::{AsyncClient, Builder, Client, Error, Lost, Released, ServerOutcome};
use redlock_tests::{RedisServer, Value};

/// A bound on anything that could hang: far above what any step takes.
const HANG: Duration = Duration::from_secs(60);

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start().unwrap()).collect()
}

fn builder(servers: &[RedisServer]) -> Builder {
    Client::builder().servers(servers.iter().map(|s| s.addr().to_string()))
}

fn get(server: &RedisServer, key: &[u8]) -> Value {
    server.conn().unwrap().request(&[b"GET", key]).unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Sends `signal` to `pid` with `kill(1)`.
fn kill(signal: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Servers stopped with SIGSTOP, continued when this is dropped (also when
/// the test panics, so that no server stays frozen behind it).
struct Stopped(Vec<u32>);

impl Stopped {
    fn new(servers: &[RedisServer]) -> Stopped {
        let pids: Vec<u32> = servers.iter().map(RedisServer::pid).collect();
        for &pid in &pids {
            kill("STOP", pid);
        }
        Stopped(pids)
    }

    fn pids(&self) -> Vec<u32> {
        self.0.clone()
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // Continuing a running process is harmless.
            let _ = std::process::Command::new("kill")
                .arg("-CONT")
                .arg(pid.to_string())
                .status();
        }
    }
}

/// A second tokio task that counts its turns on the executor until stopped.
struct Turns {
    count: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Turns {
    fn spawn() -> Turns {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (count, stop) = (count.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    count.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            }
        });
        Turns { count, stop, task }
    }

    fn now(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
    }
}

/// Yields once to the executor (any executor: it wakes itself).
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// A timer that needs no runtime: a thread sleeps, then wakes the task.
async fn sleep(d: Duration) {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(d);
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// How many `SET`s `server` has run (one per acquisition attempt that
/// reached it).
fn set_calls(server: core::net::SocketAddr) -> u64 {
    let info = redlock_tests::Conn::connect(server)
        .unwrap()
        .request(&[b"INFO", b"commandstats"])
        .unwrap();
    let Value::Bulk(text) = info else {
        panic!("INFO answered {info:?}")
    };
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .map_or(0, |rest| {
            rest.split(',').next().unwrap().parse::<u64>().unwrap()
        })
}

// --- Nothing blocks the executor ---------------------------------------------

/// Two of five servers frozen (SIGSTOP) and the resource held by another
/// client: `lock` retries, then `lock_until` retries until its deadline,
/// both failing with a conflict. Meanwhile a second task on the same
/// single-threaded executor keeps taking turns: the retries and the waits
/// for the frozen servers happen off the executor.
#[test]
fn a_contended_lock_with_two_of_five_servers_stopped_lets_other_tasks_run() {
    let s = servers(5);
    let holder = builder(&s).build().unwrap();
    let held = holder.lock("res", Duration::from_secs(60)).unwrap();
    let c = builder(&s)
        .retry(3, Duration::from_millis(20))
        .request_timeout(Duration::from_millis(300))
        .build_async()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        // Connected and past the handshakes before the servers freeze.
        c.unlock(&c.lock("warm", Duration::from_secs(10)).await.unwrap())
            .await
            .unwrap();
        let _stopped = Stopped::new(&s[3..]);
        let turns = Turns::spawn();

        let before = turns.now();
        let result = tokio::time::timeout(HANG, c.lock("res", Duration::from_secs(10)))
            .await
            .expect("lock ends");
        let during_lock = turns.now() - before;
        assert!(matches!(result, Err(Error::Conflict(_))), "{result:?}");

        let before = turns.now();
        let deadline = Instant::now() + Duration::from_millis(500);
        let result =
            tokio::time::timeout(HANG, c.lock_until("res", Duration::from_secs(10), deadline))
                .await
                .expect("lock_until ends");
        let during_lock_until = turns.now() - before;
        assert!(matches!(result, Err(Error::Conflict(_))), "{result:?}");

        turns.stop().await;
        // A blocked executor would leave the other task at most a turn or
        // two; a free one gives it thousands.
        assert!(during_lock >= 100, "{during_lock} turns during lock");
        assert!(
            during_lock_until >= 100,
            "{during_lock_until} turns during lock_until"
        );
    });
    holder.unlock(&held).unwrap();
}

/// A second task on a smol `LocalExecutor` that counts its turns until
/// stopped.
fn spawn_turns_on(
    ex: &smol::LocalExecutor<'_>,
) -> (Arc<AtomicU64>, Arc<AtomicBool>, smol::Task<()>) {
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let task = ex.spawn({
        let (count, stop) = (count.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                count.fetch_add(1, Ordering::SeqCst);
                smol::future::yield_now().await;
            }
        }
    });
    (count, stop, task)
}

/// `f`, or `None` once `HANG` has passed (on async-io's timer).
async fn within_hang<F: Future>(f: F) -> Option<F::Output> {
    smol::future::or(async { Some(f.await) }, async {
        async_io::Timer::after(HANG).await;
        None
    })
    .await
}

/// The same on smol (one thread, its `LocalExecutor` on async-io's
/// reactor, where the client drives its connections with the `async-io`
/// feature): the counting task keeps taking turns while `lock` and
/// `lock_until` retry against a held resource with two servers frozen.
#[test]
fn on_smol_a_contended_lock_with_two_of_five_servers_stopped_lets_other_tasks_run() {
    let s = servers(5);
    let holder = builder(&s).build().unwrap();
    let held = holder.lock("res", Duration::from_secs(60)).unwrap();
    let c = builder(&s)
        .retry(3, Duration::from_millis(20))
        .request_timeout(Duration::from_millis(300))
        .build_async()
        .unwrap();
    let ex = smol::LocalExecutor::new();
    smol::block_on(ex.run(async {
        c.unlock(&c.lock("warm", Duration::from_secs(10)).await.unwrap())
            .await
            .unwrap();
        let _stopped = Stopped::new(&s[3..]);
        let (count, stop, task) = spawn_turns_on(&ex);

        let before = count.load(Ordering::SeqCst);
        let result = within_hang(c.lock("res", Duration::from_secs(10)))
            .await
            .expect("lock ends");
        let during_lock = count.load(Ordering::SeqCst) - before;
        assert!(matches!(result, Err(Error::Conflict(_))), "{result:?}");

        let before = count.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_millis(500);
        let result = within_hang(c.lock_until("res", Duration::from_secs(10), deadline))
            .await
            .expect("lock_until ends");
        let during_lock_until = count.load(Ordering::SeqCst) - before;
        assert!(matches!(result, Err(Error::Conflict(_))), "{result:?}");

        stop.store(true, Ordering::SeqCst);
        task.await;
        assert!(during_lock >= 100, "{during_lock} turns during lock");
        assert!(
            during_lock_until >= 100,
            "{during_lock_until} turns during lock_until"
        );
    }));
    holder.unlock(&held).unwrap();
}

/// Two of five servers frozen, the resource held by another client: an
/// async `lock_until` is in flight, and the holder lets go only once the
/// counting task has taken 10,000 turns on the same single thread and a
/// server has seen three of the waiter's attempts. The lock is obtained,
/// so the executor was free while it was contended.
#[test]
fn a_lock_obtained_when_the_holder_lets_go_never_held_up_the_executor() {
    const TURNS: u64 = 10_000;
    let s = servers(5);
    let holder = builder(&s).build().unwrap();
    let held = holder.lock("res", Duration::from_secs(60)).unwrap();
    let c = builder(&s)
        .retry(0, Duration::from_millis(10))
        .request_timeout(Duration::from_secs(1))
        .build_async()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        c.unlock(&c.lock("warm", Duration::from_secs(10)).await.unwrap())
            .await
            .unwrap();
    });
    let watched = s[0].addr();
    let sets_before = set_calls(watched);
    let _stopped = Stopped::new(&s[3..]);
    let (lock, seen, released) = rt.block_on(async {
        let turns = Turns::spawn();
        let count = turns.count.clone();
        // Polls every few ms, for at most a minute; lets go in any case,
        // so that the waiter ends.
        let releaser = std::thread::spawn(move || {
            let give_up = Instant::now() + HANG;
            let seen = loop {
                let seen = (
                    count.load(Ordering::SeqCst),
                    set_calls(watched) - sets_before,
                );
                if (seen.0 >= TURNS && seen.1 >= 3) || Instant::now() > give_up {
                    break seen;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            (seen, holder.unlock(&held))
        });
        let deadline = Instant::now() + HANG;
        let lock = tokio::time::timeout(
            HANG * 2,
            c.lock_until("res", Duration::from_secs(10), deadline),
        )
        .await
        .expect("lock_until ends");
        turns.stop().await;
        let (seen, released) = releaser.join().unwrap();
        (lock, seen, released)
    });
    let (turns, attempts) = seen;
    assert!(turns >= TURNS, "the other task took only {turns} turns");
    assert!(attempts >= 3, "the server saw {attempts} attempts");
    assert_eq!(released.unwrap().deleted(), 3);
    let lock = lock.unwrap();
    // Won on the three servers that run.
    assert_eq!(lock.report().count(ServerOutcome::Ok), 3);
    for server in &s[..3] {
        assert_eq!(
            get(server, b"res"),
            Value::Bulk(lock.token().as_bytes().to_vec())
        );
    }
    let released = rt.block_on(c.unlock(&lock)).unwrap();
    assert_eq!(released.deleted(), 3);
}

/// A lock guard and a watched lock dropped inside the runtime while a
/// majority of the servers is frozen: the drops return at once and their
/// releases run in the background. The counting task continues the
/// servers only after 10,000 turns, which it gets only if the drops did
/// not block; the releases then complete on every server. (A drop that
/// waited for its release would have waited out the 20 s request timeout
/// of the frozen servers, and left the keys on them.)
#[test]
fn dropping_a_guard_or_a_watched_lock_inside_the_runtime_does_not_block() {
    const TURNS: u64 = 10_000;
    let s = servers(5);
    let ttl = Duration::from_secs(60);
    let c = builder(&s)
        .request_timeout(Duration::from_secs(20))
        .build_async()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        let guard = c.lock_guard("guarded", ttl).await.unwrap();
        let auto = c.lock_auto_extend("watched", ttl).await.unwrap();
        // Both keys on every server before a majority freezes (a lock is
        // granted on a majority's votes: the last ones may still be on
        // their way).
        let keys = [
            (&b"guarded"[..], Value::Bulk(guard.token().into())),
            (&b"watched"[..], Value::Bulk(auto.lock().token().into())),
        ];
        let give_up = Instant::now() + HANG;
        while !s
            .iter()
            .all(|x| keys.iter().all(|(key, token)| get(x, key) == *token))
        {
            assert!(
                Instant::now() < give_up,
                "the keys never reached every server"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stopped = Stopped::new(&s[2..]);
        let pids = stopped.pids();
        let (continued, resumed) = tokio::sync::oneshot::channel::<u64>();
        let turns = Turns::spawn();
        let count = turns.count.clone();
        let waker = tokio::spawn(async move {
            while count.load(Ordering::SeqCst) < TURNS {
                tokio::task::yield_now().await;
            }
            for pid in pids {
                kill("CONT", pid);
            }
            let _ = continued.send(count.load(Ordering::SeqCst));
        });
        drop(guard);
        drop(auto);
        let turns_seen = tokio::time::timeout(HANG, resumed)
            .await
            .expect("the servers are continued")
            .unwrap();
        assert!(turns_seen >= TURNS);
        waker.await.unwrap();
        turns.stop().await;
        drop(stopped);
        // The background releases end within the request timeout once the
        // servers run again.
        let give_up = Instant::now() + HANG;
        while s
            .iter()
            .any(|x| get(x, b"guarded") != Value::Nil || get(x, b"watched") != Value::Nil)
        {
            assert!(
                Instant::now() < give_up,
                "the background releases never completed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

// --- The same operations on every executor -----------------------------------

/// Runs `f`, failing the test if it takes longer than `HANG` (on any
/// executor: the timer is a thread).
async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    match futures::future::select(core::pin::pin!(f), core::pin::pin!(sleep(HANG))).await {
        futures::future::Either::Left((out, _)) => out,
        futures::future::Either::Right(((), _)) => panic!("{what} hung"),
    }
}

/// Servers and clients shared by the runs of the suite.
struct Fixture {
    servers: Vec<RedisServer>,
    client: AsyncClient,
    fenced: AsyncClient,
}

impl Fixture {
    fn start() -> Arc<Fixture> {
        let servers = servers(3);
        // Request timeouts with room for a loaded machine (the defaults
        // for the ttls below would be tens of ms).
        let builder = builder(&servers).request_timeout(Duration::from_secs(1));
        let client = builder.clone().build_async().unwrap();
        let fenced = builder.fencing(true).build_async().unwrap();
        Arc::new(Fixture {
            servers,
            client,
            fenced,
        })
    }

    /// What each server holds for `key`.
    fn holders(&self, key: &str) -> Vec<Value> {
        self.servers
            .iter()
            .map(|s| get(s, key.as_bytes()))
            .collect()
    }

    /// Asserts that `key` holds `token` on a majority of the servers and
    /// nothing else anywhere. (A lock is granted on a majority's votes:
    /// the last server's may still be on its way.)
    fn assert_held(&self, key: &str, token: &str) {
        let holders = self.holders(key);
        let ours = Value::Bulk(token.as_bytes().to_vec());
        let held = holders.iter().filter(|&v| *v == ours).count();
        assert!(
            held > self.servers.len() / 2 && holders.iter().all(|v| *v == ours || *v == Value::Nil),
            "{key}: {holders:?}, not {token}"
        );
    }

    fn free(&self) -> Vec<Value> {
        vec![Value::Nil; self.servers.len()]
    }
}

/// Every operation of the async API, on resources named after `run` (so
/// that runs may overlap on the same servers).
async fn basic_operations(fx: Arc<Fixture>, run: String) {
    let (c, n) = (&fx.client, fx.servers.len());
    let ttl = Duration::from_secs(10);
    let res = format!("{run}:res");

    // lock, a conflicting try_lock, extend, inspect, unlock (twice).
    let mut lock = c.lock(&res, ttl).await.unwrap();
    assert_eq!(lock.token().len(), 40);
    fx.assert_held(&res, lock.token());
    let conflict = c.try_lock(&res, ttl).await;
    assert!(matches!(conflict, Err(Error::Conflict(_))), "{conflict:?}");
    c.extend(&mut lock, Duration::from_secs(30)).await.unwrap();
    assert_eq!(lock.extensions(), 1);
    assert!(lock.remaining() > Duration::from_secs(29));
    let inspection = c.inspect(&res).await.unwrap();
    assert_eq!(inspection.entries().len(), n);
    for e in inspection.entries() {
        assert_eq!(e.outcome, ServerOutcome::Ok);
        assert_eq!(e.holder.as_deref(), Some(lock.token().as_bytes()));
        assert!(e.pttl_ms > 29_000, "{e:?}");
    }
    assert_eq!(inspection.majority_holder(), Some(lock.token().as_bytes()));
    assert_eq!(c.unlock(&lock).await.unwrap().deleted(), n);
    assert_eq!(c.unlock(&lock).await.unwrap().deleted(), 0);
    assert_eq!(fx.holders(&res), fx.free());
    // Extending a released lock reports it lost.
    let lost = c.extend(&mut lock, Duration::from_secs(1)).await;
    assert!(matches!(lost, Err(Error::Lost(_))), "{lost:?}");

    // unlock_token: a lock known only by its token.
    let token = c.lock(&res, ttl).await.unwrap().token().to_string();
    assert_eq!(c.unlock_token(&res, &token).await.unwrap().deleted(), n);
    assert_eq!(fx.holders(&res), fx.free());

    // Fenced locks: fences increase, also past a repair's floor.
    let fenced = format!("{run}:fenced");
    let mut last = 0;
    for _ in 0..3 {
        let lock = fx.fenced.lock(&fenced, ttl).await.unwrap();
        let fence = lock.fence().expect("a fenced lock has a fence");
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        assert_eq!(fx.fenced.unlock(&lock).await.unwrap().deleted(), n);
    }
    let repaired = fx.fenced.fence_repair(&fenced, last + 100).await.unwrap();
    assert!(repaired.complete());
    assert!(repaired.counter >= last + 100, "{}", repaired.counter);
    let lock = fx.fenced.lock(&fenced, ttl).await.unwrap();
    assert!(lock.fence().unwrap() > last + 100, "{:?}", lock.fence());
    fx.fenced.unlock(&lock).await.unwrap();

    // lock_guard: released explicitly, then by a drop (in the background:
    // the resource is free again soon after).
    let guard = c.lock_guard(&res, ttl).await.unwrap();
    fx.assert_held(&res, guard.token());
    assert_eq!(guard.release().await.unwrap().deleted(), n);
    let guard = c.lock_guard(&res, ttl).await.unwrap();
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(20);
    let lock = c.lock_until(&res, ttl, deadline).await.unwrap();
    assert_eq!(c.unlock(&lock).await.unwrap().deleted(), n);

    // lock_auto_extend: kept past its ttl (the first key would have
    // expired), not lost, exclusive; then released.
    let short = Duration::from_secs(6);
    let auto = c.lock_auto_extend(&res, short).await.unwrap();
    sleep(Duration::from_secs(7)).await;
    assert!(!auto.is_lost(), "{:?}", auto.lost());
    assert!(auto.lock().extensions() >= 1);
    fx.assert_held(&res, auto.lock().token());
    let conflict = c.try_lock(&res, short).await;
    assert!(matches!(conflict, Err(Error::Conflict(_))), "{conflict:?}");
    assert_eq!(auto.release().await.unwrap().deleted(), n);
    assert_eq!(fx.holders(&res), fx.free());

    // with_lock: the body runs holding the lock, which is released after.
    let res_ = &res;
    let held = c
        .with_lock(&res, ttl, |lost| async move {
            drop(lost);
            c.inspect(res_)
                .await
                .unwrap()
                .majority_holder()
                .map(<[u8]>::to_vec)
        })
        .await
        .unwrap();
    assert_eq!(held.map(|t| t.len()), Some(40));
    assert_eq!(fx.holders(&res), fx.free());

    // with_lock whose keys are deleted behind its back: the body learns it.
    let why = c
        .with_lock(&res, Duration::from_secs(6), |lost| async {
            for s in &fx.servers {
                s.conn()
                    .unwrap()
                    .request(&[b"DEL", res.as_bytes()])
                    .unwrap();
            }
            bounded("when_lost", lost).await
        })
        .await
        .unwrap();
    assert_eq!(why, Lost::NotHeld);
    assert_eq!(fx.holders(&res), fx.free());
}

#[test]
fn the_basic_operations_on_a_tokio_current_thread_runtime() {
    let fx = Fixture::start();
    current_thread().block_on(bounded("the suite", basic_operations(fx, "ct".into())));
}

#[test]
fn the_basic_operations_on_a_tokio_multi_thread_runtime() {
    let fx = Fixture::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Spawned: the suite runs on the workers (and its future is `Send`).
    let suite = rt.spawn(basic_operations(fx, "mt".into()));
    rt.block_on(bounded("the suite", suite)).unwrap();
}

#[test]
fn the_basic_operations_on_futures_block_on() {
    let fx = Fixture::start();
    futures::executor::block_on(bounded(
        "the suite",
        basic_operations(fx, "block_on".into()),
    ));
}

#[test]
fn the_basic_operations_as_four_tasks_of_one_local_pool() {
    let fx = Fixture::start();
    let mut pool = futures::executor::LocalPool::new();
    let runs: Vec<_> = (0..4)
        .map(|i| {
            pool.spawner()
                .spawn_local_with_handle(basic_operations(fx.clone(), format!("pool{i}")))
                .unwrap()
        })
        .collect();
    pool.run_until(bounded("the suite", futures::future::join_all(runs)));
}

// --- 1,000 tasks on one thread ---------------------------------------------

const TASKS: usize = 1_000;
const RESOURCES: usize = 4;
const NAMES: [&str; RESOURCES] = ["crowd:0", "crowd:1", "crowd:2", "crowd:3"];
/// The crowd's ttl: far above the few ms a holder keeps its lock.
const CROWD_TTL: Duration = Duration::from_secs(10);
/// How long each of the crowd may wait for its lock: several times what
/// 1,000 hand-offs of a few ms each take.
const CROWD_PATIENCE: Duration = Duration::from_secs(30);

/// A register the lock protects, read and then written after `.await`s, so
/// that two holders at once would lose an update; and what the tasks saw.
#[derive(Debug, Default)]
struct Register {
    value: Cell<u64>,
    /// Increments written.
    writes: Cell<u64>,
    /// Tasks between their read and their write.
    inside: Cell<u32>,
    /// Times a task found another one inside.
    overlaps: Cell<u32>,
    /// Holders that found their validity over before writing (and so did
    /// not write).
    too_late: Cell<u32>,
}

/// Client settings for a crowd: a short jitter, so that waiting tasks
/// retry often (each retry also waits the request timeout, which leaves
/// room for a loaded machine).
fn crowd_client(servers: &[RedisServer]) -> AsyncClient {
    builder(servers)
        .retry(3, Duration::from_millis(5))
        .request_timeout(Duration::from_millis(300))
        .build_async()
        .unwrap()
}

/// One task of a crowd: lock, read, yield, then write the read value + 1
/// if the lock is still valid, unlock. Returns what the release found.
async fn increment(
    c: AsyncClient,
    resource: &'static str,
    register: Rc<Register>,
    deadline: Instant,
) -> Result<Released, Error> {
    let lock = c.lock_until(resource, CROWD_TTL, deadline).await?;
    let r = &register;
    r.inside.set(r.inside.get() + 1);
    if r.inside.get() > 1 {
        r.overlaps.set(r.overlaps.get() + 1);
    }
    let read = r.value.get();
    for _ in 0..3 {
        yield_now().await;
    }
    // Checked and written with no `.await` between: within the validity.
    if lock.remaining() > Duration::ZERO {
        r.value.set(read + 1);
        r.writes.set(r.writes.get() + 1);
    } else {
        r.too_late.set(r.too_late.get() + 1);
    }
    r.inside.set(r.inside.get() - 1);
    c.unlock(&lock).await
}

type Crowd<F> = (Vec<Rc<Register>>, Vec<F>);

/// `tasks` tasks over `resources` registers: task `i` increments register
/// `i % resources`.
fn crowd(
    c: &AsyncClient,
    tasks: usize,
    resources: usize,
) -> Crowd<impl Future<Output = Result<Released, Error>> + use<>> {
    let registers: Vec<Rc<Register>> = (0..resources).map(|_| Rc::default()).collect();
    let deadline = Instant::now() + CROWD_PATIENCE;
    let tasks = (0..tasks)
        .map(|i| {
            let r = i % resources;
            increment(c.clone(), NAMES[r], registers[r].clone(), deadline)
        })
        .collect();
    (registers, tasks)
}

/// Runs a crowd as tasks spawned on a tokio current-thread runtime.
fn run_on_tokio(
    (registers, tasks): Crowd<impl Future<Output = Result<Released, Error>> + 'static>,
) -> (Vec<Rc<Register>>, Vec<Result<Released, Error>>) {
    let local = tokio::task::LocalSet::new();
    let results = local.block_on(&current_thread(), async {
        let handles: Vec<_> = tasks.into_iter().map(tokio::task::spawn_local).collect();
        let joined = bounded("the crowd", futures::future::join_all(handles)).await;
        joined.into_iter().map(Result::unwrap).collect()
    });
    (registers, results)
}

/// Runs a crowd as tasks spawned on a `futures` `LocalPool`.
fn run_on_local_pool(
    (registers, tasks): Crowd<impl Future<Output = Result<Released, Error>> + 'static>,
) -> (Vec<Rc<Register>>, Vec<Result<Released, Error>>) {
    let mut pool = futures::executor::LocalPool::new();
    let handles: Vec<_> = tasks
        .into_iter()
        .map(|t| pool.spawner().spawn_local_with_handle(t).unwrap())
        .collect();
    let results = pool.run_until(bounded("the crowd", futures::future::join_all(handles)));
    (registers, results)
}

/// Runs a crowd as tasks spawned on a smol `LocalExecutor` (one thread).
fn run_on_smol(
    (registers, tasks): Crowd<impl Future<Output = Result<Released, Error>> + 'static>,
) -> (Vec<Rc<Register>>, Vec<Result<Released, Error>>) {
    let ex = smol::LocalExecutor::new();
    let results = smol::block_on(ex.run(async {
        let handles: Vec<_> = tasks.into_iter().map(|t| ex.spawn(t)).collect();
        bounded("the crowd", futures::future::join_all(handles)).await
    }));
    (registers, results)
}

/// The safety of a crowd's run, whoever got the lock and whenever: no two
/// holders at once, and every increment written is in its register (none
/// lost).
fn no_update_lost(registers: &[Rc<Register>]) {
    for (i, r) in registers.iter().enumerate() {
        assert_eq!(r.overlaps.get(), 0, "register {i}: two holders at once");
        assert_eq!(
            r.value.get(),
            r.writes.get(),
            "register {i}: increments lost"
        );
        assert!(r.writes.get() >= 1, "register {i}: nobody wrote");
    }
}

/// How many releases found their key gone on a majority of the servers
/// (a minority may say so of a lock granted on a majority's votes).
fn released_after_expiry(results: &[Result<Released, Error>]) -> usize {
    results
        .iter()
        .filter(|r| {
            r.as_ref().is_ok_and(|released| {
                released.report.count(ServerOutcome::NotHeld) > released.report.len() / 2
            })
        })
        .count()
}

/// The liveness of a crowd's run: every task got its lock before its
/// deadline, with time left to write, and released it while its key was
/// still there (no majority said it was gone).
fn everyone_served_in_time(registers: &[Rc<Register>], results: &[Result<Released, Error>]) {
    let failed: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let too_late: u32 = registers.iter().map(|r| r.too_late.get()).sum();
    let expired_first = released_after_expiry(results);
    assert!(
        failed.is_empty() && too_late == 0 && expired_first == 0,
        "of {} tasks, {} got no lock before their deadline (the first: {}), {} got it with \
         too little validity left to write, and {} released it only after it expired",
        results.len(),
        failed.len(),
        failed.first().map_or(String::new(), ToString::to_string),
        too_late,
        expired_first
    );
}

/// 1,000 tasks on one thread contending for 4 resources, each reading the
/// register its lock protects, yielding, and writing it back + 1: every
/// increment written is in its register.
#[test]
fn a_thousand_tasks_on_one_thread_lose_no_update() {
    let s = servers(3);
    let c = crowd_client(&s);
    let (registers, _) = run_on_tokio(crowd(&c, TASKS, RESOURCES));
    no_update_lost(&registers);
}

/// The same crowd, on a `LocalPool`: no update lost, and every task gets
/// its lock before its deadline and releases it before its ttl.
#[test]
fn a_thousand_tasks_on_one_thread_are_all_served_in_time() {
    let s = servers(3);
    let c = crowd_client(&s);
    let (registers, results) = run_on_local_pool(crowd(&c, TASKS, RESOURCES));
    no_update_lost(&registers);
    everyone_served_in_time(&registers, &results);
}

/// The same crowd on smol (async-io's reactor): no update lost, and every
/// task served before its deadline.
#[test]
fn on_smol_a_thousand_tasks_on_one_thread_lose_no_update() {
    let s = servers(3);
    let c = crowd_client(&s);
    let (registers, results) = run_on_smol(crowd(&c, TASKS, RESOURCES));
    no_update_lost(&registers);
    everyone_served_in_time(&registers, &results);
}

/// 100 tasks waiting for one resource: each holder's release goes out
/// while its key is still there (it does not wait, behind the tasks that
/// wait for the very lock it holds, until the key expires).
#[test]
fn a_holder_releases_before_its_ttl_however_many_tasks_wait() {
    let s = servers(3);
    let c = crowd_client(&s);
    let (registers, results) = run_on_tokio(crowd(&c, 100, 1));
    no_update_lost(&registers);
    everyone_served_in_time(&registers, &results);
}

/// A `try_lock` and a `lock_until` of free resources that had to wait for
/// the client's other operations (1,000 tasks contending for a held
/// resource until their deadline, 3 s) before their requests could go out:
/// an attempt's time counts from when its requests are written, so the
/// `try_lock` (ttl 1 s) gets its lock, and so does the `lock_until`
/// (deadline 5 s). Counted from when the calls began, the 3 s wait would
/// spend the 1 s ttl before any server was asked, and push the
/// `lock_until`'s retry past its deadline.
#[test]
fn calls_that_waited_for_their_turn_still_get_a_free_resource() {
    let s = servers(3);
    let holder = builder(&s).build().unwrap();
    let held = holder.lock("held", Duration::from_secs(60)).unwrap();
    let c = crowd_client(&s);
    let ttl = Duration::from_secs(1);
    let local = tokio::task::LocalSet::new();
    let (tried, waited) = local.block_on(&current_thread(), async {
        // Waiters for the held resource until their deadline: more than
        // the client runs at once.
        let deadline = Instant::now() + Duration::from_secs(3);
        let waiters: Vec<_> = (0..TASKS)
            .map(|_| {
                let c = c.clone();
                tokio::task::spawn_local(
                    async move { c.lock_until("held", CROWD_TTL, deadline).await },
                )
            })
            .collect();
        // Each waiter has made its call.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let calls = futures::future::join(
            c.try_lock("free:try_lock", ttl),
            c.lock_until("free:lock_until", ttl, deadline),
        );
        let (tried, waited) = bounded("the calls", calls).await;
        for w in waiters {
            let conflict = w.await.unwrap();
            assert!(conflict.is_err(), "{conflict:?}");
        }
        (tried, waited)
    });
    holder.unlock(&held).unwrap();
    for (call, result) in [("try_lock", tried), ("lock_until", waited)] {
        match result {
            // Granted on a majority's votes (the last may be on its way).
            Ok(lock) => assert!(
                lock.report().count(ServerOutcome::Ok) >= 2,
                "{call}: {lock:?}"
            ),
            Err(e) => panic!("{call} of a free resource: {e}"),
        }
    }
}

// A crowd on a multi-thread runtime.
#[path = "async_api/multi_thread.rs"]
mod multi_thread;
