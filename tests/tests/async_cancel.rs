//! Cancellation of the async API's lock futures (`AsyncClient`), against
//! real servers: a lock future dropped at any point leaves no key behind
//! beyond the A5 window (its attempt's release, run in the background) and
//! never goes on to acquire.
//!
//! The cancellation test is seeded: set `REDLOCK_ASYNC_CANCEL_SEED` to
//! replay a run (the seed is in every failure message), and
//! `REDLOCK_ASYNC_CANCEL_ITERATIONS` to run more or fewer iterations.
//! Guards, `with_lock` and the driver's watchdog: `async_guards.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

mod async_common;

use async_common::*;

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
    /// Raced with async-io's `Timer::after(after)` on `smol::block_on`
    /// (async-io's reactor), dropped by the race that loses.
    SmolRace { after: Duration },
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
        DropAt::SmolRace { after } => smol::block_on(async move {
            let timer = async_io::Timer::after(after);
            match futures::future::select(fut, timer).await {
                futures::future::Either::Left((out, _)) => Some(out),
                futures::future::Either::Right((_, fut)) => {
                    drop(fut);
                    None
                }
            }
        }),
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
    let how = match rng.below(3) {
        0 => {
            let polls = rng.below(6) as u32;
            let gap = rng.micros(span / polls.max(1));
            DropAt::Manual { polls, gap }
        }
        1 => DropAt::Select {
            after: rng.micros(span),
        },
        _ => DropAt::SmolRace {
            after: rng.micros(span),
        },
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
        // IO for the client's `tokio` feature (its connections on tokio's
        // reactor), time for the test's own timers.
        .enable_all()
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
        // IO for the client's `tokio` feature, time for the test's timers.
        .enable_all()
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
